// AlltoAllV and put/signal on GPUs through the public API (run on a GPU machine; skipped
// without one): the CE path inside a node, the proxy path between emulated nodes (pinned
// bounce buffers, no GPU-direct provider needed), and the relay path, with device buffers.
#include <gtest/gtest.h>

#ifdef RMACC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/multiprocess.h"
#include "support/test_kernels.h"

namespace rmacc::test {
namespace {

// Asked in a child: the ranks fork from this process, which must not initialise CUDA.
int gpuCount() {
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define RMACC_OK(call, comm) ASSERT_EQ((call), rmaccSuccess) << #call << ": " << rmaccGetLastError(comm)

struct Shape {
  int nodes, local;
};

// `nodeOf` (optional) places the ranks instead of `shape`: nodes of different sizes.
// `env`: more variables for the ranks.
void runGpuAlltoallv(Shape shape, int calls, int nGpu, std::vector<int> nodeOf = {},
                     std::vector<std::pair<std::string, std::string>> env = {}) {
  if (nodeOf.empty()) nodeOf = scatteredNodes(shape.nodes, shape.local);
  const int n = (int)nodeOf.size();
  RunOptions o;
  o.nodeOf = nodeOf;
  o.timeoutS = 600;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_RELAY_BYTES", "4M"}, {"RMACC_RELAY_SLOTS", "2"}};
  for (auto& e : env) o.env.push_back(e);
  runRanks(n, o, [&](const RankContext& ctx) {
    CUDA_OK(cudaSetDevice(ctx.rank % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, ctx.rank), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int call = 0; call < calls; ++call) {
      Pattern p = call % 2 ? Pattern::kZipf : Pattern::kRandom;
      rmaccDataType_t type = call % 2 ? rmaccBfloat16 : rmaccFloat32;
      size_t esize = rmaccTypeSize(type);
      uint64_t seed = 100 + call;
      auto counts = makeCounts(p, n, (call % 10 == 9 ? (1 << 20) : 4000) / esize, seed);
      Layout l = makeLayout(counts, n, ctx.rank, seed);
      std::vector<uint8_t> hsend(l.sendElems * esize + 1), hrecv(l.recvElems * esize + 1, kPoison);
      fillSend(hsend.data(), l, esize, ctx.rank, seed);
      void *dsend, *drecv, *segment = nullptr;
      // rmaccMemAlloc; cudaMalloc'd buffers of their own; or, as PyTorch's caching allocator
      // hands them out, both inside one larger cudaMalloc segment at odd offsets. The last
      // two are mapped by peers through CUDA IPC (a fresh allocation every call: the handle
      // cache must tell a new allocation at a freed one's address from the old).
      int kind = call % 3;
      bool registered = kind == 0;
      if (registered) {
        RMACC_OK(rmaccMemAlloc(comm, &dsend, hsend.size()), comm);
        RMACC_OK(rmaccMemAlloc(comm, &drecv, hrecv.size()), comm);
      } else if (kind == 1) {
        CUDA_OK(cudaMalloc(&dsend, hsend.size()));
        CUDA_OK(cudaMalloc(&drecv, hrecv.size()));
      } else {
        CUDA_OK(cudaMalloc(&segment, hsend.size() + hrecv.size() + 4096));
        dsend = (char*)segment + 512;
        drecv = (char*)segment + 1024 + hsend.size();
      }
      CUDA_OK(cudaMemcpy(dsend, hsend.data(), hsend.size(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(drecv, hrecv.data(), hrecv.size(), cudaMemcpyHostToDevice));
      // cudaMemcpy from pageable memory may return before its DMA is done, and `stream` is
      // non-blocking (not ordered after the legacy stream): wait for the fills.
      CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
      RMACC_OK(rmaccAlltoAllv(dsend, l.sendcounts.data(), l.sdispls.data(), drecv,
                              l.recvcounts.data(), l.rdispls.data(), type, comm, stream), comm);
      RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
      CUDA_OK(cudaMemcpy(hrecv.data(), drecv, hrecv.size(), cudaMemcpyDeviceToHost));
      std::string first;
      ASSERT_EQ(checkRecv(hrecv.data(), l, esize, ctx.rank, seed, &first), 0u)
          << "call " << call << " rank " << ctx.rank << ": " << first;
      if (registered) {
        rmaccMemFree(comm, dsend);
        rmaccMemFree(comm, drecv);
      } else if (segment) {
        cudaFree(segment);
      } else {
        cudaFree(dsend);
        cudaFree(drecv);
      }
    }
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

// Fresh cudaMalloc'd buffers every call, far more of them than the peer-mapping cache holds:
// the cache is trimmed between calls without stalling anyone (an eviction while a call was in
// flight once stalled every rank), and stale mappings are never written.
TEST(GpuAlltoallvCache, FreshBuffersEveryCall) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  RunOptions o;
  o.nodeOf = scatteredNodes(1, 2);
  o.timeoutS = 300;
  runRanks(2, o, [&](const RankContext& ctx) {
    CUDA_OK(cudaSetDevice(ctx.rank % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, 2, ctx.id, ctx.rank), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int call = 0; call < 700; ++call) {
      std::vector<int32_t> hsend(2 * 256), hrecv(2 * 256, -1);
      for (size_t i = 0; i < hsend.size(); ++i) hsend[i] = ctx.rank * 1000000 + call * 1000 + (int)i;
      void *dsend, *drecv;
      CUDA_OK(cudaMalloc(&dsend, hsend.size() * 4));
      CUDA_OK(cudaMalloc(&drecv, hrecv.size() * 4));
      CUDA_OK(cudaMemcpy(dsend, hsend.data(), hsend.size() * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
      RMACC_OK(rmaccAlltoAll(dsend, drecv, 256, rmaccInt32, comm, stream), comm);
      RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
      CUDA_OK(cudaMemcpy(hrecv.data(), drecv, hrecv.size() * 4, cudaMemcpyDeviceToHost));
      for (int p = 0; p < 2; ++p)
        for (int i = 0; i < 256; ++i)
          ASSERT_EQ(hrecv[p * 256 + i], p * 1000000 + call * 1000 + ctx.rank * 256 + i)
              << "call " << call << " from rank " << p;
      cudaFree(dsend);
      cudaFree(drecv);
    }
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

// rmaccAlltoAllvDynamic with counts in device memory, written by a copy on the same stream just
// before each call (the call must read them when the stream gets there, not when it is made):
// blocks packed in source-rank order, recvcounts/rdispls written back in device memory, then an
// overflow that fails both ranks and writes nothing.
TEST(GpuAlltoallvDynamic, DeviceCountsReadInStreamOrder) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  RunOptions o;
  o.nodeOf = scatteredNodes(1, 2);
  o.timeoutS = 300;
  o.env = {{"RMACC_TIMEOUT_S", "60"}};
  runRanks(2, o, [&](const RankContext& ctx) {
    const int n = 2, me = ctx.rank;
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    constexpr size_t kCap = 4096;
    size_t *dcounts, *ddispls, *drc, *drd;
    int32_t *dsend, *drecv;
    CUDA_OK(cudaMalloc((void**)&dcounts, 4 * n * sizeof(size_t)));
    ddispls = dcounts + n, drc = dcounts + 2 * n, drd = dcounts + 3 * n;
    CUDA_OK(cudaMalloc((void**)&dsend, kCap * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void**)&drecv, kCap * sizeof(int32_t)));
    std::vector<size_t> counts(2 * n);  // the host side of each call's counts copy
    for (int call = 0; call < 12; ++call) {
      // Counts from i to j this call; the last call overflows rank 1's capacity.
      auto sends = [&](int i, int j) -> size_t { return call == 11 ? 1500 : (size_t)((i * 7 + j * 3 + call * 5) % 9) * 50; };
      std::vector<size_t> h(2 * n);
      std::vector<int32_t> hsend(kCap, 0);
      size_t off = 0;
      for (int j = 0; j < n; ++j) {
        h[j] = sends(me, j), h[n + j] = off;
        for (size_t k = 0; k < h[j]; ++k) hsend[off + k] = me * 100000 + j * 10000 + call * 100 + (int)k;
        off += h[j];
      }
      std::vector<int32_t> poison(kCap, -9);
      CUDA_OK(cudaMemcpy(dsend, hsend.data(), kCap * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(drecv, poison.data(), kCap * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(dcounts, 0xff, 2 * n * sizeof(size_t)));  // garbage until the stream writes
      CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
      counts = h;
      CUDA_OK(cudaMemcpyAsync(dcounts, counts.data(), 2 * n * sizeof(size_t), cudaMemcpyHostToDevice, stream));
      size_t cap = call == 11 && me == 1 ? 2999 : kCap;
      RMACC_OK(rmaccAlltoAllvDynamic(dsend, dcounts, ddispls, drecv, cap, drc, drd, rmaccInt32, comm,
                                     stream), comm);
      rmaccResult_t r = rmaccStreamSynchronize(comm, stream);
      std::vector<size_t> rc(2 * n);
      std::vector<int32_t> hrecv(kCap);
      CUDA_OK(cudaMemcpy(rc.data(), drc, 2 * n * sizeof(size_t), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(hrecv.data(), drecv, kCap * 4, cudaMemcpyDeviceToHost));
      size_t at = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(rc[i], sends(i, me)) << "call " << call << " recvcounts from " << i;
        ASSERT_EQ(rc[n + i], at) << "call " << call << " rdispls from " << i;
        at += rc[i];
      }
      if (call == 11) {
        EXPECT_EQ(r, rmaccInvalidUsage) << rmaccGetLastError(comm);
        for (size_t k = 0; k < kCap; ++k) ASSERT_EQ(hrecv[k], -9) << "a failed call wrote element " << k;
        continue;
      }
      ASSERT_EQ(r, rmaccSuccess) << rmaccGetLastError(comm);
      for (int i = 0; i < n; ++i)
        for (size_t k = 0; k < rc[i]; ++k)
          ASSERT_EQ(hrecv[rc[n + i] + k], i * 100000 + me * 10000 + call * 100 + (int)k)
              << "call " << call << " from " << i << " element " << k;
    }
    cudaFree(dcounts);
    cudaFree(dsend);
    cudaFree(drecv);
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

class GpuAlltoallv : public testing::TestWithParam<Shape> {};

TEST_P(GpuAlltoallv, HundredCallsByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  runGpuAlltoallv(GetParam(), 100, nGpu);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuAlltoallv,
                         testing::Values(Shape{1, 2}, Shape{2, 1}, Shape{2, 2}),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return std::to_string(i.param.nodes) + "x" + std::to_string(i.param.local);
                         });

// Both ways of copying within a GPU: `direct` (the driver's copy, an SM kernel) and `engines`
// with slots of 64 KiB, so that the 1 MiB blocks of every tenth call go through the pipelined
// route lanes in many chunks and the small blocks through the caller's stream; with ranks on
// one GPU (MPS) engines takes the pinned host route only (the next rank is on the same GPU).
class GpuLocalCopy : public testing::TestWithParam<const char*> {};

TEST_P(GpuLocalCopy, ThirtyCallsByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  runGpuAlltoallv({1, 2}, 30, nGpu, {},
                  {{"RMACC_LOCAL_COPY", GetParam()}, {"RMACC_LOCAL_COPY_SLOT", "64K"}});
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuLocalCopy, testing::Values("direct", "engines"),
                         [](const testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// Nodes of different sizes (2 + 1 and 1 + 3 ranks): a relay serving two writers, and ranks no
// writer of the smaller node reaches (tests/alltoallv_unequal_test.cc on the host backend).
TEST(GpuAlltoallvUnequal, HundredCallsByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  runGpuAlltoallv({}, 100, nGpu, {0, 1, 0});
  runGpuAlltoallv({}, 100, nGpu, {1, 0, 0, 0});
}

// Right after a call returns, the caller makes CUDA calls that wait for the device and, while
// they wait, hold back other threads' copies: on the legacy stream (PyTorch's default stream),
// a copy to pageable memory and its synchronisation (PyTorch's .tolist()), a synchronous
// cudaMemcpy to pageable memory, cudaFree. The call's device work must be enqueued by then
// (RMACC_ENQUEUE_WAIT_MS); it once was left to the progress thread, whose copies these calls
// kept out while the device waited for them: examples/moe_dispatch.py hung on an H200
// (bench/RESULTS.md §13).
TEST(GpuAlltoallvCallerThread, BlockingCudaCallsRightAfterACall) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  RunOptions o;
  o.nodeOf = scatteredNodes(1, 2);
  o.timeoutS = 120;
  runRanks(2, o, [&](const RankContext& ctx) {
    CUDA_OK(cudaSetDevice(ctx.rank % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, 2, ctx.id, ctx.rank), nullptr);
    const rmaccStream_t legacy = nullptr;
    const size_t count = 1 << 16;  // int32 per peer
    std::vector<int32_t> hsend(2 * count), hrecv(2 * count);
    void *dsend, *drecv;
    CUDA_OK(cudaMalloc(&dsend, hsend.size() * 4));
    CUDA_OK(cudaMalloc(&drecv, hrecv.size() * 4));
    for (int call = 0; call < 60; ++call) {
      for (size_t i = 0; i < hsend.size(); ++i)
        hsend[i] = ctx.rank * 100000000 + call * 1000000 + (int)i;
      CUDA_OK(cudaMemcpy(dsend, hsend.data(), hsend.size() * 4, cudaMemcpyHostToDevice));
      void* scratch = nullptr;
      CUDA_OK(cudaMalloc(&scratch, 1 << 20));
      RMACC_OK(rmaccAlltoAll(dsend, drecv, count, rmaccInt32, comm, legacy), comm);
      switch (call % 3) {
        case 0:
          CUDA_OK(cudaMemcpyAsync(hrecv.data(), drecv, hrecv.size() * 4, cudaMemcpyDeviceToHost, 0));
          CUDA_OK(cudaStreamSynchronize(0));
          break;
        case 1:
          CUDA_OK(cudaMemcpy(hrecv.data(), drecv, hrecv.size() * 4, cudaMemcpyDeviceToHost));
          break;
        default:
          CUDA_OK(cudaFree(scratch));
          scratch = nullptr;
          CUDA_OK(cudaMemcpy(hrecv.data(), drecv, hrecv.size() * 4, cudaMemcpyDeviceToHost));
      }
      RMACC_OK(rmaccStreamSynchronize(comm, legacy), comm);
      if (scratch) CUDA_OK(cudaFree(scratch));
      for (int p = 0; p < 2; ++p)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(hrecv[p * count + i], p * 100000000 + call * 1000000 + (int)(ctx.rank * count + i))
              << "call " << call << " from rank " << p;
    }
    cudaFree(dsend);
    cudaFree(drecv);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

// put/signal/wait from device memory: into device windows inside a node (CE); across
// emulated nodes (proxy, bounce-staged source) into a pinned host window (the network writes
// it) and into device windows, rmaccMemAlloc'd and cudaMalloc'd (no GPU-direct provider: the
// chunks land in the target's pinned landing slots and its proxy copies them in, H2D).
enum class WindowKind { kLibrary, kPinnedHost, kCudaMalloc };

TEST(GpuRma, PutSignalWait) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  const std::pair<Shape, WindowKind> cases[] = {{Shape{1, 2}, WindowKind::kLibrary},
                                                {Shape{2, 1}, WindowKind::kPinnedHost},
                                                {Shape{2, 1}, WindowKind::kLibrary},
                                                {Shape{2, 1}, WindowKind::kCudaMalloc}};
  for (auto [shape, kind] : cases) {
    SCOPED_TRACE(testing::Message() << shape.nodes << "x" << shape.local << " window kind " << (int)kind);
    RunOptions o;
    o.nodeOf = blockNodes(shape.nodes, shape.local);
    o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"}};
    runRanks(2, o, [&](const RankContext& ctx) {
      CUDA_OK(cudaSetDevice(ctx.rank % nGpu));
      rmaccComm_t comm = nullptr;
      RMACC_OK(rmaccCommInitRank(&comm, 2, ctx.id, ctx.rank), nullptr);
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreate(&stream));
      const size_t bytes = 32 << 20;
      void* win = nullptr;
      if (kind == WindowKind::kLibrary) RMACC_OK(rmaccMemAlloc(comm, &win, bytes), comm);
      else if (kind == WindowKind::kCudaMalloc) CUDA_OK(cudaMalloc(&win, bytes));
      else CUDA_OK(cudaHostAlloc(&win, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
      rmaccWindow_t handle;
      RMACC_OK(rmaccCommWindowRegister(comm, win, bytes, &handle), comm);
      void* src;
      CUDA_OK(cudaMalloc(&src, bytes));
      std::vector<uint8_t> h(bytes);
      for (int round = 0; round < 26; ++round) {  // 1 B to 32 MiB
        size_t size = (size_t)1 << (round % 26), off = (round * 4099) % (bytes - size + 1);
        for (size_t i = 0; i < size; ++i) h[i] = patternByte(ctx.rank, 1 - ctx.rank, i, round);
        CUDA_OK(cudaMemcpy(src, h.data(), size, cudaMemcpyHostToDevice));
        RMACC_OK(rmaccPutSignal(src, size, rmaccUint8, 1 - ctx.rank, handle, off, 0, 0, 0, comm, stream), comm);
        rmaccWaitSignalDesc_t d{1, 1 - ctx.rank, 0, 0};
        RMACC_OK(rmaccWaitSignal(1, &d, comm, stream), comm);
        RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
        std::vector<uint8_t> got(size);
        CUDA_OK(cudaMemcpy(got.data(), (char*)win + off, size, cudaMemcpyDefault));
        for (size_t i = 0; i < size; ++i)
          ASSERT_EQ(got[i], patternByte(1 - ctx.rank, ctx.rank, i, round)) << "round " << round << " byte " << i;
        RMACC_OK(rmaccBarrier(comm, stream), comm);
        RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
      }
      RMACC_OK(rmaccCommWindowDeregister(comm, handle), comm);
      if (kind == WindowKind::kLibrary) RMACC_OK(rmaccMemFree(comm, win), comm);
      RMACC_OK(rmaccCommDestroy(comm), nullptr);
      CUDA_OK(cudaFree(src));
      if (kind == WindowKind::kCudaMalloc) CUDA_OK(cudaFree(win));
      if (kind == WindowKind::kPinnedHost) CUDA_OK(cudaFreeHost(win));
    });
  }
}

// --- CUDA graph capture (coll/captured_calls.h) ---

// No node of `graph` runs on the SMs: rmacc records memory operations, copies and host
// functions only. Asked through the driver: the runtime's cudaGraphNodeGetType fails with
// cudaErrorUnknown on a batch memory-op node, which it has no type for (H200, CUDA 13.0).
void expectNoKernelNodes(cudaGraph_t graph) {
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuGraphNodeGetType", &fn, cudaEnableDefault, &found), cudaSuccess);
  ASSERT_TRUE(fn != nullptr && found == cudaDriverEntryPointSuccess);
  auto nodeType = reinterpret_cast<CUresult (*)(CUgraphNode, CUgraphNodeType*)>(fn);
  for (cudaGraphNode_t node : nodes) {
    CUgraphNodeType type;
    ASSERT_EQ(nodeType(node, &type), CUDA_SUCCESS);
    EXPECT_NE(type, CU_GRAPH_NODE_TYPE_KERNEL) << "a captured rmacc call holds a kernel node";
  }
  EXPECT_GT(count, 0u);
}

// RMACC_TEST_STACKS_AFTER_S: a rank still running after that long writes every thread's stack to
// stderr (no gdb on the device; bench/capture_diag.sh resolves the addresses).
void printOwnStack(int) {
  void* frames[32];
  char head[64];
  int len = snprintf(head, sizeof head, "== stack of thread %ld\n", (long)syscall(SYS_gettid));
  (void)!write(2, head, len);
  backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
}
void stacksAfterTimeout() {
  const char* after = getenv("RMACC_TEST_STACKS_AFTER_S");
  if (!after) return;
  signal(SIGUSR2, printOwnStack);
  std::thread([s = atoi(after)] {
    sleep(s);
    DIR* d = opendir("/proc/self/task");
    while (dirent* e = d ? readdir(d) : nullptr) {
      if (e->d_name[0] == '.') continue;
      syscall(SYS_tgkill, getpid(), atoi(e->d_name), SIGUSR2);
      usleep(200000);
    }
    if (d) closedir(d);
  }).detach();
}

// rmaccAlltoAllvDynamic captured once (global capture mode, as torch.cuda.graph captures) and
// replayed 100 times, `window` replays launched before each synchronisation (1 or 8); before each
// replay a kernel on the stream writes new counts and data, after it the stream copies the
// outputs to pinned history. Every replay is then checked byte for byte, recvcounts and rdispls
// too. More replays pending hang in the driver (README, CUDA graphs: cudaGraphLaunch waits
// holding a lock the progress thread's copies need; bench/RESULTS.md §14.3).
using CaptureCase = std::tuple<Shape, int /*window*/>;
class GpuCapture : public testing::TestWithParam<CaptureCase> {};

TEST_P(GpuCapture, DynamicGraphReplayedHundredTimes) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  const Shape shape = std::get<0>(GetParam());
  // RMACC_TEST_WINDOW overrides the window of 8 (bench/capture_diag.sh looks for where it hangs).
  const int window = std::get<1>(GetParam()) > 1 && getenv("RMACC_TEST_WINDOW")
                         ? atoi(getenv("RMACC_TEST_WINDOW")) : std::get<1>(GetParam());
  const int n = shape.nodes * shape.local;
  RunOptions o;
  o.nodeOf = scatteredNodes(shape.nodes, shape.local);
  o.timeoutS = 150;
  // Eager module loading: under lazy loading a rank's first launch of the fill kernel waits for
  // the GPU to go idle, which under MPS includes the other rank's replay waiting for this one
  // (both ranks hung at the first replay on an H200; the library warns about lazy loading).
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "60"}, {"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"},
           {"CUDA_MODULE_LOADING", "EAGER"}};
  runRanks(n, o, [&](const RankContext& ctx) {
    const int me = ctx.rank;
    stacksAfterTimeout();
    // Fewer under compute-sanitizer (bench/gpu.sh capsan), where a replay takes ~100x longer.
    const int kReplays = getenv("RMACC_TEST_REPLAYS") ? atoi(getenv("RMACC_TEST_REPLAYS")) : 100;
    const size_t cap = 400 * (size_t)n;
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    size_t* dcounts;  // sendcounts, sdispls, recvcounts, rdispls
    int32_t *dsend, *drecv;
    CUDA_OK(cudaMalloc((void**)&dcounts, 4 * n * sizeof(size_t)));
    CUDA_OK(cudaMalloc((void**)&dsend, cap * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void**)&drecv, cap * sizeof(int32_t)));
    size_t *sc = dcounts, *sd = dcounts + n, *rc = dcounts + 2 * n, *rd = dcounts + 3 * n;
    int32_t* hrecv;
    size_t* hcounts;
    CUDA_OK(cudaMallocHost((void**)&hrecv, kReplays * cap * sizeof(int32_t)));
    CUDA_OK(cudaMallocHost((void**)&hcounts, kReplays * 2 * n * sizeof(size_t)));

    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmaccResult_t r = rmaccAlltoAllvDynamic(dsend, sc, sd, drecv, cap, rc, rd, rmaccInt32, comm, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    RMACC_OK(r, comm);
    ASSERT_NO_FATAL_FAILURE(expectNoKernelNodes(graph));
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < kReplays; ++rep) {
      CUDA_OK(cudaMemsetAsync(drecv, 0xff, cap * sizeof(int32_t), stream));
      launchReplayFill(stream, n, me, rep, sc, sd, dsend);
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaMemcpyAsync(hrecv + rep * cap, drecv, cap * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaMemcpyAsync(hcounts + rep * 2 * n, rc, 2 * n * sizeof(size_t), cudaMemcpyDeviceToHost, stream));
      if ((rep + 1) % window == 0) RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    }
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    for (int rep = 0; rep < kReplays; ++rep) {
      const size_t* got = hcounts + rep * 2 * n;
      const int32_t* data = hrecv + rep * cap;
      size_t at = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], replayCount(i, me, rep)) << "replay " << rep << " recvcounts from " << i;
        ASSERT_EQ(got[n + i], at) << "replay " << rep << " rdispls from " << i;
        for (size_t k = 0; k < got[i]; ++k)
          ASSERT_EQ(data[at + k], replayValue(i, me, k, rep)) << "replay " << rep << " from " << i << " element " << k;
        at += got[i];
      }
      for (size_t k = at; k < cap; ++k) ASSERT_EQ(data[k], -1) << "replay " << rep << ": written past the blocks";
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    cudaFreeHost(hrecv);
    cudaFreeHost(hcounts);
    cudaFree(dcounts);
    cudaFree(dsend);
    cudaFree(drecv);
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuCapture,
                         testing::Combine(testing::Values(Shape{1, 1}, Shape{1, 2}, Shape{2, 1}, Shape{2, 2}),
                                          testing::Values(1, 8)),
                         [](const testing::TestParamInfo<CaptureCase>& i) {
                           const Shape s = std::get<0>(i.param);
                           return std::to_string(s.nodes) + "x" + std::to_string(s.local) + "_window" +
                                  std::to_string(std::get<1>(i.param));
                         });

// rmaccAlltoAll with fixed counts captured once (global mode) and replayed back to back,
// `window` replays launched per synchronisation (100: all of them, which hangs a call whose work
// is enqueued at replay; bench/RESULTS.md §14.3). On one node the graph holds the whole call
// (coll/in_graph_calls.h); across nodes a replay is enqueued by the progress thread, so those
// shapes keep to a window of 8. Before each replay the stream sets every send block to a byte of
// (rank, destination, replay); after it the stream copies the receive buffer to pinned history.
// 1600-byte and 4 MiB blocks (the block to itself then goes through pinned slots in 4 chunks).
using FixedCase = std::tuple<Shape, size_t /*count*/, int /*window*/>;
class GpuFixedGraph : public testing::TestWithParam<FixedCase> {};

TEST_P(GpuFixedGraph, ReplayedBackToBackByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  const auto [shape, count, window] = GetParam();
  const int n = shape.nodes * shape.local;
  RunOptions o;
  o.nodeOf = scatteredNodes(shape.nodes, shape.local);
  o.timeoutS = 150;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "60"}, {"CUDA_MODULE_LOADING", "EAGER"}};
  runRanks(n, o, [&](const RankContext& ctx) {
    const int me = ctx.rank;
    stacksAfterTimeout();
    const int kReplays = getenv("RMACC_TEST_REPLAYS") ? atoi(getenv("RMACC_TEST_REPLAYS")) : count > 400 ? 20 : 100;
    const size_t bytes = count * sizeof(int32_t);
    auto byteOf = [](int from, int to, int rep) { return (uint8_t)((from * 31 + to * 7 + rep * 13 + 1) & 0xff); };
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t *dsend, *drecv, *hist;
    CUDA_OK(cudaMalloc((void**)&dsend, n * bytes));
    CUDA_OK(cudaMalloc((void**)&drecv, n * bytes));
    CUDA_OK(cudaMallocHost((void**)&hist, (size_t)kReplays * n * bytes));
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmaccResult_t r = rmaccAlltoAll(dsend, drecv, count, rmaccInt32, comm, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    RMACC_OK(r, comm);
    ASSERT_NO_FATAL_FAILURE(expectNoKernelNodes(graph));
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < kReplays; ++rep) {
      for (int j = 0; j < n; ++j) CUDA_OK(cudaMemsetAsync(dsend + j * bytes, byteOf(me, j, rep), bytes, stream));
      CUDA_OK(cudaMemsetAsync(drecv, 0xee, n * bytes, stream));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaMemcpyAsync(hist + (size_t)rep * n * bytes, drecv, n * bytes, cudaMemcpyDeviceToHost, stream));
      if ((rep + 1) % window == 0) RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    }
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me == 0) printf("[ info ] %d replays of %zu-byte blocks in %.3f s\n", kReplays, bytes, s);
    for (int rep = 0; rep < kReplays; ++rep)
      for (int i = 0; i < n; ++i) {
        const uint8_t* blk = hist + ((size_t)rep * n + i) * bytes;
        const uint8_t want = byteOf(i, me, rep);
        size_t k = 0;
        while (k < bytes && blk[k] == want) ++k;
        ASSERT_EQ(k, bytes) << "replay " << rep << " from " << i << ": byte " << k << " is " << (int)blk[k]
                            << ", expected " << (int)want;
      }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    cudaFreeHost(hist);
    cudaFree(dsend);
    cudaFree(drecv);
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuFixedGraph,
    testing::Values(FixedCase{Shape{1, 1}, 400, 100}, FixedCase{Shape{1, 1}, 1 << 20, 20},
                    FixedCase{Shape{1, 2}, 400, 100}, FixedCase{Shape{1, 2}, 1 << 20, 20},
                    FixedCase{Shape{1, 2}, 400, 1}, FixedCase{Shape{2, 1}, 400, 8},
                    FixedCase{Shape{2, 2}, 400, 8}),
    [](const testing::TestParamInfo<FixedCase>& i) {
      const Shape s = std::get<0>(i.param);
      return std::to_string(s.nodes) + "x" + std::to_string(s.local) + "_" + std::to_string(std::get<1>(i.param) * 4) +
             "B_window" + std::to_string(std::get<2>(i.param));
    });

// rmaccAlltoAll captured (fixed counts, data a kernel writes before each replay), replays
// interleaved with uncaptured calls on the same stream, a captured call with a bad argument
// (refused at capture on every rank, nothing written), and puts refused under capture.
TEST(GpuCaptureMixed, ReplaysBesideUncapturedCallsAndRefusals) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  RunOptions o;
  o.nodeOf = blockNodes(1, 2);
  o.timeoutS = 150;
  o.env = {{"RMACC_TIMEOUT_S", "60"}, {"CUDA_MODULE_LOADING", "EAGER"}};  // as GpuCapture
  runRanks(2, o, [&](const RankContext& ctx) {
    const int n = 2, me = ctx.rank;
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    constexpr size_t kCount = 400;  // replayCount's largest block
    size_t* dcounts;
    int32_t *dsend, *drecv, *dsend2, *drecv2;
    CUDA_OK(cudaMalloc((void**)&dcounts, 2 * n * sizeof(size_t)));
    CUDA_OK(cudaMalloc((void**)&dsend, n * kCount * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void**)&drecv, n * kCount * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void**)&dsend2, n * kCount * sizeof(int32_t)));
    CUDA_OK(cudaMalloc((void**)&drecv2, n * kCount * sizeof(int32_t)));
    // Put/signal under capture: refused, and the capture survives the refusal.
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    EXPECT_EQ(rmaccSignal(1 - me, 0, 0, 0, comm, stream), rmaccInvalidUsage);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_OK(cudaStreamIsCapturing(stream, &status));
    EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "the refused call invalidated the capture";
    // The AlltoAll: block j of dsend goes to rank j. Its replays read what the kernel wrote.
    RMACC_OK(rmaccAlltoAll(dsend, drecv, kCount, rmaccInt32, comm, stream), comm);
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    ASSERT_NO_FATAL_FAILURE(expectNoKernelNodes(graph));
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<int32_t> host(n * kCount), host2(n * kCount);
    for (int rep = 0; rep < 30; ++rep) {
      // Fills block j with replayValue(me, j, k, rep) for k below replayCount(me, j, rep): the
      // AlltoAll moves whole kCount blocks, so only that prefix is compared.
      for (int j = 0; j < n; ++j)
        launchReplayFill(stream, 1, me, rep, dcounts, dcounts + n, dsend + j * kCount);
      CUDA_OK(cudaGraphLaunch(exec, stream));
      // An uncaptured call right behind the replay, on the same stream.
      std::vector<int32_t> h2(n * kCount);
      for (size_t k = 0; k < h2.size(); ++k) h2[k] = me * 777777 + rep * 1000 + (int)k;
      CUDA_OK(cudaMemcpyAsync(dsend2, h2.data(), h2.size() * 4, cudaMemcpyHostToDevice, stream));
      RMACC_OK(rmaccAlltoAll(dsend2, drecv2, kCount, rmaccInt32, comm, stream), comm);
      RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
      CUDA_OK(cudaMemcpy(host.data(), drecv, host.size() * 4, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(host2.data(), drecv2, host2.size() * 4, cudaMemcpyDeviceToHost));
      for (int i = 0; i < n; ++i) {
        // Rank i's kernel wrote its block for `me` as destination 0 of a 1-rank fill.
        for (size_t k = 0; k < replayCount(i, 0, rep); ++k)
          ASSERT_EQ(host[i * kCount + k], replayValue(i, 0, k, rep)) << "replay " << rep << " from " << i;
        for (size_t k = 0; k < kCount; ++k)
          ASSERT_EQ(host2[i * kCount + k], i * 777777 + rep * 1000 + (int)(me * kCount + k))
              << "uncaptured call after replay " << rep << " from " << i;
      }
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));

    // A bad argument on rank 0 at capture: rank 0's call says so (rmaccInvalidArgument). The
    // call is one the graph would hold whole (coll/in_graph_calls.h), so rank 1's capture fails
    // too (rmaccInvalidUsage); nothing is recorded, and the replays write nothing.
    std::vector<int32_t> poison(n * kCount, -5);
    CUDA_OK(cudaMemcpy(drecv, poison.data(), poison.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmaccResult_t r = rmaccAlltoAll(me == 0 ? nullptr : dsend, drecv, kCount, rmaccInt32, comm, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    EXPECT_EQ(r, me == 0 ? rmaccInvalidArgument : rmaccInvalidUsage) << rmaccGetLastError(comm);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    CUDA_OK(cudaMemcpy(host.data(), drecv, host.size() * 4, cudaMemcpyDeviceToHost));
    for (int32_t v : host) ASSERT_EQ(v, -5) << "a failed replay wrote";
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    // Still usable.
    RMACC_OK(rmaccAlltoAll(dsend2, drecv2, kCount, rmaccInt32, comm, stream), comm);
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    for (int32_t* p : {dsend, drecv, dsend2, drecv2}) cudaFree(p);
    cudaFree(dcounts);
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

}  // namespace
}  // namespace rmacc::test
#endif  // RMACC_HAVE_CUDA
