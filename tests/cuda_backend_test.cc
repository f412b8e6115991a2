// The CUDA backend on a real GPU: copies, stream memory ops, events, timeouts, abort, and VMM
// export/import between two processes. Without CUDA this file compiles to an empty binary;
// without a GPU every test skips.
#ifdef RMACC_HAVE_CUDA

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "support/multiprocess.h"

namespace rmacc {
namespace {

constexpr size_t kMiB = 1 << 20;

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void fill(void* p, size_t n, int salt) {
  auto* b = (uint8_t*)p;
  for (size_t i = 0; i < n; ++i) b[i] = test::patternByte(salt, 0, i);
}

// Index of the first byte that differs from the pattern, or n.
size_t firstWrong(const void* p, size_t n, int salt) {
  auto* b = (const uint8_t*)p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != test::patternByte(salt, 0, i)) return i;
  return n;
}

volatile uint64_t* word(Allocation& a, size_t index) {
  return (volatile uint64_t*)a.ptr() + index;
}

rmaccResult_t codeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return rmaccSuccess;
}

// True when `s` went idle within `seconds` (raw CUDA query: works after abort too).
bool drains(Stream& s, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (cudaStreamQuery((cudaStream_t)s.handle()) == cudaSuccess) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// --- Two processes. First in the file: the parent must not have initialised CUDA before it
// forks (children of a CUDA process cannot use CUDA), so the device count is probed in a child.

int deviceCountWithoutInit() {
  pid_t pid = fork();
  if (pid == 0) _exit(std::min(deviceCount(), 100));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

struct Exchange {
  std::atomic<int> ready[2];
  uint32_t bytes[2];
  char handle[2][128];
};

void publish(Exchange* x, int rank, const ExportHandle& h) {
  ASSERT_LE(h.size(), sizeof(x->handle[rank]));
  memcpy(x->handle[rank], h.data(), h.size());
  x->bytes[rank] = (uint32_t)h.size();
  x->ready[rank].store(1, std::memory_order_release);
}

ExportHandle fetch(Exchange* x, int rank) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!x->ready[rank].load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > end) throw std::runtime_error("peer never exported");
    usleep(1000);
  }
  return ExportHandle(x->handle[rank], x->handle[rank] + x->bytes[rank]);
}

// Rank 1 writes into rank 0's allocation and signals it there; rank 0 waits on its own memory,
// then echoes the data into rank 1's allocation and signals back. Both directions cross
// processes (and GPUs when there are two): copy into a mapping, then a write-value into it.
TEST(CudaBackendMultiProcess, ExportImportPutSignal) {
  int nDev = deviceCountWithoutInit();
  if (nDev == 0) GTEST_SKIP() << "no CUDA device";
  // The ranks fork from this process: CUDA must not be initialised here yet (ctest runs every
  // case in a process of its own, and deviceCountWithoutInit asks in a child).
  constexpr size_t kBytes = 64 * kMiB + 123;
  constexpr size_t kSigOff = (kBytes + 7) / 8 * 8;
  test::RunOptions opt;
  opt.timeoutS = 300;
  test::runRanks(2, opt, [&](const test::RankContext& ctx) {
    auto* x = (Exchange*)ctx.shared;
    ASSERT_EQ(cudaSetDevice(ctx.rank % nDev), cudaSuccess);
    auto backend = createCudaBackend(120);
    auto mine = backend->allocate(kSigOff + 8);
    publish(x, ctx.rank, mine->exportHandle());
    auto peer = backend->import(fetch(x, 1 - ctx.rank));
    ASSERT_EQ(peer->size(), kSigOff + 8);
    auto host = backend->allocateHostVisible(kBytes);
    auto stream = backend->createStream();
    auto* peerSig = (volatile uint64_t*)((char*)peer->ptr() + kSigOff);
    WaitDesc w{(volatile uint64_t*)((char*)mine->ptr() + kSigOff), 1};
    if (ctx.rank == 1) {
      fill(host->ptr(), kBytes, 1);
      auto local = backend->allocate(kBytes);
      CopyDesc c1{local->ptr(), host->ptr(), kBytes}, c2{peer->ptr(), local->ptr(), kBytes};
      stream->copy(&c1, 1);
      stream->copy(&c2, 1);  // device to the peer's memory (NVLink when on another GPU)
      stream->writeValue(peerSig, 1);
      stream->waitValues(&w, 1);  // the echo
      auto echo = backend->allocateHostVisible(kBytes);
      CopyDesc back{echo->ptr(), mine->ptr(), kBytes};
      stream->copy(&back, 1);
      stream->synchronize();
      EXPECT_EQ(firstWrong(echo->ptr(), kBytes, 1), kBytes) << "echo from rank 0 wrong";
    } else {
      stream->waitValues(&w, 1);
      CopyDesc ops[2] = {{host->ptr(), mine->ptr(), kBytes}, {peer->ptr(), mine->ptr(), kBytes}};
      stream->copy(ops, 2);
      stream->writeValue(peerSig, 1);
      stream->synchronize();
      EXPECT_EQ(firstWrong(host->ptr(), kBytes, 1), kBytes) << "data from rank 1 wrong";
    }
  });
}

