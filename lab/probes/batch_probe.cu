// What a stream pays on the device for k copies or k stream writes, issued one call each or as
// one batch (cudaMemcpyBatchAsync, cuStreamBatchMemOp), as the executor issues a relay chunk's
// forwards (src/exec/executor.cc). The stream is held on a host flag while everything is
// enqueued, so host enqueue time is not in the figure: event e0 is recorded right after the
// held wait, e1 after the work; the flag is released once both are enqueued. Median of 21.
// The host time of each call (enqueueing into the held stream) is timed too: what a rank's
// thread pays per backend call (issue 18's host time per call, bench/results §9.3).
// Copies go device -> pinned host memory (copy engines; one GPU has no NVLink peer), each to
// its own destination, as a relay's forwards go to different peers. rmacc-sim's per-op costs
// come from this (lab/sim/cluster.cc, bench/results §7.5).
//
// Built by lab/CMakeLists.txt (build/lab/), or by hand in lab/probes/: nvcc -O2 -arch=sm_90 -o batch_probe batch_probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <vector>

#include "probe_check.h"

namespace {

cudaStream_t stream;
volatile uint32_t* gate;  // host-mapped: the stream waits for it to reach the gateRound number
CUdeviceptr gateDev;
uint32_t gateRound = 0;

double lastHostUs = 0;  // host time of the last timeOnDevice's work(), median

// Device time (µs) of `work` on the stream, median of 21 rounds; its host time in lastHostUs.
double timeOnDevice(const std::function<void()>& work) {
  std::vector<double> us, host;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int rep = 0; rep < 21; ++rep) {
    ++gateRound;
    CU(cuStreamWaitValue32(stream, gateDev, gateRound, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaEventRecord(e0, stream));
    const double h0 = nowUs();
    work();
    host.push_back(nowUs() - h0);
    CK(cudaEventRecord(e1, stream));
    *gate = gateRound;
    CK(cudaStreamSynchronize(stream));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    us.push_back(ms * 1e3);
  }
  lastHostUs = median(host);
  return median(us);
}

// A 64-bit write of `value` to `addr`, as a batch's memory op.
CUstreamBatchMemOpParams write64(CUdeviceptr addr, uint64_t value) {
  CUstreamBatchMemOpParams op = {};
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  op.writeValue.address = addr;
  op.writeValue.value64 = value;
  op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  return op;
}

// A 64-bit wait for the word at `addr` to be >= 0: it always holds.
CUstreamBatchMemOpParams holdingWait(CUdeviceptr addr) {
  CUstreamBatchMemOpParams op = {};
  op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  op.waitValue.address = addr;
  op.waitValue.value64 = 0;
  op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  return op;
}

// One cuStreamBatchMemOp of k 64-bit writes of `value`, each to its own word at `base`.
void enqueueWrites(std::vector<CUstreamBatchMemOpParams>& ops, int k, CUdeviceptr base,
                   uint64_t value) {
  for (int i = 0; i < k; ++i) ops[i] = write64(base + i * 64, value);
  CU(cuStreamBatchMemOp(stream, k, ops.data(), 0));
}

}  // namespace

