#include "exec/count_exchange.h"

#include <climits>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "plan/plan_build.h"

namespace rmacc {

// What went wrong with a call, as far as one rank knows; merged so that every rank ends with
// the same one: the lowest rejecting rank wins, else the first (sender, receiver) mismatch.
struct CountExchange::Verdict {
  int32_t rejectRank = INT32_MAX;
  int32_t misSrc = INT32_MAX, misDst = INT32_MAX;
  int32_t pad = 0;
  uint64_t sent = 0, expected = 0;

  void reject(int r) { rejectRank = std::min(rejectRank, (int32_t)r); }
  void mismatch(int s, int d, uint64_t sentBytes, uint64_t expectedBytes) {
    if (std::make_pair(s, d) >= std::make_pair(misSrc, misDst)) return;
    misSrc = s;
    misDst = d;
    sent = sentBytes;
    expected = expectedBytes;
  }
  void merge(const Verdict& o) {
    reject(o.rejectRank);
    if (o.misSrc != INT32_MAX) mismatch(o.misSrc, o.misDst, o.sent, o.expected);
  }
  bool ok() const { return rejectRank == INT32_MAX && misSrc == INT32_MAX; }
};

namespace {

// Control-plane tags of the two rail rounds (messages of one (peer, tag) arrive in order,
// which orders the calls).
constexpr uint32_t kRail1Tag = 0x434e5453;  // "CNTS"
constexpr uint32_t kRail2Tag = 0x434e5432;  // "CNT2"

// Step 2's message, followed by L u64: the sender's counts to the receiver's node's ranks.
struct Rail1 {
  uint64_t seq;
  uint64_t callSeq;       // the sender's collective call number: calls out of step are an error
  RemoteRegion remote;    // the sender's network target (the receiver writes there directly)
  uint64_t offsetForYou;  // where the receiver's block lands in it
  uint64_t roundChunks;   // the sender's node's largest relay payload of round (receiver node)
};
// Step 3's message.
struct Rail2 {
  uint64_t seq;
  uint64_t roundChunks;  // the largest relay payload of round (sender's node), communicator-wide
  uint64_t firstStep;    // the relay step at which the receiver's chunks start at the sender
};

// Same AlltoAllV, different collective call: some rank made a collective call the others did
// not (a barrier, a window registration). Nothing that follows can be trusted.
void checkInStep(int peer, uint64_t theirs, uint64_t mine) {
  if (theirs != mine)
    RMACC_THROW(rmaccInvalidUsage,
                "collective calls out of step: rank %d is in call #%llu (an AlltoAll(v)), this "
                "rank in call #%llu (an AlltoAll(v)): a rank skipped or added a collective call",
                peer, (unsigned long long)theirs, (unsigned long long)mine);
}

template <typename T>
const T& at(const char* base, size_t offset) {
  return *reinterpret_cast<const T*>(base + offset);
}

}  // namespace

CountExchange::CountExchange(Bootstrap& boot, const Topology& topo, int rank,
                             const plan::Options& options, double timeoutS)
    : boot_(boot), topo_(topo), rank_(rank), n_(topo.nRanks()), node_(topo.nodeOf(rank)),
      local_(topo.localRankOf(rank)), L_(topo.localSize("the count exchange")),
      nNodes_(topo.nNodes()),
      options_(options) {
  if (L_ > 1) {
    const size_t rec1 = sizeof(MetaHeader) + sizeof(Verdict) + 8 * ((size_t)nNodes_ + 3 * n_);
    const size_t rec2 = sizeof(Verdict) + 16 * (size_t)L_;
    gather_ = std::make_unique<NodeGather>(boot, topo, rank, std::max(rec1, rec2), timeoutS);
  }
}

// Step 1. Record: header, verdict, chunks[nNodes], send[n], recv[n], offset[n].
void CountExchange::nodePhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  const size_t hdr = sizeof(MetaHeader) + sizeof(Verdict), chunks = hdr;
  const size_t sendAt = chunks + 8 * (size_t)nNodes_, recvAt = sendAt + 8 * (size_t)n_,
               offAt = recvAt + 8 * (size_t)n_;
  aggChunks_ = myChunks_;
  expect_.assign((size_t)nNodes_ * L_, 0);
  for (int a = 0; a < nNodes_; ++a) expect_[(size_t)a * L_ + local_] = mine.recv[topo_.rankAt(a, local_)];
  out.localHeader.assign(L_, MetaHeader{});
  out.localOffset.assign(L_, std::vector<uint64_t>());
  if (!gather_) return;
  std::vector<char> rec(offAt + 8 * (size_t)n_);
  memcpy(rec.data(), &mine.header, sizeof(MetaHeader));
  memcpy(rec.data() + sizeof(MetaHeader), &v, sizeof(Verdict));
  memcpy(rec.data() + chunks, myChunks_.data(), 8 * (size_t)nNodes_);
  memcpy(rec.data() + sendAt, mine.send, 8 * (size_t)n_);
  memcpy(rec.data() + recvAt, mine.recv, 8 * (size_t)n_);
  memcpy(rec.data() + offAt, mine.offset, 8 * (size_t)n_);
  gather_->publish(2 * seq - 1, rec.data(), rec.size());
  for (int j = 0; j < L_; ++j) {
    if (j == local_) continue;
    const int mate = topo_.rankAt(node_, j);
    const char* p = gather_->peerRecord(j, 2 * seq - 1);
    out.localHeader[j] = at<MetaHeader>(p, 0);
    RMACC_ENFORCE(out.localHeader[j].seq == seq, "rank %d is at call %llu, rank %d at %llu", mate,
                  (unsigned long long)out.localHeader[j].seq, rank_, (unsigned long long)seq);
    checkInStep(mate, out.localHeader[j].callSeq, mine.header.callSeq);
    v.merge(at<Verdict>(p, sizeof(MetaHeader)));
    const uint64_t sent = at<uint64_t>(p, sendAt + 8 * (size_t)rank_);
    if (sent != mine.recv[mate]) v.mismatch(mate, rank_, sent, mine.recv[mate]);
    for (int k = 1; k < nNodes_; ++k)
      aggChunks_[k] = std::max(aggChunks_[k], at<uint64_t>(p, chunks + 8 * (size_t)k));
    out.localOffset[j].resize(nNodes_);
    for (int a = 0; a < nNodes_; ++a) {
      const int origin = topo_.rankAt(a, local_);
      expect_[(size_t)a * L_ + j] = at<uint64_t>(p, recvAt + 8 * (size_t)origin);
      out.localOffset[j][a] = at<uint64_t>(p, offAt + 8 * (size_t)origin);
    }
    out.bytes.sharedRead += hdr + 8 * (3 * (size_t)nNodes_ + 1);
  }
}

