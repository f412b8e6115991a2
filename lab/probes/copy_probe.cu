// Which ways of moving bytes within one GPU (and between two) use no SM? Each method copies
// the same bytes on a side stream alone, then beside a loop of bf16 GEMMs (cuBLAS, 8192^3) on
// another stream of the same process. A method whose time beside the GEMMs stays near its time
// alone runs on a copy engine; one that waits for the GEMMs needs SMs. bench/gpu.sh runs it
// (STEPS=probe); bench/results/ records what it found.
//
// Built by lab/CMakeLists.txt (build/lab/), or by hand in lab/probes/: nvcc -O2 -arch=sm_90 -o copy_probe copy_probe.cu -lcublas -lcuda
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "probe_check.h"

struct Gemm {
  cublasHandle_t h;
  __nv_bfloat16 *a, *b, *c;
  int n = 8192;
  cudaStream_t s;
  Gemm() {
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    size_t bytes = (size_t)n * n * sizeof(__nv_bfloat16);
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMalloc(&c, bytes));
    CK(cudaMemset(a, 0x3c, bytes));  // 1.0-ish bf16 pattern, not zeros
    CK(cudaMemset(b, 0x3b, bytes));
    cublasCreate(&h);
    cublasSetStream(h, s);
  }
  void enqueue(int reps) {
    float alpha = 1, beta = 0;
    for (int i = 0; i < reps; ++i)
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF,
                   n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
};

struct Method {
  std::string name;
  std::function<void(char* dst, const char* src, size_t bytes)> run;
};

