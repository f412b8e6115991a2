// src/net tests, fabtests-style: small one-feature programs over the tcp provider on loopback,
// each rank a real process. Without the tcp provider every case is skipped, not failed.
//
// Tiers: pure logic (SignalTally, ProxyBackoff); FabricTest (raw fi_writedata); ProxyTest
// (puts with signals through the proxy thread and the real host backend).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "core/error.h"
#include "net/fabric.h"
#include "net/proxy.h"
#include "net/proxy_backoff.h"
#include "net/signal_tally.h"
#include "support/ci.h"
#include "support/holdback_fabric.h"
#include "support/multiprocess.h"

namespace rmacc {
namespace {

using test::patternByte;
using test::RankContext;
using test::RunOptions;

constexpr int kMaxTestRanks = 8;

double nowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

RunOptions netOptions(double timeoutS = 240) {
  RunOptions o;
  o.timeoutS = timeoutS;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}};
  return o;
}

// Probed in a child: libfabric must not be initialised in the parent that forks the ranks.
bool tcpAvailable() {
  static int available = -1;
  if (available < 0) {
    auto st = test::runRanksStatus(1, netOptions(60), [](const RankContext&) { Fabric f("tcp"); });
    available = st[0] == 0;
  }
  return available;
}
#define SKIP_WITHOUT_TCP() RETURN_UNLESS_AVAILABLE(tcpAvailable(), "libfabric tcp provider")

// Off CI a missing provider skips the network tests; in CI it fails them (it used to skip).
TEST(CiPrerequisite, MissingProviderFailsInCiSkipsElsewhere) {
  static bool wasSet;
  static std::string saved;
  const char* ci = getenv("CI");
  wasSet = ci != nullptr;
  saved = ci ? ci : "";
  setenv("CI", "true", 1);
  EXPECT_FATAL_FAILURE(test::skipOrFailUnless(false, "libfabric tcp provider"), "must run in CI");
  if (wasSet) setenv("CI", saved.c_str(), 1);
  else unsetenv("CI");
}

// ------------------------------------------------------------------ shared-memory control

// Out-of-band exchange through RankContext::shared (the control plane is not ours to use).
struct Board {
  std::atomic<int> count, gen;
  std::atomic<int> published[kMaxTestRanks];
  uint32_t addrLen[kMaxTestRanks];
  char addr[kMaxTestRanks][256];
  RemoteRegion region[kMaxTestRanks];
  std::atomic<uint64_t> ack[kMaxTestRanks];
  std::atomic<int> pid[kMaxTestRanks];
};
Board* boardOf(const RankContext& c) { return static_cast<Board*>(c.shared); }

// Runs `f`, which must throw Error(code); `what` names the case in failure messages. Returns
// the error's text ("" when nothing was thrown).
std::string expectError(rmaccResult_t code, const char* what, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    return e.what();
  }
  ADD_FAILURE() << what << " was accepted";
  return "";
}

// Waits for pred(), calling idle() in between (fabric progress, or a short sleep).
void waitFor(const std::function<bool()>& pred, const std::function<void()>& idle,
             double timeoutS, const char* what) {
  double deadline = nowS() + timeoutS;
  while (!pred()) {
    if (nowS() > deadline) RMACC_THROW(rmaccTimeout, "timed out waiting for %s", what);
    if (idle) idle();
    else usleep(200);
  }
}

void barrier(Board* b, int n, const std::function<void()>& idle = {}) {
  int gen = b->gen.load();
  if (b->count.fetch_add(1) + 1 == n) {
    b->count.store(0);
    b->gen.fetch_add(1);
    return;
  }
  waitFor([&] { return b->gen.load() != gen; }, idle, 120, "the barrier");
}

struct PeerInfo {
  std::vector<std::vector<char>> addrs;
  std::vector<RemoteRegion> regions;
};

PeerInfo exchange(const RankContext& c, const Fabric& fabric, RemoteRegion mine,
                  const std::function<void()>& idle = {}) {
  Board* b = boardOf(c);
  std::vector<char> a = fabric.address();
  EXPECT_LE(a.size(), sizeof(b->addr[0]));
  memcpy(b->addr[c.rank], a.data(), a.size());
  b->addrLen[c.rank] = (uint32_t)a.size();
  b->region[c.rank] = mine;
  b->published[c.rank].store(1);
  barrier(b, c.nRanks, idle);
  PeerInfo p;
  for (int r = 0; r < c.nRanks; ++r) {
    p.addrs.emplace_back(b->addr[r], b->addr[r] + b->addrLen[r]);
    p.regions.push_back(b->region[r]);
  }
  return p;
}

void fill(uint8_t* p, size_t n, int src, int dst, uint64_t salt) {
  for (size_t i = 0; i < n; ++i) p[i] = patternByte(src, dst, i, salt);
}
// Index of the first wrong byte, or -1.
long long firstMismatch(const uint8_t* p, size_t n, int src, int dst, uint64_t salt) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != patternByte(src, dst, i, salt)) return (long long)i;
  return -1;
}

// --------------------------------------------------------------------- pure logic tier

