#include "coll/count_exchange.h"

#include <climits>
#include <cstring>
#include <limits>

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

// Step 2's message (writers' node -> relays' node), followed by a Verdict and the counts from
// each rank of the sending node to each rank of the receiving node (row-major, sender rows).
struct Rail1 {
  uint64_t seq;
  uint64_t callSeq;      // the sender's collective call number: calls out of step are an error
  uint64_t roundChunks;  // the sender's node's largest relay load of round (receiver node)
  uint64_t largestPayload;  // the largest relay payload of the sender's node's writers
};
// Step 3's message (relays' node -> writers' node), followed by a Verdict and one WriterEntry
// per rank of the writers' node.
struct Rail2 {
  uint64_t seq;
  uint64_t roundChunks;  // the largest relay load of round (sender's node), communicator-wide
};
// A relay's schedule for one writer (gather 3).
struct RelayEntry {
  uint64_t firstStep;     // the relay step at which the writer's chunks start at the relay
  uint64_t writerOffset;  // steps of that round taken there by writers before this one
  uint64_t offsetForYou;  // where the writer's own block lands in the relay's target
  uint64_t callStep;      // firstStep less the relay's steps in earlier calls
};
// What a writer learns of its relay on another node (step 3, gather 4).
struct WriterEntry {
  uint64_t firstStep, writerOffset, offsetForYou, callStep;
  RemoteRegion remote;  // the relay's network target (the writer puts its own block there)
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
      local_(topo.localRankOf(rank)), L_(topo.nodeSize(node_)), nNodes_(topo.nNodes()),
      W_(plan::relayWriterSlots(topo, rank)),
      gathersPerCall_(topo.nNodes() == 1 ? 1 : 5), options_(options),
      v_(std::make_unique<Verdict>()) {
  for (int k = 1; k < nNodes_; ++k) {
    const int from = topo.recvNode(node_, k);
    for (int m = 0; local_ + m * L_ < topo.nodeSize(from); ++m)
      writers_.push_back({k, m, topo.rankAt(from, local_ + m * L_)});
  }
  // The rail handlers: local rank a mod L serves the pair (this node, node a). Where each
  // node's block sits in its handler's records of gathers 2 and 4, and each relay's writers.
  offset2_.assign(nNodes_, 0);
  offset4_.assign(nNodes_, 0);
  recordBytes2_.assign(L_, sizeof(Verdict));
  recordBytes4_.assign(L_, sizeof(Verdict));
  for (int a = 0; a < nNodes_; ++a) {
    if (a == node_) continue;
    const int h = a % L_;
    if (h == local_) handled_.push_back(a);
    offset2_[a] = recordBytes2_[h];
    recordBytes2_[h] += 16 + 8 * (size_t)topo.nodeSize(a) * L_;
    offset4_[a] = recordBytes4_[h];
    recordBytes4_[h] += 8 + sizeof(WriterEntry) * (size_t)L_;
  }
  writerIndex_.assign((size_t)L_ * nNodes_, -1);
  size_t rec3 = 0;
  for (int j = 0; j < L_; ++j) {
    int t = 0;
    for (int k = 1; k < nNodes_; ++k) {
      const int from = topo.recvNode(node_, k);
      if (j < topo.nodeSize(from)) writerIndex_[(size_t)j * nNodes_ + from] = t;
      for (int m = 0; j + m * L_ < topo.nodeSize(from); ++m) ++t;
    }
    rec3 = std::max(rec3, sizeof(Verdict) + sizeof(RelayEntry) * (size_t)t);
  }
  // Setting up the node gather is collective: every rank takes part when any node has mates,
  // and a rank alone on its node then drops its own.
  if (topo.maxNodeSize() > 1) {
    const size_t rec1 = sizeof(MetaHeader) + sizeof(Verdict) + 8 * ((size_t)nNodes_ + 3 * n_);
    const size_t rec5 = sizeof(Verdict) + 16 * (size_t)L_;
    const size_t rec = std::max({rec1, rec3, rec5,
                                 *std::max_element(recordBytes2_.begin(), recordBytes2_.end()),
                                 *std::max_element(recordBytes4_.begin(), recordBytes4_.end())});
    gather_ = std::make_unique<NodeGather>(boot, topo, rank, rec, timeoutS);
    if (L_ == 1) gather_.reset();
  }
}

// Step 1. Record: header, verdict, chunks[nNodes] ([0]: the rank's largest relay payload in
// bytes; [k]: its relay chunks of round k), send[n], recv[n], offset[n].
void CountExchange::nodePhase1Publish(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  const size_t hdr = sizeof(MetaHeader) + sizeof(Verdict), chunks = hdr;
  const size_t sendAt = chunks + 8 * (size_t)nNodes_, recvAt = sendAt + 8 * (size_t)n_,
               offAt = recvAt + 8 * (size_t)n_;
  const size_t nw = writers_.size();
  expect_.assign(nw * L_, 0);
  for (size_t t = 0; t < nw; ++t) expect_[t * L_ + local_] = mine.recv[writers_[t].rank];
  out.localHeader.assign(L_, MetaHeader{});
  out.localOffset.assign(L_, std::vector<uint64_t>());
  // [local rank * nNodes + k]: each mate's relay chunks of round k, for the relay loads.
  mateChunks_.assign((size_t)L_ * nNodes_, 0);
  mateRecords_.assign(L_, nullptr);  // step-1 records, read again by checkWholeNode and railSendCounts
  std::copy(myChunks_.begin(), myChunks_.end(), mateChunks_.begin() + (size_t)local_ * nNodes_);
  if (!gather_) return;
  std::vector<char>& rec = stepRecord_;
  rec.assign(offAt + 8 * (size_t)n_, 0);
  memcpy(rec.data(), &mine.header, sizeof(MetaHeader));
  memcpy(rec.data() + sizeof(MetaHeader), &v, sizeof(Verdict));
  memcpy(rec.data() + chunks, myChunks_.data(), 8 * (size_t)nNodes_);
  memcpy(rec.data() + sendAt, mine.send, 8 * (size_t)n_);
  memcpy(rec.data() + recvAt, mine.recv, 8 * (size_t)n_);
  memcpy(rec.data() + offAt, mine.offset, 8 * (size_t)n_);
  gather_->publish(gatherSeq(seq, 1), rec.data(), rec.size());
}

void CountExchange::nodePhase1Read(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  const size_t hdr = sizeof(MetaHeader) + sizeof(Verdict), chunks = hdr;
  const size_t sendAt = chunks + 8 * (size_t)nNodes_, recvAt = sendAt + 8 * (size_t)n_,
               offAt = recvAt + 8 * (size_t)n_;
  const size_t nw = writers_.size();
  std::vector<uint64_t>& mateChunks = mateChunks_;
  if (gather_) {
    const uint64_t gs = gatherSeq(seq, 1);
    for (int j = 0; j < L_; ++j) {
      if (j == local_) continue;
      const int mate = topo_.rankAt(node_, j);
      const char* p = mateRecords_[j] = gather_->peerRecord(j, gs);
      out.localHeader[j] = at<MetaHeader>(p, 0);
      RMACC_ENFORCE(out.localHeader[j].seq == seq, "rank %d is at call %llu, rank %d at %llu", mate,
                    (unsigned long long)out.localHeader[j].seq, rank_, (unsigned long long)seq);
      checkInStep(mate, out.localHeader[j].callSeq, mine.header.callSeq);
      v.merge(at<Verdict>(p, sizeof(MetaHeader)));
      const uint64_t sent = at<uint64_t>(p, sendAt + 8 * (size_t)rank_);
      if (sent != mine.recv[mate]) v.mismatch(mate, rank_, sent, mine.recv[mate]);
      memcpy(&mateChunks[(size_t)j * nNodes_], p + chunks, 8 * (size_t)nNodes_);
      out.localOffset[j].resize(nw + 1);
      out.localOffset[j][0] = at<uint64_t>(p, offAt + 8 * (size_t)rank_);
      for (size_t t = 0; t < nw; ++t) {
        const int origin = writers_[t].rank;
        expect_[t * L_ + j] = at<uint64_t>(p, recvAt + 8 * (size_t)origin);
        out.localOffset[j][t + 1] = at<uint64_t>(p, offAt + 8 * (size_t)origin);
      }
      out.bytes.sharedRead += hdr + 8 * ((size_t)nNodes_ + 2 + 2 * nw);
    }
    if (nNodes_ == 1) checkWholeNode(gs, mine, out, v);
  }
  nodeLargest_ = 0;
  for (int j = 0; j < L_; ++j) nodeLargest_ = std::max(nodeLargest_, mateChunks[(size_t)j * nNodes_]);
  // This node's share of each round's maximum: the largest load of a relay on the receiving
  // node, the chunks of all this node's writers that share that relay (local ranks equal mod
  // its node's size).
  aggChunks_.assign(nNodes_, 0);
  std::vector<uint64_t> load;
  for (int k = 1; k < nNodes_; ++k) {
    const int lb = topo_.nodeSize(topo_.sendNode(node_, k));
    load.assign(lb, 0);
    for (int j = 0; j < L_; ++j) load[j % lb] += mateChunks[(size_t)j * nNodes_ + k];
    aggChunks_[k] = *std::max_element(load.begin(), load.end());
  }
}

// One node: every rank checks every (sender, receiver) pair of the node from the records it
// already gathered (L^2 counts, 1 KiB at 8 ranks), so every rank reaches the same verdict
// without the second gather that spreads it across nodes (step 4 then carries nothing else:
// no rank forwards for another on one node). One gather per call instead of two.
void CountExchange::checkWholeNode(uint64_t gs, const Mine& mine, Result& out, Verdict& v) {
  const size_t sendAt = sizeof(MetaHeader) + sizeof(Verdict) + 8 * (size_t)nNodes_,
               recvAt = sendAt + 8 * (size_t)n_;
  const std::vector<const char*>& rec = mateRecords_;  // nullptr: this rank's own (in `mine`)
  for (int js = 0; js < L_; ++js) {
    const char* ps = rec[js];
    const int src = topo_.rankAt(node_, js);
    for (int jd = 0; jd < L_; ++jd) {
      const char* pd = rec[jd];
      const int dst = topo_.rankAt(node_, jd);
      const uint64_t sent = ps ? at<uint64_t>(ps, sendAt + 8 * (size_t)dst) : mine.send[dst];
      const uint64_t expected = pd ? at<uint64_t>(pd, recvAt + 8 * (size_t)src) : mine.recv[src];
      if (sent != expected) v.mismatch(src, dst, sent, expected);
    }
  }
  out.bytes.sharedRead += 16 * (size_t)(L_ - 1) * L_;
}

// Step 2, by the rail handlers: one message per pair of nodes with every count from this
// node's ranks to that node's ranks (L x L_a), read from the mates' step-1 records, and this
// node's share of that node's round maximum.
void CountExchange::railSendCounts(uint64_t seq, const Mine& mine, Result& out, const Verdict& v) {
  std::vector<char> msg;
  for (int a : handled_) {
    const int la = topo_.nodeSize(a), partner = partnerOn(a);
    const size_t sendAt = sizeof(MetaHeader) + sizeof(Verdict) + 8 * (size_t)nNodes_;
    Rail1 h{seq, mine.header.callSeq, a >= 1 ? aggChunks_[a] : 0, nodeLargest_};
    msg.resize(sizeof(Rail1) + sizeof(Verdict) + 8 * (size_t)L_ * la);
    memcpy(msg.data(), &h, sizeof(h));
    memcpy(msg.data() + sizeof(h), &v, sizeof(Verdict));
    char* counts = msg.data() + sizeof(h) + sizeof(Verdict);
    for (int i = 0; i < L_; ++i) {
      for (int j = 0; j < la; ++j) {
        const int dst = topo_.rankAt(a, j);
        const uint64_t c = i == local_ ? mine.send[dst]
                                       : at<uint64_t>(mateRecords_[i], sendAt + 8 * (size_t)dst);
        memcpy(counts + 8 * ((size_t)i * la + j), &c, 8);
      }
      if (i != local_) out.bytes.sharedRead += 8 * (size_t)la;
    }
    boot_.send(partner, kRail1Tag, msg.data(), msg.size());
    out.bytes.sent += msg.size();
  }
}

// Step 2, received by the handlers and spread over the node (gather 2): every rank reads its
// writers' counts to this node (as their relay) and checks them against its node's
// expectations, and every node's share of this node's round maximum.
void CountExchange::railTakeCounts(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  std::vector<char>& rec = stepRecord_;
  rec.assign(recordBytes2_[local_], 0);
  for (size_t i = 0; i < handled_.size(); ++i) {
    const int a = handled_[i];
    const int la = topo_.nodeSize(a), partner = partnerOn(a);
    const size_t want = sizeof(Rail1) + sizeof(Verdict) + 8 * (size_t)la * L_;
    const std::vector<char>& got = railGot_[i];
    out.bytes.received += got.size();
    RMACC_ENFORCE(got.size() == want, "count exchange of call %llu: rank %d sent %zu bytes, expected %zu",
                  (unsigned long long)seq, partner, got.size(), want);
    const Rail1& h = at<Rail1>(got.data(), 0);
    RMACC_ENFORCE(h.seq == seq, "rank %d is at call %llu, rank %d at %llu", partner,
                  (unsigned long long)h.seq, rank_, (unsigned long long)seq);
    checkInStep(partner, h.callSeq, mine.header.callSeq);
    v.merge(at<Verdict>(got.data(), sizeof(Rail1)));
    char* block = rec.data() + offset2_[a];
    memcpy(block, &h.roundChunks, 8);
    memcpy(block + 8, &h.largestPayload, 8);
    memcpy(block + 16, got.data() + sizeof(Rail1) + sizeof(Verdict), 8 * (size_t)la * L_);
  }
  memcpy(rec.data(), &v, sizeof(Verdict));
  publishStep(seq, 2, rec);
}

void CountExchange::railGatherCounts(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  const char* const* recs = stepRecords(seq, 2, stepRecord_);
  roundMaxHere_ = node_ >= 1 ? aggChunks_[node_] : 0;
  for (int h = 0; h < L_; ++h) {
    v.merge(at<Verdict>(recs[h], 0));
    if (h != local_) out.bytes.sharedRead += sizeof(Verdict);
  }
  in.largestPayload = nodeLargest_;  // communicator-wide once every node's is in
  for (int a = 0; a < nNodes_; ++a) {
    if (a == node_) continue;
    roundMaxHere_ = std::max(roundMaxHere_, at<uint64_t>(recs[a % L_], offset2_[a]));
    in.largestPayload = std::max(in.largestPayload, at<uint64_t>(recs[a % L_], offset2_[a] + 8));
    if (a % L_ != local_) out.bytes.sharedRead += 16;
  }
  for (size_t t = 0; t < writers_.size(); ++t) {
    const Writer& w = writers_[t];
    const int a = topo_.nodeOf(w.rank);
    const char* row = recs[a % L_] + offset2_[a] + 16 + 8 * (size_t)topo_.localRankOf(w.rank) * L_;
    for (int j = 0; j < L_; ++j) {
      const uint64_t c = at<uint64_t>(row, 8 * (size_t)j);
      in.relayIn[((size_t)w.k * W_ + w.m) * L_ + j] = c;
      const uint64_t e = expect_[t * L_ + j];
      if (c != e) v.mismatch(w.rank, topo_.rankAt(node_, j), c, e);
    }
    if (a % L_ != local_) out.bytes.sharedRead += 8 * (size_t)L_;
  }
}

// Gather 3: this relay's schedule for its writers (where each one's chunks start here, and
// where its own block lands in this rank's target), for the handlers to send back.
void CountExchange::relaySchedule(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  std::vector<char>& rec = relayRecord_;  // read again by railReplies
  rec.assign(sizeof(Verdict) + sizeof(RelayEntry) * writers_.size(), 0);
  memcpy(rec.data(), &v, sizeof(Verdict));  // what this rank knew when it published
  uint64_t step = relaySteps_, roundStart = step;
  for (size_t t = 0; t < writers_.size(); ++t) {
    const Writer& w = writers_[t];
    if (w.m == 0) roundStart = step;
    uint64_t total = 0;
    for (int j = 0; j < L_; ++j)
      if (j != local_) total += in.relayIn[((size_t)w.k * W_ + w.m) * L_ + j];
    const RelayEntry e{step, step - roundStart, mine.offset[w.rank], step - relaySteps_};
    memcpy(rec.data() + sizeof(Verdict) + sizeof(RelayEntry) * t, &e, sizeof(e));
    step += plan::chunkCount(total, options_, plan::isLastRound(w.k, nNodes_));
  }
  relayChunksThisCall_ = step - relaySteps_;
  if (node_ >= 1) in.roundChunks[node_] = roundMaxHere_;
  publishStep(seq, 3, relayRecord_);
}

void CountExchange::relayScheduleRead(uint64_t seq, Verdict& v, Result& out) {
  const char* const* recs = stepRecords(seq, 3, relayRecord_);
  relayRecords_.assign(recs, recs + L_);
  for (int j = 0; j < L_; ++j) {
    v.merge(at<Verdict>(relayRecords_[j], 0));
    if (j != local_) out.bytes.sharedRead += sizeof(Verdict);
  }
}

// Step 3, by the handlers: one reply per pair of nodes, with this node's round maximum, the
// verdict of this node and every entry of the relays here for that node's writers; received
// replies are spread over the node (gather 4), where every writer reads its own.
void CountExchange::railReplies(uint64_t seq, const Mine& mine, Result& out, Verdict& v) {
  const Verdict known = v;  // the node's verdict (gather 3 spread it): the same in every reply
  std::vector<char> msg;
  for (int a : handled_) {
    const int la = topo_.nodeSize(a), partner = partnerOn(a);
    msg.resize(sizeof(Rail2) + sizeof(Verdict) + sizeof(WriterEntry) * la);
    const Rail2 h{seq, roundMaxHere_};
    memcpy(msg.data(), &h, sizeof(h));
    memcpy(msg.data() + sizeof(h), &known, sizeof(Verdict));
    for (int i = 0; i < la; ++i) {
      const int j = i % L_, m = i / L_;  // the relay of a's local rank i, and its writer slot
      const RelayEntry& r = at<RelayEntry>(
          relayRecords_[j], sizeof(Verdict) + sizeof(RelayEntry) * (size_t)(writerIndex_[(size_t)j * nNodes_ + a] + m));
      const WriterEntry e{r.firstStep, r.writerOffset, r.offsetForYou, r.callStep,
                          j == local_ ? mine.header.remote : out.localHeader[j].remote};
      memcpy(msg.data() + sizeof(h) + sizeof(Verdict) + sizeof(WriterEntry) * i, &e, sizeof(e));
      if (j != local_) out.bytes.sharedRead += sizeof(RelayEntry);
    }
    boot_.send(partner, kRail2Tag, msg.data(), msg.size());
    out.bytes.sent += msg.size();
  }
}

void CountExchange::railTakeReplies(uint64_t seq, Result& out, Verdict& v) {
  std::vector<char>& rec = stepRecord_;
  rec.assign(recordBytes4_[local_], 0);
  for (size_t i = 0; i < handled_.size(); ++i) {
    const int b = handled_[i];
    const int partner = partnerOn(b);
    const size_t want = sizeof(Rail2) + sizeof(Verdict) + sizeof(WriterEntry) * L_;
    const std::vector<char>& got = railGot_[i];
    out.bytes.received += got.size();
    RMACC_ENFORCE(got.size() == want && at<Rail2>(got.data(), 0).seq == seq,
                  "count exchange of call %llu: rank %d's reply is out of step", (unsigned long long)seq, partner);
    v.merge(at<Verdict>(got.data(), sizeof(Rail2)));
    char* block = rec.data() + offset4_[b];
    memcpy(block, &at<Rail2>(got.data(), 0).roundChunks, 8);
    memcpy(block + 8, got.data() + sizeof(Rail2) + sizeof(Verdict), sizeof(WriterEntry) * L_);
  }
  memcpy(rec.data(), &v, sizeof(Verdict));
  publishStep(seq, 4, rec);
}

void CountExchange::railGatherReplies(uint64_t seq, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  const char* const* recs = stepRecords(seq, 4, stepRecord_);
  for (int h = 0; h < L_; ++h) {
    v.merge(at<Verdict>(recs[h], 0));
    if (h != local_) out.bytes.sharedRead += sizeof(Verdict);
  }
  out.railRemote.assign(nNodes_, RemoteRegion{});
  out.railOffset.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_; ++k) {
    const int a = topo_.sendNode(node_, k);
    const char* block = recs[a % L_] + offset4_[a];
    const WriterEntry& e = at<WriterEntry>(block, 8 + sizeof(WriterEntry) * (size_t)local_);
    if (a >= 1) in.roundChunks[a] = at<uint64_t>(block, 0);
    in.writerStep[k] = e.firstStep;
    in.writerCallStep[k] = e.callStep;
    in.writerOffset[k] = e.writerOffset;
    out.railRemote[a] = e.remote;
    out.railOffset[a] = e.offsetForYou;
    if (a % L_ != local_) out.bytes.sharedRead += 8 + sizeof(WriterEntry);
  }
}

