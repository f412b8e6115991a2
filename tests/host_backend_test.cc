// The host backend: CUDA stream semantics on worker threads, and memfd memory that other
// processes of the node map. Single-process cases first, then real processes (runRanks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/host/host_memory.h"
#include "core/error.h"
#include "support/multiprocess.h"

namespace rmacc {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs `f` and returns the code of the rmacc::Error it throws (rmaccSuccess if none).
template <class F>
rmaccResult_t codeOf(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return rmaccSuccess;
}

uint64_t* u64(const std::unique_ptr<Allocation>& a) { return static_cast<uint64_t*>(a->ptr()); }

TEST(HostBackend, OpsRunInOrder) {
  auto backend = createHostBackend(30);
  auto stream = backend->createStream();
  // A chain: copy i reads what copy i-1 wrote, so any reordering leaves a zero behind.
  constexpr int kOps = 2000;
  std::vector<uint64_t> chain(kOps + 1, 0);
  chain[0] = 0xC0FFEE;
  auto sig = backend->allocateHostVisible(sizeof(uint64_t));
  for (int i = 0; i < kOps; ++i) {
    CopyDesc c{&chain[i + 1], &chain[i], sizeof(uint64_t)};
    stream->copy(&c, 1);
    stream->writeValue(u64(sig), i + 1);
    WaitDesc w{u64(sig), (uint64_t)i + 1};  // satisfied by this stream's own earlier write
    stream->waitValues(&w, 1);
  }
  stream->synchronize();
  EXPECT_TRUE(stream->query());
  for (int i = 0; i <= kOps; ++i) ASSERT_EQ(chain[i], 0xC0FFEEu) << "at " << i;
  EXPECT_EQ(*u64(sig), (uint64_t)kOps);
}

TEST(HostBackend, HostCallbackRunsInStreamOrder) {
  auto backend = createHostBackend(30);
  auto stream = backend->createStream();
  auto gate = backend->allocateHostVisible(sizeof(uint64_t));
  std::vector<int> seen;  // written by the worker only; read after synchronize
  uint64_t x = 0, seven = 7;
  WaitDesc w{u64(gate), 1};
  stream->waitValues(&w, 1);
  CopyDesc c{&x, &seven, sizeof(x)};
  stream->copy(&c, 1);
  stream->hostCallback([&] { seen.push_back((int)x); });
  stream->hostCallback([&] { seen.push_back(2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(stream->query());
  backend->hostWrite(u64(gate), 1);
  stream->synchronize();
  EXPECT_EQ(seen, (std::vector<int>{7, 2}));
}

TEST(HostBackend, CopyBatchAndZeroBytes) {
  auto backend = createHostBackend(30);
  auto stream = backend->createStream();
  std::vector<uint8_t> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = test::patternByte(0, 1, i);
  std::vector<CopyDesc> batch;
  for (size_t off = 0; off < 4096; off += 512) batch.push_back({&dst[off], &src[off], 512});
  batch.push_back({nullptr, nullptr, 0});  // zero-byte entries are legal and touch nothing
  stream->copy(batch.data(), batch.size());
  stream->copy(nullptr, 0);
  stream->synchronize();
  EXPECT_EQ(src, dst);
}

TEST(HostBackend, EventOrdersTwoStreams) {
  auto backend = createHostBackend(30);
  auto a = backend->createStream();
  auto b = backend->createStream();
  auto gate = backend->allocateHostVisible(sizeof(uint64_t));
  auto event = backend->createEvent();
  uint64_t x = 0, y = 0, value = 42;
  WaitDesc w{u64(gate), 1};
  a->waitValues(&w, 1);
  CopyDesc c1{&x, &value, sizeof(x)};
  a->copy(&c1, 1);
  a->record(*event);
  b->waitEvent(*event);
  CopyDesc c2{&y, &x, sizeof(y)};
  b->copy(&c2, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(a->query());
  EXPECT_FALSE(b->query()) << "b ran ahead of the event it waits for";
  EXPECT_EQ(y, 0u);
  backend->hostWrite(u64(gate), 1);
  b->synchronize();
  EXPECT_EQ(y, 42u);
  EXPECT_TRUE(a->query());
  // Never recorded: waiting on it is a no-op, as in CUDA.
  auto fresh = backend->createEvent();
  b->waitEvent(*fresh);
  b->synchronize();
}

TEST(HostBackend, EventOutlivesItsStream) {
  auto backend = createHostBackend(30);
  auto event = backend->createEvent();
  auto b = backend->createStream();
  {
    auto a = backend->createStream();
    a->record(*event);
  }
  b->waitEvent(*event);
  b->synchronize();
}

TEST(HostBackend, WriteValueReleasesWaitOnOtherStream) {
  auto backend = createHostBackend(30);
  auto producer = backend->createStream();
  auto consumer = backend->createStream();
  auto sig = backend->allocate(2 * sizeof(uint64_t));
  std::vector<uint8_t> data(1 << 16), src(1 << 16), out(1 << 16);
  for (size_t i = 0; i < src.size(); ++i) src[i] = test::patternByte(1, 2, i);
  WaitDesc waits[2] = {{u64(sig), 1}, {u64(sig) + 1, 3}};
  consumer->waitValues(waits, 2);
  CopyDesc c{out.data(), data.data(), data.size()};
  consumer->copy(&c, 1);
  CopyDesc p{data.data(), src.data(), src.size()};
  producer->copy(&p, 1);
  producer->writeValue(u64(sig), 1);
  producer->writeValue(u64(sig) + 1, 3);
  consumer->synchronize();
  producer->synchronize();
  EXPECT_EQ(out, src);
}

// memOps: stores and waits of one call run in the given order (a store after a wait is held by
// it, one before is not), and the call counts as one backend call.
TEST(HostBackend, MemOpsRunInOrderAsOneCall) {
  auto backend = createHostBackend(30);
  auto s = backend->createStream();
  auto mem = backend->allocateHostVisible(3 * sizeof(uint64_t));
  volatile uint64_t* a = u64(mem);
  volatile uint64_t* b = a + 1;
  volatile uint64_t* c = a + 2;
  const MemOpDesc ops[5] = {{false, a, 1}, {true, b, 1}, {false, c, 1}, {true, b, 2}, {false, c, 2}};
  const uint64_t calls = streamCallsOfThisThread();
  s->memOps(ops, 5);
  EXPECT_EQ(streamCallsOfThisThread() - calls, 1u);
  for (auto t0 = Clock::now(); *a != 1 && secondsSince(t0) < 10;) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(*a, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*c, 0u) << "a store ran ahead of the wait before it";
  EXPECT_FALSE(s->query());
  backend->hostWrite(b, 1);
  for (auto t0 = Clock::now(); *c != 1 && secondsSince(t0) < 10;) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(*c, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*c, 1u) << "the second store ran ahead of its wait";
  backend->hostWrite(b, 2);
  s->synchronize();
  EXPECT_EQ(*c, 2u);
}

TEST(HostBackend, PingPongIsWokenNotPolled) {
  // 200 round trips: with working futex wakes this takes milliseconds; if waiters only saw
  // changes at the end of each 50 ms slice it would take 20 s.
  auto backend = createHostBackend(30);
  auto s1 = backend->createStream();
  auto s2 = backend->createStream();
  auto sig = backend->allocate(2 * sizeof(uint64_t));
  uint64_t* ping = u64(sig);
  uint64_t* pong = u64(sig) + 1;
  constexpr uint64_t kRounds = 200;
  auto t0 = Clock::now();
  for (uint64_t i = 1; i <= kRounds; ++i) {
    s1->writeValue(ping, i);
    WaitDesc w1{pong, i};
    s1->waitValues(&w1, 1);
    WaitDesc w2{ping, i};
    s2->waitValues(&w2, 1);
    s2->writeValue(pong, i);
  }
  s1->synchronize();
  s2->synchronize();
  EXPECT_LT(secondsSince(t0), 5.0);
}

TEST(HostBackend, TimeoutFailsStreamAndSkipsLaterOps) {
  auto backend = createHostBackend(0.3);
  auto stream = backend->createStream();
  auto sig = backend->allocateHostVisible(sizeof(uint64_t));
  uint64_t before = 0, after = 0, one = 1;
  CopyDesc c1{&before, &one, sizeof(one)};
  stream->copy(&c1, 1);
  WaitDesc w{u64(sig), 5};
  stream->waitValues(&w, 1);
  CopyDesc c2{&after, &one, sizeof(one)};
  stream->copy(&c2, 1);
  stream->writeValue(u64(sig), 7);
  auto t0 = Clock::now();
  std::string what;
  EXPECT_EQ(codeOf([&] { stream->synchronize(); }, &what), rmaccTimeout);
  EXPECT_LT(secondsSince(t0), 5.0);
  EXPECT_NE(what.find("expected >= 5"), std::string::npos) << what;
  EXPECT_NE(what.find("= 0"), std::string::npos) << what;
  EXPECT_EQ(before, 1u);
  EXPECT_EQ(after, 0u) << "an op after the failed wait ran";
  EXPECT_EQ(*u64(sig), 0u) << "a write after the failed wait ran";
  // Sticky, like a CUDA stream error: query and later work report it too.
  EXPECT_EQ(codeOf([&] { stream->query(); }), rmaccTimeout);
  stream->copy(&c2, 1);
  EXPECT_EQ(codeOf([&] { stream->synchronize(); }), rmaccTimeout);
  EXPECT_EQ(after, 0u);
}

// Stream a waits for a signal nobody writes; stream b waits for a through an event.
struct BlockedChain {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> a, b;
  std::unique_ptr<Allocation> sig;
  std::unique_ptr<Event> event;
  WaitDesc w;
  explicit BlockedChain(double timeoutS)
      : backend(createHostBackend(timeoutS)),
        a(backend->createStream()),
        b(backend->createStream()),
        sig(backend->allocateHostVisible(sizeof(uint64_t))),
        event(backend->createEvent()),
        w{u64(sig), 1} {
    a->waitValues(&w, 1);
    a->record(*event);
    b->waitEvent(*event);
  }
};

TEST(HostBackend, FailurePropagatesThroughEvent) {
  BlockedChain chain(0.2);
  auto& b = chain.b;
  uint64_t y = 0, one = 1;
  CopyDesc c{&y, &one, sizeof(y)};
  b->copy(&c, 1);
  EXPECT_EQ(codeOf([&] { b->synchronize(); }), rmaccTimeout);
  EXPECT_EQ(y, 0u);
}

TEST(HostBackend, AbortReleasesBlockedAndFutureWaits) {
  BlockedChain chain(300);
  auto& backend = chain.backend;
  auto& a = chain.a;
  auto& b = chain.b;
  auto& sig = chain.sig;
  WaitDesc w = chain.w;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    backend->abort();
  });
  auto t0 = Clock::now();
  std::string what;
  EXPECT_EQ(codeOf([&] { a->synchronize(); }, &what), rmaccRemoteError);
  EXPECT_NE(what.find("aborted"), std::string::npos) << what;
  EXPECT_EQ(codeOf([&] { b->synchronize(); }), rmaccRemoteError);
  EXPECT_LT(secondsSince(t0), 2.0);
  aborter.join();
  // A wait enqueued after the abort fails at once, on a fresh stream as well.
  auto c = backend->createStream();
  c->waitValues(&w, 1);
  EXPECT_EQ(codeOf([&] { c->synchronize(); }), rmaccRemoteError);
  // Stores and copies still run; a wait fails even when it is satisfied (after abort() its
  // word may be freed, so no wait reads it again).
  auto d = backend->createStream();
  d->writeValue(u64(sig), 1);
  d->synchronize();
  EXPECT_EQ(*u64(sig), 1u);
  WaitDesc satisfied{u64(sig), 1};
  d->waitValues(&satisfied, 1);
  EXPECT_EQ(codeOf([&] { d->synchronize(); }), rmaccRemoteError);
}

TEST(HostBackend, MisalignedSignalIsRejected) {
  auto backend = createHostBackend(30);
  auto stream = backend->createStream();
  alignas(8) char buf[16] = {};
  auto* bad = reinterpret_cast<volatile uint64_t*>(buf + 4);
  EXPECT_EQ(codeOf([&] { stream->writeValue(bad, 1); }), rmaccInvalidArgument);
  WaitDesc w{bad, 1};
  EXPECT_EQ(codeOf([&] { stream->waitValues(&w, 1); }), rmaccInvalidArgument);
  stream->synchronize();
}

TEST(HostBackend, ZeroSizeAllocations) {
  auto backend = createHostBackend(30);
  auto a = backend->allocate(0);
  auto b = backend->allocate(0);
  ASSERT_NE(a->ptr(), nullptr);
  EXPECT_NE(a->ptr(), b->ptr());
  EXPECT_EQ(a->size(), 0u);
  auto m = backend->import(a->exportHandle());
  ASSERT_NE(m->ptr(), nullptr);
  EXPECT_EQ(m->size(), 0u);
  auto h = backend->allocateHostVisible(0);
  EXPECT_NE(h->ptr(), nullptr);
  EXPECT_TRUE(backend->isHostMemory(a->ptr()));
}

TEST(HostBackend, ImportInSameProcessSharesPages) {
  auto backend = createHostBackend(30);
  auto a = backend->allocate(3 * 4096 + 5);
  auto m = backend->import(a->exportHandle());
  ASSERT_EQ(m->size(), a->size());
  ASSERT_NE(m->ptr(), a->ptr());
  memset(a->ptr(), 0xAB, a->size());
  static_cast<char*>(m->ptr())[a->size() - 1] = 0x11;
  EXPECT_EQ(static_cast<unsigned char*>(m->ptr())[0], 0xAB);
  EXPECT_EQ(static_cast<char*>(a->ptr())[a->size() - 1], 0x11);
}

TEST(HostBackend, ImportErrorsAreClear) {
  auto backend = createHostBackend(30);
  EXPECT_EQ(codeOf([&] { backend->import(ExportHandle(3, 'x')); }), rmaccInvalidArgument);
  // A freed allocation whose fd number was reused must not map the newer memory.
  auto a = backend->allocate(4096);
  ExportHandle stale = a->exportHandle();
  a.reset();
  auto b = backend->allocate(4096);
  std::string what;
  EXPECT_EQ(codeOf([&] { backend->import(stale); }, &what), rmaccSystemError);
  EXPECT_NE(what.find("import"), std::string::npos) << what;
  // An fd the owner does not have: both ways of fetching it fail, and the message says so.
  host::WireHandle h;
  ExportHandle bytes = b->exportHandle();
  memcpy(&h, bytes.data(), sizeof(h));
  h.fd = 1 << 20;
  memcpy(bytes.data(), &h, sizeof(h));
  EXPECT_EQ(codeOf([&] { backend->import(bytes); }, &what), rmaccSystemError);
  EXPECT_NE(what.find("pidfd"), std::string::npos) << what;
  EXPECT_NE(what.find("/proc/"), std::string::npos) << what;
}

TEST(HostBackend, UserStreamRegistry) {
  auto backend = createHostBackend(30);
  auto s = backend->createStream();
  void* handle = s->handle();
  EXPECT_EQ(backend->userStream(handle), s.get());
  Stream* def = backend->userStream(nullptr);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(backend->userStream(nullptr), def);
  EXPECT_NE(def, s.get());
  int notAStream = 0;
  EXPECT_EQ(backend->userStream(&notAStream), nullptr);
  s.reset();
  EXPECT_EQ(backend->userStream(handle), nullptr);
  // A stream of another backend is not ours.
  auto other = createHostBackend(30);
  auto t = other->createStream();
  EXPECT_EQ(backend->userStream(t->handle()), nullptr);
  uint64_t x = 0, one = 1;
  CopyDesc c{&x, &one, sizeof(x)};
  def->copy(&c, 1);
  def->synchronize();
  EXPECT_EQ(x, 1u);
}

long residentKiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(HostBackend, ManySmallOpsDoNotGrowMemory) {
  auto backend = createHostBackend(30);
  auto stream = backend->createStream();
  auto sig = backend->allocateHostVisible(sizeof(uint64_t));
  uint64_t a = 1, b = 0;
  uint64_t next = 0;
  auto round = [&] {
    for (int i = 0; i < 10000; ++i) {
      CopyDesc c{&b, &a, sizeof(a)};
      stream->copy(&c, 1);
      stream->writeValue(u64(sig), ++next);
      WaitDesc w{u64(sig), next};
      stream->waitValues(&w, 1);
    }
    stream->synchronize();
  };
  round();  // warm up the allocator
  long before = residentKiB();
  for (int r = 0; r < 3; ++r) round();
  EXPECT_EQ(*u64(sig), next);
  long grownKiB = residentKiB() - before;
#ifndef __SANITIZE_ADDRESS__  // ASan's quarantine keeps freed blocks resident on purpose
  EXPECT_LT(grownKiB, 2048) << "resident memory grew over 30,000 ops";
#endif
  (void)grownKiB;
}

TEST(HostBackend, FactoryHonoursConfig) {
  auto backend = createBackend(30);
  ASSERT_NE(backend, nullptr);
#ifndef RMACC_HAVE_CUDA
  EXPECT_STREQ(backend->name(), "host");
  EXPECT_EQ(createCudaBackend(30), nullptr);
  EXPECT_FALSE(cudaBackendAvailable());
#endif
}

// The layers above ask these instead of comparing the backend's name.
TEST(HostBackend, CapabilitiesOfHostMemory) {
  auto backend = createHostBackend(30);
  const BackendCaps caps = backend->caps();
  EXPECT_TRUE(caps.synchronousNullStream);
  EXPECT_FALSE(caps.deviceCopyUsesCompute);
  EXPECT_FALSE(caps.networkMayTouchDeviceMemory);
}

// Generic code asks where memory lives (MemoryPlace), never for a CUDA ordinal: everything of
// the host backend, and memory it does not own, is host memory.
TEST(HostBackend, EveryPlaceIsTheHost) {
  auto backend = createHostBackend(30);
  auto a = backend->allocate(4096);
  auto pinned = backend->allocateHostVisible(4096);
  std::vector<char> user(4096);
  for (const void* p : std::initializer_list<const void*>{a->ptr(), pinned->ptr(), user.data()}) {
    const MemoryPlace at = backend->placeOf(p);
    EXPECT_FALSE(at.onDevice());
    EXPECT_EQ(at.kind, MemoryPlace::Kind::kHost);
    EXPECT_EQ(at.device, -1);
  }
}

// ---- Real processes: handles travel through the runRanks scratch area.

constexpr int kMaxMpRanks = 8;
constexpr size_t kMaxHandle = 64;

struct Slot {
  std::atomic<int> ready;
  uint32_t bytes[2];
  char handle[2][kMaxHandle];  // [0] data, [1] signals
};
struct Mailbox {
  Slot slots[kMaxMpRanks];
};
static_assert(sizeof(Mailbox) <= (1 << 20), "fits the default scratch area");

void publish(const test::RankContext& ctx, const Allocation& data, const Allocation& sigs) {
  Slot& slot = static_cast<Mailbox*>(ctx.shared)->slots[ctx.rank];
  const Allocation* allocs[2] = {&data, &sigs};
  for (int k = 0; k < 2; ++k) {
    ExportHandle h = allocs[k]->exportHandle();
    ASSERT_LE(h.size(), kMaxHandle);
    slot.bytes[k] = (uint32_t)h.size();
    memcpy(slot.handle[k], h.data(), h.size());
  }
  slot.ready.store(1, std::memory_order_release);
}

// The peer's (data, signals) handles, once it published them. Test code: polling with sleeps.
std::pair<ExportHandle, ExportHandle> fetch(const test::RankContext& ctx, int peer) {
  Slot& slot = static_cast<Mailbox*>(ctx.shared)->slots[peer];
  auto t0 = Clock::now();
  while (!slot.ready.load(std::memory_order_acquire)) {
    if (secondsSince(t0) > 60) throw std::runtime_error("peer never published its handles");
    usleep(1000);
  }
  return {ExportHandle(slot.handle[0], slot.handle[0] + slot.bytes[0]),
          ExportHandle(slot.handle[1], slot.handle[1] + slot.bytes[1])};
}

TEST(HostBackendMultiProcess, PutThenSignalAcrossProcesses) {
  constexpr size_t kBytes = (1 << 20) + 13;
  test::runRanks(2, test::RunOptions{.timeoutS = 120}, [&](const test::RankContext& ctx) {
    auto backend = createHostBackend(60);
    auto stream = backend->createStream();
    if (ctx.rank == 0) {
      auto data = backend->allocate(kBytes);
      auto sigs = backend->allocateHostVisible(sizeof(uint64_t));
      publish(ctx, *data, *sigs);
      WaitDesc w{u64(sigs), 1};
      stream->waitValues(&w, 1);
      stream->synchronize();
      auto* bytes = static_cast<uint8_t*>(data->ptr());
      for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(bytes[i], test::patternByte(1, 0, i)) << i;
    } else {
      auto [dataHandle, sigHandle] = fetch(ctx, 0);
      auto data = backend->import(dataHandle);
      auto sigs = backend->import(sigHandle);
      ASSERT_EQ(data->size(), kBytes);
      std::vector<uint8_t> src(kBytes);
      for (size_t i = 0; i < kBytes; ++i) src[i] = test::patternByte(1, 0, i);
      CopyDesc c{data->ptr(), src.data(), kBytes};
      stream->copy(&c, 1);
      stream->writeValue(static_cast<uint64_t*>(sigs->ptr()), 1);
      stream->synchronize();
    }
  });
}

// Every rank puts into the next one's buffer and signals it, several rounds, each round into
// its own region so no round overwrites data the receiver has not checked yet.
void ringRounds(int nRanks) {
  constexpr size_t kChunk = (64 << 10) + 7;
  constexpr int kRounds = 3;
  test::runRanks(nRanks, test::RunOptions{.timeoutS = 240}, [&](const test::RankContext& ctx) {
    int next = (ctx.rank + 1) % ctx.nRanks, prev = (ctx.rank + ctx.nRanks - 1) % ctx.nRanks;
    auto backend = createHostBackend(120);
    auto stream = backend->createStream();
    auto recv = backend->allocate(kChunk * kRounds);
    auto sigs = backend->allocate(sizeof(uint64_t));
    publish(ctx, *recv, *sigs);
    auto [dataHandle, sigHandle] = fetch(ctx, next);
    auto peerData = backend->import(dataHandle);
    auto peerSig = backend->import(sigHandle);
    std::vector<uint8_t> src(kChunk * kRounds);
    for (size_t i = 0; i < src.size(); ++i) src[i] = test::patternByte(ctx.rank, next, i);
    for (int r = 0; r < kRounds; ++r) {
      CopyDesc c{static_cast<char*>(peerData->ptr()) + r * kChunk, &src[r * kChunk], kChunk};
      stream->copy(&c, 1);
      stream->writeValue(static_cast<uint64_t*>(peerSig->ptr()), r + 1);
    }
    WaitDesc w{u64(sigs), kRounds};
    stream->waitValues(&w, 1);
    stream->synchronize();
    auto* bytes = static_cast<uint8_t*>(recv->ptr());
    for (size_t i = 0; i < kChunk * kRounds; ++i)
      ASSERT_EQ(bytes[i], test::patternByte(prev, ctx.rank, i)) << "rank " << ctx.rank << " " << i;
  });
}

TEST(HostBackendMultiProcess, Ring2) { ringRounds(2); }
TEST(HostBackendMultiProcess, Ring4) { ringRounds(4); }
TEST(HostBackendMultiProcess, Ring8) { ringRounds(8); }

TEST(HostBackendMultiProcess, SilentPeerTimesOut) {
  test::runRanks(2, test::RunOptions{.timeoutS = 60}, [&](const test::RankContext& ctx) {
    auto backend = createHostBackend(0.5);
    if (ctx.rank == 1) {
      fetch(ctx, 0);  // and exit without ever signalling
      return;
    }
    auto data = backend->allocate(64);
    auto sigs = backend->allocate(sizeof(uint64_t));
    publish(ctx, *data, *sigs);
    auto stream = backend->createStream();
    WaitDesc w{u64(sigs), 1};
    stream->waitValues(&w, 1);
    EXPECT_EQ(codeOf([&] { stream->synchronize(); }), rmaccTimeout);
  });
}

}  // namespace
}  // namespace rmacc
