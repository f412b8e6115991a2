// The signal space (DESIGN.md §1): one monotonic 64-bit counter per (context, signal index,
// source rank). Contexts below RMACC_MAX_CONTEXTS are the user's; the rest are internal, so
// collective data, credits and entry/barrier signals never mix with each other or with user
// signals.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rmacc.h"

namespace rmacc {

enum InternalContext : int {
  kCtxColl = RMACC_MAX_CONTEXTS,  // collective data (direct puts, relay puts, forwards)
  kCtxCredit,                     // relay slot credits
  kCtxEntry,                      // per-call entry readiness
  kCtxBarrier,                    // rmaccBarrier
  kNumContexts
};
static_assert(kNumContexts <= 8, "the completion data has 3 bits for the context");

struct SignalLayout {
  int nRanks = 0;
  size_t count() const { return (size_t)kNumContexts * RMACC_MAX_SIGNALS * nRanks; }
  size_t bytes() const { return count() * sizeof(uint64_t); }
  size_t index(int ctx, int sigIdx, int src) const {
    return ((size_t)ctx * RMACC_MAX_SIGNALS + sigIdx) * nRanks + src;
  }
};

// The 32-bit completion data of a proxy put: [src:16][ctx:3][sig:3][chunks:8][spare:2].
// `chunks` is set on the last piece of a put the proxy had to split: the number of pieces
// (1..255) that must all have landed before the signal counts.
struct ImmData {
  int src;
  int ctx;
  int sigIdx;
  int chunks;  // 0: a piece that does not signal by itself; 1..255: last piece of that many
  static uint32_t encode(int src, int ctx, int sigIdx, int chunks) {
    return ((uint32_t)src << 16) | ((uint32_t)ctx << 13) | ((uint32_t)sigIdx << 10) |
           ((uint32_t)chunks << 2);
  }
  static ImmData decode(uint32_t d) {
    return ImmData{(int)(d >> 16), (int)((d >> 13) & 7), (int)((d >> 10) & 7),
                   (int)((d >> 2) & 0xff)};
  }
};
static_assert(RMACC_MAX_SIGNALS <= 8, "the completion data has 3 bits for the signal index");
constexpr int kMaxRanks = 1 << 16;

}  // namespace rmacc
