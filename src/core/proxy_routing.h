// Which proxy thread carries a pair's puts and how many threads a rank runs: routing policy of
// the network layer that the executor (exec/rma.cc), the communicator (comm/comm.cc) and
// rmacc-sim (lab/sim) all follow, so it lives below them all.
#pragma once

namespace rmacc {

// The proxy thread that carries puts from a rank on node `from` to one on node `to` (of
// `nodes`) when each rank runs `threads`; the put lands on the target's endpoint of the same
// index, whose thread takes it in. By the ring distance between the nodes, the way back half
// the threads further: the two nodes a rank meets in one position of its node rounds (node + k
// and node - k, Topology::pairedRoundDeltas) never share a thread, going out or coming in,
// and the rounds walk over all the threads. By the nodes' sum, as before, both came to one
// thread whenever 2k was a multiple of the thread count, with four writes of a position (out
// and in, 2 µs each) on it: at 8 threads, every fourth position of uniform 16 MiB on 128 x 8
// GPUs left the NIC idle 0.5-0.9 µs (rmacc-sim, RESULTS §36).
int proxyThreadOf(int from, int to, int threads, int nodes);

// RMACC_PROXY_THREADS=0 on `nodes` nodes: 16 from 96 nodes, 8 from 32, 4 from 4, else 1 (and 1
// where the provider reports no link speed, as tcp: FabricOptions::endpointsNeedLinkSpeed). At
// about 2 µs of proxy time per write one thread bounds uniform 16 MiB a rank from 32 nodes (0.80 of
// the bound, 4 threads 0.90); from 4 nodes 4 threads are never worse by more than 0.006 of the
// bound and gain up to 0.10 at 4 MiB; 3 threads, or 2, lose up to 0.16 at some counts (the pair
// rule's spread), and on 2 nodes every pair is on one thread anyway (rmacc-sim, bench/RESULTS.md
// §28). From 32 nodes a rank's 5 writes a node round keep 4 threads over three quarters busy at 16
// MiB (1,270 µs of CPU in a 422 µs call at 128 nodes), and a write the pacer lets go waits for its
// busy thread: 8 threads lift uniform 16 MiB on 40 / 96 / 128 nodes from 0.88 / 0.83 / 0.79 to 0.91
// / 0.86 / 0.86 of the bound (60 nodes, one of the good points of a ragged series with 4, lose
// 0.03) and move zipf, random, 256 MiB and the MoE dispatch by -0.01 .. +0.04 (§34; 24 nodes gain
// nothing). From 96 nodes a thread's two writes out and two in of a position, 8 µs at 2 µs a write
// for 5.2 µs of the NIC's, still leave it behind where the credits of a window come on top: 16
// threads lift 96 / 112 / 128 nodes from 0.908 / 0.904 / 0.889 to 0.911 / 0.911 / 0.910, and change
// nothing below (§36). A thread polls only while its puts await release or its writes are in
// flight; one with nothing pending sleeps (net/proxy_backoff.h), so the 16 cost cores only as they
// work.
int defaultProxyThreads(int nodes);

}  // namespace rmacc