// Publishes `mine` as gather `step` of call `seq`. A rank alone on its node has no gather.
void CountExchange::publishStep(uint64_t seq, int step, const std::vector<char>& mine) {
  if (gather_) gather_->publish(gatherSeq(seq, step), mine.data(), mine.size());
}

// Every local rank's record of gather `step` (this rank's own is `mine`, which it published);
// a rank alone on its node has only its own.
const char* const* CountExchange::stepRecords(uint64_t seq, int step, const std::vector<char>& mine) {
  records_.assign(L_, mine.data());
  if (!gather_) return records_.data();
  for (int j = 0; j < L_; ++j)
    if (j != local_) records_[j] = gather_->peerRecord(j, gatherSeq(seq, step));
  return records_.data();
}

// Whether every mate's record of gather `step` is there by `deadline` (then reading them
// waits no more).
bool CountExchange::gatherArrived(uint64_t seq, int step, double deadline) {
  if (!gather_) return true;
  for (int j = 0; j < L_; ++j)
    if (j != local_ && !gather_->peerRecordBy(j, gatherSeq(seq, step), deadline)) return false;
  return true;
}

// Whether the rail message `tag` of every handled node came by `deadline`; those that came are
// kept in railGot_ across calls of advance() (a message is received once).
bool CountExchange::railArrived(uint32_t tag, double deadline) {
  for (size_t i = 0; i < handled_.size(); ++i) {
    if (railHave_[i]) continue;
    if (!boot_.recvBy(partnerOn(handled_[i]), tag, deadline, railGot_[i])) return false;
    railHave_[i] = 1;
  }
  railHave_.assign(handled_.size(), 0);  // for the next rail step
  return true;
}

