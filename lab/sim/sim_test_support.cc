#include "sim_test_support.h"

#include <utility>

#include "core/signal_contexts.h"

namespace rmacc::sim {

Cluster bare(int nodes, int gpus) {
  Cluster c;
  c.nodes = nodes;
  c.gpusPerNode = gpus;
  c.nicGBps = 1;  // 1,000 bytes per µs
  c.crossRailPenalised = false;
  c.netLatencyUs = 5;
  c.ceGBps = 10;
  c.pcieGBps = 1000;
  c.localCopyGBps = 1000;
  c.ceOpUs = c.memopUs = c.eventUs = c.proxyOpUs = c.signalLatencyUs = 0;
  c.ceBatchItemUs = c.memopBatchItemUs = c.waitBatchItemUs = 0;
  c.hostFixedUs = c.enqueueUsPerOp = 0;
  c.paceLeadUs = -1;  // writes posted as released; the pacer has its own tests
  c.ceStreams = 1;     // one copy stream (the library runs 2: CopyStreamsWriteSideBySide)
  return c;
}

Op op(OpKind kind, Lane lane, int peer, uint64_t bytes, int ctx, int sig, uint32_t count,
      std::vector<int> deps, Region src, Region dst) {
  Op o;
  o.kind = kind;
  o.lane = lane;
  o.peer = peer;
  o.bytes = bytes;
  o.ctx = ctx;
  o.sigIdx = sig;
  o.count = count;
  o.deps = std::move(deps);
  o.src.region = src;
  o.dst.region = dst;
  return o;
}

plan::Plan flatPlan(int nodes) {
  plan::Plan p;
  p.topo = Topology::blocks(nodes, 1);
  p.bytes.assign((size_t)nodes * nodes, 0);
  p.ranks.resize(nodes);
  return p;
}
Op dataPut(int to, uint64_t bytes, std::vector<int> deps) {
  return op(OpKind::kPut, Lane::kProxyPut, to, bytes, kCtxColl, plan::kSigData, 0,
            std::move(deps), Region::kSend, Region::kRecv);
}
plan::Plan fanOut(int nodes, std::vector<int> to, uint64_t bytes) {
  plan::Plan p = flatPlan(nodes);
  for (int r : to) {
    p.bytes[r] = bytes;
    p.ranks[0].ops.push_back(dataPut(r, bytes));
    p.ranks[r].ops.push_back(
        op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxColl, plan::kSigData, 1, {}));
  }
  return p;
}

}  // namespace rmacc::sim
