// bench/overlap's measurements: the GEMM loop alone, N all-to-alls alone, and both at once on
// two streams of the process, each side timed by CUDA events on its own stream (the all-to-alls
// from the first call's start to the last call's end).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gemm.h"
#include "harness.h"
#include "libs.h"

namespace rmacc::overlap {

struct Config {
  Lib lib;
  BufKind kind;
  A2aBuffers buf;
  size_t countPerPeer = 0;  // floats per peer of one call
};

// Milliseconds: medians over the repetitions of each rank, then the max over ranks.
struct Times {
  double gemmAlone = 0, a2aAlone = 0, gemmBeside = 0, a2aBeside = 0;
};

class Bench {
 public:
  // gemmStream: where the GEMMs run (PyTorch's default stream is the legacy stream);
  // the all-to-alls run on ctx.stream.
  Bench(perf::Context& ctx, Libs& libs, GemmLoop& gemm, cudaStream_t gemmStream);
  ~Bench();
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // Microseconds per call alone (after a warm-up), max over ranks: to choose N.
  double perCallUs(const Config& c, int calls);
  Times measure(const Config& c, int calls, int reps);

  // The data check (uniform layout, check.h values): fill the send buffer and poison the receive
  // buffer; afterwards count wrong elements (summed over ranks).
  void fill(const Config& c);
  uint64_t wrongValues(const Config& c);

 private:
  double gemmOnly();
  double a2aOnly(const Config& c, int calls);
  void both(const Config& c, int calls, double* gemmMs, double* a2aMs);
  void calls(const Config& c, int n);
  float elapsed(cudaEvent_t from, cudaEvent_t to);

  perf::Context& ctx_;
  Libs& libs_;
  GemmLoop& gemm_;
  cudaStream_t gemmStream_, commStream_;
  cudaEvent_t g0_, g1_, a0_, a1_;
};

}  // namespace rmacc::overlap