TEST(SignalTallyTest, UnsplitPutsFireAtOnce) {
  SignalTally t;
  EXPECT_EQ(t.add(3, 1), 1u);
  EXPECT_EQ(t.add(3, 1), 1u);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(SignalTallyTest, SplitPutFiresOnlyWhenAllPiecesLanded) {
  SignalTally t;
  EXPECT_EQ(t.add(7, 0), 0u);
  EXPECT_EQ(t.add(7, 0), 0u);
  EXPECT_EQ(t.add(7, 3), 1u);
  EXPECT_EQ(t.pending(), 0u);
  // The final overtakes its siblings: nothing fires until the last sibling lands.
  EXPECT_EQ(t.add(7, 3), 0u);
  EXPECT_EQ(t.add(7, 0), 0u);
  EXPECT_EQ(t.add(7, 0), 1u);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(SignalTallyTest, InterleavedPutsAndSlotsStayApart) {
  SignalTally t;
  EXPECT_EQ(t.add(1, 0), 0u);  // put A (3 pieces) to slot 1
  EXPECT_EQ(t.add(2, 0), 0u);  // put C (2 pieces) to slot 2
  EXPECT_EQ(t.add(1, 1), 1u);  // put B (1 piece) to slot 1 completes by itself
  EXPECT_EQ(t.add(1, 0), 0u);
  EXPECT_EQ(t.add(2, 2), 1u);
  EXPECT_EQ(t.add(1, 3), 1u);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(ProxyBackoffTest, SpinsThenYieldsThenSleepsWithCaps) {
  using W = ProxyBackoff::Waiting;
  ProxyBackoff b;
  double t = 1000;
  b.active(t);
  for (int i = 0; i < ProxyBackoff::kSpinRounds + ProxyBackoff::kYieldRounds; ++i)
    EXPECT_EQ(b.idle(t, W::kNothing), 0);
  EXPECT_DOUBLE_EQ(b.idle(t, W::kNothing), 1e-6);
  EXPECT_DOUBLE_EQ(b.idle(t, W::kNothing), 2e-6);
  double s = 0;
  for (int i = 0; i < 40; ++i) s = b.idle(t, W::kNothing);
  EXPECT_DOUBLE_EQ(s, ProxyBackoff::kRecentCapS);
  EXPECT_DOUBLE_EQ(b.idle(t, W::kWrites), ProxyBackoff::kInFlightCapS);
  EXPECT_DOUBLE_EQ(b.idle(t, W::kRelease), ProxyBackoff::kInFlightCapS);
  EXPECT_DOUBLE_EQ(b.idle(t + 1, W::kNothing), ProxyBackoff::kIdleCapS);
  b.active(t + 1);
  EXPECT_EQ(b.idle(t + 1, W::kNothing), 0);
}

TEST(ProxyBackoffTest, EagerPollsWhileSomethingIsPending) {
  using W = ProxyBackoff::Waiting;
  ProxyBackoff b(/*eager=*/true);
  double t = 1000;
  b.active(t);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(b.idle(t, i % 2 ? W::kRelease : W::kWrites), 0);
  double s = 0;
  for (int i = 0; i < 40; ++i) s = b.idle(t, W::kNothing);
  EXPECT_DOUBLE_EQ(s, ProxyBackoff::kRecentCapS);  // nothing pending: sleeps like the default
}

// ------------------------------------------------------------------------- fabric tier

// Polls a Fabric and keeps what it read, so that waiting for one thing loses nothing else.
struct Pump {
  Fabric& fabric;
  std::deque<Completion> got;
  void progress() {
    Completion c[16];
    size_t n = fabric.poll(c, 16);
    got.insert(got.end(), c, c + n);
    if (n == 0) usleep(20);
  }
  bool take(Completion::Kind kind, Completion* out) {
    for (auto it = got.begin(); it != got.end(); ++it) {
      if (it->kind != kind) continue;
      *out = *it;
      got.erase(it);
      return true;
    }
    return false;
  }
};

TEST(FabricTest, OpensAndRegisters) {
  SKIP_WITHOUT_TCP();
  test::runRanks(1, netOptions(), [](const RankContext&) {
    Fabric f("tcp");
    EXPECT_NE(f.providerName().find("tcp"), std::string::npos) << f.providerName();
    EXPECT_FALSE(f.address().empty());
    EXPECT_GE(f.maxMessageBytes(), 1u << 20);
    std::vector<char> buf(1 << 20);
    auto mr = f.registerMemory(buf.data(), buf.size());
    EXPECT_EQ(mr->remote().size, buf.size());
    auto mr2 = f.registerMemory(buf.data(), 4096);
    if (mr->remote().key == mr2->remote().key) ADD_FAILURE() << "two registrations share a key";
    printf("[ provider ] %s max message %zu, FI_MR_LOCAL %d, ordered writes %d, base %s\n",
           f.providerName().c_str(), f.maxMessageBytes(), (int)f.needsLocalRegistration(),
           (int)f.orderedWrites(), mr->remote().base ? "virtual address" : "offset");
  });
}

TEST(FabricTest, UnknownProviderThrowsNetworkError) {
  test::runRanks(1, netOptions(), [](const RankContext&) {
    try {
      Fabric f("no-such-provider");
      ADD_FAILURE() << "opened a provider that does not exist";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), rmaccNetworkError) << e.what();
    }
  });
}

// Two processes: rank 0 writes 0 B .. 64 MiB into rank 1's region with completion data; rank 1
// checks every byte (and the guard bytes around) the moment the remote completion appears.
TEST(FabricTest, WriteDataByteExactUpTo64MiB) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    const std::vector<size_t> sizes = {0, 1, 2, 3, 7, 64, 4095, 4096, 4097, 65536 + 13,
                                       1 << 20, (4 << 20) + 1, 16 << 20, 64 << 20, 0};
    const size_t kBytes = (64 << 20) + 4096;
    Fabric f("tcp");
    Pump pump{f, {}};
    std::vector<uint8_t> buf(kBytes, 0xEE);
    auto mr = f.registerMemory(buf.data(), buf.size());
    PeerInfo peers = exchange(c, f, mr->remote(), [&] { pump.progress(); });
    f.insertPeers(peers.addrs);
    Board* b = boardOf(c);
    uint64_t eagain = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      size_t n = sizes[i], off = (i * 977) % 4000 + 1;
      if (c.rank == 0) {
        fill(buf.data(), n, 0, 1, i);
        alignas(16) char ctx[kOpContextBytes];
        double t0 = nowS();
        while (!f.write(1, n ? buf.data() : nullptr, n, mr->desc(),
                        peers.regions[1].addrOf(off), peers.regions[1].key, (uint32_t)i, ctx)) {
          ++eagain;
          pump.progress();
        }
        Completion done;
        waitFor([&] { return pump.take(Completion::kWriteDone, &done); }, [&] { pump.progress(); },
                60, "the local completion");
        EXPECT_EQ(done.context, (void*)ctx);
        waitFor([&] { return b->ack[1].load() > i; }, [&] { pump.progress(); }, 60, "the ack");
        if (n >= (16u << 20))
          printf("[ write    ] %zu bytes in %.1f ms (incl. verification)\n", n,
                 (nowS() - t0) * 1e3);
      } else {
        Completion got;
        waitFor([&] { return pump.take(Completion::kRemoteData, &got); }, [&] { pump.progress(); },
                60, "remote completion data");
        EXPECT_EQ(got.data, i);
        EXPECT_EQ(firstMismatch(buf.data() + off, n, 0, 1, i), -1) << "write " << i << ", " << n
                                                                    << " bytes";
        EXPECT_EQ(buf[off - 1], 0xEE) << "byte before write " << i;
        EXPECT_EQ(buf[off + n], 0xEE) << "byte after write " << i;
        memset(buf.data() + off, 0xEE, n);
        b->ack[1].store(i + 1);
      }
    }
    if (c.rank == 0) printf("[ rxm      ] %llu -FI_EAGAIN before writes went through\n",
                            (unsigned long long)eagain);
    barrier(b, 2, [&] { pump.progress(); });
  });
}

