// Which ranks share a node, and the rails between nodes (DESIGN.md §1). Pure data: built from
// every rank's host name, exchanged by the bootstrap's all-gather.
#pragma once

#include <string>
#include <vector>

namespace rmacc {

class Topology {
 public:
  Topology() = default;
  // Nodes are numbered by their lowest rank; local ranks follow global rank order inside a
  // node, so any assignment of ranks to nodes works. Throws rmaccInvalidUsage when the nodes
  // do not all hold the same number of ranks (rails need one rank per node each).
  static Topology fromHostnames(const std::vector<std::string>& hostnames);
  // nNodes nodes of localSize ranks; rank r sits on node nodeOf[r] (for tests and the planner).
  static Topology fromNodeOf(const std::vector<int>& nodeOf);
  // Contiguous blocks: ranks [n*L, (n+1)*L) on node n.
  static Topology blocks(int nNodes, int localSize);

  int nRanks() const { return (int)nodeOf_.size(); }
  int nNodes() const { return nNodes_; }
  int localSize() const { return localSize_; }
  int nodeOf(int rank) const { return nodeOf_[rank]; }
  int localRankOf(int rank) const { return localRankOf_[rank]; }
  int rankAt(int node, int localRank) const { return rankAt_[node * localSize_ + localRank]; }
  bool sameNode(int a, int b) const { return nodeOf_[a] == nodeOf_[b]; }
  // The rank that relays data from `src` to `dst`: the rank of dst's node on src's rail.
  int railPeer(int src, int dstNode) const { return rankAt(dstNode, localRankOf(src)); }
  // `from`'s position among the ranks outside `of`'s node, in rank order (0 .. nRanks -
  // localSize - 1); -1 when both share a node. Rows of a landing zone (net/landing.h).
  int remoteIndex(int of, int from) const;

  // Node rounds (DESIGN.md §2): in round k (1..nNodes-1) node A sends to A+delta(k) and
  // receives from A-delta(k), mod nNodes. Each round is a perfect matching between nodes.
  int roundDelta(int k) const { return roundDelta_[k]; }
  int sendNode(int node, int k) const { return (node + roundDelta_[k]) % nNodes_; }
  int recvNode(int node, int k) const { return (node - roundDelta_[k] + nNodes_) % nNodes_; }

  bool operator==(const Topology& o) const { return nodeOf_ == o.nodeOf_; }
  std::string describe() const;

 private:
  void finish();  // derives everything from nodeOf_

  int nNodes_ = 0;
  int localSize_ = 0;
  std::vector<int> nodeOf_;
  std::vector<int> localRankOf_;
  std::vector<int> rankAt_;
  std::vector<int> roundDelta_;  // index 0 is round 0 (intra-node, delta 0)
};

}  // namespace rmacc
