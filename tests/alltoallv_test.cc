// AlltoAllV end to end on the host backend with real processes and libfabric tcp between
// emulated nodes: every topology of the issue, every count pattern and datatype, malloc'd and
// rmaccMemAlloc buffers, gapped and permuted displacements, consecutive calls, chunking with a
// tiny relay, the settings that force each path (bounced sources, paced and several proxy
// threads, signals as values, copy-engine local copies, entry barrier, split puts).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "api/api_guard.h"
#include "coll/collective.h"
#include "rmacc.h"
#include "support/alltoallv_call.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

using Case = std::tuple<Topo, Pattern, bool /*registered*/>;

class AlltoallvCase : public testing::TestWithParam<Case> {};

TEST_P(AlltoallvCase, ByteExact) {
  auto [topo, pattern, registered] = GetParam();
  const int n = topo.nodes * topo.local;
  // Small relay slots so that multi-step rounds, chunks and credits run at these sizes.
  RunOptions o = optionsFor(topo, {{"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"}});
  runRanks(n, o, [&](const RankContext& ctx) {
    TestComm comm(ctx);
    for (int call = 0; call < 3; ++call) {
      uint64_t seed = 1000 * (int)pattern + call;
      rmaccDataType_t type = (rmaccDataType_t)((call + (int)pattern) % rmaccNumTypes);
      auto counts = makeCounts(pattern, n, 3000 / rmaccTypeSize(type) + call * 17, seed);
      // Alternate the user stream and the NULL stream (returns when done).
      oneCall(comm, counts, type, registered, seed, call % 2 ? nullptr : comm.stream());
    }
  });
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  auto [t, p, reg] = info.param;
  return std::to_string(t.nodes) + "x" + std::to_string(t.local) + "_" + patternName(p) +
         (reg ? "_memalloc" : "_malloc");
}

INSTANTIATE_TEST_SUITE_P(
    Topologies, AlltoallvCase,
    // 8 x 1 and 5 x 2: 4+ remote sources, whose completion waits get a stream of their own
    // (exec/executor.cc classify); 5 x 2 with relays.
    testing::Combine(testing::Values(Topo{1, 8}, Topo{8, 1}, Topo{2, 2}, Topo{2, 4}, Topo{4, 2},
                                     Topo{3, 3}, Topo{5, 2}),
                     testing::Values(Pattern::kUniform, Pattern::kRandom, Pattern::kSparse,
                                     Pattern::kHot, Pattern::kZipf),
                     testing::Bool()),
    caseName);

TEST(Alltoallv, EveryDatatype) {
  runRanks(4, optionsFor({2, 2}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    for (int t = 0; t < rmaccNumTypes; ++t) {
      auto counts = makeCounts(Pattern::kRandom, 4, 100, t);
      oneCall(comm, counts, (rmaccDataType_t)t, t % 2, 77 + t, comm.stream());
    }
  });
}

