#include "core/topology.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace rmacc {

Topology Topology::fromHostnames(const std::vector<std::string>& hostnames) {
  std::map<std::string, int> nodeIds;
  std::vector<int> nodeOf(hostnames.size());
  for (size_t r = 0; r < hostnames.size(); ++r) {
    auto it = nodeIds.emplace(hostnames[r], (int)nodeIds.size()).first;
    nodeOf[r] = it->second;
  }
  return fromNodeOf(nodeOf);
}

Topology Topology::fromNodeOf(const std::vector<int>& nodeOfIn) {
  RMACC_ARG_CHECK(!nodeOfIn.empty(), "a topology needs at least one rank");
  // Renumber nodes by their lowest rank.
  std::map<int, int> renumber;
  Topology t;
  t.nodeOf_.resize(nodeOfIn.size());
  for (size_t r = 0; r < nodeOfIn.size(); ++r) {
    auto it = renumber.emplace(nodeOfIn[r], (int)renumber.size()).first;
    t.nodeOf_[r] = it->second;
  }
  t.finish();
  return t;
}

Topology Topology::blocks(int nNodes, int localSize) {
  RMACC_ARG_CHECK(nNodes > 0 && localSize > 0, "blocks(%d, %d): sizes must be positive", nNodes,
                  localSize);
  std::vector<int> nodeOf(nNodes * localSize);
  for (int r = 0; r < nNodes * localSize; ++r) nodeOf[r] = r / localSize;
  return fromNodeOf(nodeOf);
}

void Topology::finish() {
  const int n = nRanks();
  nNodes_ = 0;
  for (int r = 0; r < n; ++r) nNodes_ = std::max(nNodes_, nodeOf_[r] + 1);
  std::vector<int> count(nNodes_, 0);
  localRankOf_.assign(n, 0);
  for (int r = 0; r < n; ++r) localRankOf_[r] = count[nodeOf_[r]]++;
  nodeStart_.assign(nNodes_ + 1, 0);
  maxNodeSize_ = 0;
  uniform_ = true;
  for (int node = 0; node < nNodes_; ++node) {
    nodeStart_[node + 1] = nodeStart_[node] + count[node];
    maxNodeSize_ = std::max(maxNodeSize_, count[node]);
    uniform_ = uniform_ && count[node] == count[0];
  }
  rankAt_.assign(n, -1);
  for (int r = 0; r < n; ++r) rankAt_[nodeStart_[nodeOf_[r]] + localRankOf_[r]] = r;
  // NCCL's p2p schedule trick: deltas k(k+1)/2 mod P (P = next power of two >= N), keeping
  // those < N, visit every delta 0..N-1 exactly once, and spread consecutive rounds apart.
  int p = 1;
  while (p < nNodes_) p <<= 1;
  roundDelta_.clear();
  for (int k = 0; (int)roundDelta_.size() < nNodes_; ++k) {
    int d = (int)(((long long)k * (k + 1) / 2) % p);
    if (d < nNodes_) roundDelta_.push_back(d);
  }
  indexRounds();
}

void Topology::indexRounds() {
  roundOfDelta_.assign(nNodes_, 0);
  for (int k = 0; k < nNodes_; ++k) roundOfDelta_[roundDelta_[k]] = k;
}

std::vector<int> Topology::pairedRoundDeltas(int nNodes) {
  std::vector<int> deltas{0};
  for (int k = 1; (int)deltas.size() < nNodes; ++k) {
    deltas.push_back(k);
    if (nNodes - k != k && (int)deltas.size() < nNodes) deltas.push_back(nNodes - k);
  }
  return deltas;
}

void Topology::setRoundDeltas(const std::vector<int>& deltas) {
  RMACC_ARG_CHECK((int)deltas.size() == nNodes_ && nNodes_ > 0 && deltas[0] == 0,
                  "round deltas: need %d starting at 0, got %zu", nNodes_, deltas.size());
  std::vector<char> seen(nNodes_, 0);
  for (int d : deltas) {
    RMACC_ARG_CHECK(d >= 0 && d < nNodes_ && !seen[d], "round deltas: %d repeated or out of 0..%d",
                    d, nNodes_ - 1);
    seen[d] = 1;
  }
  roundDelta_ = deltas;
  indexRounds();
}

int Topology::localSize(const char* who) const {
  if (!uniform_) {
    RMACC_THROW(rmaccInvalidUsage, "%s needs the same number of ranks on every node; %s", who,
                describe().c_str());
  }
  return maxNodeSize_;
}

std::string Topology::describe() const {
  std::string s = uniform_ ? strprintf("%d ranks on %d nodes x %d:", nRanks(), nNodes_, maxNodeSize_)
                           : strprintf("%d ranks on %d nodes of unequal sizes:", nRanks(), nNodes_);
  for (int node = 0; node < nNodes_; ++node) {
    s += strprintf(" [");
    for (int l = 0; l < nodeSize(node); ++l) s += strprintf(l ? " %d" : "%d", rankAt(node, l));
    s += "]";
  }
  return s;
}

int Topology::remoteIndex(int of, int from) const {
  if (sameNode(of, from)) return -1;
  int below = 0;  // ranks of `of`'s node numbered below `from`
  for (int l = 0; l < nodeSize(nodeOf(of)); ++l) below += rankAt(nodeOf(of), l) < from;
  return from - below;
}

}  // namespace rmacc
