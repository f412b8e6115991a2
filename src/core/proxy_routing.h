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
// and the rounds walk over all the threads (by the nodes' sum both would come to one thread
// whenever 2k is a multiple of the thread count: docs/decisions.md#proxy-routing). One thread
// carries a pair's writes at both ends.
int proxyThreadOf(int from, int to, int threads, int nodes);

// RMACC_PROXY_THREADS=0 on `nodes` nodes: 16 from 96 nodes, 8 from 32, 4 from 4, else 1 (and 1
// where the provider reports no link speed, as tcp: FabricOptions::endpointsNeedLinkSpeed). At
// about 2 µs of proxy CPU per write, the writes of a rank's node rounds outgrow one thread from
// a few nodes on, and four threads' share of them from 32 and again from 96 nodes; 2 or 3
// threads spread the pairs unevenly (docs/decisions.md#proxy-threads). A thread polls only while its puts await release or its writes are in
// flight; one with nothing pending sleeps (net/proxy_backoff.h), so the 16 cost cores only as they
// work.
int defaultProxyThreads(int nodes);

}  // namespace rmacc
