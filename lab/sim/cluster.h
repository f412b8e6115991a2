// The machine the simulator models: nodes of GPUs, each GPU with copy engines over NVLink, a
// PCIe link to its NIC, and a NIC on its rail; plus the per-op costs of the host, the proxy and
// stream memory operations. Bandwidths in GB/s (1e9 bytes/s), times in µs.
#pragma once

#include <string>

#include "core/nic_pacer.h"
#include "core/proxy_routing.h"

namespace rmacc::sim {

struct Cluster {
  int nodes = 2;
  int gpusPerNode = 8;

  // Network. nicGBps: one GPU's NIC, each direction. Traffic between different rails (local
  // rank i to local rank j != i of another node) crosses the spine: when crossRailPenalised,
  // each NIC carries at most crossRailGBps of it per direction (EFA measured ~20 against ~44).
  double nicGBps = 50;
  bool crossRailPenalised = true;
  double crossRailGBps = 22.7;      // 50 * 20/44
  double fabricGBps = 0;            // > 0: one shared core every network byte crosses (loopback)
  double netLatencyUs = 3;          // wire + NIC, first byte out to first byte in
  // A NIC keeps a queue pair per peer: messages to one peer go one at a time, in order; those to
  // different peers move at once (nicQueues of them at most, the peers taking turns) and share
  // the NIC. That is what rmacc's proxy gets: it posts every released put (up to 1,024
  // outstanding, src/net/proxy_impl.h) and an RDMA NIC serves its queue pairs in turn (tcp: a
  // socket per peer). The cap keeps the direct schedule's 1,016 peers per GPU at 128 x 8
  // tractable; rmacc has no more than a few messages queued on a NIC. false: nicQueues
  // messages at once whatever their peers, FIFO beyond (the model before bench/results §19 had 1).
  bool nicQueuePerPeer = true;
  int nicQueues = 8;
  // Transfers share resources max-min fairly (Fluid::Sharing::kMaxMin), so the messages of a NIC
  // held back by their receivers leave the NIC to the others. false: each flow takes the smallest
  // fair share on its path (Fluid::Sharing::kBottleneck, the model before bench/results §19).
  bool maxMinSharing = true;
  // A signal (a put of no bytes: entry signal, credit) to a peer that has nothing of this NIC's
  // queued or on the wire goes at once, not behind data to other peers (which it would with
  // one FIFO, or with queue pairs once more than nicQueues peers have data queued): an RDMA
  // NIC serves one queue pair per peer and interleaves them at packet granularity, and a
  // signal is one packet (bench/results §18.3). false: it waits its turn like data (with one FIFO,
  // the model before 2026-12-03: a credit then waited behind the relay's own next put, §7.6).
  bool signalsBypassNicQueue = true;
  // Signals ride an endpoint of their own (a second queue pair per peer): they do not wait
  // behind data even to their own peer. Not what the library does today (src/net/fabric.cc has
  // one endpoint, so a credit waits behind the relay's data to its writer): a design option,
  // bench/results §20.
  bool signalEndpoint = false;
  // Credits and entry signals land as the NIC's write of their counter's value (the library's
  // RMACC_NET_SIGNAL_WRITES=auto on GPUs): the target's proxy spends nothing on them and they
  // do not queue for its thread (bench/results §32).
  // false: completion data that the target's proxy turns into the signal (proxyOpUs there
  // too), as on tcp, where the provider receives every write on the proxy's thread anyway.
  bool signalWrites = true;
  // The proxy hands data writes to the NIC in posting order at nicGBps, as the library's pacer
  // does at the link speed a provider reports (src/core/nic_pacer.h): a write goes once the
  // NIC's estimated backlog is at most paceLeadUs and no other thread of the rank holds an
  // older one back; its thread spends its CPU then (ProxyThread, machine.h); a zero-byte write
  // goes at once unless a write to the same peer is held before it. < 0: not paced (every
  // write is posted as released, in each thread's order, what the library does on tcp, whose
  // provider reports no link speed, and did before §23). Default: the library's lead.
  double paceLeadUs = NicPacer::kLeadS * 1e6;

  // Inside a node. ceGBps: what one GPU's copy engines push out (and take in) over NVLink;
  // ceConcurrent: copies a GPU runs at once (FIFO beyond); localCopyGBps: a copy within one
  // GPU's memory; pcieGBps: GPU <-> NIC, each direction.
  double ceGBps = 396;
  int ceConcurrent = 4;
  double localCopyGBps = 2129;
  double pcieGBps = 55;

