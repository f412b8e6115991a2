#include "plan/graph_plan.h"

#include "core/error.h"
#include "plan/plan_internal.h"

namespace rmacc::plan {

// Larger than any block, and small enough that piece counts ((len + max - 1) / max) cannot
// overflow.
constexpr uint64_t kWholeBlocks = uint64_t{1} << 62;

Options graphOptions(const Options& options) {
  Options o = options;
  o.entrySignals = true;
  o.maxPutBytes = kWholeBlocks;
  return o;
}

RankInputs graphInputs(const Topology& topo, int rank, const std::vector<uint64_t>& send,
                       const std::vector<uint64_t>& recv) {
  const int n = topo.nRanks();
  RMACC_ARG_CHECK(topo.nNodes() == 1, "an in-graph call runs on one node, not %d", topo.nNodes());
  RMACC_ARG_CHECK(rank >= 0 && rank < n, "rank %d of %d", rank, n);
  RMACC_ARG_CHECK(send.size() == (size_t)n && recv.size() == (size_t)n,
                  "counts of %zu and %zu ranks, expected %d", send.size(), recv.size(), n);
  const int L = topo.nodeSize(0), W = relayWriterSlots(topo, rank);
  RankInputs in;
  in.rank = rank;
  in.send = send;
  in.recv = recv;
  // One node: no rounds between nodes, so no relay payloads, steps or forwards.
  in.relayIn.assign((size_t)W * L, 0);
  in.roundChunks.assign(1, 0);
  in.writerStep.assign(1, 0);
  in.writerCallStep.assign(1, 0);
  in.writerOffset.assign(1, 0);
  in.forwardSignals.assign(L, 0);
  in.forwardLastBatch.assign(L, 0);
  return in;
}

RankPlan makeGraphPlan(const Topology& topo, const Options& options, int rank,
                       const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv) {
  return makeRankPlan(topo, graphOptions(options), graphInputs(topo, rank, send, recv)).plan;
}

bool isEntrySignal(const Op& op) { return op.ctx == kPlanCtxEntry && op.sigIdx == 0; }
bool isDataSignal(const Op& op) { return op.ctx == kPlanCtxColl && op.sigIdx == kSigData; }

namespace {

// Why `op` (index i of `plan`) cannot be recorded; empty when it can.
std::string opProblem(const Topology& topo, int rank, const RankPlan& plan, size_t i) {
  const Op& op = plan.ops[i];
  const int n = topo.nRanks();
  switch (op.kind) {
    case OpKind::kCopy:
      for (size_t j = 0; j < i; ++j)
        if (plan.ops[j].kind == OpKind::kCopy) return "a second copy";
      if (op.src.region != Region::kSend || op.dst.region != Region::kRecv || !op.gather.empty())
        return "a copy other than the block a rank sends itself";
      return {};
    case OpKind::kWait:
      if (op.lane != Lane::kCeWait) return "a wait off the copy-engine wait lane";
      if (op.peer < 0 || op.peer >= n || op.peer == rank) return "a wait for no peer";
      if (!isEntrySignal(op) && !isDataSignal(op)) return "a wait for a signal other than entry or data";
      return {};
    case OpKind::kPut:
      if (op.lane != Lane::kCePut) return "a put off the copy-engine lane";
      if (op.peer < 0 || op.peer >= n || op.peer == rank) return "a put to no peer";
      if (!op.gather.empty()) return "a gathering put";
      if (isEntrySignal(op)) return op.bytes ? "an entry signal with data" : std::string();
      if (!isDataSignal(op)) return "a put with a signal other than entry or data";
      if (op.bytes && (op.src.region != Region::kSend || op.dst.region != Region::kRecv))
        return "a put from or to a relay";
      for (int d : op.deps) {
        const Op& w = plan.ops[d];
        if (w.kind != OpKind::kWait || !isEntrySignal(w) || w.peer != op.peer)
          return "a put gated by something other than its peer's entry signal";
      }
      return {};
  }
  return "an op of no kind";
}

}  // namespace

std::string graphPlanProblem(const Topology& topo, int rank, const RankPlan& plan) {
  if (topo.nNodes() != 1) return "the communicator spans nodes";
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    std::string why = opProblem(topo, rank, plan, i);
    if (!why.empty()) return formatOp(plan.ops[i], rank, (int)i) + ": " + why;
  }
  return {};
}

}  // namespace rmacc::plan
