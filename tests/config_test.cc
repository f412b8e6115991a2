// RMACC_* environment parameters (core/config.h): every one accepts its documented values and
// rejects a malformed one with rmaccInvalidArgument naming the variable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>

#include "core/config.h"
#include "core/error.h"

namespace rmacc {
namespace {

struct Knob {
  const char* name;
  const char* good;
  std::function<bool(const Config&)> applied;  // the good value took effect
  const char* bad;
};

std::string knobName(const testing::TestParamInfo<Knob>& info) { return info.param.name; }

class ConfigKnob : public testing::TestWithParam<Knob> {
 protected:
  void TearDown() override { unsetenv(GetParam().name); }
};

TEST_P(ConfigKnob, AcceptsGoodRejectsBadByName) {
  const Knob& k = GetParam();
  EXPECT_FALSE(k.applied(Config::fromEnvironment())) << "the default already looks applied";
  setenv(k.name, k.good, 1);
  EXPECT_TRUE(k.applied(Config::fromEnvironment())) << k.name << "=" << k.good;
  setenv(k.name, k.bad, 1);
  try {
    Config::fromEnvironment();
    ADD_FAILURE() << k.name << "=" << k.bad << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), rmaccInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Env, ConfigKnob,
    testing::Values(
        Knob{"RMACC_LANES", "serial", [](const Config& c) { return c.lanes == Config::Lanes::kSerial; }, "parallel"},
        Knob{"RMACC_NET_BOUNCE", "always", [](const Config& c) { return c.bounceAlways; }, "yes"},
        Knob{"RMACC_NET_BOUNCE_BYTES", "8M",
             [](const Config& c) { return c.bounceBytes == (8u << 20); }, "0"},
        Knob{"RMACC_NET_BOUNCE_CHUNK", "256K",
             [](const Config& c) { return c.bounceChunkBytes == (256u << 10); }, "4Q"},
        Knob{"RMACC_NET_LANDING", "always", [](const Config& c) { return c.landingAlways; }, "on"},
        Knob{"RMACC_NET_LANDING_BYTES", "1M",
             [](const Config& c) { return c.landingBytes == (1u << 20); }, "-1"},
        Knob{"RMACC_NET_GDR", "off", [](const Config& c) { return !c.netGdr; }, "0"},
        Knob{"RMACC_RELAY_BYTES", "8K", [](const Config& c) { return c.relayBytes == 8192; }, "1K"},
        Knob{"RMACC_MAX_PUT_BYTES", "1M",
             [](const Config& c) { return c.maxPutBytes == (1u << 20); }, "12"},
        Knob{"RMACC_PROXY_POLL", "sleep",
             [](const Config& c) { return c.proxyPoll == Config::ProxyPoll::kSleep; }, "busy"},
        Knob{"RMACC_LOCAL_COPY", "engines",
             [](const Config& c) { return c.localCopy == Config::LocalCopy::kEngines; }, "sm"},
        Knob{"RMACC_LOCAL_COPY_SLOT", "1M",
             [](const Config& c) { return c.localCopySlotBytes == (1u << 20); }, "0"}),
    knobName);

}  // namespace
}  // namespace rmacc