// Step 4: the verdict, and what this rank forwards to each mate: signals and the last batch.
// A writer's chunks follow those of the round's earlier writers at this relay.
void CountExchange::nodePhase2Publish(uint64_t seq, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  in.forwardSignals.assign(L_, 0);
  in.forwardLastBatch.assign(L_, 0);
  if (!gather_) return;
  std::vector<uint64_t> fwd(L_, 0);
  std::vector<int64_t> last(L_, 0);
  if (v.ok()) {
    const plan::Options call = plan::callOptions(options_, in.largestPayload, nNodes_);
    const std::vector<int> base = plan::roundBases(in.roundChunks, call);
    uint64_t pos = 0;
    for (const Writer& w : writers_) {
      if (w.m == 0) pos = base[w.k];
      const uint64_t* row = &in.relayIn[((size_t)w.k * W_ + w.m) * L_];
      uint64_t total = 0;  // the writer's payload at this relay, which sets its chunk size
      for (int j = 0; j < L_; ++j) total += j == local_ ? 0 : row[j];
      const bool lastRound = plan::isLastRound(w.k, nNodes_);
      const uint64_t chunk = plan::chunkBytes(total, call, lastRound);
      uint64_t start = 0;
      for (int q = 0; q + 1 < L_; ++q) {  // in payload order
        const int j = plan::payloadLocal(local_, L_, q);
        const uint64_t len = row[j];
        const plan::BlockForwards f = plan::blockForwards(start, len, chunk, call.maxPutBytes);
        fwd[j] += f.pieces;
        if (f.pieces) last[j] = std::max<int64_t>(last[j], (int64_t)(pos + f.endChunk));
        start += len;
      }
      pos += plan::chunkCount(total, call, lastRound);
    }
  }
  std::vector<char>& rec = stepRecord_;
  rec.assign(sizeof(Verdict) + 16 * (size_t)L_, 0);
  memcpy(rec.data(), &v, sizeof(Verdict));
  memcpy(rec.data() + sizeof(Verdict), fwd.data(), 8 * (size_t)L_);
  memcpy(rec.data() + sizeof(Verdict) + 8 * (size_t)L_, last.data(), 8 * (size_t)L_);
  gather_->publish(gatherSeq(seq, 5), rec.data(), rec.size());
}

