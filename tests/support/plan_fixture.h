// Building, inspecting and breaking AlltoAllV plans for the planner and verifier tests: the
// hand-checked options, count matrices from a function, consecutive calls with their carry,
// the verifier's verdict as a gtest expectation, and op lookups and surgery on a rank's plan.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/plan_build.h"
#include "plan/plan_internal.h"
#include "plan/planner.h"
#include "plan/verifier.h"

namespace rmacc::plan::fixture {

// Options of the hand-checked plans: slot reuse is the only credit (no pacing window).
Options opts(uint64_t slotBytes = 1 << 20, int slots = 2, uint64_t maxPut = 1ull << 30);
// bytes[s][d] = f(s, d)
std::vector<uint64_t> counts(int n, const std::function<uint64_t(int, int)>& f);
Plan planOf(const Topology& t, const std::vector<uint64_t>& b, const Options& o,
            const Carry& before = {});
// Relays that release themselves on up to `upTo` nodes, rounds cut into 2 chunks of >= 1 byte.
Options releasing(uint64_t slotBytes, int slots, int upTo);
// Consecutive calls on one communicator, each planned with the carry of the one before.
std::vector<Plan> planCalls(const Topology& t, const std::vector<std::vector<uint64_t>>& calls,
                            const Options& o);

// The verifier accepts the calls / rejects them with an error containing `needle`.
void expectGood(const std::vector<Plan>& calls);
void expectCaught(const std::vector<Plan>& calls, const std::string& needle);

// Indices of rank `rank`'s ops that satisfy `pred`, and how many ops it has on `lane`.
std::vector<int> find(const Plan& p, int rank, const std::function<bool(const Op&)>& pred);
int countLane(const Plan& p, int rank, Lane lane);

bool isData(const Op& op);
bool isWait(const Op& op, int ctx);
bool isRelayWait(const Op& op);
bool isDataWait(const Op& op);
// A put of data from a send block straight into a receive block (no relay on either side).
bool isDirectPut(const Op& op);
bool isSignal(const Op& op, int ctx);

// Plan surgery for the negative tests: remove or move one op, keeping deps pointing at the
// same ops (deps on a removed op disappear).
void eraseOp(Plan& p, int rank, int index);
void moveOp(Plan& p, int rank, int from, int to);

}  // namespace rmacc::plan::fixture
