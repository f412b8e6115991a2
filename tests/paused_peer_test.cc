// A rank that is alive but does not answer (SIGSTOPped) is described as not answering, never
// as having closed its connection: the survivors' errors must tell a paused rank from one
// that left or died, since the two call for different actions (look at what it is stuck on,
// or at why it exited). 2 emulated nodes x 2 ranks; rank 2 stops itself, the others' call
// times out, then rank 0 resumes it. Rank 2 stops only once every survivor is entering its
// call and right after its own puts start: a pause after a fixed delay let a fast machine
// finish the whole call first, and then no call had anything to fail on.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 2;

struct Shared {
  std::atomic<int> victimPid;
  std::atomic<int> started;   // survivors about to enter the call the pause interrupts
  std::atomic<int> reported;  // survivors whose call came back
  std::atomic<int> failed;    // of them, those whose call failed
  char text[kRanks][1024];    // each survivor's error text
};

TEST(PausedPeer, DescribedAsNotAnsweringNotAsClosed) {
  RunOptions o;
  o.nodeOf = blockNodes(2, 2);
  o.timeoutS = 120;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "3"}};
  std::vector<int> status = runRanksStatus(kRanks, o, [](const RankContext& ctx) {
    auto* sh = static_cast<Shared*>(ctx.shared);
    TestComm comm(ctx);
    constexpr size_t kCount = 4 << 20;  // 16 MiB a peer: the pause finds puts in flight
    std::vector<uint32_t> send(kRanks * kCount, (uint32_t)ctx.rank), recv(kRanks * kCount);
    // One call that works, so that every connection is up before the pause.
    RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(),
                                  nullptr));
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), nullptr));
    if (ctx.rank == kVictim) {
      sh->victimPid.store(getpid());
      while (sh->started.load() < kRanks - 1) usleep(100);
      RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(),
                                    comm.stream()));
      usleep(1000);
      // Mid-call: 16 MiB to each peer cannot have landed in a millisecond, and a stopped
      // process receives nothing more. Stopped until rank 0 has everyone's error.
      raise(SIGSTOP);
      // Resumed: the others gave up on this communicator; whatever it answers, it must not hang.
      (void)rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(), nullptr);
      return;
    }
    while (sh->victimPid.load() == 0) usleep(1000);
    sh->started.fetch_add(1);
    rmaccResult_t r =
        rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(), nullptr);
    // A survivor that had all of rank 2's data before the pause may succeed; not all can (rank
    // 2 never receives, so its peers wait for its credits or its end of the call).
    if (r != rmaccSuccess) {
      snprintf(sh->text[ctx.rank], sizeof(sh->text[0]), "%s", comm.lastError());
      sh->failed.fetch_add(1);
    }
    sh->reported.fetch_add(1);
    if (ctx.rank == 0) {
      while (sh->reported.load() < kRanks - 1) usleep(1000);
      kill(sh->victimPid.load(), SIGCONT);
      EXPECT_GT(sh->failed.load(), 0);
    }
    const std::string text = sh->text[ctx.rank];
    EXPECT_EQ(text.find("rank 2 closed its connection"), std::string::npos) << text;
    EXPECT_EQ(text.find("rank 2's process exited"), std::string::npos) << text;
    EXPECT_EQ(text.find("rank 2 gone"), std::string::npos) << text;
  });
  for (int r = 0; r < kRanks; ++r)
    if (r != kVictim) EXPECT_EQ(status[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace rmacc::test