// -------------------------------------------------------------------------- proxy tier

constexpr int kCtxData = 0;
constexpr int kCtxAck = 1;

// One rank's proxy stack on the real host backend: signals, a registered window, a proxy and
// a stream that plays the device's role (writes ready, waits on done and on signals).
// Member order is teardown order reversed: the proxy goes before the registrations, those
// before the fabric, the backend last.
struct ProxyRank {
  const RankContext& c;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Allocation> signalMem;
  volatile uint64_t* signals = nullptr;
  SignalLayout layout;
  std::unique_ptr<Allocation> window;
  std::unique_ptr<Fabric> fabric;
  std::unique_ptr<MemoryRegion> windowMr;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<Stream> stream;
  PeerInfo peers;

  test::HoldBackFabric* holdBack = nullptr;  // when the fabric is the hold-back double

  ProxyRank(const RankContext& ctx, size_t windowBytes, size_t maxPutBytes, double timeoutS,
            const FabricOptions& fo = {}, bool holdBackCompletions = false)
      : c(ctx), layout{ctx.nRanks} {
    backend = createHostBackend(std::max(timeoutS, 60.0));
    signalMem = backend->allocateHostVisible(layout.bytes());
    signals = (volatile uint64_t*)signalMem->ptr();
    for (size_t i = 0; i < layout.count(); ++i) signals[i] = 0;
    window = backend->allocate(std::max<size_t>(windowBytes, 64));
    memset(window->ptr(), 0xEE, window->size());
    if (holdBackCompletions) {
      auto f = std::make_unique<test::HoldBackFabric>("tcp", fo);
      holdBack = f.get();
      fabric = std::move(f);
    } else {
      fabric = std::make_unique<Fabric>("tcp", fo);
    }
    windowMr = fabric->registerMemory(window->ptr(), window->size());
    peers = exchange(c, *fabric, windowMr->remote());
    fabric->insertPeers(peers.addrs);
    ProxyOptions po;
    po.maxPieceBytes = maxPutBytes;
    po.timeoutS = timeoutS;
    proxy = startProxy(*fabric, *backend, c.rank, c.nRanks, signals, po);
    stream = backend->createStream();
  }
  uint8_t* win() const { return (uint8_t*)window->ptr(); }
  volatile uint64_t* sig(int ctx, int sigIdx, int src) const {
    return &signals[layout.index(ctx, sigIdx, src)];
  }
  uint64_t load(volatile uint64_t* p) const {
    return __atomic_load_n(const_cast<uint64_t*>(p), __ATOMIC_ACQUIRE);
  }
  // The device side of the handshake, through the stream as the executor will do it.
  void release(ProxyQueue* q, uint64_t seq) { stream->writeValue(q->ready(), seq); }
  void waitAtLeast(volatile uint64_t* p, uint64_t value) {
    WaitDesc w{p, value};
    stream->waitValues(&w, 1);
    stream->synchronize();
  }
  ProxyPut put(int peer, const void* src, size_t bytes, uint64_t dstOffset, int ctx, int sigIdx) {
    ProxyPut p;
    p.peer = peer, p.src = src, p.bytes = bytes, p.dst = peers.regions[peer];
    p.dstOffset = dstOffset, p.ctx = ctx, p.sigIdx = sigIdx;
    return p;
  }
  void expectHealthy() {
    std::string text;
    EXPECT_EQ(proxy->error(&text), rmaccSuccess) << text;
  }
  // Nobody tears down while a peer may still write into its window or wait for its acks.
  void finish() {
    expectHealthy();
    barrier(boardOf(c), c.nRanks);
  }
};

