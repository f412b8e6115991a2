// Landing zone: how a put reaches a window the network cannot write (device memory without a
// GPU-direct provider). The source's proxy writes each chunk into a pinned slot on the target,
// then the slot's header (where the chunk goes, which put it belongs to); the target's proxy
// copies the chunk into the window on a stream of its own (H2D on CUDA) and, once the copy is
// done, gives the slot back to the source (a credit) and, after the put's last chunk, raises
// the put's signal. Slots are few per source and only released after their copy, so landing
// memory stays bounded and is never overwritten early; nothing at the target waits for its
// user, so a source blocked on credits always gets them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "net/fabric.h"

namespace rmacc {

// Layout of a zone: one row per remote source (Topology::remoteIndex), each [slots headers of
// kLandingHeaderBytes][slots chunks of slotBytes].
constexpr size_t kLandingHeaderBytes = 64;

// What a source needs to put into one window of a target through the target's zone: the
// zone's registration and geometry and the window (published at window registration), and
// where its own slots' headers and chunks lie.
struct LandingTarget {
  RemoteRegion region;      // the target's zone; size 0: the target has none
  uint32_t slots = 0;
  uint32_t sourceRow = 0;   // the putting rank's row in that zone
  uint64_t slotBytes = 0;
  uint64_t windowBase = 0;  // the window's address in the target's process
  uint64_t windowBytes = 0;
  bool valid() const { return region.size > 0; }
  uint64_t rowBytes() const { return slots * (kLandingHeaderBytes + slotBytes); }
  uint64_t headerOffset(int slot) const { return sourceRow * rowBytes() + slot * kLandingHeaderBytes; }
  uint64_t chunkOffset(int slot) const {
    return sourceRow * rowBytes() + slots * kLandingHeaderBytes + slot * slotBytes;
  }
};

// What the source writes into a slot's header, after the chunk.
struct LandingHeader {
  uint64_t dstAddr;       // where the chunk goes in the target's process
  uint64_t bytes;         // the chunk's length (<= slotBytes)
  uint64_t putId;         // the source's number of the logical put this chunk belongs to
  uint32_t putChunks;     // on the put's last chunk: how many chunks the put had; else 0
  int32_t ctx;
  int32_t sigIdx;
  uint32_t check;         // LandingHeader::checksum of the fields above
  uint64_t pad[3];
  uint32_t checksum() const;
};
static_assert(sizeof(LandingHeader) == kLandingHeaderBytes, "one header per 64 bytes");

// The target side; everything but allow/forbid and the accessors runs on the proxy thread.
class LandingZone {
 public:
  // `sourceRow[r]`: rank r's row (Topology::remoteIndex), or -1 for ranks that never put here
  // (this node's). `memory` holds a row per source and `mr` registers it.
  LandingZone(Backend& backend, std::unique_ptr<Allocation> memory,
              std::unique_ptr<MemoryRegion> mr, std::vector<int> sourceRow, uint32_t slots,
              uint64_t slotBytes);
  ~LandingZone();  // waits for the copies in flight

  // What every source needs (it adds its row and the window): published at window registration.
  const RemoteRegion& remote() const { return mr_->remote(); }
  uint32_t slots() const { return slots_; }
  uint64_t slotBytes() const { return slotBytes_; }
  // Windows chunks may be copied into (a header naming anything else fails the proxy); one
  // forbid undoes one allow of the same start.
  void allow(const void* base, size_t bytes);
  void forbid(const void* base);

  // Slot `slot` of `src` holds a chunk and its header: start copying it into place. Throws
  // Error(rmaccRemoteError) for a header that is damaged or names memory outside every window.
  void arrived(int src, int slot);
  // Finishes copies that are done: `credit(src, slot)` once a slot may be reused, and
  // `signal(src, ctx, sigIdx)` once every chunk of a put is in place. Returns whether anything
  // finished. Throws when the copy stream failed.
  bool progress(const std::function<void(int src, int slot)>& credit,
                const std::function<void(int src, int ctx, int sigIdx)>& signal);
  bool idle() const { return copying_.empty(); }

 private:
  struct Copy {
    uint64_t seq;  // this copy's number on the stream
    int src, slot;
    uint64_t putId;
  };
  struct PutState {
    uint64_t copied = 0;
    uint32_t chunks = 0;  // known once the last chunk's header arrived
    int ctx = 0, sigIdx = 0;
  };

  Backend& backend_;
  std::unique_ptr<Allocation> memory_;
  std::unique_ptr<MemoryRegion> mr_;
  const std::vector<int> sourceRow_;
  const uint32_t slots_;
  const uint64_t slotBytes_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Allocation> doneWord_;  // the stream writes the seq of each finished copy
  uint64_t enqueued_ = 0;
  double lastQueryS_ = 0;  // when progress() last asked the copy stream for errors
  std::deque<Copy> copying_;
  std::map<std::pair<int, uint64_t>, PutState> puts_;  // by (src, putId)

  mutable std::mutex windowsMu_;
  std::multimap<const char*, size_t> windows_;  // allowed destinations (start, bytes); windows
                                                // may repeat or overlap

  char* row(int src) const;
  bool allowed(uint64_t addr, uint64_t bytes) const;
};

// Sizes a zone: `slots` slots per remote source, each a power of two between 64 KiB and
// `maxSlotBytes`, all of them together within `budget` where possible.
uint64_t landingSlotBytes(size_t budget, int sources, uint32_t slots, size_t maxSlotBytes);

}  // namespace rmacc
