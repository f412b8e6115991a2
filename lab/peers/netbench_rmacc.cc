// rmacc-netbench: fi-netbench's measurement (fi_netbench.cc) through rmacc's public API, so
// the two tables side by side say what the library adds to a put on the network. Two forked
// ranks on two emulated nodes (RMACC_HOSTNAME node0, node1: every put goes through the
// network, not the node's copy path), the host backend unless RMACC_BACKEND says otherwise,
// libfabric provider -p. Per size: the ping-pong latency of rmaccPutSignal + rmaccWaitSignal
// (half a round trip; the whole ping-pong is enqueued on the rank's stream, then synchronized)
// and the streaming bandwidth of back-to-back puts with signals into the peer's window. `-w`
// has no effect here: the library decides how many writes are in flight.
// Usage: rmacc-netbench [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "netbench_common.h"
#include "rmacc.h"

namespace {

using netbench::Options;

struct Shared {
  netbench::Barrier barrier;
  std::atomic<int> idReady{0};
  rmaccUniqueId id;
};

constexpr int kSignal = 0;  // one signal index: each rank's waits consume its counts in order

// Throws with the library's own account of what failed.
void check(rmaccResult_t r, rmaccComm_t comm, const char* call) {
  if (r == rmaccSuccess) return;
  throw std::runtime_error(std::string(call) + ": " + rmaccGetErrorString(r) + ": " +
                           rmaccGetLastError(comm));
}
#define CHECK(comm, call) check((call), (comm), #call)

// One rank's communicator, stream, source buffer and registered window.
struct Rank {
  int rank, peer;
  rmaccComm_t comm = nullptr;
  rmaccStream_t stream = nullptr;
  void* src = nullptr;
  void* win = nullptr;
  rmaccWindow_t window = nullptr;

  Rank(int r, size_t bytes, Shared* sh) : rank(r), peer(1 - r) {
    if (rank == 0) {
      CHECK(nullptr, rmaccGetUniqueId(&sh->id));
      sh->idReady.store(1);
    }
    while (!sh->idReady.load()) usleep(100);
    CHECK(nullptr, rmaccCommInitRank(&comm, 2, sh->id, rank));
    CHECK(comm, rmaccStreamCreate(comm, &stream));
    CHECK(comm, rmaccMemAlloc(comm, &src, bytes));
    CHECK(comm, rmaccMemAlloc(comm, &win, bytes));
    CHECK(comm, rmaccCommWindowRegister(comm, win, bytes, &window));
  }
  ~Rank() {  // collective: both ranks get here once neither puts any more
    if (window) rmaccCommWindowDeregister(comm, window);
    rmaccMemFree(comm, win);
    rmaccMemFree(comm, src);
    if (stream) rmaccStreamDestroy(comm, stream);
    if (comm) rmaccCommDestroy(comm);
  }
  void put(size_t bytes) {
    CHECK(comm, rmaccPutSignal(src, bytes, rmaccUint8, peer, window, 0, kSignal, 0, 0, comm,
                               stream));
  }
  void wait(int count) {
    rmaccWaitSignalDesc_t d{count, peer, kSignal, 0};
    CHECK(comm, rmaccWaitSignal(1, &d, comm, stream));
  }
  void sync() { CHECK(comm, rmaccStreamSynchronize(comm, stream)); }
};

void bench(const Options& o, Rank& r, Shared* sh) {
  if (r.rank == 0)
    printf("# rmacc put+signal (public API, 2 emulated nodes)\n# %12s %12s %12s\n", "bytes",
           "pingpong_us", "bw_GB/s");
  // One exchange off the clock: the first put to a peer connects to it.
  if (r.rank == 0) r.put(8);
  r.wait(1);
  if (r.rank == 1) r.put(8);
  r.sync();
  for (size_t bytes : netbench::sizes(o)) {
    int iters = netbench::itersAt(o, bytes);
    sh->barrier.wait();
    double t0 = netbench::now();
    for (int i = 0; i < iters; ++i) {
      if (r.rank == 0) r.put(bytes);
      r.wait(1);
      if (r.rank == 1) r.put(bytes);
    }
    r.sync();
    double lat = (netbench::now() - t0) / iters / 2;
    sh->barrier.wait();
    // Streaming: rank 1 waits for all of them, then signals back, so rank 0's clock stops when
    // every byte landed.
    t0 = netbench::now();
    if (r.rank == 0) {
      for (int i = 0; i < iters; ++i) r.put(bytes);
      r.wait(1);
    } else {
      r.wait(iters);
      CHECK(r.comm, rmaccSignal(r.peer, kSignal, 0, 0, r.comm, r.stream));
    }
    r.sync();
    double bw = (double)bytes * iters / (netbench::now() - t0) / 1e9;
    if (r.rank == 0) printf("  %12zu %12.1f %12.2f\n", bytes, lat * 1e6, bw);
  }
  sh->barrier.wait();
}

void runRank(int rank, const Options& o, Shared* sh) {
  // Each rank its own emulated node, so the puts take the network path.
  setenv("RMACC_HOSTNAME", rank == 0 ? "node0" : "node1", 1);
  setenv("RMACC_BACKEND", "host", 0);
  setenv("RMACC_NET_PROVIDER", o.provider.c_str(), 1);
  Rank r(rank, std::max<size_t>(o.maxBytes, 8), sh);  // 8: the warm-up put
  bench(o, r, sh);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = netbench::parse(argc, argv);
  return netbench::runPair<Shared>([&](int rank, Shared* sh) { runRank(rank, o, sh); });
}
