// Long runs of AlltoAllV calls whose resident memory must stay flat (issue 17 §5: RSS grew by
// ~0.39 KiB a call). 2 emulated nodes x 2 ranks over libfabric tcp, small random counts (so the
// run is about per-call bookkeeping, not bandwidth), a fresh count matrix every call.
//
// The growth of issue 17 §5 is libfabric's (docs/decisions.md#fi-universe-size): ofi_rxm
// opens an internal completion queue of (msg tx size + msg rx size) x FI_UNIVERSE_SIZE entries
// (a 12 MiB calloc'd ring at the default universe of 256 on tcp), and its entries are written
// one after another, so each page becomes resident the first time the ring reaches it: ~0.37
// KiB a call on 2 x 2 until the ring wraps after ~33,000 calls, flat from then on. rmacc now
// sets FI_UNIVERSE_SIZE to the communicator's rank count when the user has not
// (net/fabric_universe.cc), so under default settings that ring wraps within the warm-up and
// what is left to bound is rmacc's own memory (and the rest of libfabric's). The test runs
// without FI_UNIVERSE_SIZE in its ranks' environment on purpose.
//
// RMACC_SOAK_CALLS sets the number of calls (CI: the default, about a minute here; 100,000 for
// the figure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

long soakCalls() {
  const char* v = getenv("RMACC_SOAK_CALLS");
  return v ? atol(v) : 30000;
}

// Resident bytes of every mapping of this process, by "start-end name" (/proc/self/smaps).
std::map<std::string, size_t> residentByMapping() {
  std::map<std::string, size_t> out;
  std::ifstream in("/proc/self/smaps");
  std::string line, current;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string first;
    f >> first;
    if (first == "Rss:") {
      size_t kib = 0;
      f >> kib;
      out[current] += kib << 10;
    } else if (first.find('-') != std::string::npos && first.back() != ':') {
      std::string perms, offset, dev, inode, name;
      f >> perms >> offset >> dev >> inode;
      std::getline(f, name);
      name.erase(0, name.find_first_not_of(' '));
      current = first + " " + perms + " " + (name.empty() ? "[anon]" : name);
    }
  }
  return out;
}

// The mappings whose resident size grew most from `before` to now, for a failure's message:
// it says which layer grows (a malloc arena, a libfabric buffer, an rmacc region).
std::string grownMappings(const std::map<std::string, size_t>& before) {
  std::vector<std::pair<long, std::string>> grown;
  for (const auto& [key, bytes] : residentByMapping()) {
    auto it = before.find(key);
    long delta = (long)bytes - (it == before.end() ? 0 : (long)it->second);
    if (delta != 0) grown.emplace_back(delta, key);
  }
  std::sort(grown.rbegin(), grown.rend());
  std::string text;
  for (size_t i = 0; i < grown.size() && i < 6; ++i)
    text += "  " + std::to_string(grown[i].first / 1024) + " KiB  " + grown[i].second + "\n";
  return text;
}

// RSS after the warm-up and at the end: growth beyond this is a leak (0.37 KiB a call would
// be 9.5 MiB over the default run).
constexpr size_t kMaxGrowthBytes = 1 << 20;

TEST(Soak, AlltoallvResidentMemoryStaysFlat) {
  const long calls = soakCalls();
  const long warmup = std::max<long>(calls / 10, 500);
  ASSERT_GT(calls, warmup);
  RunOptions o;
  // RMACC_SOAK_NODES=1: the same 4 ranks on one node (no network), to tell the layers apart.
  const char* nodes = getenv("RMACC_SOAK_NODES");
  o.nodeOf = nodes && atoi(nodes) == 1 ? scatteredNodes(1, 4) : scatteredNodes(2, 2);
  o.timeoutS = 1500;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "30"}};
  runRanks(4, o, [&](const RankContext& ctx) {
    unsetenv("FI_UNIVERSE_SIZE");  // default settings: see the top of the file
    const int n = ctx.nRanks, me = ctx.rank;
    constexpr size_t kScale = 24;  // elements per pair on average
    TestComm comm(ctx);
    // Buffers as large as any call needs (2 * kScale per block, gaps of < 5 between blocks).
    const size_t maxElems = n * (2 * kScale + 5) + 3;
    std::vector<float> send(maxElems), recv(maxElems);
    size_t rssWarm = 0, rssPeak = 0;
    std::map<std::string, size_t> mapsWarm;
    for (long call = 0; call < calls; ++call) {
      auto counts = makeCounts(Pattern::kRandom, n, kScale, 77000 + call);
      Layout l = makeLayout(counts, n, me, 77000 + call);
      uint8_t* sb = reinterpret_cast<uint8_t*>(send.data());
      uint8_t* rb = reinterpret_cast<uint8_t*>(recv.data());
      fillSend(sb, l, sizeof(float), me, call);
      memset(rb, kPoison, l.recvElems * sizeof(float));
      RMACC_ASSERT_OK(rmaccAlltoAllv(sb, l.sendcounts.data(), l.sdispls.data(), rb,
                                     l.recvcounts.data(), l.rdispls.data(), rmaccFloat32,
                                     comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      std::string first;
      ASSERT_EQ(checkRecv(rb, l, sizeof(float), me, call, &first), 0u)
          << "call " << call << ": " << first;
      if (call + 1 == warmup) rssWarm = residentBytes(), mapsWarm = residentByMapping();
      if (call >= warmup) rssPeak = std::max(rssPeak, residentBytes());
      if (me == 0 && (call + 1) % (calls / 10) == 0)
        printf("[ soak     ] rank 0: %ld calls, RSS %.2f MiB\n", call + 1,
               residentBytes() / 1048576.0);
    }
    size_t rssEnd = residentBytes();
    printf("[ soak     ] rank %d: RSS after %ld warm-up calls %.2f MiB, after %ld calls %.2f MiB "
           "(peak %.2f MiB): %+.1f KiB\n", me, warmup, rssWarm / 1048576.0, calls,
           rssEnd / 1048576.0, rssPeak / 1048576.0, ((double)rssEnd - (double)rssWarm) / 1024);
    EXPECT_LE(rssPeak, rssWarm + kMaxGrowthBytes)
        << "rank " << me << ": resident memory grew by " << (rssPeak - rssWarm) / 1024
        << " KiB over " << calls - warmup << " calls; grown mappings:\n"
        << grownMappings(mapsWarm);
    if (me == 0)
      printf("[ soak     ] rank 0: mappings that changed most:\n%s", grownMappings(mapsWarm).c_str());
  });
}

// The universe libfabric sizes its internal rings by is the job's, set by the first
// communicator that opens the network, and a user's own FI_UNIVERSE_SIZE is left alone.
class FabricUniverse : public testing::TestWithParam<const char*> {};

TEST_P(FabricUniverse, IsTheRankCountUnlessTheUserSetIt) {
  const char* user = GetParam();
  RunOptions o;
  o.nodeOf = scatteredNodes(2, 2);
  o.timeoutS = 120;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"}};
  runRanks(4, o, [&](const RankContext& ctx) {
    if (*user) setenv("FI_UNIVERSE_SIZE", user, 1);
    else unsetenv("FI_UNIVERSE_SIZE");
    TestComm comm(ctx);
    const char* now = getenv("FI_UNIVERSE_SIZE");
    ASSERT_NE(now, nullptr);
    EXPECT_STREQ(now, *user ? user : "4");
  });
}

INSTANTIATE_TEST_SUITE_P(Soak, FabricUniverse, testing::Values("", "7"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(*info.param ? "UserSetsIt" : "Unset");
                         });

}  // namespace
}  // namespace rmacc::test