// The size and offset of the put src -> dst in round k: both ends derive them.
struct PutShape {
  size_t bytes, offset;
};
PutShape shapeOf(int src, int dst, int k, size_t maxBytes, size_t slotBytes) {
  std::mt19937_64 rng(((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ (uint64_t)k ^ 0x5eed);
  size_t bytes = (rng() % 8 == 0) ? 0 : rng() % (maxBytes + 1);
  size_t offset = rng() % (slotBytes - bytes + 1);
  return {bytes, offset};
}

// Every rank puts to every other rank each round (random sizes and offsets in its slot of the
// peer's window); the receiver checks the bytes the moment its signal reaches the expected
// count, then acknowledges with a zero-byte put on another context; the sender reuses its
// slot only after the ack. Data and acks go through two queues.
void allPairsRounds(const RankContext& c, size_t maxBytes, int rounds) {
  const size_t slot = maxBytes + 4096;
  ProxyRank pr(c, slot * c.nRanks, 1ull << 30, 60);
  ProxyQueue* dataQ = pr.proxy->createQueue();
  ProxyQueue* ackQ = pr.proxy->createQueue();
  std::vector<std::vector<uint8_t>> src(c.nRanks);
  std::vector<uint64_t> lastData(c.nRanks, 0);
  uint64_t lastAck = 0;
  for (int k = 0; k < rounds; ++k) {
    for (int d = 0; d < c.nRanks; ++d) {
      if (d == c.rank) continue;
      if (k > 0) {
        pr.waitAtLeast(pr.sig(kCtxAck, 0, d), k);           // d consumed round k-1
        pr.waitAtLeast(dataQ->done(), lastData[d]);          // our source is free again
      }
      PutShape sh = shapeOf(c.rank, d, k, maxBytes, slot);
      src[d].resize(sh.bytes);
      fill(src[d].data(), sh.bytes, c.rank, d, k);
      lastData[d] = dataQ->post(pr.put(d, src[d].data(), sh.bytes, c.rank * slot + sh.offset,
                                       kCtxData, 0));
      pr.release(dataQ, lastData[d]);
    }
    for (int s = 0; s < c.nRanks; ++s) {
      if (s == c.rank) continue;
      pr.waitAtLeast(pr.sig(kCtxData, 0, s), k + 1);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, s)), (uint64_t)k + 1) << "signal overshoot from " << s;
      PutShape sh = shapeOf(s, c.rank, k, maxBytes, slot);
      uint8_t* at = pr.win() + s * slot + sh.offset;
      EXPECT_EQ(firstMismatch(at, sh.bytes, s, c.rank, k), -1)
          << "round " << k << " from rank " << s << ": " << sh.bytes << " bytes at " << sh.offset;
      lastAck = ackQ->post(pr.put(s, nullptr, 0, 0, kCtxAck, 0));
      pr.release(ackQ, lastAck);
    }
  }
  pr.waitAtLeast(ackQ->done(), lastAck);
  pr.finish();
}

TEST(ProxyTest, PutsWithSignalsTwoRanksUpTo64MiB) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) { allPairsRounds(c, 64 << 20, 4); });
}

TEST(ProxyTest, PutsWithSignalsFourRanks) {
  SKIP_WITHOUT_TCP();
  test::runRanks(4, netOptions(), [](const RankContext& c) { allPairsRounds(c, 8 << 20, 4); });
}

// maxPutBytes 4096: a ~1 MiB put travels as 255 pieces (the most the 8-bit piece count of
// the completion data allows; the last piece is short) and raises its signal exactly once,
// after every byte landed. Parameter: the tcp provider as it is (ordered writes, no local
// registration), or forced through the paths of EFA-like providers (unordered writes:
// FI_DELIVERY_COMPLETE and the final piece held back; FI_MR_LOCAL: the proxy registers sources).
class SplitPutTest : public ::testing::TestWithParam<bool> {};

TEST_P(SplitPutTest, SignalsOnceWhenAllPiecesLanded) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const size_t kPiece = 4096, kBytes = 255 * kPiece - 77;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 2 * kBytes, kPiece, 60, fo);
    EXPECT_EQ(pr.fabric->orderedWrites(), !emulate);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 0) {
      std::vector<uint8_t> src(kBytes);
      for (int k = 0; k < 2; ++k) {
        fill(src.data(), kBytes, 0, 1, k);
        uint64_t seq = q->post(pr.put(1, src.data(), kBytes, k * kBytes, kCtxData, 3));
        pr.release(q, seq);
        pr.waitAtLeast(q->done(), seq);
      }
      // One piece more than the completion data can count: refused at post, proxy unharmed.
      expectError(rmaccInvalidArgument, "a 256-piece put",
                  [&] { q->post(pr.put(1, src.data(), 255 * kPiece + 1, 0, kCtxData, 3)); });
    } else {
      for (int k = 0; k < 2; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 3, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win() + k * kBytes, kBytes, 0, 1, k), -1) << "put " << k;
      }
      usleep(200 * 1000);  // no late extra increments
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 3, 0)), 2u);
    }
    pr.finish();
  });
}
INSTANTIATE_TEST_SUITE_P(Net, SplitPutTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "EmulatedEfaPaths" : "Tcp"; });

// One logical put posted as consecutive parts of a queue (the staged, chunked path): only the
// final part signals, once every part landed; on the unordered (EFA-like) paths the final part
// waits for the earlier parts' delivery.
TEST_P(SplitPutTest, ChunkedPartsSignalOnceAfterAllLanded) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const size_t kChunk = 64 << 10, kParts = 40, kBytes = kParts * kChunk - 123;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 2 * kBytes, 1 << 20, 60, fo);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 0) {
      std::vector<uint8_t> src(kBytes);
      for (int k = 0; k < 2; ++k) {
        fill(src.data(), kBytes, 0, 1, k);
        uint64_t last = 0;
        for (size_t i = 0, off = 0; off < kBytes; ++i, off += kChunk) {
          ProxyPut part = pr.put(1, src.data() + off, std::min(kChunk, kBytes - off),
                                 k * kBytes + off, kCtxData, 5);
          part.final = off + kChunk >= kBytes;
          part.priorPieces = part.final ? (uint32_t)i : 0;
          last = q->post(part);
          pr.release(q, last);  // each part as soon as it is posted, as the stream does
        }
        pr.waitAtLeast(q->done(), last);
      }
      // A non-final part that claims prior pieces is malformed.
      ProxyPut bad = pr.put(1, src.data(), 8, 0, kCtxData, 5);
      bad.final = false;
      bad.priorPieces = 3;
      expectError(rmaccInvalidArgument, "a non-final part with prior pieces", [&] { q->post(bad); });
    } else {
      for (int k = 0; k < 2; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 5, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win() + k * kBytes, kBytes, 0, 1, k), -1) << "put " << k;
      }
      usleep(200 * 1000);  // one signal per logical put, none per part
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 5, 0)), 2u);
    }
    pr.finish();
  });
}

