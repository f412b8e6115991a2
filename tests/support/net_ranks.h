// Helpers of the network tests (fabric_test, proxy_test, landing_test): ranks over libfabric's
// tcp provider on loopback, an out-of-band board in the ranks' shared scratch area (the control
// plane is not theirs to use), fills, and one rank's proxy stack on the real host backend.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "net/fabric.h"
#include "net/proxy.h"
#include "net/signals.h"
#include "support/ci.h"
#include "support/holdback_fabric.h"
#include "support/multiprocess.h"

namespace rmacc::test {

constexpr int kMaxTestRanks = 8;

inline double nowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline RunOptions netOptions(double timeoutS = 240) {
  RunOptions o;
  o.timeoutS = timeoutS;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}};
  return o;
}

// Probed in a child: libfabric must not be initialised in the parent that forks the ranks.
inline bool tcpAvailable() {
  static int available = -1;
  if (available < 0) {
    auto st = runRanksStatus(1, netOptions(60), [](const RankContext&) { Fabric f("tcp"); });
    available = st[0] == 0;
  }
  return available;
}
#define SKIP_WITHOUT_TCP() RETURN_UNLESS_AVAILABLE(tcpAvailable(), "libfabric tcp provider")

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
inline Board* boardOf(const RankContext& c) { return static_cast<Board*>(c.shared); }

// Runs `f`, which must throw Error(code); `what` names the case in failure messages. Returns
// the error's text ("" when nothing was thrown).
inline std::string expectError(rmaccResult_t code, const char* what, const std::function<void()>& f) {
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
inline void waitFor(const std::function<bool()>& pred, const std::function<void()>& idle,
             double timeoutS, const char* what) {
  double deadline = nowS() + timeoutS;
  while (!pred()) {
    if (nowS() > deadline) RMACC_THROW(rmaccTimeout, "timed out waiting for %s", what);
    if (idle) idle();
    else usleep(200);
  }
}

inline void barrier(Board* b, int n, const std::function<void()>& idle = {}) {
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

// Every rank's address of endpoint `ep` and its region. The board is free for the next
// exchange once this returns on every rank (the trailing barrier).
inline PeerInfo exchange(const RankContext& c, const Fabric& fabric, RemoteRegion mine,
                  const std::function<void()>& idle = {}, int ep = 0) {
  Board* b = boardOf(c);
  std::vector<char> a = fabric.address(ep);
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
  barrier(b, c.nRanks, idle);
  return p;
}

inline void fill(uint8_t* p, size_t n, int src, int dst, uint64_t salt) {
  for (size_t i = 0; i < n; ++i) p[i] = patternByte(src, dst, i, salt);
}
// Index of the first wrong byte, or -1.
inline long long firstMismatch(const uint8_t* p, size_t n, int src, int dst, uint64_t salt) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != patternByte(src, dst, i, salt)) return (long long)i;
  return -1;
}

// Polls a Fabric and keeps what it read, so that waiting for one thing loses nothing else.
struct Pump {
  Fabric& fabric;
  std::deque<Completion> got;
  void progress() {
    Completion c[16];
    size_t n = fabric.poll(0, c, 16);
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

  HoldBackFabric* holdBack = nullptr;  // when the fabric is the hold-back double

  ProxyRank(const RankContext& ctx, size_t windowBytes, size_t maxPutBytes, double timeoutS,
            const FabricOptions& fo = {}, bool holdBackCompletions = false,
            double paceBytesPerSecond = 0)
      : c(ctx), layout{ctx.nRanks} {
    backend = createHostBackend(std::max(timeoutS, 60.0));
    signalMem = backend->allocateHostVisible(layout.bytes());
    signals = (volatile uint64_t*)signalMem->ptr();
    for (size_t i = 0; i < layout.count(); ++i) signals[i] = 0;
    window = backend->allocate(std::max<size_t>(windowBytes, 64));
    memset(window->ptr(), 0xEE, window->size());
    if (holdBackCompletions) {
      auto f = std::make_unique<HoldBackFabric>("tcp", fo);
      holdBack = f.get();
      fabric = std::move(f);
    } else {
      fabric = std::make_unique<Fabric>("tcp", fo);
    }
    windowMr = fabric->registerMemory(window->ptr(), window->size());
    peers = exchange(c, *fabric, windowMr->remote());
    fabric->insertPeers(peers.addrs);
    for (int ep = 1; ep < fabric->endpoints(); ++ep)  // FabricOptions::endpoints: one a thread
      fabric->insertPeers(ep, exchange(c, *fabric, windowMr->remote(), {}, ep).addrs);
    ProxyOptions po;
    po.maxPieceBytes = maxPutBytes;
    po.timeoutS = timeoutS;
    po.paceBytesPerSecond = paceBytesPerSecond;
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
inline PutShape shapeOf(int src, int dst, int k, size_t maxBytes, size_t slotBytes) {
  std::mt19937_64 rng(((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ (uint64_t)k ^ 0x5eed);
  size_t bytes = (rng() % 8 == 0) ? 0 : rng() % (maxBytes + 1);
  size_t offset = rng() % (slotBytes - bytes + 1);
  return {bytes, offset};
}

}  // namespace rmacc::test
