// How many backend stream calls one AlltoAll / AlltoAllV costs the host at steady state (plan
// cache hit, peer mappings cached), on the host backend with real processes: every stream call
// is a driver call on CUDA (1.5-2.5 us each under MPS, docs/decisions.md#backend-call-count), so this count,
// not a timing, is what CI can hold the per-call host cost to. Data is checked byte-exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "api/api_guard.h"
#include "coll/collective.h"
#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

struct Shape {
  int nodes, local;
  // The most backend calls a steady-state call may make, user stream and engine together.
  uint64_t maxCalls;
  std::vector<int> nodeOf = {};  // unequal nodes: the node of each rank (nodes, local unused)
  int ranks() const { return nodeOf.empty() ? nodes * local : (int)nodeOf.size(); }
  std::string name() const {
    if (nodeOf.empty()) return std::to_string(nodes) + "x" + std::to_string(local);
    std::string n = "unequal";
    for (int r : nodeOf) n += std::to_string(r);
    return n;
  }
};

// Why these bounds. One node, every op on one engine stream (RMACC_LANES auto = serial there):
//   1  the user stream: wait for the previous call, publish this call's start, wait for its
//      done flag (one memop batch);
//   1  the engine stream: wait for the start, the entry signals to every mate, the waits for
//      theirs (one memop batch);
//   1  the copies: every mate's block and this rank's own block (one copy batch);
//   1  the data signals, the waits for the mates' data signals and the done flags (one memop
//      batch).
// = 4 whatever the node size (was 12 before the batching: an event to start each stream, one
// batch per kind of memory op, the self copy apart, an event and a batch for the done flags).
// Across nodes (split lanes: the proxy path has streams of its own), measured 32 at 2 x 2
// before the wait lanes stopped being streams and proxy puts joined the memory-op batches, 11
// before each stream kept its own open batch (ops of other lanes in between cut it):
//   1  the user stream, as above;
//   the proxy-put stream: one memop batch per 16 memory ops (start wait, ready flag stores,
//      the waits their deps need, in op order);
//   each CE stream (RMACC_CE_STREAMS, 2 by default: mates of even and of odd local rank, the
//      rank's own block on the first): per node round with work for it one copy batch (a copy
//      must not pass a wait) and one memop batch (the round's data signals, a relay's credit to
//      the writer -- posted on this stream's proxy queue, not the proxy lane's, so no event --
//      and the next round's waits);
//   the join: the proxy-put stream ends with its ready flag, so the last stream waits for that
//      flag and for the puts' sources among its memory ops (no event); the waits of the wait
//      lanes go into its last batch with the done flags.
//   a run of proxy puts whose stream hands over its next batch 16 ops or more later goes over
//      as it ends (plan/proxy_runs.h): one call more where it happens.
//   with two or more remote completion waits (sources on other nodes, and the wait for the
//      round-1 relay's release, plan.h Options::releaseRelayUpTo), the completion waits
//      run on the CE-wait stream, one memop batch (plan/completion_waits.h), instead of
//      joining the last batch.
// Measured: 2x2 8-11, 4x2 11-14, 2x4 13-15 and 8-13 with unequal nodes (the batches split
// where deps fall, which the counts decide); the bounds are the worst rank's. With one CE
// stream the worst were 8, 13, 12 and 10 (7 at 2x2 before the release; before the run ends
// went over, 4x2 11, 2x4 7-11, unequal 7-9; 4x2 12 before its completion waits got their
// stream): a rank whose mates' copies fall on the second stream makes up to 3 calls more.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {
      {1, 2, 4}, {1, 4, 4}, {2, 2, 11}, {4, 2, 14}, {2, 4, 15}, {0, 0, 13, {0, 1, 0, 1, 1}}};
  return kShapes;
}

enum class Kind { kAlltoAll, kAlltoAllv };

RunOptions optionsFor(const Shape& s) {
  return tcpRanks(s.nodeOf.empty() ? scatteredNodes(s.nodes, s.local) : s.nodeOf);
}