// Step 2: trade counts with the rail peers; check theirs against this node's expectations.
void CountExchange::railPhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  out.railRemote.assign(nNodes_, RemoteRegion{});
  out.railOffset.assign(nNodes_, 0);
  roundMaxHere_ = node_ >= 1 ? aggChunks_[node_] : 0;
  std::vector<char> msg(sizeof(Rail1) + sizeof(Verdict) + 8 * (size_t)L_);
  for (int a = 0; a < nNodes_; ++a) {
    if (a == node_) continue;
    const int peer = topo_.rankAt(a, local_);
    Rail1 h{seq, mine.header.callSeq, mine.header.remote, mine.offset[peer],
            a >= 1 ? aggChunks_[a] : 0};
    memcpy(msg.data(), &h, sizeof(h));
    memcpy(msg.data() + sizeof(h), &v, sizeof(Verdict));
    for (int j = 0; j < L_; ++j) {
      const uint64_t c = mine.send[topo_.rankAt(a, j)];
      memcpy(msg.data() + sizeof(h) + sizeof(Verdict) + 8 * j, &c, 8);
    }
    boot_.send(peer, kRail1Tag, msg.data(), msg.size());
    out.bytes.sent += msg.size();
  }
  for (int k = 1; k < nNodes_; ++k) {
    const int a = topo_.recvNode(node_, k), peer = topo_.rankAt(a, local_);
    std::vector<char> got = boot_.recv(peer, kRail1Tag);
    out.bytes.received += got.size();
    RMACC_ENFORCE(got.size() == msg.size(), "count exchange of call %llu: rank %d sent %zu bytes, expected %zu",
                  (unsigned long long)seq, peer, got.size(), msg.size());
    const Rail1& h = at<Rail1>(got.data(), 0);
    RMACC_ENFORCE(h.seq == seq, "rank %d is at call %llu, rank %d at %llu", peer,
                  (unsigned long long)h.seq, rank_, (unsigned long long)seq);
    checkInStep(peer, h.callSeq, mine.header.callSeq);
    v.merge(at<Verdict>(got.data(), sizeof(Rail1)));
    out.railRemote[a] = h.remote;
    out.railOffset[a] = h.offsetForYou;
    roundMaxHere_ = std::max(roundMaxHere_, h.roundChunks);
    for (int j = 0; j < L_; ++j) {
      const uint64_t c = at<uint64_t>(got.data(), sizeof(Rail1) + sizeof(Verdict) + 8 * j);
      in.relayIn[(size_t)k * L_ + j] = c;
      const uint64_t want = expect_[(size_t)a * L_ + j];
      if (c != want) v.mismatch(peer, topo_.rankAt(node_, j), c, want);
    }
  }
}