// --- One process.

// Why contexts on `device` are MPS clients ("" when they are not): the driver's own answer
// where it gives one (cudaDevAttrMpsEnabled), else a running control daemon's pipe
// (CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps), through which new contexts would connect.
std::string mpsInUse(int device) {
  int enabled = 0;
  if (cudaDeviceGetAttribute(&enabled, cudaDevAttrMpsEnabled, device) == cudaSuccess)
    return enabled ? "cudaDevAttrMpsEnabled is 1 on device " + std::to_string(device) : "";
  (void)cudaGetLastError();  // a driver older than the attribute
  const char* dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  if (stat(control.c_str(), &st) == 0) return "the MPS control pipe " + control + " exists";
  return "";
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (deviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    backend_ = createCudaBackend(60);
    ASSERT_NE(backend_, nullptr);
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(CudaBackendTest, Capabilities) {
  const BackendCaps caps = backend_->caps();
  EXPECT_FALSE(caps.synchronousNullStream);
  EXPECT_TRUE(caps.deviceCopyUsesCompute);
  EXPECT_TRUE(caps.networkMayTouchDeviceMemory);
}

// The GPU's UUID as 32 hex digits: what LocalCopier compares to find ranks sharing one GPU
// (MPS), where a copy into the next rank's memory would be a same-device copy again. Another
// device of the machine, when there is one, has another.
TEST_F(CudaBackendTest, DeviceIdentityIsTheGpusUuid) {
  const std::string id = backend_->deviceIdentity();
  ASSERT_EQ(id.size(), 32u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(createCudaBackend(60)->deviceIdentity(), id);
  if (deviceCount() > 1) {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    EXPECT_NE(createCudaBackend(60)->deviceIdentity(), id);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
}

// Device memory is placed on its CUDA device (what an FI_HMEM_CUDA registration needs); pinned
// and pageable host memory on the host.
TEST_F(CudaBackendTest, PlaceOfDeviceAndHostMemory) {
  auto a = backend_->allocate(4096);
  auto pinned = backend_->allocateHostVisible(4096);
  std::vector<char> user(4096);
  const MemoryPlace at = backend_->placeOf(a->ptr());
  EXPECT_TRUE(at.onDevice());
  EXPECT_EQ(at.kind, MemoryPlace::Kind::kCuda);
  EXPECT_GE(at.device, 0);
  EXPECT_TRUE(backend_->isDeviceMemory(a->ptr()));
  EXPECT_FALSE(backend_->placeOf(pinned->ptr()).onDevice());
  EXPECT_FALSE(backend_->placeOf(user.data()).onDevice());
}

TEST_F(CudaBackendTest, CopySizes) {
  constexpr size_t kMax = 256 * kMiB;
  auto src = backend_->allocateHostVisible(kMax + 8);
  auto dst = backend_->allocateHostVisible(kMax + 8);
  auto a = backend_->allocate(kMax + 8);
  auto b = backend_->allocate(kMax + 8);
  fill((char*)src->ptr() + 1, kMax, 7);
  auto s = backend_->createStream();
  for (size_t n : {size_t(1), size_t(3), size_t(4096), size_t(65537), kMiB, 16 * kMiB + 5, kMax}) {
    memset(dst->ptr(), 0, n);
    // Odd offsets: nothing relies on alignment.
    CopyDesc h2d{(char*)a->ptr() + 3, (char*)src->ptr() + 1, n};
    CopyDesc d2d{(char*)b->ptr() + 5, (char*)a->ptr() + 3, n};
    CopyDesc d2h{dst->ptr(), (char*)b->ptr() + 5, n};
    s->copy(&h2d, 1);
    s->copy(&d2d, 1);
    s->copy(&d2h, 1);
    s->synchronize();
    EXPECT_EQ(firstWrong(dst->ptr(), n, 7), n) << "copy of " << n << " bytes";
  }
}

TEST_F(CudaBackendTest, StreamOrdering) {
  auto host = backend_->allocateHostVisible(3 * kMiB + 64);
  auto dev = backend_->allocate(4 * kMiB);
  auto s = backend_->createStream();
  char* x = (char*)host->ptr();
  fill(x, kMiB, 1);
  fill(x + kMiB, kMiB, 2);
  fill(x + 2 * kMiB, kMiB, 3);
  // Three copies into one place: the last one wins only if they run in order.
  for (int i = 0; i < 3; ++i) {
    CopyDesc c{dev->ptr(), x + i * kMiB, kMiB};
    s->copy(&c, 1);
  }
  // A write-value lands before a later copy reads the same word.
  auto* sig = (volatile uint64_t*)((char*)dev->ptr() + 2 * kMiB);
  s->writeValue(sig, 0x1234567890abcdefull);
  auto* out = (uint64_t*)(x + 3 * kMiB);
  *out = 0;
  CopyDesc c1{(char*)dev->ptr() + kMiB, dev->ptr(), kMiB};
  CopyDesc c2{out, (const void*)sig, 8};
  s->copy(&c1, 1);
  s->copy(&c2, 1);
  s->synchronize();
  EXPECT_EQ(*out, 0x1234567890abcdefull);
  CopyDesc back{x, (char*)dev->ptr() + kMiB, kMiB};
  s->copy(&back, 1);
  s->synchronize();
  EXPECT_EQ(firstWrong(x, kMiB, 3), kMiB);
}

// Many copies in one call (cudaMemcpyBatchAsync), on an owned stream, a user stream and the
// legacy default stream (which the batch API refuses: the per-copy fallback).
TEST_F(CudaBackendTest, BatchCopies) {
  constexpr int kOps = 1000;
  std::vector<size_t> off(kOps + 1, 0);
  for (int i = 0; i < kOps; ++i) off[i + 1] = off[i] + (i % 10 == 0 ? 0 : (i * 37) % 5000 + 1);
  size_t total = off[kOps];
  auto host = backend_->allocateHostVisible(2 * total);
  auto src = backend_->allocate(total);
  auto dst = backend_->allocate(total);
  fill(host->ptr(), total, 11);
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreate(&user), cudaSuccess);
  auto owned = backend_->createStream();
  for (Stream* s : {owned.get(), backend_->userStream(user), backend_->userStream(nullptr)}) {
    ASSERT_NE(s, nullptr);
    std::vector<CopyDesc> ops;
    // H2D in one batch, scattered: op i puts block i at the mirrored place.
    for (int i = 0; i < kOps; ++i)
      ops.push_back({(char*)src->ptr() + (total - off[i + 1]), (char*)host->ptr() + off[i],
                     off[i + 1] - off[i]});
    s->copy(ops.data(), ops.size());
    // D2D back in place, then one D2H.
    for (auto& op : ops) op = CopyDesc{(char*)dst->ptr() + ((char*)op.src - (char*)host->ptr()),
                                       op.dst, op.bytes};
    s->copy(ops.data(), ops.size());
    char* out = (char*)host->ptr() + total;
    memset(out, 0, total);
    CopyDesc d2h{out, dst->ptr(), total};
    s->copy(&d2h, 1);
    s->synchronize();
    EXPECT_EQ(firstWrong(out, total, 11), total) << "stream " << s->handle();
  }
  EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

// The batch API with the backend's attribute set is accepted here: otherwise the backend
// silently (but for a WARN) falls back to one cudaMemcpyAsync per copy.
TEST_F(CudaBackendTest, BatchApiAccepted) {
  auto host = backend_->allocateHostVisible(3 * 4096);
  auto dev = backend_->allocate(3 * 4096);
  auto s = backend_->createStream();
  char* h = (char*)host->ptr();
  char* d = (char*)dev->ptr();
  void* dsts[3] = {d, d + 4096, h + 8192};          // H2D, D2D, D2H
  const void* srcs[3] = {h, d, d + 4096};
  size_t sizes[3] = {4096, 4096, 4096};
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t idx = 0;
  fill(h, 4096, 41);
  EXPECT_EQ(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1,
                                 (cudaStream_t)s->handle()),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpyBatchAsync(dsts + 1, srcs + 1, sizes + 1, 1, &attr, &idx, 1,
                                 (cudaStream_t)s->handle()),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpyBatchAsync(dsts + 2, srcs + 2, sizes + 2, 1, &attr, &idx, 1,
                                 (cudaStream_t)s->handle()),
            cudaSuccess);
  s->synchronize();
  EXPECT_EQ(firstWrong(h + 8192, 4096, 41), 4096u);
}

// writeValue on one stream releases waitValues on another, with the data ordered before it;
// signals in device memory and in host-visible memory; more waits than one memop batch holds.
TEST_F(CudaBackendTest, WriteWaitBetweenStreams) {
  constexpr size_t kBytes = 16 * kMiB;
  constexpr int kSlots = 600;
  auto host = backend_->allocateHostVisible(2 * kBytes);
  auto data = backend_->allocate(kBytes);
  auto out = backend_->allocate(kBytes);
  auto devSig = backend_->allocate(kSlots * 8);
  auto hostSig = backend_->allocateHostVisible(kSlots * 8);
  auto a = backend_->createStream();
  auto b = backend_->createStream();
  for (Allocation* sig : {devSig.get(), hostSig.get()}) {
    int salt = sig == devSig.get() ? 21 : 22;
    fill(host->ptr(), kBytes, salt);
    std::vector<WaitDesc> waits;
    for (int i = 0; i < kSlots; ++i) waits.push_back({word(*sig, i), (uint64_t)salt * 1000 + i});
    a->waitValues(waits.data(), waits.size());
    CopyDesc take{out->ptr(), data->ptr(), kBytes};
    a->copy(&take, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(a->query()) << "waits passed before any signal";
    CopyDesc put{data->ptr(), host->ptr(), kBytes};
    b->copy(&put, 1);
    for (int i = 0; i < kSlots; ++i) b->writeValue(word(*sig, i), (uint64_t)salt * 1000 + i);
    a->synchronize();
    b->synchronize();
    char* check = (char*)host->ptr() + kBytes;
    CopyDesc d2h{check, out->ptr(), kBytes};
    a->copy(&d2h, 1);
    a->synchronize();
    EXPECT_EQ(firstWrong(check, kBytes, salt), kBytes);
  }
  // A CPU store (the proxy's path) releases a stream wait too.
  WaitDesc w{word(*hostSig, 0), 999999};
  a->waitValues(&w, 1);
  backend_->hostWrite(word(*hostSig, 0), 999999);
  a->synchronize();
}

// A user stream held by a stream-memory wait (as one waiting for a call is) blocks no work on
// rmacc's own streams, however many streams the process has: streams of one priority share a
// hardware queue with every 32nd stream of that priority (H200, driver 580), so rmacc's streams
// take a priority of their own. Before they did, a PyTorch MoE step hung this way. 70 user
// streams (more than two rounds of queues) and the legacy stream, against 40 internal streams
// made after them; the user's rmaccStreamCreate streams must not take rmacc's priority either.
//
// Its premise is a process that owns its GPU context and with it the hardware queues its streams
// map to; under MPS the context is the MPS server's, shared with every client, and the queues
// are not this process's to order (it failed there, issue 50 item 8). So it checks that MPS is
// off and reports a skip with the reason otherwise; bench/gpu_tests.sh runs it before starting
// MPS.
TEST_F(CudaBackendTest, WaitingUserStreamsNeverBlockInternalStreams) {
  const std::string mps = mpsInUse(0);
  if (!mps.empty()) GTEST_SKIP() << "needs a GPU context of its own, but MPS is in use (" << mps << ")";
  constexpr int kUser = 70, kInternal = 40;
  std::vector<cudaStream_t> user(kUser + 1, nullptr);  // the last is the legacy stream
  for (int u = 0; u < kUser; ++u)
    ASSERT_EQ(cudaStreamCreateWithFlags(&user[u], cudaStreamNonBlocking), cudaSuccess);
  auto handedOut = backend_->createUserStream();
  user.push_back((cudaStream_t)handedOut->handle());
  std::vector<std::unique_ptr<Stream>> internal;
  for (int k = 0; k < kInternal; ++k) internal.push_back(backend_->createStream());
  auto flags = backend_->allocateHostVisible((kInternal + 1) * sizeof(uint64_t));
  volatile uint64_t* gate = word(*flags, kInternal);
  *gate = 0;
  for (size_t u = 0; u < user.size(); ++u) {
    Stream* held = backend_->userStream((rmaccStream_t)user[u]);
    ASSERT_NE(held, nullptr);
    const uint64_t round = u + 1;
    WaitDesc w{gate, round};
    held->waitValues(&w, 1);
    for (int k = 0; k < kInternal; ++k) internal[k]->writeValue(word(*flags, k), round);
    std::vector<int> blocked;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int k = 0; k < kInternal; ++k)
      while (*word(*flags, k) != round) {
        if (std::chrono::steady_clock::now() > until) {
          blocked.push_back(k);
          break;
        }
      }
    backend_->hostWrite(gate, round);  // release the user stream whatever happened
    held->synchronize();
    for (auto& s : internal) s->synchronize();
    EXPECT_TRUE(blocked.empty()) << "user stream " << u << " (of " << user.size()
                                 << ") blocked " << blocked.size() << " internal streams, the "
                                 << "first " << blocked[0];
  }
  for (int u = 0; u < kUser; ++u) cudaStreamDestroy(user[u]);
}

// memOps: stores and waits in one call run in order (a store after a wait is held by it), also
// when they take more than one cuStreamBatchMemOp (300 ops: two driver calls).
TEST_F(CudaBackendTest, MemOpsRunInOrder) {
  constexpr int kPairs = 150;
  auto mem = backend_->allocateHostVisible(2 * kPairs * sizeof(uint64_t));
  volatile uint64_t* gate = static_cast<volatile uint64_t*>(mem->ptr());
  volatile uint64_t* out = gate + kPairs;
  memset(mem->ptr(), 0, 2 * kPairs * sizeof(uint64_t));
  auto s = backend_->createStream();
  std::vector<MemOpDesc> ops;
  for (int i = 0; i < kPairs; ++i) {
    ops.push_back({false, out + i, 7});         // runs once the waits before it passed
    ops.push_back({true, gate + i, (uint64_t)1});
  }
  const uint64_t calls = streamCallsOfThisThread();
  s->memOps(ops.data(), ops.size());
  EXPECT_EQ(streamCallsOfThisThread() - calls, 2u);
  for (int i = 0; i < kPairs; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (i + 1 < kPairs) EXPECT_EQ(out[i + 1], 0u) << "store " << i + 1 << " passed the wait before it";
    backend_->hostWrite(gate + i, 1);
  }
  s->synchronize();
  for (int i = 0; i < kPairs; ++i) EXPECT_EQ(out[i], 7u);
}

TEST_F(CudaBackendTest, EventBetweenStreams) {
  constexpr size_t kBytes = 64 * kMiB;
  auto host = backend_->allocateHostVisible(kBytes);
  auto flag = backend_->allocateHostVisible(8);
  auto x = backend_->allocate(kBytes);
  auto y = backend_->allocate(kBytes);
  auto z = backend_->allocate(kBytes);
  fill(host->ptr(), kBytes, 31);
  CopyDesc init{x->ptr(), host->ptr(), kBytes};
  auto a = backend_->createStream();
  auto b = backend_->createStream();
  auto ev = backend_->createEvent();
  a->copy(&init, 1);
  WaitDesc w{word(*flag, 0), 1};
  a->waitValues(&w, 1);  // holds a (and through the event, b) until the CPU says so
  CopyDesc xy{y->ptr(), x->ptr(), kBytes};
  a->copy(&xy, 1);
  a->record(*ev);
  b->waitEvent(*ev);
  CopyDesc yz{z->ptr(), y->ptr(), kBytes};
  b->copy(&yz, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(b->query()) << "b ran ahead of the event";
  backend_->hostWrite(word(*flag, 0), 1);
  b->synchronize();
  memset(host->ptr(), 0, kBytes);
  CopyDesc d2h{host->ptr(), z->ptr(), kBytes};
  b->copy(&d2h, 1);
  b->synchronize();
  EXPECT_EQ(firstWrong(host->ptr(), kBytes, 31), kBytes);
  a->synchronize();
}

TEST_F(CudaBackendTest, SynchronizeTimesOut) {
  auto backend = createCudaBackend(0.5);
  auto flag = backend->allocateHostVisible(8);
  auto s = backend->createStream();
  WaitDesc w{word(*flag, 0), 1};
  s->waitValues(&w, 1);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(codeOf([&] { s->synchronize(); }), rmaccTimeout);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, 10.0);
  backend->hostWrite(word(*flag, 0), 1);  // release it, then the stream is usable again
  s->synchronize();
}

// abort() releases waits that nothing would ever satisfy, in host-visible and device memory,
// on owned and user streams; afterwards calls fail with rmaccRemoteError.
TEST_F(CudaBackendTest, AbortReleasesWaits) {
  auto flag = backend_->allocateHostVisible(8);
  auto devSig = backend_->allocate(16);
  auto a = backend_->createStream();
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
  Stream* b = backend_->userStream(user);
  ASSERT_NE(b, nullptr);
  WaitDesc wa[2] = {{word(*flag, 0), 3}, {word(*flag, 0), 5}};
  a->waitValues(wa, 2);
  WaitDesc wb{word(*devSig, 1), 7};
  b->waitValues(&wb, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(a->query());
  EXPECT_FALSE(b->query());
  backend_->abort();
  EXPECT_TRUE(drains(*a, 10)) << "host-memory wait not released";
  EXPECT_TRUE(drains(*b, 10)) << "device-memory wait not released";
  EXPECT_EQ(*word(*flag, 0), 5u);
  EXPECT_EQ(codeOf([&] { a->synchronize(); }), rmaccRemoteError);
  EXPECT_EQ(codeOf([&] { b->query(); }), rmaccRemoteError);
  CopyDesc c{devSig->ptr(), flag->ptr(), 8};
  EXPECT_EQ(codeOf([&] { a->copy(&c, 1); }), rmaccRemoteError);
  EXPECT_EQ(codeOf([&] { a->waitValues(wa, 1); }), rmaccRemoteError);
  EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

TEST_F(CudaBackendTest, UserStreams) {
  cudaStream_t user = nullptr;
  ASSERT_EQ(cudaStreamCreate(&user), cudaSuccess);
  Stream* s = backend_->userStream(user);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s, backend_->userStream(user));
  EXPECT_EQ(s->handle(), (void*)user);
  Stream* legacy = backend_->userStream(nullptr);
  ASSERT_NE(legacy, nullptr);
  EXPECT_EQ(legacy->handle(), nullptr);
  EXPECT_NE(backend_->userStream(cudaStreamPerThread), nullptr);
  auto owned = backend_->createStream();
  EXPECT_NE(owned->handle(), nullptr);
  auto flag = backend_->allocateHostVisible(8);
  s->writeValue(word(*flag, 0), 42);
  s->synchronize();
  EXPECT_EQ(*word(*flag, 0), 42u);
  legacy->writeValue(word(*flag, 0), 43);
  legacy->synchronize();
  EXPECT_EQ(*word(*flag, 0), 43u);
  EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

TEST_F(CudaBackendTest, MemoryKinds) {
  auto dev = backend_->allocate(kMiB);
  auto zero = backend_->allocate(0);
  auto zero2 = backend_->allocate(0);
  auto host = backend_->allocateHostVisible(64);
  EXPECT_NE(zero->ptr(), nullptr);
  EXPECT_NE(zero->ptr(), zero2->ptr());
  EXPECT_EQ(zero->size(), 0u);
  EXPECT_FALSE(zero->exportHandle().empty());
  std::vector<char> plain(64);
  EXPECT_TRUE(backend_->isHostMemory(plain.data()));
  EXPECT_TRUE(backend_->isHostMemory(host->ptr()));
  EXPECT_FALSE(backend_->isHostMemory(dev->ptr()));
  void* raw = nullptr;
  ASSERT_EQ(cudaMalloc(&raw, 64), cudaSuccess);
  EXPECT_FALSE(backend_->isHostMemory(raw));
  cudaFree(raw);
  ASSERT_EQ(cudaMallocManaged(&raw, 64), cudaSuccess);
  EXPECT_FALSE(backend_->isHostMemory(raw));
  cudaFree(raw);
  // New device memory is zeroed, like the host backend's.
  auto s = backend_->createStream();
  CopyDesc c{host->ptr(), dev->ptr(), 64};
  memset(host->ptr(), 0xff, 64);
  s->copy(&c, 1);
  s->synchronize();
  EXPECT_EQ(*word(*host, 0), 0u);
  EXPECT_EQ(codeOf([&] { backend_->import(ExportHandle{1, 2, 3}); }), rmaccInvalidArgument);
  EXPECT_EQ(codeOf([&] { host->exportHandle(); }), rmaccInvalidUsage);
}

}  // namespace
}  // namespace rmacc

#endif  // RMACC_HAVE_CUDA