int main() {
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CK(cudaHostAlloc((void**)&gate, 64, cudaHostAllocMapped));
  *gate = 0;
  CK(cudaHostGetDevicePointer((void**)&gateDev, (void*)gate, 0));
  const int kMax = 32;
  const size_t kMaxBytes = 256 << 10;
  char* src;
  char* dst;
  CK(cudaMalloc(&src, kMax * kMaxBytes));
  CK(cudaHostAlloc((void**)&dst, kMax * kMaxBytes, cudaHostAllocDefault));
  CK(cudaMemset(src, 1, kMax * kMaxBytes));
  uint64_t* flags;  // one stream-written word per item, on its own line
  CK(cudaHostAlloc((void**)&flags, kMax * 64, cudaHostAllocMapped));
  CUdeviceptr flagsDev;
  CK(cudaHostGetDevicePointer((void**)&flagsDev, flags, 0));

  printf("what k bytes one_call_each_us batch_us host_each_us host_batch_us\n");
  for (size_t bytes : {(size_t)4096, (size_t)16384, (size_t)262144}) {
    for (int k : {1, 2, 7, 14, 28}) {
      std::vector<void*> d(k), s(k);
      std::vector<size_t> n(k, bytes);
      for (int i = 0; i < k; ++i) d[i] = dst + i * kMaxBytes, s[i] = src + i * kMaxBytes;
      const double each = timeOnDevice([&] {
        for (int i = 0; i < k; ++i)
          CK(cudaMemcpyAsync(d[i], s[i], bytes, cudaMemcpyDefault, stream));
      });
      const double hostEach = lastHostUs;
      cudaMemcpyAttributes attr = {};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attrIdx = 0;
      const double batch = timeOnDevice([&] {
        if (k == 1) {
          CK(cudaMemcpyAsync(d[0], s[0], bytes, cudaMemcpyDefault, stream));
          return;
        }
        CK(cudaMemcpyBatchAsync(d.data(), s.data(), n.data(), k, &attr, &attrIdx, 1, stream));
      });
      printf("copy %d %zu %.2f %.2f %.2f %.2f\n", k, bytes, each, batch, hostEach, lastHostUs);
    }
  }
  uint64_t value = 1;
  for (int k : {1, 2, 7, 14, 28}) {
    const double each = timeOnDevice([&] {
      ++value;
      for (int i = 0; i < k; ++i)
        CU(cuStreamWriteValue64(stream, flagsDev + i * 64, value, CU_STREAM_WRITE_VALUE_DEFAULT));
    });
    const double hostEach = lastHostUs;
    std::vector<CUstreamBatchMemOpParams> ops(k);
    const double batch = timeOnDevice([&] {
      ++value;
      enqueueWrites(ops, k, flagsDev, value);
    });
    printf("write %d 8 %.2f %.2f %.2f %.2f\n", k, each, batch, hostEach, lastHostUs);
  }
  // Waits whose values already hold, k of them: the executor's end of a call, where the waits
  // nothing depends on (one per source of the rank's data) join the last stream's memory ops
  // (src/exec/executor.cc join), as rmacc-sim charges them (Cluster::waitBatchItemUs).
  for (int k : {1, 7, 28, 127}) {
    const double each = timeOnDevice([&] {
      for (int i = 0; i < k; ++i)
        CU(cuStreamWaitValue64(stream, flagsDev + (i % kMax) * 64, 0, CU_STREAM_WAIT_VALUE_GEQ));
    });
    const double hostEach = lastHostUs;
    std::vector<CUstreamBatchMemOpParams> ops(k);
    const double batch = timeOnDevice([&] {
      for (int i = 0; i < k; ++i) ops[i] = holdingWait(flagsDev + (i % kMax) * 64);
      CU(cuStreamBatchMemOp(stream, k, ops.data(), 0));
    });
    printf("wait %d 8 %.2f %.2f %.2f %.2f\n", k, each, batch, hostEach, lastHostUs);
  }
  // The proxy-put stream's pattern (src/exec/executor.cc batchProxyPut): per node round a
  // credit wait (here on a value that already holds) then the round's ready-flag store, the
  // rounds' memory ops in one cuStreamBatchMemOp of up to kFlushAtMemOps = 16
  // (src/plan/proxy_runs.h), so 8 rounds a batch; against one call per wait and per store.
  // rmacc-sim charges each wait and each store as a batch's first memory op (Cluster::memopUs).
  for (int pairs : {1, 8, 64, 127}) {
    std::vector<CUstreamBatchMemOpParams> ops(16);
    const double each = timeOnDevice([&] {
      ++value;
      for (int r = 0; r < pairs; ++r) {
        CU(cuStreamWaitValue64(stream, flagsDev + 31 * 64, 0, CU_STREAM_WAIT_VALUE_GEQ));
        CU(cuStreamWriteValue64(stream, flagsDev + (r % 16) * 64, value,
                                CU_STREAM_WRITE_VALUE_DEFAULT));
      }
    });
    const double hostEach = lastHostUs;
    const double batch = timeOnDevice([&] {
      ++value;
      for (int r = 0; r < pairs; r += 8) {
        const int n = std::min(8, pairs - r);
        for (int i = 0; i < 2 * n; ++i)
          ops[i] = i % 2 == 0 ? holdingWait(flagsDev + 31 * 64)
                              : write64(flagsDev + ((r + i / 2) % 16) * 64, value);
        CU(cuStreamBatchMemOp(stream, 2 * n, ops.data(), 0));
      }
    });
    printf("wait+store %d 8 %.2f %.2f %.2f %.2f\n", pairs, each, batch, hostEach, lastHostUs);
  }
  // The executor's forward pattern: one copy batch of k, then one memop batch of k writes.
  for (size_t bytes : {(size_t)16384, (size_t)262144}) {
    for (int k : {1, 7}) {
      std::vector<void*> d(k), s(k);
      std::vector<size_t> n(k, bytes);
      for (int i = 0; i < k; ++i) d[i] = dst + i * kMaxBytes, s[i] = src + i * kMaxBytes;
      std::vector<CUstreamBatchMemOpParams> ops(k);
      cudaMemcpyAttributes attr = {};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t attrIdx = 0;
      const double both = timeOnDevice([&] {
        ++value;
        if (k == 1) CK(cudaMemcpyAsync(d[0], s[0], bytes, cudaMemcpyDefault, stream));
        else CK(cudaMemcpyBatchAsync(d.data(), s.data(), n.data(), k, &attr, &attrIdx, 1, stream));
        enqueueWrites(ops, k, flagsDev, value);
      });
      printf("copies+writes %d %zu - %.2f - %.2f\n", k, bytes, both, lastHostUs);
    }
  }
  // A relay's node rounds as the executor enqueues them on its copy stream (bench/results §9.3):
  // per round one copy batch of 7 forwards (after the capture check the backend makes) and
  // one memop batch of 7 data signals, a credit's ready flag and the next round's wait (on a
  // value that already holds). 127 rounds: a rank's copy stream in one call at 128 nodes x 8.
  {
    const int k = 7, rounds = 127;
    const size_t bytes = 16384;
    std::vector<void*> d(k), s(k);
    std::vector<size_t> n(k, bytes);
    for (int i = 0; i < k; ++i) d[i] = dst + i * kMaxBytes, s[i] = src + i * kMaxBytes;
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attrIdx = 0;
    std::vector<CUstreamBatchMemOpParams> ops(k + 2);
    const double dev = timeOnDevice([&] {
      for (int r = 0; r < rounds; ++r) {
        cudaStreamCaptureStatus status;
        CK(cudaStreamIsCapturing(stream, &status));
        CK(cudaMemcpyBatchAsync(d.data(), s.data(), n.data(), k, &attr, &attrIdx, 1, stream));
        ++value;
        for (int i = 0; i < k + 2; ++i)
          ops[i] = i == k + 1 ? holdingWait(flagsDev + 31 * 64) : write64(flagsDev + i * 64, value);
        CU(cuStreamBatchMemOp(stream, k + 2, ops.data(), 0));
      }
    });
    printf("rounds %d %zu %.2f - %.2f - (per round: device %.2f, host %.2f)\n", rounds, bytes,
           dev, lastHostUs, dev / rounds, lastHostUs / rounds);
  }
  return 0;
}
