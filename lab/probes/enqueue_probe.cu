// Host time of the ways a rank could hand one call's relay forwards to the GPU at 128 x 8
// (issue 18 item 3: exchange + plan + enqueue <= 100 us per call at 1,024 ranks). A relay
// forwards (L - 1) x (nodes - 1) = 889 blocks per call there; the executor issues them as 127
// rounds of [one cudaMemcpyBatchAsync of 7 copies, one cuStreamBatchMemOp of 7 signal writes +
// a credit's ready flag + the next round's wait] on one copy stream (bench/results §17.3: 4.88 us a
// round, 0.62 ms a call). Three alternatives, each timed on the host while the streams are held
// on a host flag (so only the enqueue is timed), medians of 11:
//   batch    one cudaMemcpyBatchAsync of k copies: what a copy descriptor costs in a large batch
//   threads  the 127 rounds split over T threads, each on a stream of its own (does the driver
//            take enqueues from several threads at once?)
//   graph    the 127 rounds recorded once as a graph (wait node -> 7 memcpy nodes -> write node,
//            round after round); per call every memcpy node and every memop node gets new
//            parameters (cudaGraphExecMemcpyNodeSetParams1D, cuGraphExecBatchMemOpNodeSetParams:
//            counts, offsets and signal values change every call) and the graph is launched
// Copies go device -> pinned host memory, each to its own place (one GPU has no NVLink peer).
//
// Built by lab/CMakeLists.txt (build/lab/), or by hand in lab/probes/: nvcc -O2 -arch=sm_90 -o enqueue_probe enqueue_probe.cu -lcuda -lpthread
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>

#include "probe_check.h"

