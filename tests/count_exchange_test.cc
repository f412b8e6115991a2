// The count exchange (coll/count_exchange.h) against the reference derivation of each rank's
// plan inputs from the whole byte matrix (plan::MatrixInputs): real processes, the TCP
// bootstrap and the shared-memory node gather, equal and unequal node sizes with scrambled node
// maps, several calls in a row so that relay steps carry over. Every field of RankInputs must
// be equal on every rank, on every call; a mismatch gives every rank the same verdict.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "coll/count_exchange.h"
#include "plan/rank_planner.h"
#include "support/multiprocess.h"

namespace rmacc {
namespace {

using test::RankContext;
using test::RunOptions;

struct Shape {
  const char* name;
  std::vector<int> nodeOf;
};

// The byte matrix of call `call`: zeros, small and multi-slot blocks, the same on every rank.
std::vector<uint64_t> matrix(int n, int call, uint64_t slot) {
  std::mt19937_64 rng(1000 + call);
  std::vector<uint64_t> b((size_t)n * n);
  for (auto& v : b) v = rng() % 5 == 0 ? 0 : rng() % (3 * slot);
  return b;
}

std::string diff(const plan::RankInputs& got, const plan::RankInputs& want) {
  auto cmp = [](const char* name, const auto& a, const auto& b) -> std::string {
    if (a.size() != b.size())
      return strprintf("%s: %zu entries, want %zu", name, a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i])
        return strprintf("%s[%zu] = %lld, want %lld", name, i, (long long)a[i], (long long)b[i]);
    return "";
  };
  for (std::string d : {cmp("send", got.send, want.send), cmp("recv", got.recv, want.recv),
                        cmp("relayIn", got.relayIn, want.relayIn),
                        cmp("roundChunks", got.roundChunks, want.roundChunks),
                        cmp("writerStep", got.writerStep, want.writerStep),
                        cmp("writerCallStep", got.writerCallStep, want.writerCallStep),
                        cmp("writerOffset", got.writerOffset, want.writerOffset),
                        cmp("forwardSignals", got.forwardSignals, want.forwardSignals),
                        cmp("forwardLastBatch", got.forwardLastBatch, want.forwardLastBatch)})
    if (!d.empty()) return d;
  if (got.largestPayload != want.largestPayload)
    return strprintf("largestPayload = %llu, want %llu", (unsigned long long)got.largestPayload,
                     (unsigned long long)want.largestPayload);
  if (got.relayStepsBefore != want.relayStepsBefore)
    return strprintf("relayStepsBefore = %llu, want %llu", (unsigned long long)got.relayStepsBefore,
                     (unsigned long long)want.relayStepsBefore);
  return "";
}

class CountExchangeShapes : public testing::TestWithParam<Shape> {};

TEST_P(CountExchangeShapes, InputsEqualTheMatrixDerivation) {
  const std::vector<int>& nodeOf = GetParam().nodeOf;
  const int n = (int)nodeOf.size();
  RunOptions o;
  o.timeoutS = 120;
  test::runRanks(n, o, [&](const RankContext& ctx) {
    auto boot = createTcpBootstrap(ctx.id, ctx.rank, n, 30);
    const Topology topo = Topology::fromNodeOf(nodeOf);
    plan::Options opt;
    opt.slots = 4;
    opt.slotBytes = 4096;
    opt.maxPutBytes = 1500;
    // Shapes of odd size cut relay payloads into >= 3 chunks of >= 1000 bytes (chunkBytes).
    opt.minChunksPerRound = n % 2 ? 3 : 0;
    opt.minChunkBytes = 1000;
    opt.lastRoundMinChunks = 2;  // the last round cut finer than the others,
    opt.lastRoundMinChunkBytes = 500;  // in a unit of its own
    opt.fitSlotsFrom = n % 2 ? 0 : 2;  // calls whose payloads fit half a slot get 8 of 2048 B
    CountExchange x(*boot, topo, ctx.rank, opt, 30);
    plan::Carry carry;
    for (int call = 1; call <= 6; ++call) {
      const std::vector<uint64_t> bytes = matrix(n, call, opt.slotBytes);
      const plan::MatrixInputs ref(topo, bytes, opt, carry);
      std::vector<uint64_t> send(n), recv(n), offset(n);
      for (int r = 0; r < n; ++r) {
        send[r] = bytes[(size_t)ctx.rank * n + r];
        recv[r] = bytes[(size_t)r * n + ctx.rank];
        offset[r] = 1000 * r + ctx.rank;
      }
      MetaHeader h{};
      h.seq = call;
      h.callSeq = call;
      h.remote.base = 77 + ctx.rank;
      CountExchange::Result out;
      x.exchange(call, CountExchange::Mine{h, send.data(), recv.data(), offset.data()}, out);
      ASSERT_EQ(out.code, rmaccSuccess) << out.error;
      ASSERT_EQ(diff(out.inputs, ref.of(ctx.rank)), "") << "rank " << ctx.rank << " call " << call;
      // The relay's target and the offset there of this rank's block, from the relay itself.
      for (int nd = 0; nd < topo.nNodes(); ++nd) {
        if (nd == topo.nodeOf(ctx.rank)) continue;
        const int relay = topo.railPeer(ctx.rank, nd);
        EXPECT_EQ(out.railRemote[nd].base, 77u + relay);
        EXPECT_EQ(out.railOffset[nd], 1000u * ctx.rank + relay);
      }
      x.commit(out);
      carry = ref.after();
    }
    // A count one rank does not expect: every rank gets the same verdict.
    const std::vector<uint64_t> bytes = matrix(n, 99, opt.slotBytes);
    std::vector<uint64_t> send(n), recv(n), offset(n, 0);
    for (int r = 0; r < n; ++r) {
      send[r] = bytes[(size_t)ctx.rank * n + r];
      recv[r] = bytes[(size_t)r * n + ctx.rank] + (ctx.rank == n - 1 && r == 0);
    }
    MetaHeader h{};
    h.seq = h.callSeq = 7;
    CountExchange::Result out;
    x.exchange(7, CountExchange::Mine{h, send.data(), recv.data(), offset.data()}, out);
    EXPECT_EQ(out.code, rmaccInvalidUsage);
    const std::string want = "rank 0 sends " + std::to_string(bytes[n - 1]) + " elements to rank " +
                             std::to_string(n - 1);
    EXPECT_NE(out.error.find(want), std::string::npos) << out.error << " (want: " << want << ")";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CountExchangeShapes,
    testing::Values(Shape{"2x2", {0, 1, 0, 1}}, Shape{"3x2", {2, 0, 1, 1, 0, 2}},
                    Shape{"2p3", {1, 0, 1, 0, 1}}, Shape{"1p3p2", {1, 2, 0, 1, 2, 1}},
                    Shape{"4p1p2", {0, 1, 0, 2, 0, 2, 0}}, Shape{"1p1p3", {2, 0, 2, 1, 2}},
                    // More nodes than local ranks: a rank handles the rails of several nodes.
                    Shape{"5x2", {0, 1, 2, 3, 4, 4, 3, 2, 1, 0}},
                    Shape{"3p1p2p1p2", {4, 0, 2, 0, 1, 4, 2, 3, 0}}),
    [](const testing::TestParamInfo<Shape>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace rmacc