int main(int argc, char** argv) {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  size_t bytes = (argc > 1 ? atol(argv[1]) : 32) << 20;
  int reps = argc > 2 ? atoi(argv[2]) : 50;
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, asyncEngineCount %d, %d devices\n", prop.name,
         prop.multiProcessorCount, prop.asyncEngineCount, ndev);
  if (ndev > 1) {
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaSetDevice(1));
    CK(cudaDeviceEnablePeerAccess(0, 0));
    CK(cudaSetDevice(0));
  }
  char *src, *dst, *peer = nullptr, *host = nullptr;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMemset(src, 7, bytes));
  CK(cudaMallocHost(&host, bytes));
  cudaStream_t side[4], peerStream = nullptr;
  cudaEvent_t peerDone = nullptr;  // events belong to a device: this one to GPU1
  for (auto& s : side) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (ndev > 1) {
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&peer, bytes));
    CK(cudaStreamCreateWithFlags(&peerStream, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&peerDone, cudaEventDisableTiming));
    CK(cudaSetDevice(0));
  }
  cudaEvent_t fork, join[4];
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (auto& e : join) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  // Runs fn's copies on streams side[0..k) and returns them joined on side[0].
  auto fan = [&](int k, std::function<void(int, cudaStream_t)> fn) {
    CK(cudaEventRecord(fork, side[0]));
    for (int i = 1; i < k; ++i) CK(cudaStreamWaitEvent(side[i], fork, 0));
    for (int i = 0; i < k; ++i) fn(i, side[i]);
    for (int i = 1; i < k; ++i) {
      CK(cudaEventRecord(join[i], side[i]));
      CK(cudaStreamWaitEvent(side[0], join[i], 0));
    }
  };
  auto twoD = [&](size_t width, int k) {
    return [=](char* d, const char* s, size_t b) {
      fan(k, [&](int i, cudaStream_t st) {
        size_t part = b / k, rows = part / width;
        CK(cudaMemcpy2DAsync(d + i * part, width, s + i * part, width, width, rows,
                             cudaMemcpyDeviceToDevice, st));
      });
    };
  };
  std::vector<Method> methods = {
      {"memcpy 1D", [&](char* d, const char* s, size_t b) {
         CK(cudaMemcpyAsync(d, s, b, cudaMemcpyDeviceToDevice, side[0]));
       }},
      {"memcpy 2D w=64K", twoD(64 << 10, 1)},
      {"memcpy 2D w=1M", twoD(1 << 20, 1)},
      {"memcpy 2D w=4K", twoD(4 << 10, 1)},
      {"memcpy 2D w=1M x2 streams", twoD(1 << 20, 2)},
      {"memcpy 2D w=1M x4 streams", twoD(1 << 20, 4)},
      {"memcpy 2D pitch!=width", [&](char* d, const char* s, size_t b) {
         // rows of 1 MiB - 256 B in a pitch of 1 MiB: a true strided copy
         size_t pitch = 1 << 20, width = pitch - 256, rows = b / pitch;
         CK(cudaMemcpy2DAsync(d, pitch, s, pitch, width, rows, cudaMemcpyDeviceToDevice, side[0]));
       }},
      {"memcpy 3D", [&](char* d, const char* s, size_t b) {
         cudaMemcpy3DParms p = {};
         size_t w = 1 << 20;
         p.srcPtr = make_cudaPitchedPtr((void*)s, w, w, b / w);
         p.dstPtr = make_cudaPitchedPtr(d, w, w, b / w);
         p.extent = make_cudaExtent(w, b / w, 1);
         p.kind = cudaMemcpyDeviceToDevice;
         CK(cudaMemcpy3DAsync(&p, side[0]));
       }},
      {"batch srcOrder=any +overlap hint", [&](char* d, const char* s, size_t b) {
         void* dsts[1] = {d};
         const void* srcs[1] = {s};
         size_t sizes[1] = {b};
         cudaMemcpyAttributes attr = {};
         attr.srcAccessOrder = cudaMemcpySrcAccessOrderAny;
         attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
         size_t idx = 0;
         CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &idx, 1, side[0]));
       }},
      {"via pinned host (D2H+H2D, 4 MiB chunks)", [&](char* d, const char* s, size_t b) {
         size_t chunk = 4 << 20;
         for (size_t o = 0; o < b; o += chunk) {
           CK(cudaMemcpyAsync(host + o, s + o, chunk, cudaMemcpyDeviceToHost, side[0]));
           CK(cudaMemcpyAsync(d + o, host + o, chunk, cudaMemcpyHostToDevice, side[0]));
         }
       }},
  };
  if (ndev > 1) {
    methods.push_back({"issued on GPU1's stream (dst,src on GPU0)", [&](char* d, const char* s, size_t b) {
      CK(cudaEventRecord(fork, side[0]));
      CK(cudaSetDevice(1));
      CK(cudaStreamWaitEvent(peerStream, fork, 0));
      CK(cudaMemcpyAsync(d, s, b, cudaMemcpyDefault, peerStream));
      CK(cudaEventRecord(peerDone, peerStream));
      CK(cudaSetDevice(0));
      CK(cudaStreamWaitEvent(side[0], peerDone, 0));
    }});
    methods.push_back({"2D issued on GPU1's stream", [&](char* d, const char* s, size_t b) {
      CK(cudaEventRecord(fork, side[0]));
      CK(cudaSetDevice(1));
      CK(cudaStreamWaitEvent(peerStream, fork, 0));
      size_t w = 1 << 20;
      CK(cudaMemcpy2DAsync(d, w, s, w, w, b / w, cudaMemcpyDefault, peerStream));
      CK(cudaEventRecord(peerDone, peerStream));
      CK(cudaSetDevice(0));
      CK(cudaStreamWaitEvent(side[0], peerDone, 0));
    }});
    methods.push_back({"two hops through GPU1", [&](char* d, const char* s, size_t b) {
      CK(cudaMemcpyAsync(peer, s, b, cudaMemcpyDefault, side[0]));
      CK(cudaMemcpyAsync(d, peer, b, cudaMemcpyDefault, side[0]));
    }});
    methods.push_back({"peer copy GPU0->GPU1 (reference)", [&](char* d, const char* s, size_t b) {
      CK(cudaMemcpyAsync(peer, s, b, cudaMemcpyDefault, side[0]));
    }});
    methods.push_back({"peer copy 2D GPU0->GPU1", [&](char* d, const char* s, size_t b) {
      size_t w = 1 << 20;
      CK(cudaMemcpy2DAsync(peer, w, s, w, w, b / w, cudaMemcpyDefault, side[0]));
    }});
  }
  Gemm gemm;
  cudaEvent_t e0, e1, g0, g1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&g0));
  CK(cudaEventCreate(&g1));
  auto timeCopies = [&](Method& m, size_t b, int n) {
    CK(cudaEventRecord(e0, side[0]));
    for (int i = 0; i < n; ++i) m.run(dst, src, b);
    CK(cudaEventRecord(e1, side[0]));
  };
  const int gemms = 40;
  gemm.enqueue(3);
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(g0, gemm.s));
  gemm.enqueue(gemms);
  CK(cudaEventRecord(g1, gemm.s));
  CK(cudaDeviceSynchronize());
  float gemmAlone = 0;
  CK(cudaEventElapsedTime(&gemmAlone, g0, g1));
  printf("GEMM loop alone: %.2f ms (%d x 8192^3 bf16, %.0f TFLOP/s)\n", gemmAlone, gemms,
         gemms * 2.0 * 8192.0 * 8192 * 8192 / (gemmAlone * 1e-3) / 1e12);
  printf("%-44s %10s %10s %10s %8s %9s %10s %10s\n", "method", "alone ms", "GB/s", "beside ms",
         "ratio", "gemm +%", "64K us", "64K bes.");
  const char* only = argc > 3 ? argv[3] : nullptr;  // run only methods whose name has this
  for (auto& m : methods) {
    if (only && m.name.find(only) == std::string::npos) continue;
    // correctness of the method: dst must equal src afterwards
    CK(cudaMemset(dst, 0, bytes));
    m.run(dst, src, bytes);
    CK(cudaDeviceSynchronize());
    bool ok = true;
    if (m.name.find("reference") == std::string::npos && m.name.find("GPU0->GPU1") == std::string::npos) {
      std::vector<char> h(4096);
      CK(cudaMemcpy(h.data(), dst + bytes - 4096, 4096, cudaMemcpyDeviceToHost));
      for (char c : h) ok &= c == 7;
    }
    timeCopies(m, bytes, 3);
    CK(cudaDeviceSynchronize());
    float alone = 0, beside = 0, gBeside = 0, small = 0, smallBeside = 0;
    timeCopies(m, bytes, reps);
    CK(cudaDeviceSynchronize());
    CK(cudaEventElapsedTime(&alone, e0, e1));
    timeCopies(m, 64 << 10, 200);
    CK(cudaDeviceSynchronize());
    CK(cudaEventElapsedTime(&small, e0, e1));
    // beside: GEMMs first, so that they hold the SMs when the copies arrive
    CK(cudaEventRecord(g0, gemm.s));
    gemm.enqueue(gemms);
    CK(cudaEventRecord(g1, gemm.s));
    timeCopies(m, bytes, reps);
    CK(cudaDeviceSynchronize());
    CK(cudaEventElapsedTime(&beside, e0, e1));
    CK(cudaEventElapsedTime(&gBeside, g0, g1));
    CK(cudaEventRecord(g0, gemm.s));
    gemm.enqueue(10);
    CK(cudaEventRecord(g1, gemm.s));
    timeCopies(m, 64 << 10, 200);
    CK(cudaDeviceSynchronize());
    CK(cudaEventElapsedTime(&smallBeside, e0, e1));
    printf("%-44s %10.2f %10.1f %10.2f %8.2f %9.1f %10.1f %10.1f%s\n", m.name.c_str(), alone,
           reps * (double)bytes / (alone * 1e-3) / 1e9, beside, beside / alone,
           100.0 * (gBeside / gemmAlone - 1), small * 1e3 / 200, smallBeside * 1e3 / 200,
           ok ? "" : "  WRONG DATA");
    fflush(stdout);
  }
  return 0;
}
