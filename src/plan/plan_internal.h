// Private to src/plan: the signal contexts the plans use and the text of one op.
#pragma once

#include <string>

#include "core/signal_contexts.h"
#include "plan/plan.h"
#include "rmacc.h"

namespace rmacc::plan {

// The internal signal contexts the plans use (core/signal_contexts.h).
constexpr int kPlanCtxColl = kCtxColl;      // data: direct puts, relay puts, forwards
constexpr int kPlanCtxCredit = kCtxCredit;  // relay slot credits
constexpr int kPlanCtxEntry = kCtxEntry;    // per-call entry readiness
constexpr int kPlanNumContexts = 8;  // contexts a signal may name (3 bits of completion data)

// One line of Plan::dump, also used by the verifier's reports, e.g.
// "r3 b1 proxyPut #12 -> r7 relay+0x100000 <- send[7]+0 4096B sig(coll,relay) deps{3,5}".
std::string formatOp(const Op& op, int rank, int index);

}  // namespace rmacc::plan
