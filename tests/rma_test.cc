// The one-sided primitives through the public API, in real processes: puts and signals inside
// a node (CE path) and across emulated nodes (proxy path over libfabric tcp on loopback),
// the barrier, bad input, and failing peers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "api/api_guard.h"
#include "exec/rma.h"
#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

struct Shape {
  int nodes;
  int local;
  bool scattered;
};

std::string shapeName(const testing::TestParamInfo<Shape>& info) {
  return std::to_string(info.param.nodes) + "x" + std::to_string(info.param.local) +
         (info.param.scattered ? "_scattered" : "");
}

// tcpRanks (support/multiprocess.h): a broken data path fails within minutes.
RunOptions optionsFor(const Shape& s, double timeoutS = 240) {
  RunOptions o = tcpRanks(s.scattered ? scatteredNodes(s.nodes, s.local) : blockNodes(s.nodes, s.local));
  o.timeoutS = timeoutS;
  return o;
}

// The schedule every rank derives from the seed: in round k, rank r puts `size` bytes at
// `offset` into the window of rank (r + shift) % n.
struct PutPlan {
  int shift;
  size_t size;
  size_t offset;
  int ctx;
  int sig;
};

PutPlan planFor(int round, int sender, int n, size_t window, size_t maxSize) {
  std::mt19937_64 rng((uint64_t)round * 7919 + sender);
  PutPlan p;
  p.shift = 1 + (int)(round % std::max(1, n - 1));
  if (n == 1) p.shift = 0;
  // Log-uniform sizes: many small puts, a few large ones, and zero.
  double lg = std::uniform_real_distribution<double>(-1, std::log2((double)maxSize))(rng);
  p.size = lg < 0 ? 0 : std::min(maxSize, (size_t)std::exp2(lg));
  p.offset = std::uniform_int_distribution<size_t>(0, window - p.size)(rng);
  p.ctx = (int)(rng() % RMACC_MAX_CONTEXTS);
  p.sig = (int)(rng() % RMACC_MAX_SIGNALS);
  return p;
}

void randomPuts(const RankContext& ctx, int rounds, size_t maxSize) {
  TestComm comm(ctx);
  const int n = ctx.nRanks, me = ctx.rank;
  const size_t window = maxSize + 4096;
  void* win = nullptr;
  RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, window));
  rmaccWindow_t handle;
  RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, window, &handle));
  std::vector<uint8_t> src(maxSize);
  for (int round = 0; round < rounds; ++round) {
    PutPlan mine = planFor(round, me, n, window, maxSize);
    int peer = (me + mine.shift) % n;
    for (size_t i = 0; i < mine.size; ++i) src[i] = patternByte(me, peer, i, round);
    RMACC_ASSERT_OK(rmaccPutSignal(src.data(), mine.size, rmaccUint8, peer, handle, mine.offset,
                                   mine.sig, mine.ctx, 0, comm.get(), comm.stream()));
    // The rank that puts into me this round.
    int from = -1;
    PutPlan theirs{};
    for (int r = 0; r < n; ++r) {
      PutPlan p = planFor(round, r, n, window, maxSize);
      if ((r + p.shift) % n == me) from = r, theirs = p;
    }
    ASSERT_GE(from, 0);
    rmaccWaitSignalDesc_t d{1, from, theirs.sig, theirs.ctx};
    RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    const uint8_t* got = static_cast<const uint8_t*>(win) + theirs.offset;
    for (size_t i = 0; i < theirs.size; ++i) {
      if (got[i] != patternByte(from, me, i, round)) {
        ADD_FAILURE() << "round " << round << ": byte " << i << " of " << theirs.size
                      << " from rank " << from << " is wrong";
        break;
      }
    }
    // Nobody reuses a window before its owner has checked it.
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
  }
  RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), handle));
  RMACC_ASSERT_OK(rmaccMemFree(comm.get(), win));
}

class RmaTopology : public testing::TestWithParam<Shape> {};

TEST_P(RmaTopology, RandomPutsVerifiedAtSignal) {
  Shape s = GetParam();
  int n = s.nodes * s.local;
  runRanks(n, optionsFor(s), [&](const RankContext& ctx) { randomPuts(ctx, 24, 64 << 20); });
}

