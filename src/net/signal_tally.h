// Receive side of split puts: counts the pieces that landed per signal slot and says when the
// puts that target the slot are complete (private to src/net).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace rmacc {

// Each put ends with a "final" piece that carries its piece count (ImmData::chunks); earlier
// pieces carry 0. The sender makes a final piece land only after its siblings (ordered writes,
// or FI_DELIVERY_COMPLETE plus holding the final back), so normally a final fires at once; the
// count is the guard that no signal is ever raised before the bytes it announces are in place.
//
// Invariant: landed - consumed = pieces that landed for puts not yet signalled. A put is
// signalled (in the order its final arrived) once that number covers its piece count.
class SignalTally {
 public:
  // A piece for `slot` landed; `chunks` is 0 for a non-final piece, else the number of pieces
  // of the put it ends. Returns how many puts to `slot` became complete (usually 0 or 1).
  uint32_t add(size_t slot, int chunks) {
    if (chunks == 1 && slots_.empty()) return 1;  // fast path: unsplit puts, nothing pending
    Slot& s = slots_[slot];
    ++s.landed;
    if (chunks > 0) s.finals.push_back((uint8_t)chunks);
    uint32_t fired = 0;
    while (!s.finals.empty() && s.landed - s.consumed >= s.finals.front()) {
      s.consumed += s.finals.front();
      s.finals.pop_front();
      ++fired;
    }
    // A slot with nothing outstanding needs no memory (and keeps the fast path open).
    if (s.finals.empty() && s.landed == s.consumed) slots_.erase(slot);
    return fired;
  }

  // Slots with pieces or finals still waiting (for diagnostics and tests).
  size_t pending() const { return slots_.size(); }

 private:
  struct Slot {
    uint64_t landed = 0;
    uint64_t consumed = 0;
    std::deque<uint8_t> finals;  // piece counts of finals that could not fire yet
  };
  std::unordered_map<size_t, Slot> slots_;
};

}  // namespace rmacc
