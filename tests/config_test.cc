// The parameters of core/config.h: every one accepts its documented values and rejects a
// malformed one with rmaccInvalidArgument naming it; public and internal ones through the
// environment, fixed ones only through the test hook (core/test_hooks.h), their environment
// ignored. The tables of README.md and docs/configuration.md are the declaration's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "core/test_hooks.h"

namespace rmacc {
namespace {

struct Knob {
  const char* name;
  const char* good;
  std::function<bool(const Config&)> applied;  // the good value took effect
  const char* bad;                             // nullptr: every text is accepted
};

std::string knobName(const testing::TestParamInfo<Knob>& info) { return info.param.name; }

class ConfigKnob : public testing::TestWithParam<Knob> {
 protected:
  void TearDown() override {
    unsetenv(GetParam().name);
    clearParamsForTest();
  }
};

void expectRejectedByName(const Knob& k, const std::function<void()>& set) {
  try {
    set();
    ADD_FAILURE() << k.name << "=" << k.bad << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), rmaccInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
  }
}

TEST_P(ConfigKnob, AcceptsGoodRejectsBadByName) {
  const Knob& k = GetParam();
  const ParamInfo* info = findParam(k.name);
  ASSERT_NE(info, nullptr);
  const bool fixed = info->visibility == ParamVisibility::kFixed;
  EXPECT_FALSE(k.applied(Config::fromEnvironment())) << "the default already looks applied";
  setenv(k.name, k.good, 1);
  EXPECT_EQ(k.applied(Config::fromEnvironment()), !fixed)
      << k.name << "=" << k.good << (fixed ? ": a fixed parameter read the environment" : "");
  if (fixed) {
    // Only the hook sets it; a malformed environment value is not read either.
    setParamForTest(k.name, k.good);
    EXPECT_TRUE(k.applied(Config::fromEnvironment())) << "setParamForTest(" << k.name << ")";
    if (!k.bad) return;
    setenv(k.name, k.bad, 1);
    EXPECT_NO_THROW(Config::fromEnvironment());
    expectRejectedByName(k, [&] { setParamForTest(k.name, k.bad); });
    return;
  }
  if (!k.bad) return;
  setenv(k.name, k.bad, 1);
  expectRejectedByName(k, [] { Config::fromEnvironment(); });
}

TEST(ConfigTable, HookRefusesUnknownNames) {
  try {
    setParamForTest("RMACC_NO_SUCH_KNOB", "1");
    ADD_FAILURE() << "an unknown parameter was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), rmaccInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("RMACC_NO_SUCH_KNOB"), std::string::npos) << e.what();
  }
}

// The public surface stays small: at most 8 variables a user is asked to know.
TEST(ConfigTable, AtMostEightPublicParameters) {
  size_t n = 0, pub = 0;
  const ParamInfo* table = paramTable(&n);
  for (size_t i = 0; i < n; ++i) pub += table[i].visibility == ParamVisibility::kPublic;
  EXPECT_LE(pub, 8u);
}

const std::string kLongName(256, 'n');

const Knob kKnobs[] = {
    Knob{"RMACC_DEBUG", "TRACE", [](const Config& c) { return c.debugLevel == LogLevel::kTrace; }, "LOUD"},
    Knob{"RMACC_DEBUG_SUBSYS", "NET,PROXY",
         [](const Config& c) { return c.debugSubsys == (kSubsysNet | kSubsysProxy); }, "DISK"},
    Knob{"RMACC_BACKEND", "host", [](const Config& c) { return c.backend == BackendKind::kHost; }, "tpu"},
    Knob{"RMACC_HOSTNAME", "node7", [](const Config& c) { return c.hostname == "node7"; }, kLongName.c_str()},
    Knob{"RMACC_NET_PROVIDER", "tcp", [](const Config& c) { return c.netProvider == "tcp"; }, nullptr},
    Knob{"RMACC_TIMEOUT_S", "2.5", [](const Config& c) { return c.timeoutS == 2.5; }, "-1"},
    Knob{"RMACC_TRACE_FILE", "/tmp/t%r.json", [](const Config& c) { return c.traceFile == "/tmp/t%r.json"; }, nullptr},
    Knob{"RMACC_RELAY_BYTES", "8K", [](const Config& c) { return c.relayBytes == 8192; }, "1K"},
    Knob{"RMACC_ENQUEUE_WAIT_MS", "0", [](const Config& c) { return c.enqueueWaitMs == 0; }, "-1"},
    Knob{"RMACC_STREAM_TRIGGER", "always", [](const Config& c) { return c.streamTriggerAlways; }, "on"},
    Knob{"RMACC_GRAPH_CALLS", "triggered", [](const Config& c) { return c.graphCalls == GraphCalls::kTriggered; }, "graph"},
    Knob{"RMACC_BOOTSTRAP_ADDR", "10.0.0.1", [](const Config& c) { return c.bootstrapAddr == "10.0.0.1"; }, nullptr},
    Knob{"RMACC_MAX_CALLS_IN_FLIGHT", "64", [](const Config& c) { return c.maxCallsInFlight == 64; }, "0"},
    Knob{"RMACC_RELAY_SLOTS", "8", [](const Config& c) { return c.relaySlots == 8; }, "1"},
    Knob{"RMACC_CREDIT_WINDOW", "2", [](const Config& c) { return c.creditWindow == 2; }, "-1"},
    Knob{"RMACC_ENTRY_SYNC", "barrier", [](const Config& c) { return c.entrySync == EntrySync::kBarrier; }, "none"},
    Knob{"RMACC_MAX_PUT_BYTES", "1M", [](const Config& c) { return c.maxPutBytes == (1u << 20); }, "12"},
    Knob{"RMACC_DUMP_PLAN", "1", [](const Config& c) { return c.dumpPlan; }, "2"},
    Knob{"RMACC_CE_STREAMS", "4", [](const Config& c) { return c.ceStreams == 4; }, "65"},
    Knob{"RMACC_LANES", "serial", [](const Config& c) { return c.lanes == Config::Lanes::kSerial; }, "parallel"},
    Knob{"RMACC_PROXY_POLL", "sleep",
         [](const Config& c) { return c.proxyPoll == Config::ProxyPoll::kSleep; }, "busy"},
    Knob{"RMACC_PROXY_THREADS", "3", [](const Config& c) { return c.proxyThreads == 3; }, "17"},
    Knob{"RMACC_NET_BOUNCE", "always", [](const Config& c) { return c.bounceAlways; }, "yes"},
    Knob{"RMACC_NET_BOUNCE_BYTES", "8M", [](const Config& c) { return c.bounceBytes == (8u << 20); }, "0"},
    Knob{"RMACC_NET_BOUNCE_CHUNK", "256K",
         [](const Config& c) { return c.bounceChunkBytes == (256u << 10); }, "4Q"},
    Knob{"RMACC_NET_GDR", "off", [](const Config& c) { return !c.netGdr; }, "0"},
    Knob{"RMACC_NET_LANDING", "always", [](const Config& c) { return c.landingAlways; }, "on"},
    Knob{"RMACC_NET_PACE_GBPS", "0", [](const Config& c) { return c.netPaceGBps == 0; }, "-3"},
    Knob{"RMACC_NET_SIGNAL_WRITES", "always",
         [](const Config& c) { return c.netSignalWrites == SignalWritesSetting::kAlways; }, "on"},
    Knob{"RMACC_NET_MR_LOCAL", "1", [](const Config& c) { return c.netMrLocal; }, "2"},
    Knob{"RMACC_NET_LANDING_BYTES", "1M", [](const Config& c) { return c.landingBytes == (1u << 20); }, "-1"},
    Knob{"RMACC_LOCAL_COPY", "engines",
         [](const Config& c) { return c.localCopy == Config::LocalCopy::kEngines; }, "sm"},
    Knob{"RMACC_LOCAL_COPY_SLOT", "1M", [](const Config& c) { return c.localCopySlotBytes == (1u << 20); }, "0"},
    Knob{"RMACC_LOCAL_COPY_SLOTS", "3", [](const Config& c) { return c.localCopySlots == 3; }, "1"},
};

INSTANTIATE_TEST_SUITE_P(Env, ConfigKnob, testing::ValuesIn(kKnobs), knobName);

// Every parameter of the table has a case above, and no case names one the table lacks.
TEST(ConfigTable, EveryParameterIsTested) {
  size_t n = 0;
  const ParamInfo* table = paramTable(&n);
  std::set<std::string> declared, tested;
  for (size_t i = 0; i < n; ++i) declared.insert(table[i].name);
  for (const Knob& k : kKnobs) tested.insert(k.name);
  EXPECT_EQ(declared, tested);
  EXPECT_EQ(declared.size(), n) << "a parameter is declared twice";
}

// The documents' tables are the declaration's (tools/rmacc-params prints them): the text between
// `<!-- params: public -->` (or internal, fixed) and `<!-- params: end -->`.
std::string section(const std::string& readme, const std::string& which) {
  const std::string open = "<!-- params: " + which + " -->\n", close = "<!-- params: end -->";
  size_t a = readme.find(open);
  if (a == std::string::npos) return "(no marker " + open + ")";
  a += open.size();
  size_t b = readme.find(close, a);
  return b == std::string::npos ? "(no end marker)" : readme.substr(a, b - a);
}

std::string sourceFile(const char* path) {
  std::ifstream in(std::string(RMACC_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ConfigTable, ReadmeTablesMatchTheDeclaration) {
  const std::string readme = sourceFile("README.md"), docs = sourceFile("docs/configuration.md");
  EXPECT_EQ(section(readme, "public"), paramMarkdown(ParamVisibility::kPublic))
      << "paste tools/rmacc-params' public table between README.md's markers";
  EXPECT_EQ(section(docs, "internal"), paramMarkdown(ParamVisibility::kInternal))
      << "paste tools/rmacc-params' internal table between docs/configuration.md's markers";
  EXPECT_EQ(section(docs, "fixed"), paramMarkdown(ParamVisibility::kFixed))
      << "paste tools/rmacc-params' fixed table between docs/configuration.md's markers";
}

// A malformed RMACC_DEBUG is rejected by Config but never breaks logging (it keeps WARN).
TEST(ConfigTable, ReadOneNeitherThrowsNorChangesOnMalformed) {
  setenv("RMACC_DEBUG", "LOUD", 1);
  Config c;
  EXPECT_EQ(c.readOne("RMACC_DEBUG"), Config::Read::kMalformed);
  EXPECT_EQ(c.debugLevel, LogLevel::kWarn);
  unsetenv("RMACC_DEBUG");
}

}  // namespace
}  // namespace rmacc
