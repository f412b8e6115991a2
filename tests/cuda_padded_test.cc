// rmaccAlltoAllvPadded on GPUs through the public API (run on a GPU machine; skipped without
// one): counts in device memory that the stream changes before each call, uncaptured and
// captured into a CUDA graph; the graph holds no kernel node (and, on one node, no host node:
// nothing for the CPU at replay); 100 replays launched back to back land byte-exact, slots and
// count words (across nodes 4 per synchronisation: rmacc.h); a count above the capacity fails the communicator at the synchronisation.
#include <gtest/gtest.h>

#ifdef RMACC_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "rmacc.h"
#include "support/gpu_ranks.h"
#include "support/graph_nodes.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

RunOptions gpuRanks(Shape shape) {
  RunOptions o;
  o.nodeOf = scatteredNodes(shape.nodes, shape.local);
  o.timeoutS = 150;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "60"}, {"CUDA_MODULE_LOADING", "EAGER"}};
  return o;
}

uint8_t byteOf(int from, int to, int rep) { return (uint8_t)((from * 31 + to * 7 + rep * 13 + 1) & 0xff); }
size_t countOf(int from, int to, int rep, size_t capacity) { return (from * 3 + to * 5 + rep) % (capacity + 1); }

// capture: one call captured and replayed `kReplays` times, `window` launches between
// synchronisations; else as many uncaptured calls. Before each call the stream writes every
// slot with a byte of (rank, destination, call) and copies that call's counts to the device;
// after it the stream copies the slots and the received counts to pinned history.
using Case = std::tuple<Shape, size_t /*capacity, int32 elements*/, bool /*capture*/, int /*window*/>;
class GpuPadded : public testing::TestWithParam<Case> {};

