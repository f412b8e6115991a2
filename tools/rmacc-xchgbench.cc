// Host cost of the per-call count exchange (coll/count_exchange.h, issue 18): n forked ranks on
// this machine, the TCP bootstrap and the shared-memory node gather, `calls` exchanges with new
// counts each. Prints, per rank count, the median over ranks and calls of the exchange's wall
// time and of the CPU time of the calling thread (what the exchange costs the host besides
// waiting for peers), the control-plane messages per rank per call, and CPU per message. On a
// machine with fewer cores than ranks, wall time is mostly waiting for descheduled peers; the
// CPU time per message is the figure to extrapolate from.
// Usage: rmacc-xchgbench nNodes localSize [calls=50]
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "coll/count_exchange.h"

using namespace rmacc;

namespace {

double clockS(clockid_t c) {
  timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// One rank: medians of wall and CPU seconds per exchange, written to `out` (shared pipe).
void runRank(const rmaccUniqueId& id, int rank, int nNodes, int L, int calls, int fd) {
  const int n = nNodes * L;
  auto boot = createTcpBootstrap(id, rank, n, 120);
  const Topology topo = Topology::blocks(nNodes, L);
  plan::Options opt;
  CountExchange x(*boot, topo, rank, opt, 120);
  std::vector<double> wall, cpu;
  std::vector<uint64_t> send(n), recv(n), offset(n, 0);
  for (int call = 1; call <= calls; ++call) {
    std::mt19937_64 rng(call);
    std::vector<uint64_t> b((size_t)n * n);
    for (auto& v : b) v = (512 << 10) + rng() % (1 << 20);
    for (int r = 0; r < n; ++r) send[r] = b[(size_t)rank * n + r], recv[r] = b[(size_t)r * n + rank];
    MetaHeader h{};
    h.seq = h.callSeq = call;
    CountExchange::Result out;
    const double w0 = clockS(CLOCK_MONOTONIC), c0 = clockS(CLOCK_THREAD_CPUTIME_ID);
    x.exchange(call, CountExchange::Mine{h, send.data(), recv.data(), offset.data()}, out);
    cpu.push_back(clockS(CLOCK_THREAD_CPUTIME_ID) - c0);
    wall.push_back(clockS(CLOCK_MONOTONIC) - w0);
    if (out.code != rmaccSuccess) {
      fprintf(stderr, "rank %d: %s\n", rank, out.error.c_str());
      _exit(1);
    }
    x.commit(out);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  double r[2] = {wall[wall.size() / 2], cpu[cpu.size() / 2]};
  if (write(fd, r, sizeof(r)) != sizeof(r)) _exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s nNodes localSize [calls=50]\n", argv[0]);
    return 2;
  }
  const int nNodes = atoi(argv[1]), L = atoi(argv[2]), calls = argc > 3 ? atoi(argv[3]) : 50;
  const int n = nNodes * L;
  if (nNodes < 1 || L < 1 || calls < 1) return 2;
  rmaccUniqueId id;
  createUniqueId(&id);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t p = fork();
    if (p == 0) {
      close(fds[0]);
      try {
        runRank(id, r, nNodes, L, calls, fds[1]);
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d: %s\n", r, e.what());
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(p);
  }
  close(fds[1]);
  std::vector<double> wall, cpu;
  double r[2];
  while (read(fds[0], r, sizeof(r)) == sizeof(r)) wall.push_back(r[0]), cpu.push_back(r[1]);
  int bad = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  if (bad || wall.size() != (size_t)n) {
    fprintf(stderr, "%d ranks failed\n", bad);
    return 1;
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  // Control-plane messages a rank sends or receives per call (equal sizes): per pair of nodes
  // one message each way with the counts and one each way with the replies, handled on each
  // node by one rank (local rank = the other node's index mod L): 4 (nodes - 1) / L on average,
  // 4 x the most nodes one local rank handles at worst.
  const double msgs = 4.0 * (nNodes - 1) / L;
  const int most = 4 * ((nNodes - 1 + L - 1) / L);
  printf("%5d x %-3d ranks %5d  wall %9.1f us  cpu %8.1f us  messages %6.1f (at most %d)  "
         "cpu/message %6.2f us\n",
         nNodes, L, n, wall[n / 2] * 1e6, cpu[n / 2] * 1e6, msgs, most,
         msgs > 0 ? cpu[n / 2] * 1e6 / msgs : 0.0);
  return 0;
}