// An unordered endpoint whose completions come late and out of order (the hold-back double
// around tcp): the signalling piece of a split put, and the final part of a chunked put, must
// be issued only after every earlier piece was reported complete. Over plain tcp the writes
// land in order anyway, so only this double sees a proxy that sends the signal early.
TEST(ProxyTest, UnorderedCompletionsHoldTheSignalBack) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    const size_t kPiece = 4096, kSplit = 37 * kPiece + 5, kChunk = 3 * kPiece, kParts = 6;
    const size_t kChunked = kParts * kChunk - 11;
    FabricOptions fo;
    fo.assumeUnorderedWrites = true;
    ProxyRank pr(c, kSplit + kChunked, kPiece, 60, fo, /*holdBackCompletions=*/c.rank == 0);
    ProxyQueue* q = pr.proxy->createQueue();
    const int kRounds = 4;
    if (c.rank == 0) {
      std::vector<uint8_t> src(kSplit + kChunked);
      for (int k = 0; k < kRounds; ++k) {
        fill(src.data(), kSplit, 0, 1, 2 * k);
        fill(src.data() + kSplit, kChunked, 0, 1, 2 * k + 1);
        uint64_t last = q->post(pr.put(1, src.data(), kSplit, 0, kCtxData, 2));
        pr.release(q, last);
        for (size_t i = 0, off = 0; off < kChunked; ++i, off += kChunk) {
          ProxyPut part = pr.put(1, src.data() + kSplit + off, std::min(kChunk, kChunked - off),
                                 kSplit + off, kCtxData, 4);
          part.final = off + kChunk >= kChunked;
          part.priorPieces = part.final ? (uint32_t)(i * (kChunk / kPiece)) : 0;
          last = q->post(part);
          pr.release(q, last);
        }
        pr.waitAtLeast(q->done(), last);
        pr.waitAtLeast(pr.sig(kCtxAck, 0, 1), k + 1);  // rank 1 checked this round
      }
      EXPECT_EQ(pr.holdBack->violations(), 0u) << "signalling writes issued before their siblings "
                                                  "were reported complete";
      EXPECT_EQ(pr.holdBack->splitFinals(), 2u * kRounds);
      EXPECT_GT(pr.holdBack->reordered(), 0u) << "the double never reordered anything";
    } else {
      uint64_t lastAck = 0;
      for (int k = 0; k < kRounds; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 2, 0), k + 1);
        pr.waitAtLeast(pr.sig(kCtxData, 4, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win(), kSplit, 0, 1, 2 * k), -1) << "split put, round " << k;
        EXPECT_EQ(firstMismatch(pr.win() + kSplit, kChunked, 0, 1, 2 * k + 1), -1)
            << "chunked put, round " << k;
        lastAck = q->post(pr.put(0, nullptr, 0, 0, kCtxAck, 0));
        pr.release(q, lastAck);
      }
      pr.waitAtLeast(q->done(), lastAck);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 2, 0)), (uint64_t)kRounds);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 4, 0)), (uint64_t)kRounds);
    }
    pr.finish();
  });
}

// Two queues of one rank to the same peer: B is released entirely while A is held, so B must
// finish on its own (queues never block each other); then A. done is per queue, in order.
TEST(ProxyTest, TwoQueuesInterleave) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    const int kPuts = 16;
    const size_t kBytes = 256 << 10;
    ProxyRank pr(c, 2 * kPuts * kBytes, 1ull << 30, 60);
    if (c.rank == 0) {
      ProxyQueue* qa = pr.proxy->createQueue();
      ProxyQueue* qb = pr.proxy->createQueue();
      std::vector<uint8_t> src(2 * kPuts * kBytes);
      uint64_t lastA = 0, lastB = 0;
      for (int i = 0; i < 2 * kPuts; ++i) {  // A0 B0 A1 B1 ...: regions i*kBytes
        fill(src.data() + i * kBytes, kBytes, 0, 1, i);
        ProxyQueue* q = (i % 2) ? qb : qa;
        uint64_t seq = q->post(pr.put(1, src.data() + i * kBytes, kBytes, i * kBytes, kCtxData,
                                      (i % 2) ? 2 : 1));
        ((i % 2) ? lastB : lastA) = seq;
      }
      EXPECT_EQ(lastA, (uint64_t)kPuts);
      EXPECT_EQ(lastB, (uint64_t)kPuts);
      for (uint64_t s = 1; s <= lastB; ++s) pr.release(qb, s);
      pr.waitAtLeast(qb->done(), lastB);
      EXPECT_EQ(pr.load(qa->done()), 0u) << "queue A moved without its ready";
      pr.release(qa, lastA);
      pr.waitAtLeast(qa->done(), lastA);
    } else {
      pr.waitAtLeast(pr.sig(kCtxData, 2, 0), kPuts);
      pr.waitAtLeast(pr.sig(kCtxData, 1, 0), kPuts);
      for (int i = 0; i < 2 * kPuts; ++i)
        EXPECT_EQ(firstMismatch(pr.win() + i * kBytes, kBytes, 0, 1, i), -1) << "put " << i;
    }
    pr.finish();
  });
}

// Rank 1 dies (SIGKILL) when the first of a stream of puts has landed, the rest still in
// flight or queued: rank 0's proxy must report an error naming the peer within about its
// timeout (an error completion, or the put timeout when rxm keeps answering -FI_EAGAIN while
// it tries to reconnect), call the error handler once, refuse later puts; nothing hangs.
TEST(ProxyTest, KilledPeerBecomesAnError) {
  SKIP_WITHOUT_TCP();
  auto status = test::runRanksStatus(2, netOptions(120), [](const RankContext& c) {
    const double kTimeoutS = 3;
    const size_t kBytes = 4 << 20;
    const int kPuts = 32;
    ProxyRank pr(c, kBytes, 1ull << 30, kTimeoutS);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 1) {
      pr.waitAtLeast(pr.sig(kCtxData, 0, 0), 1);
      raise(SIGKILL);
    }
    std::atomic<int> handlerCalls{0};
    pr.proxy->setErrorHandler([&](rmaccResult_t, const std::string&) { ++handlerCalls; });
    std::vector<uint8_t> src(kBytes, 1);
    double t0 = nowS();
    for (int i = 0; i < kPuts; ++i) pr.release(q, q->post(pr.put(1, src.data(), kBytes, 0, kCtxData, 0)));
    std::string text;
    rmaccResult_t code = rmaccSuccess;
    while ((code = pr.proxy->error(&text)) == rmaccSuccess && nowS() - t0 < 60) usleep(10 * 1000);
    double took = nowS() - t0;
    printf("[ dead peer] error after %.2f s, done %llu of %d: %s: %s\n", took,
           (unsigned long long)pr.load(q->done()), kPuts, rmaccGetErrorString(code), text.c_str());
    EXPECT_TRUE(code == rmaccRemoteError || code == rmaccNetworkError || code == rmaccTimeout)
        << code;
    EXPECT_LT(took, kTimeoutS + 10);
    EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
    // The proxy thread publishes the error before it calls the handler (it must not hold its
    // lock across a callback), so a poller may see the error first: wait for the call, then
    // make sure no second one follows (this read raced once in ~20 runs: 0 != 1).
    waitFor([&] { return handlerCalls.load() > 0; }, {}, 10, "the error handler");
    usleep(100 * 1000);
    EXPECT_EQ(handlerCalls.load(), 1);
    EXPECT_LT(pr.load(q->done()), (uint64_t)kPuts);
    EXPECT_THROW(q->post(pr.put(1, src.data(), 1, 0, kCtxData, 0)), Error);
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 128 + SIGKILL);
}