TEST_P(GpuPadded, SlotsAndCountsByteExact) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  const auto [shape, capacity, capture, window] = GetParam();
  const int n = shape.nodes * shape.local;
  runRanks(n, gpuRanks(shape), [&](const RankContext& ctx) {
    const int me = ctx.rank;
    const int kReplays = 100;
    const size_t slot = capacity * sizeof(int32_t);
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t *dsend, *drecv, *hist;
    size_t *dsc, *drc, *hsc, *hrc;
    CUDA_OK(cudaMalloc((void**)&dsend, n * slot));
    CUDA_OK(cudaMalloc((void**)&drecv, n * slot));
    CUDA_OK(cudaMalloc((void**)&dsc, n * sizeof(size_t)));
    CUDA_OK(cudaMalloc((void**)&drc, n * sizeof(size_t)));
    CUDA_OK(cudaMallocHost((void**)&hist, (size_t)kReplays * n * slot));
    CUDA_OK(cudaMallocHost((void**)&hsc, (size_t)kReplays * n * sizeof(size_t)));
    CUDA_OK(cudaMallocHost((void**)&hrc, (size_t)kReplays * n * sizeof(size_t)));
    for (int rep = 0; rep < kReplays; ++rep)
      for (int j = 0; j < n; ++j) hsc[rep * n + j] = countOf(me, j, rep, capacity);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (capture) {
      CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      rmaccResult_t r = rmaccAlltoAllvPadded(dsend, dsc, capacity, drecv, drc, rmaccInt32, comm, stream);
      CUDA_OK(cudaStreamEndCapture(stream, &graph));
      RMACC_OK(r, comm);
      ASSERT_NO_FATAL_FAILURE(expectNoKernelNodes(graph, shape.nodes == 1));
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < kReplays; ++rep) {
      for (int j = 0; j < n; ++j) CUDA_OK(cudaMemsetAsync(dsend + j * slot, byteOf(me, j, rep), slot, stream));
      CUDA_OK(cudaMemcpyAsync(dsc, hsc + rep * n, n * sizeof(size_t), cudaMemcpyHostToDevice, stream));
      CUDA_OK(cudaMemsetAsync(drecv, 0xee, n * slot, stream));
      CUDA_OK(cudaMemsetAsync(drc, 0xff, n * sizeof(size_t), stream));
      if (capture) CUDA_OK(cudaGraphLaunch(exec, stream));
      else RMACC_OK(rmaccAlltoAllvPadded(dsend, dsc, capacity, drecv, drc, rmaccInt32, comm, stream), comm);
      CUDA_OK(cudaMemcpyAsync(hist + (size_t)rep * n * slot, drecv, n * slot, cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaMemcpyAsync(hrc + rep * n, drc, n * sizeof(size_t), cudaMemcpyDeviceToHost, stream));
      if ((rep + 1) % window == 0) RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    }
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me == 0)
      printf("[ info ] %d %s calls, %zu-byte slots, in %.3f s\n", kReplays, capture ? "replayed" : "uncaptured",
             slot, s);
    for (int rep = 0; rep < kReplays; ++rep)
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(hrc[rep * n + i], countOf(i, me, rep, capacity)) << "call " << rep << ": count from " << i;
        const uint8_t* blk = hist + ((size_t)rep * n + i) * slot;
        const uint8_t want = byteOf(i, me, rep);
        size_t k = 0;
        while (k < slot && blk[k] == want) ++k;
        ASSERT_EQ(k, slot) << "call " << rep << " from " << i << ": byte " << k << " is " << (int)blk[k]
                           << ", expected " << (int)want;
      }
    rmaccResult_t async = rmaccInternalError;
    RMACC_OK(rmaccCommGetAsyncError(comm, &async), comm);
    EXPECT_EQ(async, rmaccSuccess);
    if (capture) {
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
    }
    cudaFreeHost(hist), cudaFreeHost(hsc), cudaFreeHost(hrc);
    cudaFree(dsend), cudaFree(drecv), cudaFree(dsc), cudaFree(drc);
    cudaStreamDestroy(stream);
    RMACC_OK(rmaccCommDestroy(comm), nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuPadded,
    testing::Values(Case{Shape{1, 1}, 256, false, 100}, Case{Shape{1, 1}, 256, true, 100},
                    Case{Shape{1, 2}, 256, false, 100}, Case{Shape{1, 2}, 256, true, 100},
                    Case{Shape{1, 2}, 1 << 18, true, 100}, Case{Shape{2, 1}, 256, false, 100},
                    Case{Shape{2, 1}, 256, true, 4}, Case{Shape{2, 2}, 256, true, 4}),
    [](const testing::TestParamInfo<Case>& i) {
      const Shape s = std::get<0>(i.param);
      return std::to_string(s.nodes) + "x" + std::to_string(s.local) + "_" +
             std::to_string(std::get<1>(i.param) * 4) + "B_" + (std::get<2>(i.param) ? "captured" : "uncaptured");
    });

// A replay whose count exceeds the capacity: only the capacity moves, and the synchronisation
// after it fails (the communicator is poisoned, naming the count and the capacity).
TEST(GpuPaddedErrors, CountAboveCapacityInAReplayFailsTheSynchronisation) {
  int nGpu = gpuCount();
  if (nGpu == 0) GTEST_SKIP() << "no CUDA device";
  const int n = 2;
  runRanks(n, gpuRanks(Shape{1, 2}), [&](const RankContext& ctx) {
    const int me = ctx.rank;
    const size_t capacity = 64, slot = capacity * sizeof(int32_t);
    CUDA_OK(cudaSetDevice(me % nGpu));
    rmaccComm_t comm = nullptr;
    RMACC_OK(rmaccCommInitRank(&comm, n, ctx.id, me), nullptr);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t *dsend, *drecv;
    size_t *dsc, *drc;
    CUDA_OK(cudaMalloc((void**)&dsend, n * slot));
    CUDA_OK(cudaMalloc((void**)&drecv, n * slot + 256));
    CUDA_OK(cudaMalloc((void**)&dsc, n * sizeof(size_t)));
    CUDA_OK(cudaMalloc((void**)&drc, n * sizeof(size_t)));
    size_t good[2] = {capacity, capacity}, bad[2] = {capacity, capacity + 1};
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    rmaccResult_t r = rmaccAlltoAllvPadded(dsend, dsc, capacity, drecv, drc, rmaccInt32, comm, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    RMACC_OK(r, comm);
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaMemcpy(dsc, good, sizeof(good), cudaMemcpyHostToDevice));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    RMACC_OK(rmaccStreamSynchronize(comm, stream), comm);
    CUDA_OK(cudaMemcpy(dsc, me == 0 ? bad : good, sizeof(good), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(drecv, 0xee, n * slot + 256));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    r = rmaccStreamSynchronize(comm, stream);
    EXPECT_TRUE(r == rmaccInvalidUsage || r == rmaccRemoteError) << rmaccGetErrorString(r);
    EXPECT_NE(std::string(rmaccGetLastError(comm)).find("more than capacity 64"), std::string::npos)
        << rmaccGetLastError(comm);
    if (me == 1 && r == rmaccInvalidUsage) {
      std::vector<uint8_t> tail(256);
      CUDA_OK(cudaMemcpy(tail.data(), drecv + n * slot, tail.size(), cudaMemcpyDeviceToHost));
      for (uint8_t b : tail) ASSERT_EQ(b, 0xee) << "written past the slots";
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    cudaFree(dsend), cudaFree(drecv), cudaFree(dsc), cudaFree(drc);
    cudaStreamDestroy(stream);
    rmaccCommDestroy(comm);
  });
}

}  // namespace
}  // namespace rmacc::test

#else
TEST(GpuPadded, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }
#endif