  // Per-op costs: the time an op holds its stream or thread. ceOpUs: a stream launching one
  // copy; memopUs: a stream memory operation (signal write, or noticing a wait is satisfied);
  // eventUs: a dependency between streams (a progress word written and waited for);
  // proxyOpUs: the proxy's CPU time per put it issues (and per signal it applies on arrival).
  // signalLatencyUs: from a CE signal's write until a waiter on another GPU sees it (does not
  // hold any stream).
  double ceOpUs = 2;
  double memopUs = 1;
  double eventUs = 1;
  double proxyOpUs = 2;
  // Proxy threads per rank (RMACC_PROXY_THREADS; 0: the library's default for the node
  // count, defaultProxyThreads). As in the library, a rank's writes to another go through one
  // thread at each end, of the same index, proxyThreadOf(their nodes).
  int proxyThreads = 0;
  int proxyThreadsResolved() const {
    return proxyThreads > 0 ? proxyThreads : defaultProxyThreads(nodes);
  }
  double signalLatencyUs = 4.8;
  // Batches (the executor hands a stream's consecutive CE puts to the backend as one copy batch
  // then one batch of signal writes, and consecutive proxy puts as one ready-flag store):
  // ceOpUs and memopUs are the first item's cost, each further item of the batch costs these.
  // Measured on one H200 (lab/probes/batch_probe.cu, bench/results §7.5): a further copy of one
  // cudaMemcpyBatchAsync 0.13 µs (4 KiB copies; one call each: 1.7 µs), a further write of one
  // cuStreamBatchMemOp 0.63 µs (one call each: 1.5 µs).
  double ceBatchItemUs = 0.13;
  double memopBatchItemUs = 0.63;
  // A wait right after another wait of its stream, in one memory-op batch (the executor issues a
  // stream's consecutive waits as one cuStreamBatchMemOp of up to kFlushAtMemOps, as a call's
  // completion waits): its value already holding, it costs this instead of memopUs. Measured
  // on one H200 (lab/probes/batch_probe.cu, bench/results §35): 127 such waits in one batch 115.1
  // us, 0.89
  // each after the first. A wait right after a store costs about memopUs (a credit wait and its
  // ready-flag store: 1.62 us a pair, against 0.63 for a store).
  double waitBatchItemUs = 0.89;
  // Sources one network write gathers (a relay chunk of several send blocks is one put): the
  // provider's tx iov_limit, 4 for tcp;ofi_rxm (fi_info on the project's machine); the proxy
  // pays proxyOpUs per write, at both ends. Send blocks are taken as packed in rank order
  // (rmacc-perf's displacements), so adjacent blocks are one source.
  int iovLimit = 4;

  // Executor: copy streams per rank (RMACC_CE_STREAMS, the library's default 2; CE ops to peer
  // p use stream localRank(p) mod ceStreams, as src/exec/executor.cc).
  int ceStreams = 2;

  // Host, per call and rank: the fixed part (count exchange, call setup: hostFixedUs plus
  // exchangeUsPerNode per node beyond the first), planning (planUsPerOp x the rank's ops; 0 =
  // the plan cache hits) and enqueueing, op by op in plan order (an op cannot start before the
  // host has enqueued it, nor a backend call before its last op): enqueueUsPerOp per op, plus,
  // per backend call the executor makes, what the driver takes for it: a copy batch
  // enqueueCopyCallUs + enqueueCopyItemUs per further copy, a memory-op batch (a CE call's
  // signal writes; a run of proxy puts' ready-flag store) enqueueMemopCallUs +
  // enqueueMemopItemUs per further op; a wait is one more memory op in its dependent's batch
  // (enqueueMemopItemUs). The per-call costs are 0 here (the "h200" preset's calibration is
  // per op); "h200-host" sets them from bench/results §17.3.
  double hostFixedUs = 20;
  double exchangeUsPerNode = 0;
  double planUsPerOp = 0;
  double enqueueUsPerOp = 6;
  double enqueueCopyCallUs = 0;
  double enqueueCopyItemUs = 0;
  double enqueueMemopCallUs = 0;
  double enqueueMemopItemUs = 0;

  int ranks() const { return nodes * gpusPerNode; }
  std::string describe() const;
  void validate() const;  // throws rmaccInvalidArgument naming the bad field
};

// Named parameter sets (bench/results/ says where each figure comes from):
//  "h200"          an H200 node as measured here (CE 396 GB/s) with 50 GB/s NICs per GPU;
//  "h200-loopback" the 2 x H200 machine with emulated nodes over loopback TCP (bench/results §4-5);
//  "h200-host"     "h200" with the host's per-call costs of one rank per GPU (no MPS) as
//                  measured for the control plane at scale (bench/results §9, §17.3, §18).
// Throws rmaccInvalidArgument for an unknown name.
Cluster preset(const std::string& name);

}  // namespace rmacc::sim