namespace {

constexpr int kRounds = 127, kPeers = 7, kCopies = kRounds * kPeers;
constexpr size_t kBytes = 16384;  // 16 MiB per rank at 1,024 ranks

volatile uint32_t* gate;  // host-mapped: held streams wait for it to reach gateRound
CUdeviceptr gateDev;
uint32_t gateRound = 0;
char* src;                 // device
char* dst;                 // pinned host, kCopies blocks
CUdeviceptr flagsDev;      // host-mapped words the writes go to (one line each)
CUdeviceptr holdsDev;      // a word that stays 0: waits on ">= 0" hold at once

void hold(cudaStream_t s) {
  CU(cuStreamWaitValue32(s, gateDev, gateRound, CU_STREAM_WAIT_VALUE_GEQ));
}

// One round's memory ops: 7 signal writes, a ready flag, the next round's wait.
void roundMemops(CUstreamBatchMemOpParams* ops, uint64_t value) {
  for (int i = 0; i <= kPeers; ++i) {
    ops[i] = {};
    ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[i].writeValue.address = flagsDev + i * 64;
    ops[i].writeValue.value64 = value;
    ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  ops[kPeers + 1] = {};
  ops[kPeers + 1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  ops[kPeers + 1].waitValue.address = holdsDev;
  ops[kPeers + 1].waitValue.value64 = 0;
  ops[kPeers + 1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
}

// Rounds [first, first + count) of the call as the executor issues them, on `s`; samePlaces:
// every round's 7 copies go to the same 7 places (as bench/results §17.3's probe did) instead of
// 7 places of their own, as a relay's forwards do.
void enqueueRounds(cudaStream_t s, int first, int count, uint64_t value, bool samePlaces = false) {
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t attrIdx = 0;
  void* d[kPeers];
  void* sp[kPeers];
  size_t n[kPeers];
  CUstreamBatchMemOpParams ops[kPeers + 2];
  for (int r = first; r < first + count; ++r) {
    for (int i = 0; i < kPeers; ++i) {
      d[i] = dst + (size_t)((samePlaces ? 0 : r) * kPeers + i) * kBytes;
      sp[i] = src + (size_t)i * kBytes;
      n[i] = kBytes;
    }
    cudaStreamCaptureStatus status;
    CK(cudaStreamIsCapturing(s, &status));
    CK(cudaMemcpyBatchAsync(d, sp, n, kPeers, &attr, &attrIdx, 1, s));
    roundMemops(ops, value);
    CU(cuStreamBatchMemOp(s, kPeers + 2, ops, 0));
  }
}

// Host µs of `enqueue` (its streams held until it returned), median of 11; the held streams
// are released and drained after each.
double timeHost(const std::vector<cudaStream_t>& streams, const std::function<void()>& enqueue) {
  std::vector<double> us;
  for (int rep = 0; rep < 11; ++rep) {
    ++gateRound;
    for (cudaStream_t s : streams) hold(s);
    const double t0 = nowUs();
    enqueue();
    us.push_back(nowUs() - t0);
    *gate = gateRound;
    for (cudaStream_t s : streams) CK(cudaStreamSynchronize(s));
  }
  return median(us);
}

void batchSizes(cudaStream_t s) {
  printf("# batch: one cudaMemcpyBatchAsync of k copies of %zu B\n", kBytes);
  printf("batch k host_us per_copy_us\n");
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t attrIdx = 0;
  for (int k : {1, 7, 28, 112, 448, kCopies}) {
    std::vector<void*> d(k), sp(k);
    std::vector<size_t> n(k, kBytes);
    for (int i = 0; i < k; ++i)
      d[i] = dst + (size_t)i * kBytes, sp[i] = src + (size_t)(i % kPeers) * kBytes;
    cudaError_t err = cudaSuccess;
    const double us = timeHost({s}, [&] {
      err = cudaMemcpyBatchAsync(d.data(), sp.data(), n.data(), k, &attr, &attrIdx, 1, s);
    });
    if (err != cudaSuccess) {
      printf("batch %d failed: %s\n", k, cudaGetErrorString(err));
      cudaGetLastError();
      continue;
    }
    printf("batch %d %.2f %.3f\n", k, us, us / k);
  }
}

// Starts t threads on the device, releases them at once, runs work(k) on thread k, joins them.
void onThreads(int t, const std::function<void(int)>& work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int k = 0; k < t; ++k)
    pool.emplace_back([&, k] {
      CK(cudaSetDevice(0));
      ++ready;
      while (!go.load()) {}
      work(k);
    });
  while (ready.load() < t) {}
  go = true;
  for (auto& th : pool) th.join();
}

void threads() {
  printf("# threads: %d rounds (copy batch of %d + memop batch of %d) split over T threads,"
         " a stream each; wall time until the last thread returned\n", kRounds, kPeers, kPeers + 2);
  printf("threads T wall_us per_round_us\n");
  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  std::vector<cudaStream_t> streams(8);
  for (auto& s : streams) CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
  uint64_t value = 1;
  for (int t : {1, 2, 4, 8}) {
    std::vector<cudaStream_t> mine(streams.begin(), streams.begin() + t);
    const double us = timeHost(mine, [&] {
      ++value;
      onThreads(t, [&](int k) {
        const int first = kRounds * k / t, last = kRounds * (k + 1) / t;
        enqueueRounds(mine[k], first, last - first, value);
      });
    });
    // The thread start-up is in the figure; time it alone to take it out.
    const double empty = timeHost({}, [&] { onThreads(t, [](int) {}); });
    printf("threads %d %.2f %.3f (thread start-up %.2f us subtracted)\n", t, us - empty,
           (us - empty) / kRounds, empty);
  }
  // Persistent threads (as a pool of enqueue threads would be): each waits for a call number.
  for (int t : {1, 2, 4, 8}) {
    std::vector<cudaStream_t> mine(streams.begin(), streams.begin() + t);
    std::atomic<int> call{0}, done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    for (int k = 0; k < t; ++k)
      pool.emplace_back([&, k] {
        CK(cudaSetDevice(0));
        int seen = 0;
        while (true) {
          int c;
          while ((c = call.load()) == seen && !stop.load()) {}
          if (stop.load()) return;
          seen = c;
          const int first = kRounds * k / t, last = kRounds * (k + 1) / t;
          enqueueRounds(mine[k], first, last - first, (uint64_t)c);
          ++done;
        }
      });
    const double us = timeHost(mine, [&] {
      done = 0;
      ++call;
      while (done.load() < t) {}
    });
    stop = true;
    for (auto& th : pool) th.join();
    printf("pool %d %.2f %.3f\n", t, us, us / kRounds);
  }
  for (auto& s : streams) CK(cudaStreamDestroy(s));
}

void graph(cudaStream_t s) {
  printf("# graph: %d rounds as nodes (wait -> %d memcpy -> %d writes), updated and launched\n",
         kRounds, kPeers, kPeers + 1);
  CUcontext ctx;
  CU(cuCtxGetCurrent(&ctx));
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  std::vector<cudaGraphNode_t> copies(kCopies), waits(kRounds), writes(kRounds);
  std::vector<CUstreamBatchMemOpParams> ops((size_t)kRounds * (kPeers + 2));
  for (int r = 0; r < kRounds; ++r) roundMemops(&ops[(size_t)r * (kPeers + 2)], 1);
  cudaGraphNode_t prev = nullptr;
  for (int r = 0; r < kRounds; ++r) {
    CUDA_BATCH_MEM_OP_NODE_PARAMS wp = {ctx, 1, &ops[(size_t)r * (kPeers + 2) + kPeers + 1], 0};
    CU(cuGraphAddBatchMemOpNode((CUgraphNode*)&waits[r], g, (CUgraphNode*)&prev, prev ? 1 : 0,
                                &wp));
    for (int i = 0; i < kPeers; ++i) {
      const int c = r * kPeers + i;
      CK(cudaGraphAddMemcpyNode1D(&copies[c], g, &waits[r], 1, dst + (size_t)c * kBytes,
                                  src + (size_t)i * kBytes, kBytes, cudaMemcpyDefault));
    }
    CUDA_BATCH_MEM_OP_NODE_PARAMS xp = {ctx, (unsigned)kPeers + 1, &ops[(size_t)r * (kPeers + 2)],
                                        0};
    CU(cuGraphAddBatchMemOpNode((CUgraphNode*)&writes[r], g,
                                (CUgraphNode*)&copies[(size_t)r * kPeers], kPeers, &xp));
    prev = writes[r];
  }
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, g, 0));
  CK(cudaGraphUpload(exec, s));
  CK(cudaStreamSynchronize(s));
  const double launch = timeHost({s}, [&] { CK(cudaGraphLaunch(exec, s)); });
  // New sizes, places and signal values every call, as new counts bring.
  uint64_t value = 1;
  double copyUs = 0, memopUs = 0;
  const double all = timeHost({s}, [&] {
    ++value;
    const double t0 = nowUs();
    for (int c = 0; c < kCopies; ++c) {
      const size_t bytes = kBytes - 64 * (value % 7) - c % 5;
      CK(cudaGraphExecMemcpyNodeSetParams1D(exec, copies[c], dst + (size_t)c * kBytes,
                                            src + (size_t)(c % kPeers) * kBytes + value % 3,
                                            bytes, cudaMemcpyDefault));
    }
    const double t1 = nowUs();
    for (int r = 0; r < kRounds; ++r) {
      CUstreamBatchMemOpParams* o = &ops[(size_t)r * (kPeers + 2)];
      for (int i = 0; i <= kPeers; ++i) o[i].writeValue.value64 = value;
      CUDA_BATCH_MEM_OP_NODE_PARAMS xp = {ctx, (unsigned)kPeers + 1, o, 0};
      CU(cuGraphExecBatchMemOpNodeSetParams((CUgraphExec)exec, (CUgraphNode)writes[r], &xp));
      CUDA_BATCH_MEM_OP_NODE_PARAMS wp = {ctx, 1, o + kPeers + 1, 0};
      CU(cuGraphExecBatchMemOpNodeSetParams((CUgraphExec)exec, (CUgraphNode)waits[r], &wp));
    }
    const double t2 = nowUs();
    CK(cudaGraphLaunch(exec, s));
    copyUs += t1 - t0;
    memopUs += t2 - t1;
  });
  printf("graph launch_only_us %.2f\n", launch);
  printf("graph update+launch_us %.2f (mean over runs: memcpy updates %.2f = %.3f per node,"
         " memop updates %.2f = %.3f per node)\n", all, copyUs / 11, copyUs / 11 / kCopies,
         memopUs / 11, memopUs / 11 / (2 * kRounds));
  // The device time of one replay against the same work on a stream (the executor's way).
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto device = [&](const std::function<void()>& work) {
    std::vector<double> v;
    for (int rep = 0; rep < 11; ++rep) {
      ++gateRound;
      hold(s);
      CK(cudaEventRecord(e0, s));
      work();
      CK(cudaEventRecord(e1, s));
      *gate = gateRound;
      CK(cudaStreamSynchronize(s));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      v.push_back(ms * 1e3);
    }
    return median(v);
  };
  const double devGraph = device([&] { CK(cudaGraphLaunch(exec, s)); });
  const double devStream = device([&] { enqueueRounds(s, 0, kRounds, ++value); });
  printf("graph device_us graph %.2f stream %.2f\n", devGraph, devStream);
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(g));
}

}  // namespace

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaHostAlloc((void**)&gate, 64, cudaHostAllocMapped));
  *gate = 0;
  CK(cudaHostGetDevicePointer((void**)&gateDev, (void*)gate, 0));
  CK(cudaMalloc(&src, kPeers * kBytes + 4096));
  CK(cudaMemset(src, 1, kPeers * kBytes + 4096));
  CK(cudaHostAlloc((void**)&dst, (size_t)kCopies * kBytes, cudaHostAllocDefault));
  uint64_t* flags;
  CK(cudaHostAlloc((void**)&flags, 64 * 64, cudaHostAllocMapped));
  for (int i = 0; i < 64 * 8; ++i) flags[i] = 0;
  CK(cudaHostGetDevicePointer((void**)&flagsDev, flags, 0));
  holdsDev = flagsDev + 63 * 64;

  // The reference: the executor's way, one thread, one stream (bench/results §17.3's 4.88 us a
  // round).
  uint64_t value = 1;
  const double ref = timeHost({s}, [&] { enqueueRounds(s, 0, kRounds, ++value); });
  printf("# reference: %d rounds on one stream from one thread\nstream %.2f %.3f\n", kRounds, ref,
         ref / kRounds);
  const double same = timeHost({s}, [&] { enqueueRounds(s, 0, kRounds, ++value, true); });
  printf("stream-same-places %.2f %.3f\n", same, same / kRounds);
  threads();
  graph(s);
  batchSizes(s);
  const double ref2 = timeHost({s}, [&] { enqueueRounds(s, 0, kRounds, ++value); });
  printf("# reference again\nstream %.2f %.3f\n", ref2, ref2 / kRounds);
  return 0;
}
