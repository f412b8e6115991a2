#include "measure.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.h"
#include "counts.h"
#include "cuda_check.h"

namespace rmacc::overlap {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

perf::Layout layoutOf(const perf::Context& ctx, size_t countPerPeer) {
  perf::Options uniform;
  uniform.pattern = perf::Pattern::kUniform;
  return perf::makeLayout(perf::makeCounts(uniform, ctx.nranks, countPerPeer * ctx.nranks), ctx.rank, 0, 1);
}

}  // namespace

Bench::Bench(perf::Context& ctx, Libs& libs, GemmLoop& gemm, cudaStream_t gemmStream)
    : ctx_(ctx), libs_(libs), gemm_(gemm), gemmStream_(gemmStream),
      commStream_(static_cast<cudaStream_t>(ctx.stream)) {
  for (cudaEvent_t* e : {&g0_, &g1_, &a0_, &a1_}) cudaCheck(cudaEventCreate(e), "cudaEventCreate");
}

Bench::~Bench() {
  for (cudaEvent_t e : {g0_, g1_, a0_, a1_}) cudaEventDestroy(e);
}

float Bench::elapsed(cudaEvent_t from, cudaEvent_t to) {
  cudaCheck(cudaEventSynchronize(to), "cudaEventSynchronize");
  float ms = 0;
  cudaCheck(cudaEventElapsedTime(&ms, from, to), "cudaEventElapsedTime");
  return ms;
}

void Bench::calls(const Config& c, int n) {
  for (int i = 0; i < n; ++i) libs_.call(c.lib, c.buf, c.countPerPeer, commStream_);
}

double Bench::gemmOnly() {
  cudaCheck(cudaEventRecord(g0_, gemmStream_), "cudaEventRecord");
  gemm_.enqueue(gemmStream_);
  cudaCheck(cudaEventRecord(g1_, gemmStream_), "cudaEventRecord");
  return elapsed(g0_, g1_);
}

double Bench::a2aOnly(const Config& c, int n) {
  libs_.barrier();  // start together: a late rank's lateness is not the calls' time
  cudaCheck(cudaEventRecord(a0_, commStream_), "cudaEventRecord");
  calls(c, n);
  cudaCheck(cudaEventRecord(a1_, commStream_), "cudaEventRecord");
  return elapsed(a0_, a1_);
}

void Bench::both(const Config& c, int n, double* gemmMs, double* a2aMs) {
  libs_.barrier();
  // The GEMMs first, as a training step's compute is already queued when its all-to-all is.
  cudaCheck(cudaEventRecord(g0_, gemmStream_), "cudaEventRecord");
  gemm_.enqueue(gemmStream_);
  cudaCheck(cudaEventRecord(g1_, gemmStream_), "cudaEventRecord");
  cudaCheck(cudaEventRecord(a0_, commStream_), "cudaEventRecord");
  calls(c, n);
  cudaCheck(cudaEventRecord(a1_, commStream_), "cudaEventRecord");
  *a2aMs = elapsed(a0_, a1_);
  *gemmMs = elapsed(g0_, g1_);
}

double Bench::perCallUs(const Config& c, int n) {
  a2aOnly(c, 3);  // warm-up: first-touch registration and mapping of these buffers
  return perf::maxOverRanks(ctx_, 1000.0 * a2aOnly(c, n) / n);
}

Times Bench::measure(const Config& c, int n, int reps) {
  std::vector<double> ga, aa, gb, ab;
  for (int r = 0; r < reps; ++r) {
    // Interleaved, so that a drift of clocks or temperature touches all three alike.
    ga.push_back(gemmOnly());
    aa.push_back(a2aOnly(c, n));
    double g = 0, a = 0;
    both(c, n, &g, &a);
    gb.push_back(g);
    ab.push_back(a);
  }
  Times t;
  t.gemmAlone = perf::maxOverRanks(ctx_, median(ga));
  t.a2aAlone = perf::maxOverRanks(ctx_, median(aa));
  t.gemmBeside = perf::maxOverRanks(ctx_, median(gb));
  t.a2aBeside = perf::maxOverRanks(ctx_, median(ab));
  return t;
}

void Bench::fill(const Config& c) {
  const perf::Layout l = layoutOf(ctx_, c.countPerPeer);
  const size_t es = sizeof(float);
  std::vector<uint8_t> host(std::max(l.sendElems, l.recvElems) * es);
  perf::fillSend(host.data(), l, ctx_.rank, es);
  cudaCheck(cudaMemcpy(c.buf.send, host.data(), l.sendElems * es, cudaMemcpyHostToDevice), "cudaMemcpy");
  perf::poison(host.data(), l.recvElems, es);
  cudaCheck(cudaMemcpy(c.buf.recv, host.data(), l.recvElems * es, cudaMemcpyHostToDevice), "cudaMemcpy");
  // cudaMemcpy from pageable memory may return before the copy landed (device_cuda.cc): the
  // calls run on a non-blocking stream that is not ordered after it.
  cudaCheck(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

uint64_t Bench::wrongValues(const Config& c) {
  cudaCheck(cudaStreamSynchronize(commStream_), "cudaStreamSynchronize");
  const perf::Layout l = layoutOf(ctx_, c.countPerPeer);
  const size_t es = sizeof(float);
  std::vector<uint8_t> host(l.recvElems * es);
  cudaCheck(cudaMemcpy(host.data(), c.buf.recv, host.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return perf::sumOverRanks(ctx_, perf::verifyRecv(host.data(), l, ctx_.rank, es));
}

}  // namespace rmacc::overlap
