// Long runs of AlltoAllV calls whose resident memory must stay flat (issue 17 §5: RSS grew by
// ~0.39 KiB a call). 2 emulated nodes x 2 ranks over libfabric tcp, small random counts (so the
// run is about per-call bookkeeping, not bandwidth), a fresh count matrix every call.
//
// RMACC_SOAK_CALLS sets the number of calls (CI: the default; bench/soak.sh: 100,000).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

long soakCalls() {
  const char* v = getenv("RMACC_SOAK_CALLS");
  return v ? atol(v) : 20000;
}

// RSS after the warm-up and at the end: growth beyond this is a leak (0.39 KiB a call would
// be 7 MiB over the default run).
constexpr size_t kMaxGrowthBytes = 1 << 20;

// DISABLED until the growth is fixed (issue 17 §5 is open): this is its reproducer, and it
// fails today by ~0.37 KiB a call on 2 x 2 while RMACC_SOAK_NODES=1 stays flat. Run it with
//   build/tests/soak_test --gtest_also_run_disabled_tests
// and enable it (drop DISABLED_) with the fix, so CI holds the bound.
TEST(Soak, DISABLED_AlltoallvResidentMemoryStaysFlat) {
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
    const int n = ctx.nRanks, me = ctx.rank;
    constexpr size_t kScale = 24;  // elements per pair on average
    TestComm comm(ctx);
    // Buffers as large as any call needs (2 * kScale per block, gaps of < 5 between blocks).
    const size_t maxElems = n * (2 * kScale + 5) + 3;
    std::vector<float> send(maxElems), recv(maxElems);
    size_t rssWarm = 0, rssPeak = 0;
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
      if (call + 1 == warmup) rssWarm = residentBytes();
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
        << " KiB over " << calls - warmup << " calls";
  });
}

}  // namespace
}  // namespace rmacc::test