// Rank 1 dies while the connection is idle; rank 0 posts afterwards. Depending on timing the
// provider fails the write (EPIPE/ENOTCONN; seen on a 16-core machine) or keeps answering
// -FI_EAGAIN while rxm tries to reconnect (seen on a loaded 2-core one): then the put timeout
// fires. Either way the error comes within about timeoutS and names the peer.
TEST(ProxyTest, PutToPeerThatDiedFails) {
  SKIP_WITHOUT_TCP();
  auto status = test::runRanksStatus(2, netOptions(120), [](const RankContext& c) {
    const double kTimeoutS = 2;
    ProxyRank pr(c, 4096, 1ull << 30, kTimeoutS);
    ProxyQueue* q = pr.proxy->createQueue();
    Board* b = boardOf(c);
    if (c.rank == 1) {
      pr.waitAtLeast(pr.sig(kCtxData, 0, 0), 1);
      b->pid[1].store(getpid());
      raise(SIGKILL);
    }
    char src[64] = {};
    uint64_t seq = q->post(pr.put(1, src, sizeof(src), 0, kCtxData, 0));
    pr.release(q, seq);
    pr.waitAtLeast(q->done(), seq);
    waitFor([&] { return b->pid[1].load() != 0 && kill(b->pid[1].load(), 0) != 0; }, {}, 30,
            "rank 1 to die");
    double t0 = nowS();
    pr.release(q, q->post(pr.put(1, src, sizeof(src), 0, kCtxData, 0)));
    std::string text;
    rmaccResult_t code = rmaccSuccess;
    while ((code = pr.proxy->error(&text)) == rmaccSuccess && nowS() - t0 < 60) usleep(10 * 1000);
    double took = nowS() - t0;
    printf("[ dead peer] error after %.2f s: %s: %s\n", took, rmaccGetErrorString(code),
           text.c_str());
    EXPECT_NE(code, rmaccSuccess);
    EXPECT_LT(took, kTimeoutS + 5);
    EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
  });
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 128 + SIGKILL);
}

// Bad puts are refused at post() with rmaccInvalidArgument and leave the proxy healthy.
TEST(ProxyTest, InvalidPutsRefused) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    ProxyRank pr(c, 4096, 1ull << 30, 60);
    ProxyQueue* q = pr.proxy->createQueue();
    char src[16] = {};
    auto expectRefused = [&](ProxyPut p, const char* what) {
      expectError(rmaccInvalidArgument, what, [&] { q->post(p); });
    };
    int peer = 1 - c.rank;
    ProxyPut p = pr.put(peer, src, 16, 0, kCtxData, 0);
    p.peer = 2;
    expectRefused(p, "peer out of range");
    p = pr.put(peer, src, 16, 0, kNumContexts, 0);
    expectRefused(p, "context out of range");
    p = pr.put(peer, src, 16, 0, kCtxData, RMACC_MAX_SIGNALS);
    expectRefused(p, "signal out of range");
    p = pr.put(peer, src, 16, 4090, kCtxData, 0);
    expectRefused(p, "overrun of the target region");
    p = pr.put(peer, nullptr, 16, 0, kCtxData, 0);
    expectRefused(p, "null source");
    p = pr.put(peer, nullptr, 0, 0, kCtxData, 0);
    p.dst = RemoteRegion{};
    expectRefused(p, "unregistered target");
    EXPECT_EQ(q->post(pr.put(peer, src, 16, 0, kCtxData, 0)), 1u);  // no seq was consumed
    pr.release(q, 1);
    pr.waitAtLeast(pr.sig(kCtxData, 0, peer), 1);
    pr.waitAtLeast(q->done(), 1);
    pr.finish();
  });
}

// An idle proxy sleeps: over one second it uses a small fraction of a core. abort() stops it
// at once and later posts are refused.
TEST(ProxyTest, IdleProxySleepsAndAbortIsPrompt) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    ProxyRank pr(c, 4096, 1ull << 30, 60);
    ProxyQueue* q = pr.proxy->createQueue();
    usleep(300 * 1000);  // let start-up activity age out of the "recently active" window
    timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    usleep(1000 * 1000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    double cpu = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
    printf("[ idle     ] rank %d: %.1f ms CPU in 1 s idle\n", c.rank, cpu * 1e3);
    EXPECT_LT(cpu, 0.1);
    barrier(boardOf(c), c.nRanks);
    double t0 = nowS();
    pr.proxy->abort();
    EXPECT_THROW(q->post(pr.put(1 - c.rank, nullptr, 0, 0, kCtxData, 0)), Error);
    pr.proxy.reset();
    EXPECT_LT(nowS() - t0, 0.5);
  });
}

