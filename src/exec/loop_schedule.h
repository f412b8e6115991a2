// The schedule of a same-device copy that goes out and back through copy engines
// (exec/local_copy.h), as data: which copy, event record and event wait goes on which lane, so
// that the dependencies can be tested without a device (tests/loop_schedule_test.cc runs the
// ops in random interleavings that respect them and checks every byte).
//
// Why lanes: a batch of copies on one stream goes to one copy engine in order, and a stream
// runs one step after another, so hops of a route would never overlap and neither would
// routes (docs/decisions.md#local-copy-lanes). Here every route has
// two lanes of its own (its in-hop, src -> slot, and its out-hop, slot -> dst, on different
// links), and chunks flow through S slots: chunk k's out-hop waits for its in-hop, and chunk
// k+S's in-hop into the same slot waits for chunk k's out-hop. The caller's lane forks to the
// route lanes at the start (one event) and joins them at the end (one wait per route), so its
// later work sees the bytes.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.h"

namespace rmacc {

// One way out and back: S >= 2 slots of `slotBytes` that hold a chunk between its two hops.
struct LoopRoute {
  std::vector<char*> slots;
  size_t slotBytes = 0;
  double share = 0;  // the fraction of a large copy's bytes this route carries
};

struct LoopOp {
  enum class Kind { kCopy, kRecord, kWait };
  Kind kind;
  int lane;       // kCallerLane, or a route lane (LoopSchedule::inLane / outLane)
  int event = 0;  // kRecord, kWait: which of the schedule's events
  CopyDesc copy{};
};

// Builds the ops of successive copies. It keeps which slots were used and by what, so that the
// ops of copy n+1 wait for copy n's use of a slot: the events are reused across copies, and a
// wait means "the work of the event's latest record enqueued before this wait" (CUDA's event
// semantics, which the host backend mimics). Pure; not thread-safe.
class LoopSchedule {
 public:
  static constexpr int kCallerLane = -1;

  // `routes`: the large copies' routes (every route needs >= 2 slots); `small`: one slot of
  // `small.slotBytes` that copies up to that size use on the caller's lane alone.
  // `minChunk`: large copies are cut into at least a few chunks of at least this size, so that
  // their hops overlap even when they fit in one slot.
  LoopSchedule(std::vector<LoopRoute> routes, LoopRoute small, size_t minChunk);

  int lanes() const { return 2 * (int)routes_.size(); }
  int events() const { return kFirstSlotEvent + 2 * totalSlots_; }
  static int inLane(int route) { return 2 * route; }
  static int outLane(int route) { return 2 * route + 1; }
  size_t smallMax() const { return small_.slotBytes; }

  // Appends the ops that copy `bytes` from `src` to `dst` (device memory of this rank, not
  // overlapping). `sameCaller`: the previous small copy (bytes <= smallMax()) was enqueued on
  // the same caller stream as this one (a small copy then needs no wait: the stream orders it).
  void copy(char* dst, const char* src, size_t bytes, bool sameCaller, std::vector<LoopOp>& out);

  // How many bytes of a large copy of `bytes` each route carries (sums to bytes; pure).
  std::vector<size_t> split(size_t bytes) const;
  // Chunk size for `part` bytes through slots of `slotBytes` (pure).
  static size_t chunkFor(size_t part, size_t slotBytes, size_t minChunk);

 private:
  static constexpr int kFork = 0, kSmallFree = 1, kFirstSlotEvent = 2;
  int inDone(int route, int slot) const { return kFirstSlotEvent + 2 * (slotBase_[route] + slot); }
  int outDone(int route, int slot) const { return inDone(route, slot) + 1; }
  void smallCopy(char* dst, const char* src, size_t bytes, bool sameCaller, std::vector<LoopOp>& out);
  void largeCopy(char* dst, const char* src, size_t bytes, std::vector<LoopOp>& out);
  // One chunk through route r's next slot; returns the slot.
  int chunk(int r, char* dst, const char* src, size_t len, std::vector<LoopOp>& out);

  std::vector<LoopRoute> routes_;
  LoopRoute small_;
  size_t minChunk_;
  std::vector<int> slotBase_;            // by route: index of its first slot among all
  int totalSlots_ = 0;
  std::vector<std::vector<char>> used_;  // [route][slot]: an out-hop was recorded there
  std::vector<int> next_;                // by route: the slot its next chunk goes into
  bool smallUsed_ = false;
};

// The fraction of a large copy to send through pinned host memory when the rest goes through a
// peer GPU, such that both routes finish together while the node's other traffic uses the same
// NVLink: for L local ranks the peer route loads a GPU's links with (L-1)/L + 2(1-x)/L of the
// call's bytes and the host route its PCIe with x/L, so x = (L+1) h / (n + 2h) for host and
// NVLink bandwidths h and n (clamped to [0, 1]).
double hostShare(int localRanks, double hostGBs, double nvlinkGBs);

}  // namespace rmacc