TEST_P(RmaTopology, BarrierHoldsEveryRank) {
  Shape s = GetParam();
  const int n = s.nodes * s.local, iters = 1000;
  RunOptions o = optionsFor(s);
  o.sharedBytes = iters * sizeof(std::atomic<int>);
  runRanks(n, o, [&](const RankContext& ctx) {
    auto* arrived = static_cast<std::atomic<int>*>(ctx.shared);
    TestComm comm(ctx);
    std::mt19937 rng(ctx.rank);
    for (int i = 0; i < iters; ++i) {
      usleep(rng() % 300);
      arrived[i].fetch_add(1);
      RMACC_ASSERT_OK(rmaccBarrier(comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      ASSERT_EQ(arrived[i].load(), n) << "rank " << ctx.rank << " left barrier " << i << " early";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmaTopology,
                         testing::Values(Shape{1, 2, false}, Shape{1, 4, false}, Shape{1, 8, false},
                                         Shape{2, 1, false}, Shape{2, 2, true}, Shape{4, 2, true},
                                         Shape{3, 3, true}),
                         shapeName);

// RMACC_MAX_PUT_BYTES is where the planner cuts a collective's puts; the proxy splits only at the
// provider's largest message. When the proxy applied it too, a user put above 255 × 4 KiB was
// refused ("needs more than 255 pieces") although the provider takes it whole.
TEST(RmaMaxPut, PlannerLimitLeavesUserPutsWhole) {
  RunOptions o = optionsFor(Shape{2, 1, false});
  o.env.push_back({"RMACC_MAX_PUT_BYTES", "4096"});
  runRanks(2, o, [&](const RankContext& ctx) { randomPuts(ctx, 24, 8 << 20); });
}

// A destroyed stream's proxy queue (scanned by the proxy every round) and bounce ring go to a
// pool: streams created and destroyed one after another reuse one, instead of leaving one
// each behind (and a new stream at a freed stream's address inheriting its queue). Staged puts
// (RMACC_NET_BOUNCE=always) make every stream use a ring too; the data is checked each round.
// One round between two ranks: fill `from` for this round, put it into the peer's window with
// a signal, wait for the peer's put, check it byte by byte, then a barrier so that nobody
// overwrites a window before both ranks checked it.
void exchangeRound(const RankContext& ctx, rmaccComm_t comm, rmaccWindow_t handle, void* win,
                   uint8_t* from, size_t bytes, int round, rmaccStream_t s) {
  for (size_t k = 0; k < bytes; ++k) from[k] = patternByte(ctx.rank, round, k);
  RMACC_ASSERT_OK(rmaccPutSignal(from, bytes, rmaccUint8, 1 - ctx.rank, handle, 0, 0, 0, 0, comm, s));
  rmaccWaitSignalDesc_t d{1, 1 - ctx.rank, 0, 0};
  RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm, s));
  RMACC_ASSERT_OK(rmaccStreamSynchronize(comm, s));
  const uint8_t* p = static_cast<const uint8_t*>(win);
  for (size_t k = 0; k < bytes; ++k)
    ASSERT_EQ(p[k], patternByte(1 - ctx.rank, round, k)) << "round " << round << " byte " << k;
  RMACC_ASSERT_OK(rmaccBarrier(comm, s));
  RMACC_ASSERT_OK(rmaccStreamSynchronize(comm, s));
}

TEST(RmaStreams, DestroyedStreamsGiveTheirQueuesBack) {
  RunOptions o = optionsFor(Shape{2, 1, false});
  o.env.push_back({"RMACC_NET_BOUNCE", "always"});
  o.env.push_back({"RMACC_NET_BOUNCE_BYTES", "1M"});
  runRanks(2, o, [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const size_t kBytes = 64 << 10;
    const int kRounds = 20;
    void* win = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, kBytes));
    rmaccWindow_t handle;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, kBytes, &handle));
    std::vector<uint8_t> src(kBytes);
    for (int round = 0; round < kRounds; ++round) {
      rmaccStream_t s;
      RMACC_ASSERT_OK(rmaccStreamCreate(comm.get(), &s));
      exchangeRound(ctx, comm.get(), handle, win, src.data(), kBytes, round, s);
      if (::testing::Test::HasFatalFailure()) return;
      RMACC_ASSERT_OK(rmaccStreamDestroy(comm.get(), s));
    }
    // Every user stream is gone (the default stream posted nothing to the proxy).
    EXPECT_EQ(api::commOf(comm.get()).rma().streamsHeld(), 0u);
    EXPECT_LE(api::commOf(comm.get()).rma().queuesCreated(), 1u);
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), handle));
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), win));
  });
}

