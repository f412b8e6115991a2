// AlltoAllV and put/signal on GPUs through the public API (run on a GPU machine; skipped
// without one): the CE path inside a node, the proxy path between emulated nodes (pinned
// bounce buffers, no GPU-direct provider needed), and the relay path, with device buffers.
#include <gtest/gtest.h>

#ifdef RMACC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <signal.h>
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
#include "support/gpu_ranks.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {


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

// The largest same-device copies (issue 50 item 8: rmacc-loopbench printed WRONG for `direct`
// at 256 MiB; its fills ran on the legacy stream, not ordered with the copier's non-blocking
// stream). Two ranks of one node, blocks of 256 MiB (the self block is a same-device copy of
// 256 MiB, the other a copy into the peer's memory), every byte checked, three calls with
// fresh contents each so that a copy that did not run leaves the last call's bytes. The fills,
// the calls and the read-back are all ordered on the call's stream. A failure names the first
// differing byte of each block, what it should be and what it is, and how many differ.
class GpuLocalCopyLarge : public testing::TestWithParam<const char*> {};

uint32_t largeValue(int src, int dst, size_t i, int call) {
  uint64_t x = ((uint64_t)src << 40) ^ ((uint64_t)dst << 32) ^ ((uint64_t)call << 56) ^ i;
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return (uint32_t)(x ^ (x >> 29));
}

TEST_P(GpuLocalCopyLarge, AlltoAll256MiBBlocksByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  constexpr size_t kBlockBytes = 256u << 20, kElems = kBlockBytes / 4;
  RunOptions o;
  o.nodeOf = {0, 0};
  o.timeoutS = 600;
  o.env = {{"RMACC_LOCAL_COPY", GetParam()}};
  runRanks(2, o, [&](const RankContext& ctx) {
    const int me = ctx.rank;
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, 2, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *dsend = nullptr, *drecv = nullptr;
    CUDA_OK(cudaMalloc(&dsend, 2 * kBlockBytes));
    CUDA_OK(cudaMalloc(&drecv, 2 * kBlockBytes));
    std::vector<uint32_t> host(2 * kElems);
    for (int call = 0; call < 3; ++call) {
      for (int p = 0; p < 2; ++p)
        for (size_t i = 0; i < kElems; ++i) host[p * kElems + i] = largeValue(me, p, i, call);
      CUDA_OK(cudaMemcpyAsync(dsend, host.data(), 2 * kBlockBytes, cudaMemcpyHostToDevice, stream));
      CUDA_OK(cudaMemsetAsync(drecv, 0xEE, 2 * kBlockBytes, stream));
      RMACC_OK(rmaccAlltoAll(dsend, drecv, kElems, rmaccUint32, comm, stream), comm);
      CUDA_OK(cudaMemcpyAsync(host.data(), drecv, 2 * kBlockBytes, cudaMemcpyDeviceToHost, stream));
      RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
      std::string report;
      for (int p = 0; p < 2; ++p) {
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < kElems; ++i)
          if (host[p * kElems + i] != largeValue(p, me, i, call) && wrong++ == 0) first = i;
        if (!wrong) continue;
        uint32_t want = largeValue(p, me, first, call), got = host[p * kElems + first];
        size_t byte = 0;
        while (((want >> (8 * byte)) & 0xff) == ((got >> (8 * byte)) & 0xff)) ++byte;
        char line[256];
        snprintf(line, sizeof line,
                 "\n  block from rank %d: %zu of %zu elements differ; the first at byte %zu of the "
                 "block: expected 0x%02x, got 0x%02x (element 0x%08x, got 0x%08x)",
                 p, wrong, kElems, first * 4 + byte, (want >> (8 * byte)) & 0xff,
                 (got >> (8 * byte)) & 0xff, want, got);
        report += line;
      }
      ASSERT_TRUE(report.empty()) << "call " << call << ", rank " << me << ", RMACC_LOCAL_COPY="
                                  << GetParam() << ":" << report;
      RMACC_OK(rmaccBarrier(comm, stream), comm);  // the peer read this rank's block
      RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    }
    CUDA_OK(cudaFree(dsend));
    CUDA_OK(cudaFree(drecv));
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuLocalCopyLarge, testing::Values("direct", "engines"),
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
// (RMACC_ENQUEUE_WAIT_MS): left to the progress thread, its copies would be kept out by these
// calls while the device waits for them (docs/decisions.md#enqueue-wait).
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
}  // namespace
}  // namespace rmacc::test
#endif  // RMACC_HAVE_CUDA
