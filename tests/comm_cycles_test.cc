// A communicator returns its memory when destroyed: a process that creates and destroys one
// many times (a job that rebuilds its groups, a test suite) must not grow with the count.
// 2 emulated nodes x 2 ranks over libfabric tcp on loopback; each cycle is init, one
// AlltoAllV across the nodes, destroy. Resident memory is read after malloc_trim, so that
// what the allocator merely keeps cached for reuse does not count.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

constexpr int kRanks = 4;
constexpr int kWarmCycles = 3;   // the first cycles load libraries and fill one-time caches
constexpr int kCycles = 20;
// What 17 more cycles may add, in all: lazily built process-wide state of the libraries
// (libfabric's provider tables, the allocator's arenas) is not per cycle.
constexpr size_t kGrowthLimit = 8u << 20;

struct Shared {
  std::atomic<size_t> warm[kRanks];
  std::atomic<size_t> end[kRanks];
  rmaccUniqueId ids[kCycles];    // cycle c's id, made by rank 0
  std::atomic<int> published;    // the last cycle whose id is in ids
};

size_t trimmedResidentBytes() {
  malloc_trim(0);
  return residentBytes();
}

TEST(CommCycles, DestroyReturnsMemory) {
  RunOptions o = tcpRanks(blockNodes(2, 2), {{"RMACC_TIMEOUT_S", "20"}});
  o.timeoutS = 120;
  std::vector<int> status = runRanksStatus(kRanks, o, [](const RankContext& ctx) {
    auto* sh = static_cast<Shared*>(ctx.shared);
    constexpr size_t kCount = 64 << 10;  // 256 KiB to each peer
    std::vector<uint32_t> send(kRanks * kCount, (uint32_t)ctx.rank), recv(kRanks * kCount);
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      // Every cycle needs a fresh id: rank 0 makes it, the others wait for it in the scratch.
      rmaccUniqueId id = ctx.id;
      if (cycle > 0) {
        if (ctx.rank == 0) {
          RMACC_ASSERT_OK(rmaccGetUniqueId(&sh->ids[cycle]));
          sh->published.store(cycle);
        }
        while (sh->published.load() < cycle) usleep(1000);
        id = sh->ids[cycle];
      }
      rmaccComm_t comm = nullptr;
      RMACC_ASSERT_OK(rmaccCommInitRank(&comm, ctx.nRanks, id, ctx.rank));
      RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm,
                                    nullptr));
      for (int r = 0; r < kRanks; ++r) ASSERT_EQ(recv[(size_t)r * kCount], (uint32_t)r);
      RMACC_ASSERT_OK(rmaccCommDestroy(comm));
      if (cycle + 1 == kWarmCycles) sh->warm[ctx.rank] = trimmedResidentBytes();
    }
    sh->end[ctx.rank] = trimmedResidentBytes();
    const size_t warm = sh->warm[ctx.rank], end = sh->end[ctx.rank];
    printf("rank %d: %.2f MiB resident after %d cycles, %.2f MiB after %d (%+.2f MiB)\n",
           ctx.rank, warm / 1048576.0, kWarmCycles, end / 1048576.0, kCycles,
           ((double)end - (double)warm) / 1048576.0);
    EXPECT_LT(end, warm + kGrowthLimit)
        << "rank " << ctx.rank << " kept " << (end - warm) / 1024 << " KiB over "
        << kCycles - kWarmCycles << " init/destroy cycles";
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace rmacc::test
