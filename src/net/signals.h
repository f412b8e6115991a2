// The signal space (DESIGN.md §1): one monotonic 64-bit counter per (context, signal index,
// source rank). Contexts below RMACC_MAX_CONTEXTS are the user's; the rest are internal, so
// collective data, credits and entry/barrier signals never mix with each other or with user
// signals.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/signal_contexts.h"
#include "rmacc.h"

namespace rmacc {

struct SignalLayout {
  int nRanks = 0;
  size_t count() const { return (size_t)kNumContexts * RMACC_MAX_SIGNALS * nRanks; }
  size_t bytes() const { return count() * sizeof(uint64_t); }
  size_t index(int ctx, int sigIdx, int src) const {
    return ((size_t)ctx * RMACC_MAX_SIGNALS + sigIdx) * nRanks + src;
  }
};

// The 32-bit completion data of a proxy put: [src:16][ctx:3][sig:3][chunks:8][kind:2].
// `chunks` is set on the last piece of a put the proxy had to split: the number of pieces
// (1..255) that must all have landed before the signal counts. `kind` says what landed:
//   kSignal:  a put (or a piece of one) into a registered region; (ctx, sig) names the signal.
//   kLanding: a chunk or its header in landing slot `slot` of `src` on this rank (net/landing.h);
//             the ctx and sig bits hold the slot.
//   kCredit:  the target of `src`'s landing slot `slot` copied the chunk out: the slot is free.
enum class ImmKind : int { kSignal = 0, kLanding = 1, kCredit = 2 };
constexpr int kMaxLandingSlots = 64;  // the 6 bits of ctx and sig

struct ImmData {
  int src;
  int ctx;
  int sigIdx;
  int chunks;  // 0: a piece that does not signal by itself; 1..255: last piece of that many
  ImmKind kind = ImmKind::kSignal;
  int slot() const { return ctx << 3 | sigIdx; }  // kLanding, kCredit
  static uint32_t encode(int src, int ctx, int sigIdx, int chunks,
                         ImmKind kind = ImmKind::kSignal) {
    return ((uint32_t)src << 16) | ((uint32_t)ctx << 13) | ((uint32_t)sigIdx << 10) |
           ((uint32_t)chunks << 2) | (uint32_t)kind;
  }
  static uint32_t encodeSlot(int src, int slot, int chunks, ImmKind kind) {
    return encode(src, slot >> 3, slot & 7, chunks, kind);
  }
  static ImmData decode(uint32_t d) {
    return ImmData{(int)(d >> 16), (int)((d >> 13) & 7), (int)((d >> 10) & 7),
                   (int)((d >> 2) & 0xff), (ImmKind)(d & 3)};
  }
};
static_assert(RMACC_MAX_SIGNALS <= 8, "the completion data has 3 bits for the signal index");
constexpr int kMaxRanks = 1 << 16;

}  // namespace rmacc
