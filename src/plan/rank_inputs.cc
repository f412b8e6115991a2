// MatrixInputs (rank_planner.h): every rank's RankInputs from the whole byte matrix, the way
// the full count exchange lets each rank compute them. The per-rank exchange of DESIGN.md §2
// delivers the same values without the matrix; tests compare both planners through this.
#include <algorithm>
#include <climits>

#include "core/error.h"
#include "plan/plan_build.h"
#include "plan/rank_planner.h"

namespace rmacc::plan {

MatrixInputs::MatrixInputs(const Topology& topo, const std::vector<uint64_t>& bytes,
                           const Options& options, const Carry& before)
    : topo_(topo), bytes_(bytes), options_(options), n_(topo.nRanks()), nNodes_(topo.nNodes()),
      totals_((size_t)n_ * nNodes_, 0), roundChunks_(nNodes_, 0) {
  RMACC_ARG_CHECK(bytes.size() == (size_t)n_ * n_, "byte matrix has %zu entries, expected %d x %d",
                  bytes.size(), n_, n_);
  before_.relaySteps = before.relaySteps.empty() ? std::vector<uint64_t>(n_, 0) : before.relaySteps;
  RMACC_ARG_CHECK(before_.relaySteps.size() == (size_t)n_, "carry has %zu relay counters, expected %d",
                  before_.relaySteps.size(), n_);
  after_ = before_;
  // totals_: each writer's relay payload to each other node, in bytes.
  for (int w = 0; w < n_; ++w) {
    const int a = topo.nodeOf(w);
    for (int k = 1; k < nNodes_; ++k) {
      const int b = topo.sendNode(a, k), skip = topo.railLocal(topo.localRankOf(w), b);
      uint64_t total = 0;
      for (int j = 0; j < topo.nodeSize(b); ++j)
        if (j != skip) total += count(w, topo.rankAt(b, j));
      const uint64_t c = chunkCount(total, options, isLastRound(k, nNodes_));
      totals_[(size_t)w * nNodes_ + b] = total;
      after_.relaySteps[topo.railPeer(w, b)] += c;
      largest_ = std::max(largest_, total);
    }
  }
  options_ = callOptions(options, largest_, topo.nNodes());  // chunk counts are the same under both
  // A round takes as many positions as its busiest relay: the chunks of all its writers.
  for (int k = 1; k < nNodes_; ++k)
    for (int r = 0; r < n_; ++r)
      roundChunks_[k] = std::max(roundChunks_[k], chunksAt(r, k, INT_MAX));
  roundBase_ = roundBases(roundChunks_, options_);
}

uint64_t MatrixInputs::chunksAt(int relay, int k, int below) const {
  const Topology& t = topo_;
  const int b = t.nodeOf(relay), from = t.recvNode(b, k), L = t.nodeSize(b);
  uint64_t sum = 0;
  for (int wi = t.localRankOf(relay); wi < t.nodeSize(from) && wi < below; wi += L)
    sum += chunksTo(t.rankAt(from, wi), b, k);
  return sum;
}

uint64_t MatrixInputs::chunksTo(int writer, int node, int k) const {
  return chunkCount(totalTo(writer, node), options_, isLastRound(k, nNodes_));
}

RankInputs MatrixInputs::of(int rank) const {
  const Topology& t = topo_;
  const int node = t.nodeOf(rank), i = t.localRankOf(rank), L = t.nodeSize(node);
  const int W = relayWriterSlots(t, rank);
  RankInputs in;
  in.rank = rank;
  in.send.assign(bytes_.begin() + (size_t)rank * n_, bytes_.begin() + (size_t)(rank + 1) * n_);
  in.recv.resize(n_);
  for (int s = 0; s < n_; ++s) in.recv[s] = count(s, rank);
  in.relayIn.assign((size_t)nNodes_ * W * L, 0);
  in.writerStep.assign(nNodes_, 0);
  in.writerCallStep.assign(nNodes_, 0);
  in.writerOffset.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_; ++k) {
    const int from = t.recvNode(node, k);
    for (int m = 0; i + m * L < t.nodeSize(from); ++m) {
      const int w = t.rankAt(from, i + m * L);
      for (int j = 0; j < L; ++j)
        in.relayIn[((size_t)k * W + m) * L + j] = count(w, t.rankAt(node, j));
    }
    // The relay's steps before this rank's: earlier calls, earlier rounds of this call, then
    // the writers of this round with a lower local rank.
    const int b = t.sendNode(node, k), relay = t.railPeer(rank, b);
    uint64_t step = before_.relaySteps[relay];
    for (int e = 1; e < k; ++e) step += chunksAt(relay, e, INT_MAX);
    in.writerOffset[k] = chunksAt(relay, k, i);
    in.writerStep[k] = step + in.writerOffset[k];
    in.writerCallStep[k] = in.writerStep[k] - before_.relaySteps[relay];
  }
  in.roundChunks = roundChunks_;
  in.relayStepsBefore = before_.relaySteps[rank];
  in.largestPayload = largest_;
  // What each local relay j forwards here: this rank's block of each of its payloads, cut at
  // chunk boundaries (chunkBytes of that payload) and at maxPutBytes (pieces).
  in.forwardSignals.assign(L, 0);
  in.forwardLastBatch.assign(L, 0);
  for (int j = 0; j < L; ++j) {
    if (j == i) continue;
    for (int k = 1; k < nNodes_; ++k) {
      const int from = t.recvNode(node, k);
      uint64_t pos = roundBase_[k];  // position of the current writer's first chunk at relay j
      for (int wi = j; wi < t.nodeSize(from); wi += L) {
        const int w = t.rankAt(from, wi);
        const uint64_t len = count(w, rank);
        const uint64_t chunk = chunkBytes(totalTo(w, node), options_, isLastRound(k, nNodes_));
        uint64_t start = 0;  // the blocks before this rank's in relay j's payload order
        for (int q = 0; len > 0 && payloadLocal(j, L, q) != i; ++q)
          start += count(w, t.rankAt(node, payloadLocal(j, L, q)));
        const BlockForwards f = blockForwards(start, len, chunk, options_.maxPutBytes);
        in.forwardSignals[j] += f.pieces;
        if (f.pieces) in.forwardLastBatch[j] = std::max(in.forwardLastBatch[j], (int)(pos + f.endChunk));
        pos += chunksTo(w, node, k);
      }
    }
  }
  return in;
}

}  // namespace rmacc::plan
