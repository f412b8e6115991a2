// CUDA graphs on GPUs through the public API (run on a GPU machine; skipped without one): calls
// captured into graphs and replayed (device counts a kernel changes between replays, fixed-count
// graphs back to back, replays beside uncaptured calls, refusals), no kernel node in a graph.
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
#include "support/gpu_ranks.h"
#include "support/graph_nodes.h"
#include "support/multiprocess.h"
#include "support/test_kernels.h"

namespace rmacc::test {
namespace {

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
// too. More replays pending hang in the driver (docs/usage.md, CUDA graphs: cudaGraphLaunch waits
// holding a lock the progress thread's copies need;
// docs/decisions.md#replay-triggered-limit).
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
// is enqueued at replay; docs/decisions.md#replay-triggered-limit). On one node the graph holds the whole call
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