// Step 3: this rank's relay schedule goes back to its writers, with the round maximum.
void CountExchange::railPhase2(uint64_t seq, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  std::vector<uint64_t> firstStep(nNodes_, 0);  // [round]
  uint64_t step = relaySteps_;
  for (int k = 1; k < nNodes_; ++k) {
    uint64_t total = 0;
    for (int j = 0; j < L_; ++j)
      if (j != local_) total += in.relayIn[(size_t)k * L_ + j];
    firstStep[k] = step;
    step += L_ > 1 ? plan::chunkCount(total, options_.slotBytes) : 0;
  }
  relayChunksThisCall_ = step - relaySteps_;
  const Verdict mine = v;  // what this rank knew when it sent (the same to every peer)
  std::vector<char> msg(sizeof(Rail2) + sizeof(Verdict));
  for (int k = 1; k < nNodes_; ++k) {
    const int peer = topo_.rankAt(topo_.recvNode(node_, k), local_);
    Rail2 h{seq, roundMaxHere_, firstStep[k]};
    memcpy(msg.data(), &h, sizeof(h));
    memcpy(msg.data() + sizeof(h), &mine, sizeof(Verdict));
    boot_.send(peer, kRail2Tag, msg.data(), msg.size());
    out.bytes.sent += msg.size();
  }
  if (node_ >= 1) in.roundChunks[node_] = roundMaxHere_;
  for (int k = 1; k < nNodes_; ++k) {
    const int a = topo_.sendNode(node_, k), peer = topo_.rankAt(a, local_);
    std::vector<char> got = boot_.recv(peer, kRail2Tag);
    out.bytes.received += got.size();
    RMACC_ENFORCE(got.size() == msg.size() && at<Rail2>(got.data(), 0).seq == seq,
                  "count exchange of call %llu: rank %d's reply is out of step", (unsigned long long)seq, peer);
    const Rail2& h = at<Rail2>(got.data(), 0);
    v.merge(at<Verdict>(got.data(), sizeof(Rail2)));
    if (a >= 1) in.roundChunks[a] = h.roundChunks;
    in.writerStep[k] = h.firstStep;
  }
}