// GPU-direct is asked for and falls back: tcp offers no FI_HMEM, so the endpoint opens without
// it and refuses to register device memory; shm offers FI_HMEM (system memory on this build),
// so it opens with it, host memory registers as before, and CUDA memory fails with a network
// error (libfabric without CUDA support) that the communicator's probe turns into staging.
TEST(FabricTest, HmemIsAskedForAndFallsBack) {
  SKIP_WITHOUT_TCP();
  auto st = test::runRanksStatus(1, netOptions(60), [](const RankContext&) {
    FabricOptions fo;
    fo.wantHmem = true;
    std::vector<char> host(1 << 16);
    {
      Fabric tcp("tcp", fo);
      EXPECT_FALSE(tcp.hmem());
      EXPECT_FALSE(tcp.deviceNeedsRegistration());
      EXPECT_NE(tcp.registerMemory(host.data(), host.size()), nullptr);
      expectError(rmaccInvalidArgument, "CUDA registration without FI_HMEM",
                  [&] { tcp.registerMemory(host.data(), host.size(), 0); });
    }
    std::unique_ptr<Fabric> shm;
    try {
      shm = std::make_unique<Fabric>("shm", fo);
    } catch (const Error&) {
      return;  // no shm provider with FI_RMA here: nothing more to check
    }
    EXPECT_TRUE(shm->hmem());
    EXPECT_NE(shm->registerMemory(host.data(), host.size()), nullptr);
    // Not CUDA memory, and no CUDA support.
    std::string text = expectError(rmaccNetworkError, "FI_HMEM_CUDA registration of host memory",
                                   [&] { shm->registerMemory(host.data(), host.size(), 0); });
    EXPECT_NE(text.find("FI_HMEM_CUDA"), std::string::npos) << text;
  });
  EXPECT_EQ(st[0], 0);
}

// ------------------------------------------------------------------ landing zone

// The target side alone, on the host backend: headers are checked, chunks copied into place,
// slots returned in copy order, and a put's signal raised once, after its last chunk was
// copied, whatever order its chunks arrived in.
TEST(LandingZoneTest, CopiesChecksCreditsAndSignals) {
  auto backend = createHostBackend(60);
  const uint32_t kSlots = 4;
  const uint64_t kSlotBytes = 4096;
  auto memory = backend->allocateNicVisible(kSlots * (kLandingHeaderBytes + kSlotBytes));
  char* row = static_cast<char*>(memory->ptr());
  RemoteRegion fake{0, 0, memory->size()};
  auto mr = std::make_unique<MemoryRegion>(nullptr, memory->ptr(), memory->size(), fake);
  LandingZone zone(*backend, std::move(memory), std::move(mr), {-1, 0}, kSlots, kSlotBytes);
  std::vector<uint8_t> window(3 * kSlotBytes, 0xEE);
  zone.allow(window.data(), window.size());
  LandingTarget t;  // the source's view, for the offsets
  t.region = fake, t.slots = kSlots, t.slotBytes = kSlotBytes;
  auto stage = [&](int slot, uint64_t dstOff, uint64_t bytes, uint64_t putId, uint32_t putChunks,
                   uint8_t value) {
    memset(row + t.chunkOffset(slot), value, bytes);
    auto& h = *reinterpret_cast<LandingHeader*>(row + t.headerOffset(slot));
    h = LandingHeader{};
    h.dstAddr = (uint64_t)(uintptr_t)(window.data() + dstOff);
    h.bytes = bytes, h.putId = putId, h.putChunks = putChunks, h.ctx = 2, h.sigIdx = 5;
    h.check = h.checksum();
    return &h;
  };
  std::vector<std::pair<int, int>> credits;
  int signals = 0;
  auto drain = [&] {
    for (int i = 0; i < 10000 && !zone.idle(); ++i) {
      zone.progress([&](int src, int slot) { credits.emplace_back(src, slot); },
                    [&](int src, int ctx, int sig) {
                      EXPECT_EQ(src, 1);
                      EXPECT_EQ(ctx, 2);
                      EXPECT_EQ(sig, 5);
                      ++signals;
                    });
      usleep(100);
    }
    EXPECT_TRUE(zone.idle());
  };
  // Put 7 in three chunks; the last one (it announces 3 chunks) arrives first.
  stage(2, 2 * kSlotBytes, 100, 7, 3, 0xC3);
  zone.arrived(1, 2);
  drain();
  EXPECT_EQ(signals, 0) << "signalled before every chunk was copied";
  stage(0, 0, kSlotBytes, 7, 0, 0xA1);
  stage(1, kSlotBytes, kSlotBytes, 7, 0, 0xB2);
  zone.arrived(1, 1);
  zone.arrived(1, 0);
  drain();
  EXPECT_EQ(signals, 1);
  EXPECT_EQ(credits, (std::vector<std::pair<int, int>>{{1, 2}, {1, 1}, {1, 0}}));
  EXPECT_EQ(window[0], 0xA1);
  EXPECT_EQ(window[kSlotBytes], 0xB2);
  EXPECT_EQ(window[2 * kSlotBytes + 99], 0xC3);
  EXPECT_EQ(window[2 * kSlotBytes + 100], 0xEE) << "copied past the chunk";

  auto expectRefused = [&](int src, int slot, const char* what) {
    expectError(rmaccRemoteError, what, [&] { zone.arrived(src, slot); });
  };
  LandingHeader* h = stage(3, 0, 16, 8, 1, 0x11);
  h->bytes = 17;  // changed after the checksum: a torn header
  expectRefused(1, 3, "a header failing its checksum");
  stage(3, 3 * kSlotBytes - 8, 16, 8, 1, 0x11);
  expectRefused(1, 3, "a chunk running past the window");
  stage(3, 0, kSlotBytes + 1, 8, 1, 0x11);
  expectRefused(1, 3, "a chunk larger than its slot");
  stage(3, 0, 16, 8, 1, 0x11);
  expectRefused(0, 3, "a chunk from a rank of this node");
  expectRefused(1, 4, "a slot past the last");
  // Windows nest and repeat: one forbid undoes one allow.
  zone.allow(window.data() + kSlotBytes, 16);
  zone.allow(window.data(), window.size());
  stage(3, 2 * kSlotBytes, 16, 9, 1, 0x22);
  zone.forbid(window.data());
  zone.arrived(1, 3);  // still allowed: the window was registered twice
  drain();
  EXPECT_EQ(window[2 * kSlotBytes], 0x22);
  zone.forbid(window.data());
  stage(3, 0, 16, 10, 1, 0x11);
  expectRefused(1, 3, "a chunk into a deregistered window");
  stage(3, kSlotBytes, 16, 10, 1, 0x33);
  zone.arrived(1, 3);  // inside the small window still registered
  drain();
  EXPECT_EQ(window[kSlotBytes], 0x33);
  EXPECT_TRUE(zone.idle());
}

