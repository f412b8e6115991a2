#include "cluster.h"

#include <cstdio>

#include "core/error.h"

namespace rmacc::sim {

std::string Cluster::describe() const {
  char pacing[48] = "writes posted as released";
  if (paceLeadUs >= 0) snprintf(pacing, sizeof pacing, "writes paced (lead %.1f us)", paceLeadUs);
  char text[1024];
  snprintf(text, sizeof text,
           "%d nodes x %d GPUs; NIC %.1f GB/s per GPU, cross-rail %s (%.1f GB/s), fabric %s, "
           "latency %.1f us, %d message(s) at once, %s, %s sharing, signals %s, %s, %s; CE %.0f GB/s x %d copies, local "
           "copy %.0f GB/s, PCIe %.0f GB/s; ce op %.1f us (+%.2f in a batch), memop %.1f us "
           "(+%.2f, wait +%.2f), event %.1f us, proxy op %.1f us x %d thread(s), iov limit %d, "
           "signal latency %.1f us, "
           "%d CE stream(s); host %.1f us + %.1f us/node, plan %.3f us/op, enqueue %.2f us/op "
           "+ copy call %.2f (+%.2f) + memop call %.2f (+%.2f) us",
           nodes, gpusPerNode, nicGBps, crossRailPenalised ? "penalised" : "free", crossRailGBps,
           fabricGBps > 0 ? (std::to_string(fabricGBps) + " GB/s").c_str() : "unlimited",
           netLatencyUs, nicQueues, nicQueuePerPeer ? "a queue per peer" : "FIFO",
           maxMinSharing ? "max-min" : "bottleneck",
           !signalsBypassNicQueue ? "in the FIFO"
           : signalEndpoint ? "on an endpoint of their own" : "pass data to other peers",
           signalWrites ? "credits and entry signals written as values" : "every signal as completion data",
           pacing,
           ceGBps,
           ceConcurrent, localCopyGBps, pcieGBps, ceOpUs, ceBatchItemUs, memopUs,
           memopBatchItemUs, waitBatchItemUs, eventUs, proxyOpUs, proxyThreads, iovLimit,
           signalLatencyUs, ceStreams,
           hostFixedUs, exchangeUsPerNode, planUsPerOp, enqueueUsPerOp, enqueueCopyCallUs,
           enqueueCopyItemUs, enqueueMemopCallUs, enqueueMemopItemUs);
  return text;
}

void Cluster::validate() const {
  RMACC_ARG_CHECK(nodes >= 1 && nodes <= 4096, "nodes must be in 1..4096, got %d", nodes);
  RMACC_ARG_CHECK(gpusPerNode >= 1 && gpusPerNode <= 64, "GPUs per node must be in 1..64, got %d",
                  gpusPerNode);
  RMACC_ARG_CHECK(nicGBps > 0 && crossRailGBps > 0 && ceGBps > 0 && localCopyGBps > 0 &&
                      pcieGBps > 0 && fabricGBps >= 0,
                  "bandwidths must be > 0 (fabric >= 0)");
  RMACC_ARG_CHECK(netLatencyUs >= 0 && ceOpUs >= 0 && memopUs >= 0 && eventUs >= 0 &&
                      proxyOpUs >= 0 && signalLatencyUs >= 0 && ceBatchItemUs >= 0 &&
                      memopBatchItemUs >= 0 && waitBatchItemUs >= 0 && hostFixedUs >= 0 &&
                      exchangeUsPerNode >= 0 &&
                      planUsPerOp >= 0 && enqueueUsPerOp >= 0 && enqueueCopyCallUs >= 0 &&
                      enqueueCopyItemUs >= 0 && enqueueMemopCallUs >= 0 &&
                      enqueueMemopItemUs >= 0,
                  "per-op costs and latencies must be >= 0");
  RMACC_ARG_CHECK(nicQueues >= 1 && ceConcurrent >= 1 && ceStreams >= 1 && iovLimit >= 1 &&
                      proxyThreads >= 0,
                  "NIC queues, concurrent copies, CE streams and the iov limit must be >= 1, "
                  "proxy threads >= 0");
}

Cluster preset(const std::string& name) {
  Cluster c;
  // The defaults in cluster.h. Measured here (bench/results §4-5): copy-engine ceiling 396 GB/s one
  // way; local copy 2129 GB/s; CE put+signal half round trip 8.8 µs = ce op 2 + memop 1 +
  // signal latency 4.8 + memop 1; host per call 20 µs + 6 µs per op enqueued (plan+enqueue
  // 36.2 µs for 5 ops a rank at 1 x 2, 80.9 µs for 12 at 2 x 2, same commit). Assumed, not
  // measurable here: NIC 50 GB/s (400 Gb/s), cross-rail 22.7 GB/s (EFA's 20 of 44), network
  // latency 3 µs, proxy 2 µs per put, PCIe Gen5 55 GB/s.
  if (name == "h200") return c;
  if (name == "h200-loopback") {
    // bench/results §5.2/§5.3: one loopback TCP connection carries ~2.35 GB/s one way (128 MiB
    // putsignal into a host window 2.48; 2 x 1 AlltoAllV at 256 MiB 2.3 each way at once);
    // put+signal half round trip 23.8 µs into host windows = memop 1 + proxy 5 + latency
    // 10.8 + proxy 5 + memop 1; the count exchange grows by ~20 µs a node: fitted to the
    // small calls of 2 x 1, 2 x 2 and 4 x 1 (§4.2; the cost step's 41.6 against 7.8 µs, §4.1,
    // would say 34, which over-predicts those calls by 15-49%).
    c.nicGBps = 2.35;
    c.crossRailPenalised = false;
    c.netLatencyUs = 10.8;
    c.proxyOpUs = 5;
    c.pcieGBps = 25;
    c.exchangeUsPerNode = 20;
    c.paceLeadUs = -1;  // tcp reports no link speed: the library does not pace there
    c.proxyThreads = 1;  // and runs one proxy thread (FabricOptions::endpointsNeedLinkSpeed)
    c.signalWrites = false;  // the provider receives every write on the target's proxy thread
    return c;
  }
  if (name == "h200-host") {
    // One rank per GPU, no MPS, new counts every call. Enqueueing per backend call, host side
    // of each CUDA call on an H200 (bench/results §17.3, lab/probes/batch_probe.cu):
    // cudaMemcpyBatchAsync
    // 3.60 us for 7 copies, 11.22 for 28 (0.40 us a further copy, so ~1.2 for the first);
    // cuStreamBatchMemOp 0.77 us for one write, 1.14 for 7 (~0.05 a further op). The exchange:
    // each pair of nodes is 4 messages handled by one rank of each node, i.e. 0.5 messages per
    // rank per other node at 8 ranks a node, 4-7 us of CPU each here (bench/results §9.1-9.2): 2.5
    // us
    // per node; its fixed part (five node gathers) and the call's setup 20 us. Planning
    // (planUsPerOp) stays 0: a cache hit; set it for counts that change every call (0.075 us
    // per op of the rank's plan at 1,024 ranks: 0.078 ms for 1,933 ops, bench/results §18.1).
    c.enqueueUsPerOp = 0;
    c.enqueueCopyCallUs = 1.2;
    c.enqueueCopyItemUs = 0.40;
    c.enqueueMemopCallUs = 0.77;
    c.enqueueMemopItemUs = 0.05;
    c.exchangeUsPerNode = 2.5;
    return c;
  }
  RMACC_THROW(rmaccInvalidArgument,
              "unknown cluster preset '%s' (h200, h200-loopback, h200-host)", name.c_str());
}

}  // namespace rmacc::sim
