#include "plan/plan_build.h"

#include <numeric>

#include "core/error.h"
#include "plan/plan_internal.h"

namespace rmacc::plan {

Op putOp(Lane lane, int peer, Loc src, Loc dst, uint64_t bytes, int ctx, int sig,
         std::vector<int> deps) {
  Op op;
  op.kind = OpKind::kPut;
  op.lane = lane;
  op.peer = peer;
  op.src = src;
  op.dst = dst;
  op.bytes = bytes;
  op.ctx = ctx;
  op.sigIdx = sig;
  op.deps = std::move(deps);
  return op;
}

Op selfCopyOp(int rank, uint64_t bytes) {
  Op op;
  op.kind = OpKind::kCopy;
  op.lane = Lane::kCePut;
  op.peer = rank;
  op.src = {Region::kSend, rank, 0};
  op.dst = {Region::kRecv, rank, 0};
  op.bytes = bytes;
  return op;
}

Op waitOp(Lane lane, int peer, int ctx, int sig, uint64_t count) {
  RMACC_ENFORCE(count <= UINT32_MAX, "wait count %llu from r%d overflows",
                (unsigned long long)count, peer);
  Op op;
  op.kind = OpKind::kWait;
  op.lane = lane;
  op.peer = peer;
  op.ctx = ctx;
  op.sigIdx = sig;
  op.count = (uint32_t)count;
  return op;
}

std::vector<int> depsOf(std::initializer_list<int> ids) {
  std::vector<int> deps;
  for (int id : ids)
    if (id >= 0) deps.push_back(id);
  return deps;
}

void quietEarlierPuts(const Topology& topo, int rank, const Options& options,
                      std::vector<Op>& ops) {
  if (!options.quietPuts) return;
  std::vector<char> signalled(topo.nodeSize(topo.nodeOf(rank)), 0);  // by the peer's local rank
  for (size_t i = ops.size(); i-- > 0;) {
    Op& op = ops[i];
    if (op.kind != OpKind::kPut || op.lane != Lane::kCePut || op.bytes == 0 ||
        op.ctx != kPlanCtxColl || op.sigIdx != kSigData || !topo.sameNode(rank, op.peer))
      continue;
    char& later = signalled[topo.localRankOf(op.peer)];
    op.quiet = later;
    later = 1;
  }
}

std::vector<Op> sortDrafts(std::vector<Draft>& drafts, int rank) {
  std::vector<int> order(drafts.size()), where(drafts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return drafts[a].key < drafts[b].key; });
  for (size_t i = 0; i < order.size(); ++i) where[order[i]] = (int)i;
  std::vector<Op> ops;
  ops.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Op op = std::move(drafts[order[i]].op);
    for (int& dep : op.deps) {
      dep = where[dep];
      RMACC_ENFORCE(dep < (int)i, "r%d op %zu depends on later op %d", rank, i, dep);
    }
    std::sort(op.deps.begin(), op.deps.end());
    ops.push_back(std::move(op));
  }
  return ops;
}

void appendSegments(const std::vector<Block>& blocks, uint64_t lo, uint64_t hi,
                    std::vector<Segment>& out) {
  for (const Block& b : blocks) {
    const uint64_t segLo = std::max(lo, b.start), segHi = std::min(hi, b.start + b.len);
    if (segLo < segHi) out.push_back({{Region::kSend, b.dest, segLo - b.start}, segHi - segLo});
  }
}

void settleGather(Op& op) {
  if (op.gather.size() != 1) return;
  op.src = op.gather[0].src;
  op.gather.clear();
}

// Chunks are whole multiples of minChunkBytes: with blocks of a power-of-two size (the usual
// case) a chunk boundary then falls between blocks, not inside one, where it would cost one more
// put and one more forward (docs/decisions.md#half-unit-chunks). So a payload may take fewer than
// minChunksPerRound chunks when it is under minChunksPerRound x minChunkBytes. Where a chunk's
// share is one to two units it is rounded to half units instead, and is still at least one:
// rounded to whole units the last chunk could be as little as a fifth of the first, and its
// slivers of blocks each a forward of their own at the call's tail
// (docs/decisions.md#half-unit-chunks). Not
// in the last round, whose own unit is finer already.
uint64_t chunkBytes(uint64_t total, const Options& options, bool lastRound) {
  const uint64_t slot = options.slotBytes;
  const bool finer = lastRound && options.lastRoundMinChunks > 0;
  const int least = std::max(options.minChunksPerRound, finer ? options.lastRoundMinChunks : 0);
  if (least <= 1) return slot;
  const uint64_t unit = std::max<uint64_t>(1, finer && options.lastRoundMinChunkBytes
                                                  ? options.lastRoundMinChunkBytes
                                                  : options.minChunkBytes);
  const uint64_t want = (total + least - 1) / least;
  const uint64_t grain = !finer && want >= unit && want < 2 * unit && unit % 2 == 0 ? unit / 2
                                                                                 : unit;
  return std::min(slot, std::max(unit, (want + grain - 1) / grain * grain));
}

