// Private to src/plan: the signal contexts the plans use and the text of one op.
#pragma once

#include <string>

#include "plan/plan.h"
#include "rmacc.h"

namespace rmacc::plan {

// The internal signal contexts (DESIGN.md §1). They equal net/signals.h kCtxColl, kCtxCredit
// and kCtxEntry; src/plan may not include net/, so tests/planner_test.cc static_asserts the
// equality instead.
constexpr int kPlanCtxColl = RMACC_MAX_CONTEXTS;  // data: direct puts, relay puts, forwards
constexpr int kPlanCtxCredit = RMACC_MAX_CONTEXTS + 1;  // relay slot credits
constexpr int kPlanCtxEntry = RMACC_MAX_CONTEXTS + 2;   // per-call entry readiness
constexpr int kPlanNumContexts = 8;  // contexts a signal may name (3 bits of completion data)

// One line of Plan::dump, also used by the verifier's reports, e.g.
// "r3 b1 proxyPut #12 -> r7 relay+0x100000 <- send[7]+0 4096B sig(coll,relay) deps{3,5}".
std::string formatOp(const Op& op, int rank, int index);

}  // namespace rmacc::plan