void CountExchange::nodePhase2Read(uint64_t seq, Result& out, Verdict& v) {
  plan::RankInputs& in = out.inputs;
  if (!gather_) return;
  const uint64_t gs = gatherSeq(seq, 5);
  for (int j = 0; j < L_; ++j) {
    if (j == local_) continue;
    const char* p = gather_->peerRecord(j, gs);
    v.merge(at<Verdict>(p, 0));
    in.forwardSignals[j] = at<uint64_t>(p, sizeof(Verdict) + 8 * (size_t)local_);
    in.forwardLastBatch[j] = (int)at<int64_t>(p, sizeof(Verdict) + 8 * ((size_t)L_ + local_));
    out.bytes.sharedRead += sizeof(Verdict) + 16;
  }
}

void CountExchange::exchange(uint64_t seq, const Mine& mine, Result& out) {
  start(seq, mine, out);
  advance(std::numeric_limits<double>::infinity());
}

void CountExchange::start(uint64_t seq, const Mine& mine, Result& out) {
  seq_ = seq;
  mine_ = mine;
  out_ = &out;
  out = Result{};
  plan::RankInputs& in = out.inputs;
  in.rank = rank_;
  in.send.assign(mine.send, mine.send + n_);
  in.recv.assign(mine.recv, mine.recv + n_);
  in.relayIn.assign((size_t)nNodes_ * W_ * L_, 0);
  in.roundChunks.assign(nNodes_, 0);
  in.writerStep.assign(nNodes_, 0);
  in.writerCallStep.assign(nNodes_, 0);
  in.writerOffset.assign(nNodes_, 0);
  in.relayStepsBefore = relaySteps_;
  // This rank's relay payload to each round's node: its blocks there but the relay's own.
  myChunks_.assign(nNodes_, 0);  // [0]: the largest payload in bytes (nodePhase1)
  for (int k = 1; k < nNodes_; ++k) {
    const int b = topo_.sendNode(node_, k), skip = topo_.railLocal(local_, b);
    uint64_t total = 0;
    for (int j = 0; j < topo_.nodeSize(b); ++j)
      if (j != skip) total += mine.send[topo_.rankAt(b, j)];
    myChunks_[k] = plan::chunkCount(total, options_, plan::isLastRound(k, nNodes_));
    myChunks_[0] = std::max(myChunks_[0], total);
  }
  Verdict& v = *v_;
  v = Verdict{};
  if (mine.header.rejected) v.reject(rank_);
  if (mine.send[rank_] != mine.recv[rank_]) v.mismatch(rank_, rank_, mine.send[rank_], mine.recv[rank_]);
  railGot_.resize(handled_.size());
  railHave_.assign(handled_.size(), 0);
  nodePhase1Publish(seq, mine, out, v);
  stage_ = Stage::kGather1;
}

