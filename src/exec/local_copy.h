// Copies inside this rank's own device memory that take no compute units.
//
// On CUDA (driver 580, CUDA 13.0) a device-to-device copy within one GPU always runs as a
// kernel on the SMs: 1-D, 2-D and 3-D copies, batched or not, with or without the
// overlap-with-compute hint, even when issued from another GPU's stream (bench/copy_probe.cu,
// bench/RESULTS.md §6.1). Beside a compute kernel that holds every SM such a copy waits for
// the kernel to end, and the collective with it. Copies between GPUs over NVLink and between a
// GPU and pinned host memory run on copy engines and do not wait. So a block a rank sends to
// itself (and a staged block copied into the caller's buffer) goes out and comes back: part
// through two slots in the next local rank's device memory (two NVLink hops), part through two
// pinned host slots (PCIe down and up), pipelined: step t copies chunk t into a slot and chunk
// t-1 out of the other slot, every route at once, as one batch of independent copies.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace rmacc {

class Bootstrap;
class Topology;

// One way out and back: two slots of `slotBytes` that hold a chunk between its two hops.
struct LoopRoute {
  char* slot[2] = {nullptr, nullptr};
  size_t slotBytes = 0;
  double share = 0;  // the fraction of a copy's bytes this route carries
};

// The steps that copy `bytes` from `src` to `dst` through `routes` (pure; tested alone). The
// copies of one step are independent of each other (no copy reads what another writes); a step
// may start only once the previous one is complete, which is what a stream gives.
std::vector<std::vector<CopyDesc>> loopbackSteps(char* dst, const char* src, size_t bytes,
                                                 const std::vector<LoopRoute>& routes);

// The fraction of a large copy to send through pinned host memory when the rest goes through a
// peer GPU, such that both routes finish together while the node's other traffic uses the same
// NVLink: for L local ranks the peer route loads a GPU's links with (L-1)/L + 2(1-x)/L of the
// call's bytes and the host route its PCIe with x/L, so x = (L+1) h / (n + 2h) for host and
// NVLink bandwidths h and n (clamped to [0, 1]).
double hostShare(int localRanks, double hostGBs, double nvlinkGBs);

enum class LocalCopyMode { kDirect, kEngines };

class LocalCopier {
 public:
  // Collective over the communicator (every rank calls it, in the same order as the other
  // setup collectives): each rank hosts slots for its predecessor among the node's ranks and
  // maps its successor's. `slotBytes` sizes each slot.
  LocalCopier(Backend& backend, Bootstrap& boot, const Topology& topo, int rank, LocalCopyMode mode,
              size_t slotBytes);
  ~LocalCopier();

  LocalCopyMode mode() const { return mode_; }
  // Enqueues the copies on `s`, after its earlier work; later work of `s` sees their bytes.
  // Copies between two places in this rank's device memory go through the loop routes (in
  // engines mode); the others are one batch of direct copies.
  void copy(Stream& s, const CopyDesc* ops, size_t n);

 private:
  Backend& backend_;
  LocalCopyMode mode_;
  std::unique_ptr<Allocation> hosted_;    // slots this rank lends its predecessor
  std::unique_ptr<Mapping> successor_;    // the slots the successor lends this rank
  std::unique_ptr<Allocation> hostSlots_;  // pinned host memory
  std::vector<LoopRoute> routes_;       // large copies: every route, by share
  std::vector<LoopRoute> smallRoutes_;  // small copies: one route
};

}  // namespace rmacc
