// The contexts of the signal space (DESIGN.md §1): those below RMACC_MAX_CONTEXTS are the
// user's, the rest internal, so that collective data, credits and entry/barrier signals never
// mix with each other or with user signals. The plans name them (plan_internal.h), the network
// carries them (net/signals.h) and rmacc-sim models what each costs (lab/sim).
#pragma once

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
// Contexts whose signals never carry data (credits, entry readiness): a sender may write their
// counters as values into the receiver's signal array (ProxyPut::writesValue), since no data
// write of its own increments the same counter through the receiver's proxy.
inline bool pureSignalContext(int ctx) { return ctx == kCtxCredit || ctx == kCtxEntry; }

}  // namespace rmacc