// Step 4: the verdict, and what this rank forwards to each mate: signals and the last batch.
void CountExchange::nodePhase2(uint64_t seq, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  in.forwardSignals.assign(L_, 0);
  in.forwardLastBatch.assign(L_, 0);
  if (!gather_) return;
  std::vector<uint64_t> fwd(L_, 0);
  std::vector<int64_t> last(L_, 0);
  if (v.ok()) {
    const std::vector<int> base = plan::roundBases(in.roundChunks, options_);
    const uint64_t slot = options_.slotBytes;
    for (int k = 1; k < nNodes_; ++k) {
      uint64_t start = 0;
      for (int j = 0; j < L_; ++j) {
        const uint64_t len = j == local_ ? 0 : in.relayIn[(size_t)k * L_ + j];
        for (uint64_t c = start / slot; len > 0 && c * slot < start + len; ++c) {
          const uint64_t lo = std::max(start, c * slot), hi = std::min(start + len, (c + 1) * slot);
          fwd[j] += plan::pieceCount(hi - lo, options_.maxPutBytes);
          last[j] = std::max<int64_t>(last[j], base[k] + (int64_t)c + 1);
        }
        start += len;
      }
    }
  }
  std::vector<char> rec(sizeof(Verdict) + 16 * (size_t)L_);
  memcpy(rec.data(), &v, sizeof(Verdict));
  memcpy(rec.data() + sizeof(Verdict), fwd.data(), 8 * (size_t)L_);
  memcpy(rec.data() + sizeof(Verdict) + 8 * (size_t)L_, last.data(), 8 * (size_t)L_);
  gather_->publish(2 * seq, rec.data(), rec.size());
  for (int j = 0; j < L_; ++j) {
    if (j == local_) continue;
    const char* p = gather_->peerRecord(j, 2 * seq);
    v.merge(at<Verdict>(p, 0));
    in.forwardSignals[j] = at<uint64_t>(p, sizeof(Verdict) + 8 * (size_t)local_);
    in.forwardLastBatch[j] = (int)at<int64_t>(p, sizeof(Verdict) + 8 * ((size_t)L_ + local_));
    out.bytes.sharedRead += sizeof(Verdict) + 16;
  }
}

void CountExchange::exchange(uint64_t seq, const Mine& mine, Result& out) {
  out = Result{};
  plan::RankInputs& in = out.inputs;
  in.rank = rank_;
  in.send.assign(mine.send, mine.send + n_);
  in.recv.assign(mine.recv, mine.recv + n_);
  in.relayIn.assign((size_t)nNodes_ * L_, 0);
  in.roundChunks.assign(nNodes_, 0);
  in.writerStep.assign(nNodes_, 0);
  in.writerOffset.assign(nNodes_, 0);  // one writer per relay and round: nodes are equal
  in.relayStepsBefore = relaySteps_;
  myChunks_.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_ && L_ > 1; ++k) {
    const int b = topo_.sendNode(node_, k);
    uint64_t total = 0;
    for (int j = 0; j < L_; ++j)
      if (j != local_) total += mine.send[topo_.rankAt(b, j)];
    myChunks_[k] = plan::chunkCount(total, options_.slotBytes);
  }
  Verdict v;
  if (mine.header.rejected) v.reject(rank_);
  if (mine.send[rank_] != mine.recv[rank_]) v.mismatch(rank_, rank_, mine.send[rank_], mine.recv[rank_]);
  nodePhase1(seq, mine, out, v);
  if (nNodes_ > 1) {
    railPhase1(seq, mine, out, v);
    railPhase2(seq, out, v);
  } else {
    relayChunksThisCall_ = 0;
  }
  nodePhase2(seq, out, v);
  if (v.rejectRank != INT32_MAX) {
    out.code = v.rejectRank == rank_ ? rmaccInvalidArgument : rmaccInvalidUsage;
    out.error = strprintf("rank %d rejected its arguments of this call", v.rejectRank);
  } else if (!v.ok()) {
    out.code = rmaccInvalidUsage;
    out.error = strprintf("count mismatch: rank %d sends %llu bytes to rank %d, which expects %llu",
                          v.misSrc, (unsigned long long)v.sent, v.misDst,
                          (unsigned long long)v.expected);
  }
}

}  // namespace rmacc