// On providers that need write sources registered (FI_MR_LOCAL: verbs, efa; emulated on tcp
// by RMACC_NET_MR_LOCAL=1), an rmaccMemAlloc source is registered once and its descriptor
// handed to the proxy with every put, instead of the proxy registering and closing the source
// on its thread for every put (it did: 20 registrations for 20 puts). A source rmacc does not
// own still goes through the proxy's registration, once per put.
TEST(RmaSourceRegistration, MemAllocSourcesAreRegisteredOnce) {
  RunOptions o = optionsFor(Shape{2, 1, false});
  o.env.push_back({"RMACC_NET_MR_LOCAL", "1"});
  runRanks(2, o, [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const size_t kBytes = 64 << 10;
    const int kRounds = 20;
    void* win = nullptr;
    void* src = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, kBytes));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &src, kBytes));
    std::vector<uint8_t> userSrc(kBytes);
    rmaccWindow_t handle;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, kBytes, &handle));
    Proxy* proxy = api::commOf(comm.get()).proxy();
    ASSERT_NE(proxy, nullptr);
    ASSERT_TRUE(proxy->needsSourceRegistration());
    for (int round = 0; round < 2 * kRounds; ++round) {
      // The first kRounds from the rmaccMemAlloc buffer, then from memory rmacc does not own.
      uint8_t* from = round < kRounds ? static_cast<uint8_t*>(src) : userSrc.data();
      exchangeRound(ctx, comm.get(), handle, win, from, kBytes, round, nullptr);
      if (::testing::Test::HasFatalFailure()) return;
      if (round == kRounds - 1) EXPECT_EQ(proxy->sourceRegistrations(), 0u);
    }
    EXPECT_EQ(proxy->sourceRegistrations(), (uint64_t)kRounds);
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), handle));
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), src));
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), win));
  });
}

// Windows the network cannot write (device memory without a GPU-direct provider) take puts
// from other nodes through the target's landing zone; RMACC_NET_LANDING=always sends host
// windows that way too. A 1 MiB zone makes 64-256 KiB slots, so the 4 MiB puts go through
// 4 slots in 16-64 chunks on credits; with staged sources (RMACC_NET_BOUNCE=always) a put
// arrives as several parts of one logical put.
struct LandingCase {
  Shape shape;
  bool staged;
};

class RmaLanding : public testing::TestWithParam<LandingCase> {};

RunOptions landingOptions(const LandingCase& c) {
  RunOptions o = optionsFor(c.shape);
  o.env.push_back({"RMACC_NET_LANDING", "always"});
  o.env.push_back({"RMACC_NET_LANDING_BYTES", "1M"});
  if (c.staged) {
    o.env.push_back({"RMACC_NET_BOUNCE", "always"});
    o.env.push_back({"RMACC_NET_BOUNCE_CHUNK", "1M"});
  }
  return o;
}

TEST_P(RmaLanding, RandomPutsVerifiedAtSignal) {
  const LandingCase c = GetParam();
  int n = c.shape.nodes * c.shape.local;
  runRanks(n, landingOptions(c), [&](const RankContext& ctx) { randomPuts(ctx, 24, 4 << 20); });
}

// Two streams of one rank put into the same peer at once and share its slots; the peer's
// signals count puts, not chunks, and every byte is in place when they fire.
void twoStreamsIntoOnePeer(const LandingCase& c) {
  const int kPuts = 8;
  const size_t kBytes = 3 << 20;
  runRanks(2, landingOptions(c), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    void* win = nullptr;
    const size_t window = 2 * kPuts * kBytes;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, window));
    rmaccWindow_t handle;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, window, &handle));
    if (ctx.rank == 0) {
      rmaccStream_t second;
      RMACC_ASSERT_OK(rmaccStreamCreate(comm.get(), &second));
      std::vector<uint8_t> src(window);
      for (size_t k = 0; k < window; ++k) src[k] = patternByte(0, 1, k);
      for (int i = 0; i < 2 * kPuts; ++i) {
        rmaccStream_t s = i % 2 ? second : comm.stream();
        RMACC_ASSERT_OK(rmaccPutSignal(src.data() + i * kBytes, kBytes, rmaccUint8, 1, handle,
                                       i * kBytes, i % 2, 0, 0, comm.get(), s));
      }
      RMACC_ASSERT_OK(rmaccStreamSynchronize(comm.get(), second));
      RMACC_ASSERT_OK(rmaccStreamDestroy(comm.get(), second));
      RMACC_ASSERT_OK(comm.sync());
      // The headers of landing puts were set up before the proxy thread saw the first one.
      EXPECT_EQ(api::commOf(comm.get()).proxy()->proxyThreadAllocations(), 0u);
    } else {
      rmaccWaitSignalDesc_t d[2] = {{kPuts, 0, 0, 0}, {kPuts, 0, 1, 0}};
      RMACC_ASSERT_OK(rmaccWaitSignal(2, d, comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      const uint8_t* p = static_cast<const uint8_t*>(win);
      for (size_t k = 0; k < window; ++k) ASSERT_EQ(p[k], patternByte(0, 1, k)) << "byte " << k;
    }
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), handle));
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), win));
  });
}

TEST(RmaLandingStreams, TwoStreamsShareThePeersSlots) {
  twoStreamsIntoOnePeer({{2, 1, false}, false});
}

TEST(RmaLandingStreams, TwoStreamsShareThePeersSlotsStaged) {
  twoStreamsIntoOnePeer({{2, 1, false}, true});
}

