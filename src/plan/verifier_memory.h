// Private to the verifier: buffer contents as interval maps, so that the cost of verifying a
// plan does not depend on how many bytes it moves (1 GiB shapes verify as fast as 1 KiB ones).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace rmacc::plan::verify_detail {

// What a relay byte holds: byte `offset` of the block `origin` sends to `dest`, written by relay
// step `step`; `pending` until a forward has read it. A range of such bytes with consecutive
// offsets is stored as one segment whose tag describes its first byte.
struct RelayTag {
  int origin = -1;
  int dest = -1;
  uint64_t offset = 0;
  uint64_t step = 0;
  bool pending = false;
};

class RelayMemory {
 public:
  struct Seg {
    uint64_t end;
    RelayTag tag;
  };

  // Calls f(begin, end, tag) for the written segments inside [a, b), in order; gaps (bytes
  // never written) are passed with a tag whose origin is -1.
  template <typename F>
  void visit(uint64_t a, uint64_t b, F&& f) {
    split(a);
    split(b);
    uint64_t at = a;
    for (auto it = segs_.lower_bound(a); it != segs_.end() && it->first < b; ++it) {
      if (it->first > at) f(at, it->first, RelayTag{});
      f(it->first, it->second.end, it->second.tag);
      at = it->second.end;
    }
    if (at < b) f(at, b, RelayTag{});
  }

  // Replaces [a, b) with bytes tagged `tag` (tag.offset is the offset of byte a).
  void write(uint64_t a, uint64_t b, const RelayTag& tag) {
    split(a);
    split(b);
    segs_.erase(segs_.lower_bound(a), segs_.lower_bound(b));
    segs_[a] = Seg{b, tag};
  }

  // Marks [a, b) as forwarded.
  void release(uint64_t a, uint64_t b) {
    split(a);
    split(b);
    for (auto it = segs_.lower_bound(a); it != segs_.end() && it->first < b; ++it) {
      it->second.tag.pending = false;
    }
  }

 private:
  // Makes `pos` a segment boundary.
  void split(uint64_t pos) {
    auto it = segs_.upper_bound(pos);
    if (it == segs_.begin()) return;
    --it;
    if (it->first == pos || it->second.end <= pos) return;
    Seg tail = it->second;
    tail.tag.offset += pos - it->first;
    it->second.end = pos;
    segs_[pos] = tail;
  }

  std::map<uint64_t, Seg> segs_;  // begin -> segment
};

// Which bytes of one receive block have been written; each may be written once.
class Coverage {
 public:
  // Adds [a, b); false when it overlaps bytes already written.
  bool add(uint64_t a, uint64_t b) {
    const uint64_t len = b - a;
    auto next = iv_.lower_bound(a);
    if (next != iv_.end() && next->first < b) return false;
    if (next != iv_.begin()) {
      auto prev = std::prev(next);
      if (prev->second > a) return false;
      if (prev->second == a) {  // merge with the left neighbour
        a = prev->first;
        iv_.erase(prev);
      }
    }
    if (next != iv_.end() && next->first == b) {  // merge with the right neighbour
      b = next->second;
      iv_.erase(next);
    }
    total_ += len;
    iv_[a] = b;
    return true;
  }
  uint64_t total() const { return total_; }

 private:
  std::map<uint64_t, uint64_t> iv_;  // begin -> end, disjoint, not touching
  uint64_t total_ = 0;
};

}  // namespace rmacc::plan::verify_detail