TEST(LandingZoneTest, SlotSizes) {
  EXPECT_EQ(landingSlotBytes(64 << 20, 1, 4, 4 << 20), 4u << 20);        // 2 nodes x 1
  EXPECT_EQ(landingSlotBytes(64 << 20, 8, 4, 4 << 20), 2u << 20);        // 2 nodes x 8
  EXPECT_EQ(landingSlotBytes(64 << 20, 1016, 4, 4 << 20), 64u << 10);    // 128 nodes x 8: floor
  EXPECT_EQ(landingSlotBytes(1 << 20, 1, 4, 4 << 20), 256u << 10);
  EXPECT_EQ(landingSlotBytes(64 << 20, 1, 4, 1 << 20), 1u << 20);        // capped by the piece
}

// Landing puts through two proxies: rank 1's window is "device memory" (the zone copies into
// it), rank 0 puts into it from two queues at once, in puts of 0.5-16 chunks and in parts
// (final / not final), so both queues compete for 4 slots and wait on credits. Every put's
// signal fires once, after all its bytes are in place. Parameter as in SplitPutTest.
class LandingPutTest : public ::testing::TestWithParam<bool> {};

TEST_P(LandingPutTest, ChunksThroughFewSlotsLandByteExact) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const uint32_t kSlots = 4;
    const uint64_t kSlotBytes = 64 << 10;
    const int kPuts = 12;
    const size_t kMax = 16 * kSlotBytes, kRegion = kMax + 4096;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    std::unique_ptr<LandingZone> zone;
    ProxyRank pr(c, 2 * kPuts * kRegion, 1 << 20, 60, fo);
    if (c.rank == 1) {
      auto memory = pr.backend->allocateNicVisible(kSlots * (kLandingHeaderBytes + kSlotBytes));
      auto mr = pr.fabric->registerMemory(memory->ptr(), memory->size());
      zone = std::make_unique<LandingZone>(*pr.backend, std::move(memory), std::move(mr),
                                           std::vector<int>{0, -1}, kSlots, kSlotBytes);
      zone->allow(pr.win(), pr.window->size());
      pr.proxy->attachLanding(zone.get(), pr.peers.regions);
    }
    barrier(boardOf(c), c.nRanks);  // every rank has read the first exchange
    PeerInfo zones = exchange(c, *pr.fabric, zone ? zone->remote() : RemoteRegion{});
    barrier(boardOf(c), c.nRanks);
    PeerInfo windows = exchange(c, *pr.fabric, RemoteRegion{(uint64_t)(uintptr_t)pr.win(), 0, 0});
    auto shape = [&](int k) { return shapeOf(0, 1, k, kMax, kRegion); };
    if (c.rank == 0) {
      LandingTarget t;
      t.region = zones.regions[1];
      t.slots = kSlots, t.sourceRow = 0, t.slotBytes = kSlotBytes;
      t.windowBase = windows.regions[1].base, t.windowBytes = 2 * kPuts * kRegion;
      ProxyQueue* q[2] = {pr.proxy->createQueue(), pr.proxy->createQueue()};
      std::vector<uint8_t> src(2 * kPuts * kRegion);
      uint64_t last[2] = {0, 0};
      for (int k = 0; k < 2 * kPuts; ++k) {
        PutShape sh = shape(k);
        if (sh.bytes == 0) sh.bytes = 1;
        uint8_t* from = src.data() + k * kRegion;
        fill(from, sh.bytes, 0, 1, k);
        // Every third put goes out in three parts, as the staged path sends it.
        size_t parts = k % 3 == 0 ? 3 : 1, step = (sh.bytes + parts - 1) / parts;
        for (size_t off = 0; off < sh.bytes; off += step) {
          ProxyPut p = pr.put(1, from + off, std::min(step, sh.bytes - off),
                              k * kRegion + sh.offset + off, kCtxData, k % 2);
          p.dst = t.region;
          p.landing = t;
          p.final = off + step >= sh.bytes;
          last[k % 2] = q[k % 2]->post(p);
        }
      }
      pr.release(q[1], last[1]);  // the second queue first: it must not need the first
      pr.release(q[0], last[0]);
      pr.waitAtLeast(q[0]->done(), last[0]);
      pr.waitAtLeast(q[1]->done(), last[1]);
      ProxyPut empty = pr.put(1, src.data(), 0, 0, kCtxData, 0);
      empty.landing = t;
      empty.dst = t.region;
      expectError(rmaccInvalidArgument, "a zero-byte landing put", [&] { q[0]->post(empty); });
    } else {
      pr.waitAtLeast(pr.sig(kCtxData, 0, 0), kPuts);
      pr.waitAtLeast(pr.sig(kCtxData, 1, 0), kPuts);
      for (int k = 0; k < 2 * kPuts; ++k) {
        PutShape sh = shape(k);
        if (sh.bytes == 0) sh.bytes = 1;
        EXPECT_EQ(firstMismatch(pr.win() + k * kRegion + sh.offset, sh.bytes, 0, 1, k), -1)
            << "put " << k << " of " << sh.bytes << " bytes";
      }
      usleep(200 * 1000);  // one signal per put, none per chunk or part
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, 0)), (uint64_t)kPuts);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 1, 0)), (uint64_t)kPuts);
    }
    pr.finish();
    pr.proxy.reset();  // stops using the zone; the zone's registration goes before the fabric
    zone.reset();
  });
}
INSTANTIATE_TEST_SUITE_P(Net, LandingPutTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "EmulatedEfaPaths" : "Tcp"; });

}  // namespace
}  // namespace rmacc
