// A zero-byte put is a signal, and gives the same answer inside a node (the copy engine's
// path) and across nodes (the proxy's): every rank registers an empty window (NULL, 0), puts
// 0 elements to rank + 1 and waits for rank - 1. Across nodes the put was refused ("put to
// rank 2 without a registered target region"), its peer's wait timed out, and every later
// call failed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

struct Shape {
  int nodes;
  int local;
};

std::string shapeName(const testing::TestParamInfo<Shape>& info) {
  return std::to_string(info.param.nodes) + "x" + std::to_string(info.param.local);
}

RunOptions optionsFor(const Shape& s) {
  RunOptions o;
  o.nodeOf = blockNodes(s.nodes, s.local);
  o.timeoutS = 120;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "20"}};
  return o;
}

// Rounds of: a zero-element put (signal `round % 2`) to rank + 1, a wait for rank - 1's.
// `windowBytes` 0 registers (NULL, 0); otherwise a real buffer, put to at its end (the one
// offset a zero-byte put may have beyond every other put's).
void zeroPutRing(const RankContext& ctx, size_t windowBytes) {
  TestComm comm(ctx);
  void* buf = nullptr;
  if (windowBytes > 0) RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &buf, windowBytes));
  rmaccWindow_t win;
  RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), buf, windowBytes, &win));
  const int next = (ctx.rank + 1) % ctx.nRanks, prev = (ctx.rank + ctx.nRanks - 1) % ctx.nRanks;
  const int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    const int sig = round % 2, ctxId = round % 3 == 2 ? 1 : 0;
    RMACC_ASSERT_OK(rmaccPutSignal(nullptr, 0, rmaccFloat32, next, win, windowBytes, sig, ctxId,
                                   0, comm.get(), comm.stream()));
    rmaccWaitSignalDesc_t d{1, prev, sig, ctxId};  // opCnt, peer, sigIdx, ctx
    RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
  }
  // And the communicator still works for a collective afterwards.
  RMACC_ASSERT_OK(rmaccBarrier(comm.get(), comm.stream()));
  RMACC_ASSERT_OK(comm.sync());
  RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), win));
  if (buf) RMACC_ASSERT_OK(rmaccMemFree(comm.get(), buf));
}

class RmaZeroSize : public testing::TestWithParam<Shape> {};

TEST_P(RmaZeroSize, EmptyWindowPutIsASignal) {
  const Shape s = GetParam();
  runRanks(s.nodes * s.local, optionsFor(s), [](const RankContext& ctx) { zeroPutRing(ctx, 0); });
}

TEST_P(RmaZeroSize, ZeroBytesAtTheWindowsEnd) {
  const Shape s = GetParam();
  runRanks(s.nodes * s.local, optionsFor(s),
           [](const RankContext& ctx) { zeroPutRing(ctx, 4096); });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmaZeroSize,
                         testing::Values(Shape{1, 4}, Shape{2, 1}, Shape{2, 2}), shapeName);

}  // namespace
}  // namespace rmacc::test
