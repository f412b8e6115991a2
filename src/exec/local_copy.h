// Copies inside this rank's own device memory that take no compute units.
//
// On CUDA (driver 580, CUDA 13.0) a device-to-device copy within one GPU always runs as a
// kernel on the SMs: 1-D, 2-D and 3-D copies, batched or not, with or without the
// overlap-with-compute hint, even when issued from another GPU's stream
// (lab/probes/copy_probe.cu; docs/decisions.md#local-copy-direct). Beside a compute kernel that holds every SM such a copy waits for
// the kernel to end, and the collective with it. Copies between GPUs over NVLink and between a
// GPU and pinned host memory run on copy engines and do not wait. So a block a rank sends to
// itself (and a staged block copied into the caller's buffer) goes out and comes back: part
// through slots in the next local rank's device memory (two NVLink hops), part through pinned
// host slots (PCIe down and up). Each route's two hops run on two streams of their own, chunk
// after chunk through the slots, so that all four links move bytes at once
// (exec/loop_schedule.h has the dependencies). In engines mode that is two more streams per
// route (four with a peer GPU): on CUDA each takes one of the CUDA_DEVICE_MAX_CONNECTIONS
// hardware queues (bench/gpu.sh sets 16). They hold only event waits for work enqueued before
// them, never a peer's signal; a queue they share with another stream can delay their copies
// behind that stream's waits, and two hops sharing one queue run one after the other.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/config.h"
#include "exec/loop_schedule.h"
#include "exec/signal_space.h"

namespace rmacc {

class Bootstrap;
class Topology;

enum class LocalCopyMode { kDirect, kEngines };

// RMACC_LOCAL_COPY resolved for this device: `auto` is engines where a same-device copy needs
// the compute units (BackendCaps::deviceCopyUsesCompute), direct elsewhere. Logs the choice at
// INFO.
LocalCopyMode chooseLocalCopyMode(LocalCopySetting setting, const BackendCaps& caps);

// What each rank tells the others of its node at setup: the slots it lends (an empty record
// when it lends none) and which physical device they are on (Backend::deviceIdentity).
struct SlotRecord {
  HandleRecord slots;
  char device[48] = {};
};

class LocalCopier {
 public:
  // Collective over the communicator (every rank calls it, in the same order as the other
  // setup collectives): each rank hosts slots for its predecessor among the node's ranks and
  // maps its successor's. `slotBytes` sizes each of a route's `slots` slots.
  LocalCopier(Backend& backend, Bootstrap& boot, const Topology& topo, int rank, LocalCopyMode mode,
              size_t slotBytes, int slots);
  ~LocalCopier();

  LocalCopyMode mode() const { return mode_; }
  // Enqueues the copies on `s`, after its earlier work; later work of `s` sees their bytes.
  // Copies between two places in this rank's device memory go through the loop routes (in
  // engines mode); the others are one batch of direct copies. Calls come from one thread at a
  // time (the progress thread); copies enqueued on different streams may overlap in time: the
  // slots they share are ordered by events.
  void copy(Stream& s, const CopyDesc* ops, size_t n);

 private:
  // Lends slots to the predecessor (engines mode, a node of several ranks) and trades records
  // with the node's ranks (collective).
  std::vector<SlotRecord> exchange(Bootstrap& boot, const Topology& topo, int rank, size_t routeBytes);
  void buildRoutes(const Topology& topo, int rank, const std::vector<SlotRecord>& records,
                   size_t slotBytes, int slots, size_t smallBytes);
  void run(Stream& caller);  // enqueues ops_

  Backend& backend_;
  LocalCopyMode mode_;
  std::unique_ptr<Allocation> hosted_;     // slots this rank lends its predecessor
  std::unique_ptr<Mapping> successor_;     // the slots the successor lends this rank
  std::unique_ptr<Allocation> hostSlots_;  // pinned host memory
  std::unique_ptr<LoopSchedule> schedule_;
  // Declared after the memory: destroyed (and drained) before it.
  std::vector<std::unique_ptr<Stream>> lanes_;  // by LoopSchedule lane
  std::vector<std::unique_ptr<Event>> events_;  // by LoopSchedule event
  std::vector<LoopOp> ops_;                     // reused every copy
  Stream* lastSmallCaller_ = nullptr;
};

}  // namespace rmacc