// The engine's cost record of call `seq`, once the progress thread has enqueued it.
CallCost costOf(rmaccComm_t comm, uint64_t seq) {
  CollectiveEngine& coll = api::commOf(comm).coll();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    CallCost c = coll.lastCallCost();
    if (c.seq >= seq || std::chrono::steady_clock::now() > deadline) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// One call with the same counts as every other: returns the wrong bytes.
size_t oneCall(TestComm& comm, Kind kind, const Layout& l, uint8_t* send, uint8_t* recv,
               size_t recvBytes, int me, uint64_t salt) {
  memset(recv, kPoison, recvBytes);
  fillSend(send, l, 1, me, salt);
  rmaccResult_t r;
  if (kind == Kind::kAlltoAll)
    r = rmaccAlltoAll(send, recv, l.sendcounts[0], rmaccUint8, comm.get(), comm.stream());
  else
    r = rmaccAlltoAllv(send, l.sendcounts.data(), l.sdispls.data(), recv, l.recvcounts.data(),
                       l.rdispls.data(), rmaccUint8, comm.get(), comm.stream());
  EXPECT_EQ(r, rmaccSuccess) << comm.lastError();
  EXPECT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
  std::string first;
  size_t wrong = checkRecv(recv, l, 1, me, salt, &first);
  EXPECT_EQ(wrong, 0u) << "rank " << me << ": " << first;
  return wrong;
}

// AlltoAll's layout: equal blocks back to back, as rmaccAlltoAll defines them.
Layout uniformLayout(int n, size_t count) {
  Layout l;
  for (int p = 0; p < n; ++p) {
    l.sendcounts.push_back(count);
    l.recvcounts.push_back(count);
    l.sdispls.push_back(p * count);
    l.rdispls.push_back(p * count);
  }
  l.sendElems = l.recvElems = n * count;
  return l;
}

using Case = std::tuple<Shape, Kind>;
class CallCostCase : public testing::TestWithParam<Case> {};

TEST_P(CallCostCase, BackendCallsPerSteadyStateCallAreBounded) {
  auto [shape, kind] = GetParam();
  const int n = shape.ranks();
  constexpr int kCalls = 8, kWarmUp = 3;  // the first calls plan and map peers' buffers
  runRanks(n, optionsFor(shape), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank;
    Layout l = kind == Kind::kAlltoAll
                   ? uniformLayout(n, 1024)
                   : makeLayout(makeCounts(Pattern::kRandom, n, 1024, 11), n, me, 11);
    void *send, *recv;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &send, std::max<size_t>(l.sendElems, 1)));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &recv, std::max<size_t>(l.recvElems, 1)));
    for (int call = 1; call <= kCalls; ++call) {
      if (oneCall(comm, kind, l, (uint8_t*)send, (uint8_t*)recv, l.recvElems, me, 40 + call)) break;
      CallCost c = costOf(comm.get(), call);
      ASSERT_EQ(c.seq, (uint64_t)call) << "call " << call << " never reported its cost";
      if (call <= kWarmUp) continue;
      EXPECT_LE(c.userCalls + c.engineCalls, shape.maxCalls)
          << "rank " << me << " call " << call << ": " << c.userCalls << " calls on the user stream + "
          << c.engineCalls << " by the engine for " << c.ops << " ops";
      if (call == kCalls)
        printf("%s rank %d: %llu backend calls per call (user stream %llu) for %zu ops\n",
               shape.name().c_str(), me, (unsigned long long)(c.userCalls + c.engineCalls),
               (unsigned long long)c.userCalls, c.ops);
    }
    rmaccMemFree(comm.get(), send);
    rmaccMemFree(comm.get(), recv);
  });
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  auto [s, k] = info.param;
  return s.name() +
         (k == Kind::kAlltoAll ? "_alltoall" : "_alltoallv");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CallCostCase,
                         testing::Combine(testing::ValuesIn(shapes()),
                                          testing::Values(Kind::kAlltoAll, Kind::kAlltoAllv)),
                         caseName);

}  // namespace
}  // namespace rmacc::test