// 10 nodes x 2 with 2 relay slots: enough node rounds for fitted slots (plan::Options::
// fitSlotsFrom = 4 x slots + 2) and paired rounds. Calls whose blocks fit half a slot (4 KiB)
// take 8 slots of 2 KiB (halved twice: fitWindowBytes), the others 2 of 8 KiB, alternating, so
// the relay geometry changes from call to call under the carried credits.
TEST(Alltoallv, FittedSlotsChangeFromCallToCall) {
  const Topo topo{10, 2};
  const int n = topo.nodes * topo.local;
  runRanks(n, optionsFor(topo, {{"RMACC_RELAY_BYTES", "16K"}, {"RMACC_RELAY_SLOTS", "2"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 6; ++call) {
               const size_t elems = call % 2 ? 1500 : 500;  // 6,000 or 2,000 bytes a block
               auto counts = makeCounts(Pattern::kUniform, n, elems, 7000 + call);
               if (oneCall(comm, counts, rmaccFloat32, false, 7000 + call, comm.stream())) return;
             }
           });
}

// RMACC_TRACE_FILE: the executor enqueues every op on its own between two trace callbacks
// (exec/trace.h), not in batches, the quiet puts (plan::Op::quiet) of a relay's forwards in
// several chunks included. 2 x 3 with slots of 2 KiB: the calls stay byte-exact and each rank
// writes its trace.
TEST(Alltoallv, TracedCallsStayByteExact) {
  const Topo topo{2, 3};
  const int n = topo.nodes * topo.local;
  const std::string path = "/tmp/rmacc_traced_" + std::to_string(getpid()) + "_%r.json";
  runRanks(n, optionsFor(topo, {{"RMACC_RELAY_BYTES", "4K"}, {"RMACC_RELAY_SLOTS", "2"},
                                {"RMACC_TRACE_FILE", path}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 2; ++call) {
               auto counts = makeCounts(Pattern::kRandom, n, 1200, 8100 + call);
               if (oneCall(comm, counts, rmaccFloat32, call == 1, 8100 + call, comm.stream()))
                 return;
             }
           });
  for (int r = 0; r < n; ++r) {
    std::string file = path;
    file.replace(file.find("%r"), 2, std::to_string(r));
    FILE* f = fopen(file.c_str(), "r");
    ASSERT_NE(f, nullptr) << file;
    std::string text(1 << 16, '\0');
    text.resize(fread(&text[0], 1, text.size(), f));
    fclose(f);
    unlink(file.c_str());
    EXPECT_NE(text.find("cePut"), std::string::npos) << file;
  }
}

TEST(Alltoallv, HundredConsecutiveCallsWithChangingCounts) {
  for (Topo topo : {Topo{2, 2}, Topo{3, 3}}) {
    const int n = topo.nodes * topo.local;
    runRanks(n, optionsFor(topo, {{"RMACC_RELAY_BYTES", "16K"}, {"RMACC_RELAY_SLOTS", "3"}}),
             [&](const RankContext& ctx) {
               TestComm comm(ctx);
               for (int call = 0; call < 100; ++call) {
                 Pattern p = (Pattern)(call % 5);
                 auto counts = makeCounts(p, n, 200 + 37 * (call % 7), 5000 + call);
                 if (oneCall(comm, counts, rmaccFloat32, call % 3 == 0, 5000 + call,
                             comm.stream()))
                   return;
               }
             });
  }
}

// RMACC_LANES=serial: every op of a call on one stream, in plan order; must not deadlock.
TEST(Alltoallv, SerialLanes) {
  runRanks(6, optionsFor({3, 2}, {{"RMACC_LANES", "serial"}, {"RMACC_RELAY_BYTES", "8K"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 10; ++call) {
               auto counts = makeCounts((Pattern)(call % 5), 6, 700, 300 + call);
               oneCall(comm, counts, rmaccFloat32, call % 2, 300 + call, comm.stream());
             }
           });
}

// Every proxy put staged through a small bounce ring in 16 KiB chunks (the path of GPU sources
// without a GPU-direct provider): the ring wraps many times a call while earlier chunks are
// still on the wire, no region may be rewritten before the put reading it is done (a GPU run
// once caught exactly that), and a put's signal fires only when all its chunks landed.
TEST(Alltoallv, BouncedSourcesWrapTheRing) {
  runRanks(4, optionsFor({2, 2}, {{"RMACC_NET_BOUNCE", "always"}, {"RMACC_NET_BOUNCE_BYTES", "64K"},
                                  {"RMACC_NET_BOUNCE_CHUNK", "16K"}, {"RMACC_RELAY_BYTES", "256K"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 12; ++call) {
               Pattern p = call % 2 ? Pattern::kZipf : Pattern::kRandom;
               auto counts = makeCounts(p, 4, call % 3 == 2 ? 1000000 : 100000, 500 + call);
               oneCall(comm, counts, rmaccFloat32, call % 2, 500 + call, comm.stream());
             }
           });
}

// RMACC_NET_PACE_GBPS: every rank's proxy hands data writes to tcp at 0.2 GB/s, in order, while
// credits and entry signals pass the writes it holds (nic_pacer.h); with 4 small relay slots
// the writers' credit waits sit between paced puts on the same proxy lane. Bytes exact, no
// deadlock; calls of ~1 MB a rank take a few ms more each.
TEST(Alltoallv, PacedProxyWrites) {
  for (Topo t : {Topo{2, 2}, Topo{3, 2}}) {
    SCOPED_TRACE(std::to_string(t.nodes) + "x" + std::to_string(t.local));
    runRanks(t.nodes * t.local, optionsFor(t, {{"RMACC_NET_PACE_GBPS", "0.2"},
                                              {"RMACC_RELAY_BYTES", "64K"}}),
             [&](const RankContext& ctx) {
               TestComm comm(ctx);
               const int n = t.nodes * t.local;
               for (int call = 0; call < 8; ++call) {
                 Pattern p = (Pattern)(call % 5);
                 auto counts = makeCounts(p, n, call % 4 == 3 ? 250000 : 2000 + call, 900 + call);
                 oneCall(comm, counts, rmaccFloat32, call % 2, 900 + call, comm.stream());
               }
             });
  }
}

// One job per variant (its topology and environment; SCOPED_TRACE names its second setting):
// `calls` calls of the five patterns in turn, every fourth of larger blocks, seeds from `seed`.
struct EnvVariant {
  Topo topo;
  std::vector<std::pair<std::string, std::string>> env;
};
void runVariants(const std::vector<EnvVariant>& variants, int calls, int seed) {
  for (const EnvVariant& v : variants) {
    SCOPED_TRACE(v.env[1].first + " on " + std::to_string(v.topo.nodes) + "x" +
                 std::to_string(v.topo.local));
    const int n = v.topo.nodes * v.topo.local;
    runRanks(n, optionsFor(v.topo, v.env), [&](const RankContext& ctx) {
      TestComm comm(ctx);
      for (int call = 0; call < calls; ++call) {
        auto counts = makeCounts((Pattern)(call % 5), n, call % 4 == 3 ? 60000 : 700 + 13 * call,
                                 seed + call);
        if (oneCall(comm, counts, rmaccFloat32, call % 2, seed + call, comm.stream())) return;
      }
    });
  }
}

// RMACC_PROXY_THREADS: each rank runs several proxy threads, each with its own endpoint, and a
// pair of ranks talks through the thread of their nodes' sum at both ends. 5 nodes on 4
// threads put every thread to work (and some pairs on one); staged sources take a bounce ring
// per thread; landing puts all go through thread 0 while pure signals to the same ranks ride
// the others, so one signal counter is raised from two threads; paced (2 GB/s, so that the
// pacer holds loopback's writes back), the threads keep the rank's posting order between them
// (core/nic_pacer.h NicPacer::first). Bytes exact, no deadlock.
TEST(Alltoallv, SeveralProxyThreads) {
  runVariants({{{5, 2}, {{"RMACC_PROXY_THREADS", "4"}, {"RMACC_RELAY_BYTES", "16K"},
                         {"RMACC_RELAY_SLOTS", "2"}}},
               {{3, 2}, {{"RMACC_PROXY_THREADS", "3"}, {"RMACC_NET_BOUNCE", "always"},
                         {"RMACC_NET_BOUNCE_BYTES", "64K"}, {"RMACC_NET_BOUNCE_CHUNK", "16K"}}},
               {{3, 2}, {{"RMACC_PROXY_THREADS", "2"}, {"RMACC_NET_LANDING", "always"},
                         {"RMACC_RELAY_BYTES", "64K"}}},
               {{4, 2}, {{"RMACC_PROXY_THREADS", "4"}, {"RMACC_NET_PACE_GBPS", "2"},
                         {"RMACC_RELAY_BYTES", "64K"}}}},
              10, 1300);
}

// RMACC_NET_SIGNAL_WRITES=always: credits and entry signals reach other nodes as the NIC's
// writes of their counters' values (ProxyPut::writesValue), which the receiver's proxy never
// sees; the host backend's waits notice them at their next sleep slice. Many credits (small
// relays), and several proxy threads. Bytes exact, no deadlock.
TEST(Alltoallv, CreditsAndEntrySignalsWrittenAsValues) {
  runVariants({{{3, 2}, {{"RMACC_NET_SIGNAL_WRITES", "always"}, {"RMACC_RELAY_BYTES", "64K"}}},
               {{5, 2}, {{"RMACC_NET_SIGNAL_WRITES", "always"}, {"RMACC_PROXY_THREADS", "4"},
                         {"RMACC_RELAY_BYTES", "16K"}, {"RMACC_RELAY_SLOTS", "2"}}}},
              5, 3100);
}

// Small node rounds share pipeline positions (4 slots: 2 rounds a position), so a relay's
// steps there forward together (plan.h Options::joinForwardsBelow) and their signal writes to
// one receiver merge into one (executor.cc batchOp). Calls of ~1 KiB blocks and of larger
// ones, whose chunks are not joined, alternate. Bytes exact, no deadlock.
TEST(Alltoallv, SmallRoundsForwardTogether) {
  const Topo topo{6, 2};
  const int n = topo.nodes * topo.local;
  runRanks(n, optionsFor(topo, {{"RMACC_RELAY_BYTES", "1M"}, {"RMACC_RELAY_SLOTS", "4"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 8; ++call) {
               auto counts = makeCounts((Pattern)(call % 5), n, call % 4 == 3 ? 120000 : 250 + call,
                                        2100 + call);
               if (oneCall(comm, counts, rmaccFloat32, call % 2, 2100 + call, comm.stream())) return;
             }
           });
}

// RMACC_LOCAL_COPY=engines: the block a rank sends itself, and staged blocks copied into a
// malloc'd receive buffer, go out and back through the next local rank's slots and pinned
// host slots (what CUDA uses so that no copy needs an SM). Odd slot sizes make many steps and
// uneven last chunks; calls above 1 MiB a block split over both routes, smaller ones take one.
TEST(Alltoallv, LocalCopiesTakeTheCopyEngineRoutes) {
  for (Topo t : {Topo{1, 3}, Topo{2, 2}, Topo{1, 1}}) {
    SCOPED_TRACE(std::to_string(t.nodes) + "x" + std::to_string(t.local));
    runRanks(t.nodes * t.local,
             optionsFor(t, {{"RMACC_LOCAL_COPY", "engines"}, {"RMACC_LOCAL_COPY_SLOT", "40961"}}),
             [&](const RankContext& ctx) {
               TestComm comm(ctx);
               const int n = t.nodes * t.local;
               for (int call = 0; call < 6; ++call) {
                 Pattern p = call % 2 ? Pattern::kZipf : Pattern::kUniform;
                 auto counts = makeCounts(p, n, call % 3 == 2 ? 400000 : 3000 + call, 700 + call);
                 oneCall(comm, counts, rmaccFloat32, call % 2, 700 + call, comm.stream());
               }
             });
  }
}

// RMACC_LOCAL_COPY=engines with many calls in flight on three user streams at once (the
// copier's route lanes are shared by all of them, its slots reused across calls), mixing
// blocks that fit the small slot (both hops on the caller's stream), blocks of many chunks over
// both routes, and AlltoAll beside AlltoAllV; every call is checked only after all were
// enqueued. 3 slots of 8 KiB + 1: odd chunk sizes, slots refilled hundreds of times a call.
TEST(Alltoallv, LocalCopiesOfCallsInFlightOnSeveralStreams) {
  for (Topo t : {Topo{1, 3}, Topo{2, 2}, Topo{1, 1}}) {
    SCOPED_TRACE(std::to_string(t.nodes) + "x" + std::to_string(t.local));
    runRanks(t.nodes * t.local,
             optionsFor(t, {{"RMACC_LOCAL_COPY", "engines"}, {"RMACC_LOCAL_COPY_SLOT", "8193"},
                            {"RMACC_LOCAL_COPY_SLOTS", "3"}}),
             [&](const RankContext& ctx) {
               TestComm comm(ctx);
               const int n = ctx.nRanks, me = ctx.rank;
               rmaccStream_t streams[3] = {comm.stream(), nullptr, nullptr};
               for (int i = 1; i < 3; ++i) RMACC_ASSERT_OK(rmaccStreamCreate(comm.get(), &streams[i]));
               struct Call {
                 Layout l;
                 std::unique_ptr<Buffers> b;
               };
               std::vector<Call> calls;
               for (int call = 0; call < 9; ++call) {
                 // Elements per pair: below the small slot, and far above one slot.
                 size_t scale = call % 3 == 0 ? 300 : 20000 + 999 * call;
                 auto counts = makeCounts(call % 2 ? Pattern::kZipf : Pattern::kUniform, n, scale, 40 + call);
                 Call c{makeLayout(counts, n, me, 40 + call), nullptr};
                 c.b = std::make_unique<Buffers>(comm.get(), call % 2, c.l.sendElems * 4, c.l.recvElems * 4);
                 fillSend(c.b->send, c.l, 4, me, 40 + call);
                 RMACC_ASSERT_OK(rmaccAlltoAllv(c.b->send, c.l.sendcounts.data(), c.l.sdispls.data(),
                                                c.b->recv, c.l.recvcounts.data(), c.l.rdispls.data(),
                                                rmaccFloat32, comm.get(), streams[call % 3]));
                 calls.push_back(std::move(c));
               }
               // AlltoAll on the third stream while the others may still run.
               const size_t count = 30001;
               std::vector<int32_t> send(n * count), recv(n * count, -1);
               for (int p = 0; p < n; ++p)
                 for (size_t k = 0; k < count; ++k) send[p * count + k] = me * 1000000 + p * 100000 + (int)k;
               RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), count, rmaccInt32, comm.get(), streams[2]));
               for (rmaccStream_t s : streams) RMACC_ASSERT_OK(rmaccStreamSynchronize(comm.get(), s));
               for (size_t i = 0; i < calls.size(); ++i) {
                 std::string first;
                 EXPECT_EQ(checkRecv(calls[i].b->recv, calls[i].l, 4, me, 40 + i, &first), 0u)
                     << "call " << i << ": " << first;
               }
               for (int p = 0; p < n; ++p)
                 for (size_t k = 0; k < count; ++k)
                   ASSERT_EQ(recv[p * count + k], p * 1000000 + me * 100000 + (int)k) << "from " << p;
               for (int i = 1; i < 3; ++i) RMACC_ASSERT_OK(rmaccStreamDestroy(comm.get(), streams[i]));
             });
  }
}

// RMACC_ENTRY_SYNC=barrier: a barrier instead of per-peer entry signals before every call.
TEST(Alltoallv, EntryBarrierMode) {
  runRanks(6, optionsFor({3, 2}, {{"RMACC_ENTRY_SYNC", "barrier"}, {"RMACC_RELAY_BYTES", "8K"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             for (int call = 0; call < 10; ++call) {
               auto counts = makeCounts((Pattern)(call % 5), 6, 500, 900 + call);
               oneCall(comm, counts, rmaccBfloat16, call % 2, 900 + call, comm.stream());
             }
           });
}

// Fresh rmaccMemAlloc buffers every call, more than the peer-mapping cache holds: the cache
// is trimmed between calls (only while the rank is quiet) and no write goes to a stale mapping.
TEST(Alltoallv, FreshBuffersEveryCallTrimTheMappingCache) {
  runRanks(3, optionsFor({1, 3}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    for (int call = 0; call < 600; ++call) {
      auto counts = makeCounts(Pattern::kRandom, 3, 40, 300 + call);
      oneCall(comm, counts, rmaccInt32, /*registered=*/true, 300 + call,
              call % 2 ? nullptr : comm.stream());
    }
  });
}

TEST(Alltoallv, AlltoAllUniform) {
  runRanks(6, optionsFor({3, 2}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int n = ctx.nRanks, me = ctx.rank;
    const size_t count = 1000;
    std::vector<int32_t> send(n * count), recv(n * count, -1);
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < count; ++k) send[p * count + k] = me * 1000000 + p * 10000 + (int)k;
    RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), count, rmaccInt32, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < count; ++k)
        ASSERT_EQ(recv[p * count + k], p * 1000000 + me * 10000 + (int)k) << "from " << p;
  });
}

