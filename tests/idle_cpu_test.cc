// An idle communicator costs (almost) no CPU (issue 50 item 6): after init and one AlltoAllV
// across 2 emulated nodes over libfabric tcp, each rank sleeps 2 s and the CPU time its process
// used meanwhile (every thread: the proxy, the progress thread, stream workers, the bootstrap
// reader) must stay under kMaxIdleCores. A thread that polls on a millisecond timer instead of
// blocking costs a few hundredths of a core a rank, which adds up to cores on a host of 8
// ranks; blocked threads cost nothing until work or the network wakes them.
// On a failure the message names each thread (pthread_setname_np names rmacc's) with its share.
#include <gtest/gtest.h>
#include <dirent.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

// Far above what blocked threads cost (the odd wake-up), below one thread on a millisecond timer
// (a few hundredths of a core).
constexpr double kMaxIdleCores = 0.004;
constexpr double kIdleSeconds = 2.0;

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double wallSeconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// CPU seconds of each thread of this process, by "tid name" (/proc/self/task/*/schedstat: the
// first field is the time on CPU in ns).
std::map<std::string, double> threadCpuSeconds() {
  std::map<std::string, double> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(dir + "/comm"), sched(dir + "/schedstat");
    std::string name;
    std::getline(comm, name);
    double ns = 0;
    sched >> ns;
    out[std::string(e->d_name) + " " + name] = ns * 1e-9;
  }
  closedir(d);
  return out;
}

std::string describeThreads(const std::map<std::string, double>& before,
                            const std::map<std::string, double>& after, double wall) {
  std::ostringstream s;
  for (const auto& [name, cpu] : after) {
    auto it = before.find(name);
    const double used = cpu - (it == before.end() ? 0 : it->second);
    char line[128];
    snprintf(line, sizeof line, "\n  thread %-28s %.4f cores", name.c_str(), used / wall);
    s << line;
  }
  return s.str();
}

class IdleCpu : public testing::TestWithParam<std::vector<int>> {};

TEST_P(IdleCpu, RanksSleepAfterACall) {
  const std::vector<int> nodeOf = GetParam();
  const int n = (int)nodeOf.size();
  runRanks(n, tcpRanks(nodeOf), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    constexpr size_t kCount = 1024;
    std::vector<uint32_t> send(n * kCount), recv(n * kCount, 0);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i) send[p * kCount + i] = (uint32_t)(ctx.rank << 24 | p << 16 | i);
    RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    for (int p = 0; p < n; ++p)
      ASSERT_EQ(recv[p * kCount + 5], (uint32_t)(p << 24 | ctx.rank << 16 | 5)) << "from rank " << p;
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    // Let the call's tail (completions, the proxy's back-off) settle before measuring.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto threadsBefore = threadCpuSeconds();
    const double cpu0 = processCpuSeconds(), wall0 = wallSeconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(kIdleSeconds));
    const double cpu = processCpuSeconds() - cpu0, wall = wallSeconds() - wall0;
    const double cores = cpu / wall;
    printf("rank %d: %.5f cores idle over %.2f s\n", ctx.rank, cores, wall);
    EXPECT_LE(cores, kMaxIdleCores) << "rank " << ctx.rank << " used " << cpu << " s of CPU in "
                                    << wall << " s idle:"
                                    << describeThreads(threadsBefore, threadCpuSeconds(), wall);
    // Still usable at once after the idle time: the sleeping threads wake for the next call.
    RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), kCount, rmaccUint32, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    for (int p = 0; p < n; ++p)
      ASSERT_EQ(recv[p * kCount + 7], (uint32_t)(p << 24 | ctx.rank << 16 | 7)) << "from rank " << p;
  });
}

// The first traffic between two ranks whose proxies went to sleep right after init: the peer's
// connection request and its first write must wake the sleeping proxy (the CQ's wait fd), or
// the signal would wait for the call's timeout. Measured as a signal's round trip.
TEST_P(IdleCpu, FirstSignalAfterSleepIsPrompt) {
  const std::vector<int> nodeOf = GetParam();
  const int n = (int)nodeOf.size();
  runRanks(n, tcpRanks(nodeOf), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    // Rank 0 and the last rank (another node) ping-pong; the others only idle.
    const int peer = ctx.rank == 0 ? n - 1 : 0;
    if (ctx.rank != 0 && ctx.rank != n - 1) return;
    rmaccWaitSignalDesc_t w{1, peer, 0, 0};
    for (int k = 0; k < 3; ++k) {
      const double t0 = wallSeconds();
      if (ctx.rank == 0) RMACC_ASSERT_OK(rmaccSignal(peer, 0, 0, 0, comm.get(), comm.stream()));
      RMACC_ASSERT_OK(rmaccWaitSignal(1, &w, comm.get(), comm.stream()));
      if (ctx.rank != 0) RMACC_ASSERT_OK(rmaccSignal(peer, 0, 0, 0, comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      const double rtt = wallSeconds() - t0;
      if (ctx.rank == 0) printf("round trip %d after %s: %.3f ms\n", k, k ? "the last" : "1.5 s idle", rtt * 1e3);
      if (ctx.rank == 0) EXPECT_LT(rtt, 0.5) << "round trip " << k;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(TwoNodes, IdleCpu,
                         testing::Values(std::vector<int>{0, 1}, std::vector<int>{0, 1, 0, 1}),
                         [](const testing::TestParamInfo<std::vector<int>>& i) {
                           return i.param.size() == 2 ? std::string("2x1") : std::string("2x2");
                         });

}  // namespace
}  // namespace rmacc::test