INSTANTIATE_TEST_SUITE_P(Zone, RmaLanding,
                         testing::Values(LandingCase{{2, 1, false}, false},
                                         LandingCase{{2, 1, false}, true},
                                         LandingCase{{2, 2, true}, false},
                                         LandingCase{{3, 3, true}, true}),
                         [](const testing::TestParamInfo<LandingCase>& info) {
                           Shape s = info.param.shape;
                           return std::to_string(s.nodes) + "x" + std::to_string(s.local) +
                                  (info.param.staged ? "_staged" : "");
                         });

// A rank that puts and destroys its communicator at once: streams do not wait for the network
// completion of staged sources, so destroy must send what was released before it frees the
// bounce rings (it once freed them first: EFAULT in the provider, the peer waited forever).
TEST(Rma, DestroyRightAfterStagedPutsDeliversThem) {
  RunOptions o = optionsFor(Shape{2, 1, false}, 120);
  o.env.push_back({"RMACC_NET_BOUNCE", "always"});
  o.env.push_back({"RMACC_NET_BOUNCE_CHUNK", "64K"});
  o.env.push_back({"RMACC_TIMEOUT_S", "30"});
  const size_t bytes = 16 << 20;
  runRanks(2, o, [&](const RankContext& ctx) {
    TestComm comm(ctx);
    void* win = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, bytes));
    rmaccWindow_t handle;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, bytes, &handle));
    if (ctx.rank == 0) {
      std::vector<uint8_t> src(bytes);
      for (size_t k = 0; k < bytes; ++k) src[k] = patternByte(0, 1, k);
      RMACC_ASSERT_OK(rmaccPutSignal(src.data(), bytes, rmaccUint8, 1, handle, 0, 0, 0, 0,
                                     comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());  // returns once staged, long before the bytes are sent
    } else {
      rmaccWaitSignalDesc_t d{1, 0, 0, 0};
      RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      const uint8_t* p = static_cast<const uint8_t*>(win);
      for (size_t k = 0; k < bytes; ++k)
        ASSERT_EQ(p[k], patternByte(0, 1, k)) << "byte " << k;
    }
    // The window is never deregistered here: destroy releases it (rank 0 leaves first).
  });
}

// 10,000 small puts in batches of 100; the resident size must not grow.
class RmaSoak : public testing::TestWithParam<Shape> {};

TEST_P(RmaSoak, TenThousandPutsWithoutGrowth) {
  Shape s = GetParam();
  runRanks(2, optionsFor(s), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int batch = 100, batches = 100;
    const size_t slot = 4096;
    void* win = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &win, slot * batch));
    rmaccWindow_t handle;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), win, slot * batch, &handle));
    std::vector<uint8_t> src(slot * batch);
    std::mt19937 rng(42);
    size_t rssAfterWarmup = 0;
    for (int b = 0; b < batches; ++b) {
      std::vector<size_t> sizes(batch);
      for (auto& sz : sizes) sz = rng() % (slot + 1);
      if (ctx.rank == 0) {
        for (int i = 0; i < batch; ++i) {
          uint8_t* p = src.data() + i * slot;
          for (size_t k = 0; k < sizes[i]; ++k) p[k] = patternByte(b, i, k);
          RMACC_ASSERT_OK(rmaccPutSignal(p, sizes[i], rmaccUint8, 1, handle, i * slot, 0, 0, 0,
                                         comm.get(), comm.stream()));
        }
        rmaccWaitSignalDesc_t ack{1, 1, 1, 0};
        RMACC_ASSERT_OK(rmaccWaitSignal(1, &ack, comm.get(), comm.stream()));
        RMACC_ASSERT_OK(comm.sync());
      } else {
        rmaccWaitSignalDesc_t d{batch, 0, 0, 0};
        RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm.get(), comm.stream()));
        RMACC_ASSERT_OK(comm.sync());
        for (int i = 0; i < batch; ++i) {
          const uint8_t* p = static_cast<const uint8_t*>(win) + i * slot;
          for (size_t k = 0; k < sizes[i]; ++k)
            if (p[k] != patternByte(b, i, k)) {
              ADD_FAILURE() << "batch " << b << " put " << i << " byte " << k;
              return;
            }
        }
        RMACC_ASSERT_OK(rmaccSignal(0, 1, 0, 0, comm.get(), comm.stream()));
        RMACC_ASSERT_OK(comm.sync());
      }
      if (b == 10) rssAfterWarmup = residentBytes();
    }
    EXPECT_LT(residentBytes(), rssAfterWarmup + (8u << 20)) << "resident memory grew";
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), handle));
  });
}

INSTANTIATE_TEST_SUITE_P(Paths, RmaSoak, testing::Values(Shape{1, 2, false}, Shape{2, 1, false}),
                         shapeName);

}  // namespace
}  // namespace rmacc::test
