#include "plan/plan_build.h"

#include <numeric>

#include "core/error.h"

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

std::vector<int> roundBases(const std::vector<uint64_t>& roundChunks) {
  const int nNodes = std::max<int>(1, (int)roundChunks.size());
  std::vector<int> base(nNodes + 1, 0);
  for (int k = 1; k < nNodes; ++k) {
    const uint64_t chunks = std::max<uint64_t>(1, roundChunks[k]);
    RMACC_ENFORCE((uint64_t)base[k] + chunks < (uint64_t)kFinalBatch / 2,
                  "too many pipeline steps (%llu chunks in round %d)",
                  (unsigned long long)chunks, k);
    base[k + 1] = base[k] + (int)chunks;
  }
  return base;
}

}  // namespace rmacc::plan