bool usePairedRounds(int nNodes, const Options& options) { return fitsSlots(nNodes, options); }

Options callOptions(const Options& base, uint64_t largestPayload, int nNodes) {
  Options o = base;
  if (!fitsSlots(nNodes, base) || base.minChunksPerRound > 1) return o;
  auto halve = [&] {
    // An odd slot does not halve into the same relay memory (the relay buffer stays put).
    if (o.slotBytes < 2 || o.slotBytes % 2 || largestPayload > o.slotBytes / 2) return false;
    o.slots *= 2;
    o.slotBytes /= 2;
    return true;
  };
  if (!halve()) return o;
  // Again, up to 8 x slots, while the slots hold less than the window of the largest payload,
  // or the payloads are small (deepFitBelow) and the node rounds still outnumber four times
  // the slots: the rule that decides fitting at all (libraryFitSlotsFrom).
  auto deeper = [&] {
    if (o.slots >= 8 * base.slots) return false;
    if ((uint64_t)o.slots * largestPayload < base.fitWindowBytes) return true;
    return largestPayload < base.deepFitBelow && nNodes >= libraryFitSlotsFrom(o.slots);
  };
  while (deeper())
    if (!halve()) break;
  return o;
}

int creditWindow(const Options& options) {
  const int w = options.creditWindow <= 0 ? options.slots : options.creditWindow;
  return std::max(2, std::min(w, options.slots));
}

int roundsPerBatch(const Options& options) {
  const int most = std::max(1, creditWindow(options) / 2);
  return options.roundsPerBatch <= 0 ? most : std::min(options.roundsPerBatch, most);
}

// Why at most W / 2 small rounds per position (W = creditWindow, S by default): a relay takes at
// most one step per small round, so steps t .. t+W of one relay span at least three positions
// and the writer of step t+W waits for its credit at least two positions after step t was put
// -- planner.cc's deadlock argument, unchanged.
std::vector<int> roundBases(const std::vector<uint64_t>& roundChunks, const Options& options) {
  const int nNodes = std::max<int>(1, (int)roundChunks.size()), perBatch = roundsPerBatch(options);
  std::vector<int> base(nNodes + 1, 0);
  int next = 0;  // the first free position
  int run = 0;   // small rounds at the position of round k-1 (0: it is not a small round's)
  for (int k = 1; k < nNodes; ++k) {
    const bool small = roundChunks[k] <= 1;
    if (small && run > 0 && run < perBatch) {
      base[k] = base[k - 1];
      ++run;
    } else {
      base[k] = next;
      run = small ? 1 : 0;
    }
    const uint64_t chunks = std::max<uint64_t>(1, roundChunks[k]);
    RMACC_ENFORCE((uint64_t)base[k] + chunks < (uint64_t)kFinalBatch / 2,
                  "too many pipeline steps (%llu chunks in round %d)",
                  (unsigned long long)chunks, k);
    next = base[k] + (int)chunks;
  }
  base[nNodes] = next;
  return base;
}

std::vector<int> directPositions(const std::vector<int>& base,
                                 const std::vector<uint64_t>& roundChunks, int window) {
  const size_t nNodes = base.size() - 1;
  std::vector<int> at(nNodes, 0);
  for (size_t k = 1; k < nNodes; ++k) {
    const uint64_t chunks = std::max<uint64_t>(1, roundChunks[k]);
    const bool last = nNodes > 2 || chunks <= (uint64_t)window;
    at[k] = base[k] + (last ? (int)chunks - 1 : 0);
  }
  return at;
}

}  // namespace rmacc::plan
