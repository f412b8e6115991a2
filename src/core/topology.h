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
  // node, so any assignment of ranks to nodes works, nodes of different sizes included.
  static Topology fromHostnames(const std::vector<std::string>& hostnames);
  // Rank r sits on node nodeOf[r] (any labels; for tests and the planner).
  static Topology fromNodeOf(const std::vector<int>& nodeOf);
  // Contiguous blocks: ranks [n*L, (n+1)*L) on node n.
  static Topology blocks(int nNodes, int localSize);

  int nRanks() const { return (int)nodeOf_.size(); }
  int nNodes() const { return nNodes_; }
  // Ranks per node when every node holds the same number; nodes of different sizes have no one
  // value, and code that needs it throws rmaccInvalidUsage naming `who` (use nodeSize()).
  int localSize(const char* who = "this operation") const;
  bool uniform() const { return uniform_; }
  int nodeSize(int node) const { return nodeStart_[node + 1] - nodeStart_[node]; }
  int maxNodeSize() const { return maxNodeSize_; }
  int nodeOf(int rank) const { return nodeOf_[rank]; }
  int localRankOf(int rank) const { return localRankOf_[rank]; }
  int rankAt(int node, int localRank) const { return rankAt_[nodeStart_[node] + localRank]; }
  bool sameNode(int a, int b) const { return nodeOf_[a] == nodeOf_[b]; }
  // Rails across nodes of different sizes: local rank i of a node of L_A ranks reaches a node
  // of L_B ranks through that node's local rank i mod L_B. With equal sizes this is the rail
  // of DESIGN.md §1 (i to i); when the target node is smaller, several ranks of the sending
  // node share one relay there (rank order decides who goes first); when it is larger, its
  // local ranks L_A .. L_B-1 relay nothing from that node and receive all of it forwarded.
  int railLocal(int localRank, int dstNode) const { return localRank % nodeSize(dstNode); }
  // The rank that relays data from `src` to node `dstNode` (and receives src's block for it
  // directly): the rank of dstNode on src's rail.
  int railPeer(int src, int dstNode) const {
    return rankAt(dstNode, railLocal(localRankOf(src), dstNode));
  }
  // `from`'s position among the ranks outside `of`'s node, in rank order (0 .. nRanks -
  // nodeSize(nodeOf(of)) - 1); -1 when both share a node. Rows of a landing zone (net/landing.h).
  int remoteIndex(int of, int from) const;

  // Node rounds (DESIGN.md §2): in round k (1..nNodes-1) node A sends to A+delta(k) and
  // receives from A-delta(k), mod nNodes. Each round is a perfect matching between nodes.
  int roundDelta(int k) const { return roundDelta_[k]; }
  int sendNode(int node, int k) const { return (node + roundDelta_[k]) % nNodes_; }
  int recvNode(int node, int k) const { return (node - roundDelta_[k] + nNodes_) % nNodes_; }
  // The round in which `node` receives from node `from` (recvNode(node, k) == from; 0: itself).
  int recvRound(int node, int from) const {
    return roundOfDelta_[(node - from + nNodes_) % nNodes_];
  }
  // Node rounds in another order: deltas[k] for k = 0 .. nNodes-1, a permutation of
  // 0 .. nNodes-1 starting at 0. Throws rmaccInvalidArgument otherwise.
  void setRoundDeltas(const std::vector<int>& deltas);
  // Deltas 0, 1, N-1, 2, N-2, ...: the two directions between a pair of nodes in adjacent
  // rounds (plan::usePairedRounds says when the library takes them).
  static std::vector<int> pairedRoundDeltas(int nNodes);

  bool operator==(const Topology& o) const { return nodeOf_ == o.nodeOf_; }
  std::string describe() const;

 private:
  void finish();  // derives everything from nodeOf_

  int nNodes_ = 0;
  int maxNodeSize_ = 0;
  bool uniform_ = true;
  std::vector<int> nodeOf_;
  std::vector<int> localRankOf_;
  std::vector<int> nodeStart_;  // [node]: index of its first rank in rankAt_; [nNodes]: n
  std::vector<int> rankAt_;     // ranks grouped by node, local rank order
  std::vector<int> roundDelta_;  // index 0 is round 0 (intra-node, delta 0)
  std::vector<int> roundOfDelta_;  // its inverse: [delta] = round
  void indexRounds();
};

}  // namespace rmacc