// At least 1 GiB in one call (4 ranks x 256 MiB) through a 1 MiB relay: hundreds of chunks,
// each waiting for its credit. The relay allocation stays at RMACC_RELAY_BYTES.
TEST(Alltoallv, OneGibibyteThroughATinyRelay) {
  const Topo topo{2, 2};
  RunOptions o = optionsFor(topo, {{"RMACC_RELAY_BYTES", "1M"}, {"RMACC_RELAY_SLOTS", "4"},
                                   {"RMACC_TIMEOUT_S", "200"}});  // one long call: its done wait
  o.timeoutS = 280;
  runRanks(4, o,
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             auto counts = makeCounts(Pattern::kUniform, 4, (256u << 20) / 4 / 8, 9);
             oneCall(comm, counts, rmaccFloat64, false, 9, comm.stream());
             // Allocated and actually written: within RMACC_RELAY_BYTES.
             CollectiveEngine& coll = comm.get()->impl->coll();
             EXPECT_EQ(coll.relayBytes(), 1u << 20);
             EXPECT_GT(coll.relayHighWater(), 0u);
             EXPECT_LE(coll.relayHighWater(), 1u << 20);
             printf("rank %d: relay high-water %llu of %u bytes\n", ctx.rank,
                    (unsigned long long)coll.relayHighWater(), 1u << 20);
           });
}

// RMACC_MAX_PUT_BYTES=4097 (an odd piece size) with blocks that are exact multiples of it:
// every put across nodes splits into whole pieces with no short last piece (the boundary case of
// the piece arithmetic), through the relays too; byte-exact over consecutive calls.
TEST(Alltoallv, PutsSplitAtAnOddMaxPutBytes) {
  runRanks(4, optionsFor({2, 2}, {{"RMACC_MAX_PUT_BYTES", "4097"}, {"RMACC_RELAY_BYTES", "96K"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             const int n = 4;
             for (int call = 0; call < 6; ++call) {
               std::vector<size_t> counts(n * n);
               for (int i = 0; i < n; ++i)
                 for (int j = 0; j < n; ++j) counts[i * n + j] = 4097 * (1 + (i + j + call) % 4);
               oneCall(comm, counts, rmaccUint8, call % 2, 4097 + call, comm.stream());
             }
           });
}
}  // namespace
}  // namespace rmacc::test
