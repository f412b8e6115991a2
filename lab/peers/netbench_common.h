// What the two network benchmarks (fi_netbench.cc: raw libfabric; netbench_rmacc.cc: rmacc's
// put+signal through include/rmacc.h) share, so that their rows are comparable: the same
// options, the same sizes and iteration counts, two ranks forked on this machine and a barrier
// between them in shared memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace netbench {

struct Options {
  std::string provider = "tcp";
  size_t minBytes = 8, maxBytes = 64 << 20;
  int factor = 4, iters = 50, window = 16;
};

// The command line: [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window], sizes
// with k/M/G suffixes. Exits 2 on a bad one, 0 after -h.
Options parse(int argc, char** argv);

// minBytes, × factor, up to maxBytes.
std::vector<size_t> sizes(const Options& o);

// From 8 MiB on, 10 iterations: a large size is bandwidth-bound after a few, and 50 of them
// would make a 256 MiB row take minutes on tcp.
int itersAt(const Options& o, size_t bytes);

double now();  // seconds, steady clock

// Both ranks return from wait() only once both have called it; `idle` runs while waiting (the
// raw benchmark drives its completion queue there, so the peer's writes can complete).
struct Barrier {
  std::atomic<int> count{0}, gen{0};
  void wait(const std::function<void()>& idle = {});
};

// Runs rank(1, shared) in a forked child and rank(0, shared) here, over one Shared in memory
// both see (built before the fork), with FI_TCP_IFACE=lo unless the caller set it. A rank fails
// by throwing: its message goes to stderr, with the program's name and the rank. Returns 0 when
// neither failed.
int runPair(size_t sharedBytes, const std::function<void(void*)>& init,
            const std::function<void(int rank, void* shared)>& rank);
template <class Shared>
int runPair(const std::function<void(int rank, Shared* shared)>& rank) {
  return runPair(sizeof(Shared), [](void* m) { new (m) Shared(); },
                 [&](int r, void* m) { rank(r, static_cast<Shared*>(m)); });
}

}  // namespace netbench
