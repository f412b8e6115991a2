// MatrixInputs (rank_planner.h): every rank's RankInputs from the whole byte matrix, the way
// the full count exchange lets each rank compute them. The per-rank exchange of DESIGN.md §2
// delivers the same values without the matrix; tests compare both planners through this.
#include "core/error.h"
#include "plan/plan_build.h"
#include "plan/rank_planner.h"

namespace rmacc::plan {

MatrixInputs::MatrixInputs(const Topology& topo, const std::vector<uint64_t>& bytes,
                           const Options& options, const Carry& before)
    : topo_(topo), bytes_(bytes), options_(options), n_(topo.nRanks()), nNodes_(topo.nNodes()),
      chunks_((size_t)n_ * nNodes_, 0), roundChunks_(nNodes_, 0) {
  RMACC_ARG_CHECK(bytes.size() == (size_t)n_ * n_, "byte matrix has %zu entries, expected %d x %d",
                  bytes.size(), n_, n_);
  before_.relaySteps = before.relaySteps.empty() ? std::vector<uint64_t>(n_, 0) : before.relaySteps;
  RMACC_ARG_CHECK(before_.relaySteps.size() == (size_t)n_, "carry has %zu relay counters, expected %d",
                  before_.relaySteps.size(), n_);
  after_ = before_;
  const int L = topo.localSize();
  for (int w = 0; w < n_; ++w) {
    const int a = topo.nodeOf(w), i = topo.localRankOf(w);
    for (int k = 1; k < nNodes_ && L > 1; ++k) {
      const int b = topo.sendNode(a, k);
      uint64_t total = 0;
      for (int j = 0; j < L; ++j)
        if (j != i) total += count(w, topo.rankAt(b, j));
      const uint64_t c = chunkCount(total, options.slotBytes);
      chunks_[(size_t)w * nNodes_ + b] = c;
      roundChunks_[k] = std::max(roundChunks_[k], c);
      after_.relaySteps[topo.rankAt(b, i)] += c;
    }
  }
  roundBase_ = roundBases(roundChunks_);
}

RankInputs MatrixInputs::of(int rank) const {
  const Topology& t = topo_;
  const int node = t.nodeOf(rank), i = t.localRankOf(rank), L = t.localSize();
  RankInputs in;
  in.rank = rank;
  in.send.assign(bytes_.begin() + (size_t)rank * n_, bytes_.begin() + (size_t)(rank + 1) * n_);
  in.recv.resize(n_);
  for (int s = 0; s < n_; ++s) in.recv[s] = count(s, rank);
  in.relayIn.assign((size_t)nNodes_ * L, 0);
  in.writerStep.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_; ++k) {
    const int w = t.rankAt(t.recvNode(node, k), i);
    for (int j = 0; j < L; ++j) in.relayIn[(size_t)k * L + j] = count(w, t.rankAt(node, j));
    // The relay's steps before this rank's: earlier calls, then earlier rounds of this call.
    const int b = t.sendNode(node, k), relay = t.rankAt(b, i);
    uint64_t step = before_.relaySteps[relay];
    for (int e = 1; e < k; ++e) step += chunksTo(t.rankAt(t.recvNode(b, e), i), b);
    in.writerStep[k] = step;
  }
  in.roundChunks = roundChunks_;
  in.relayStepsBefore = before_.relaySteps[rank];
  // What each local relay j forwards here: this rank's block of each round's payload, cut at
  // slot boundaries (chunks) and at maxPutBytes (pieces).
  in.forwardSignals.assign(L, 0);
  in.forwardLastBatch.assign(L, 0);
  const uint64_t slot = options_.slotBytes;
  for (int j = 0; j < L; ++j) {
    if (j == i) continue;
    for (int k = 1; k < nNodes_; ++k) {
      const int w = t.rankAt(t.recvNode(node, k), j);
      const uint64_t len = count(w, rank);
      if (len == 0) continue;
      uint64_t start = 0;
      for (int m = 0; m < i; ++m)
        if (m != j) start += count(w, t.rankAt(node, m));
      for (uint64_t c = start / slot; c * slot < start + len; ++c) {
        const uint64_t lo = std::max(start, c * slot), hi = std::min(start + len, (c + 1) * slot);
        in.forwardSignals[j] += pieceCount(hi - lo, options_.maxPutBytes);
        in.forwardLastBatch[j] = std::max(in.forwardLastBatch[j], roundBase_[k] + (int)c + 1);
      }
    }
  }
  return in;
}

}  // namespace rmacc::plan