// Each stage first waits for what the previous one published or sent to arrive from the
// peers, then reads it and publishes or sends the next: a stage that returns false has changed
// nothing, and runs whole when advance() is called again.
bool CountExchange::advance(double deadline) {
  RMACC_ENFORCE(out_ != nullptr, "count exchange: advance() without start()");
  const uint64_t seq = seq_;
  const Mine& mine = mine_;
  Result& out = *out_;
  Verdict& v = *v_;
  for (;;) {
    switch (stage_) {
      case Stage::kGather1:
        if (!gatherArrived(seq, 1, deadline)) return false;
        nodePhase1Read(seq, mine, out, v);
        if (nNodes_ == 1) {
          relayChunksThisCall_ = 0;
          out.inputs.forwardSignals.assign(L_, 0);
          out.inputs.forwardLastBatch.assign(L_, 0);
          stage_ = Stage::kDone;
          break;
        }
        railSendCounts(seq, mine, out, v);
        stage_ = Stage::kRail1;
        break;
      case Stage::kRail1:
        if (!railArrived(kRail1Tag, deadline)) return false;
        railTakeCounts(seq, mine, out, v);
        stage_ = Stage::kGather2;
        break;
      case Stage::kGather2:
        if (!gatherArrived(seq, 2, deadline)) return false;
        railGatherCounts(seq, mine, out, v);
        relaySchedule(seq, mine, out, v);
        stage_ = Stage::kGather3;
        break;
      case Stage::kGather3:
        if (!gatherArrived(seq, 3, deadline)) return false;
        relayScheduleRead(seq, v, out);
        railReplies(seq, mine, out, v);
        stage_ = Stage::kRail2;
        break;
      case Stage::kRail2:
        if (!railArrived(kRail2Tag, deadline)) return false;
        railTakeReplies(seq, out, v);
        stage_ = Stage::kGather4;
        break;
      case Stage::kGather4:
        if (!gatherArrived(seq, 4, deadline)) return false;
        railGatherReplies(seq, out, v);
        nodePhase2Publish(seq, out, v);
        stage_ = Stage::kGather5;
        break;
      case Stage::kGather5:
        if (!gatherArrived(seq, 5, deadline)) return false;
        nodePhase2Read(seq, out, v);
        stage_ = Stage::kDone;
        break;
      case Stage::kDone:
        finish(mine, out, v);
        out_ = nullptr;
        stage_ = Stage::kIdle;
        return true;
      case Stage::kIdle:
        RMACC_THROW(rmaccInternalError, "count exchange: advance() without start()");
    }
  }
}

// The common verdict, as every rank computes it.
void CountExchange::finish(const Mine& mine, Result& out, const Verdict& v) {
  if (v.rejectRank != INT32_MAX) {
    out.code = v.rejectRank == rank_ ? rmaccInvalidArgument : rmaccInvalidUsage;
    out.error = strprintf("rank %d rejected its arguments of this call", v.rejectRank);
  } else if (!v.ok()) {
    out.code = rmaccInvalidUsage;
    // In the caller's unit; in bytes only when the two ranks' datatypes differ in size.
    const uint64_t e = mine.elementBytes ? mine.elementBytes : 1;
    const bool whole = v.sent % e == 0 && v.expected % e == 0;
    out.error = strprintf("count mismatch: rank %d sends %llu %s to rank %d, which expects %llu",
                          v.misSrc, (unsigned long long)(whole ? v.sent / e : v.sent),
                          whole ? "elements" : "bytes", v.misDst,
                          (unsigned long long)(whole ? v.expected / e : v.expected));
  }
}

CountExchange::~CountExchange() = default;

}  // namespace rmacc
