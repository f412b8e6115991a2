// rmacc-overlap (bench/overlap, issue 11): do all-to-alls keep their speed beside compute, and
// does compute keep its speed beside them? One process per GPU; each runs a loop of bf16 GEMMs
// (cuBLAS, 40 x 8192^3 by default) on one stream and N all-to-alls on a second stream, and
// measures the GEMM loop alone, the N calls alone, and both together, for rmacc and NCCL (kernel
// path; copy-engine path where NCCL has one) in the same run with the same bytes, on
// PyTorch-like buffers (cudaMalloc, and blocks at an offset inside one cudaMalloc segment) and
// on each library's own memory. N is chosen per size so that the slowest library's calls take
// about --target-ms alone, well inside the GEMM loop. Prints one table and the targets
// (rmacc beside <= 1.25 x alone at 16-256 MiB, GEMM slowdown <= 3%) as PASS/FAIL.
//   tools/rmacc-run -n 2 -- build/lab/rmacc-overlap
#include <cuda_runtime.h>
#include <getopt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gemm.h"
#include "harness.h"
#include "libs.h"
#include "measure.h"
#include "options.h"

using namespace rmacc;
using namespace rmacc::overlap;

namespace {

struct Args {
  std::vector<size_t> sizes = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
  std::vector<int> calls;  // --calls: N per size instead of calibrating
  int gemms = 40, dim = 8192, reps = 3;
  double targetMs = 20;
  bool legacyStream = true;
  std::string ncclLib;
};

[[noreturn]] void usage(const char* prog, const char* why) {
  if (why) fprintf(stderr, "rmacc-overlap: %s\n", why);
  fprintf(stderr,
          "usage: %s [--sizes 1M,16M,64M,256M] [--calls N,N,...] [--target-ms 20] [--gemms 40] [--dim 8192]\n"
          "          [--reps 3] [--gemm-stream legacy|own] [--nccl-lib PATH]\n"
          "  sizes are per-rank send bytes of one all-to-all; --calls fixes N per size (else calibrated);\n"
          "  --gemm-stream legacy: the GEMMs on the legacy default stream, as PyTorch's default stream\n",
          prog);
  exit(why ? 2 : 0);
}

template <typename T, typename Parse>
std::vector<T> listArg(const char* prog, const char* text, Parse parse) {
  std::vector<T> out;
  std::string s = text;
  for (size_t pos = 0; pos <= s.size();) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    T v{};
    if (!parse(item, &v)) usage(prog, ("bad list item: " + item).c_str());
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool parseInt(const std::string& s, int* v) {
  char* end = nullptr;
  long x = strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || x < 1 || x > 1000000) return false;
  *v = static_cast<int>(x);
  return true;
}

Args parseArgs(int argc, char** argv) {
  Args a;
  enum { kSizes = 1000, kCalls, kTarget, kGemms, kDim, kReps, kStream, kLib };
  const option opts[] = {{"sizes", required_argument, nullptr, kSizes},   {"calls", required_argument, nullptr, kCalls},
                         {"target-ms", required_argument, nullptr, kTarget}, {"gemms", required_argument, nullptr, kGemms},
                         {"dim", required_argument, nullptr, kDim},       {"reps", required_argument, nullptr, kReps},
                         {"gemm-stream", required_argument, nullptr, kStream},
                         {"nccl-lib", required_argument, nullptr, kLib},  {"help", no_argument, nullptr, 'h'},
                         {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, nullptr)) != -1) {
    switch (c) {
      case kSizes: a.sizes = listArg<size_t>(argv[0], optarg, [](const std::string& s, size_t* v) { return perf::parseBytes(s, v) && *v > 0; }); break;
      case kCalls: a.calls = listArg<int>(argv[0], optarg, parseInt); break;
      case kTarget: a.targetMs = atof(optarg); if (!(a.targetMs > 0)) usage(argv[0], "bad --target-ms"); break;
      case kGemms: if (!parseInt(optarg, &a.gemms)) usage(argv[0], "bad --gemms"); break;
      case kDim: if (!parseInt(optarg, &a.dim)) usage(argv[0], "bad --dim"); break;
      case kReps: if (!parseInt(optarg, &a.reps)) usage(argv[0], "bad --reps"); break;
      case kStream:
        if (strcmp(optarg, "legacy") && strcmp(optarg, "own")) usage(argv[0], "--gemm-stream takes legacy or own");
        a.legacyStream = !strcmp(optarg, "legacy");
        break;
      case kLib: a.ncclLib = optarg; break;
      case 'h': usage(argv[0], nullptr);
      default: usage(argv[0], "unknown option");
    }
  }
  if (optind != argc) usage(argv[0], "unexpected argument");
  if (!a.calls.empty() && a.calls.size() != a.sizes.size()) usage(argv[0], "--calls needs one N per size");
  return a;
}

// The targets apply to rmacc at 16-256 MiB per rank.
constexpr double kMaxBesideRatio = 1.25, kMaxGemmSlowdownPct = 3.0;
bool targeted(const Config& c, size_t bytes) { return c.lib == Lib::kRmacc && bytes >= (16u << 20) && bytes <= (256u << 20); }

struct Verdicts {
  int rows = 0, ratioFails = 0, gemmFails = 0;
  double worstRatio = 0, worstSlowdown = -1e9;
};

void printHeader() {
  printf("# %7s %-14s %-11s %5s %9s %9s %6s %9s %9s %7s %6s %s\n", "size", "buffers", "library", "N", "a2a-alone",
         "a2a-besd", "ratio", "gemm", "gemm-besd", "gemm%", "wrong", "target");
  printf("# %7s %-14s %-11s %5s %9s %9s %6s %9s %9s %7s %6s %s\n", "(MiB)", "", "", "calls", "(ms)", "(ms)", "",
         "(ms)", "(ms)", "slower", "", "");
}

void printRow(const Config& c, size_t bytes, int n, const Times& t, uint64_t wrong, Verdicts* v) {
  const double ratio = t.a2aAlone > 0 ? t.a2aBeside / t.a2aAlone : 0;
  const double slow = t.gemmAlone > 0 ? 100.0 * (t.gemmBeside / t.gemmAlone - 1) : 0;
  std::string verdict = "-";
  if (targeted(c, bytes)) {
    bool okRatio = ratio <= kMaxBesideRatio, okGemm = slow <= kMaxGemmSlowdownPct;
    verdict = okRatio && okGemm ? "PASS" : std::string("FAIL") + (okRatio ? "" : " ratio") + (okGemm ? "" : " gemm");
    ++v->rows;
    v->ratioFails += !okRatio;
    v->gemmFails += !okGemm;
    v->worstRatio = std::max(v->worstRatio, ratio);
    v->worstSlowdown = std::max(v->worstSlowdown, slow);
  }
  // '*': the calls outlasted the GEMM loop, so their tail ran alone and the ratio understates.
  const char* tail = t.a2aBeside > t.gemmBeside ? "*" : "";
  printf("  %7.0f %-14s %-11s %5d %9.2f %9.2f %5.2f%s %9.2f %9.2f %7.2f %6llu %s\n", bytes / 1048576.0,
         kindName(c.kind), libName(c.lib), n, t.a2aAlone, t.a2aBeside, ratio, tail, t.gemmAlone, t.gemmBeside, slow,
         static_cast<unsigned long long>(wrong), verdict.c_str());
}

std::vector<Config> configsFor(Libs& libs) {
  std::vector<Config> cs;
  for (BufKind k : {BufKind::kCudaMalloc, BufKind::kOffset, BufKind::kLibAlloc}) cs.push_back({Lib::kRmacc, k, {}, 0});
  if (libs.has(Lib::kNcclKernel))
    for (BufKind k : {BufKind::kCudaMalloc, BufKind::kOffset}) cs.push_back({Lib::kNcclKernel, k, {}, 0});
  if (libs.has(Lib::kNcclCe)) cs.push_back({Lib::kNcclCe, BufKind::kLibAlloc, {}, 0});
  return cs;
}

// One size: every configuration's buffers, N from the slowest configuration alone, then the
// measurements and the data check. Returns the wrong-value count.
uint64_t runSize(perf::Context& ctx, Libs& libs, Bench& bench, const Args& a, size_t idx, Verdicts* v) {
  const size_t countPerPeer = a.sizes[idx] / sizeof(float) / ctx.nranks;
  const size_t bytes = countPerPeer * ctx.nranks * sizeof(float);
  std::vector<Config> cs = configsFor(libs);
  for (Config& c : cs) {
    c.countPerPeer = countPerPeer;
    c.buf = libs.alloc(c.lib, c.kind, bytes ? bytes : 4096);
    bench.fill(c);
  }
  int n = a.calls.empty() ? 0 : a.calls[idx];
  if (n == 0) {
    double slowestUs = 0;
    for (const Config& c : cs) slowestUs = std::max(slowestUs, bench.perCallUs(c, 10));
    n = static_cast<int>(std::lround(a.targetMs * 1000.0 / std::max(slowestUs, 1.0)));
    n = std::clamp(n, 2, 5000);
  }
  uint64_t wrongTotal = 0;
  for (Config& c : cs) {
    Times t = bench.measure(c, n, a.reps);
    uint64_t wrong = bench.wrongValues(c);
    wrongTotal += wrong;
    if (ctx.rank == 0) printRow(c, bytes, n, t, wrong, v);
  }
  for (auto it = cs.rbegin(); it != cs.rend(); ++it) libs.release(it->lib, it->kind, &it->buf);
  return wrongTotal;
}

void printVerdicts(const Verdicts& v) {
  if (v.rows == 0) {
    printf("# overlap targets: no rmacc row at 16-256 MiB measured\n");
    return;
  }
  printf("# overlap target: rmacc beside <= %.2f x alone at 16-256 MiB: %s (%d of %d rows fail, worst %.2f x)\n",
         kMaxBesideRatio, v.ratioFails ? "FAIL" : "PASS", v.ratioFails, v.rows, v.worstRatio);
  printf("# overlap target: GEMM slowdown beside rmacc <= %.0f%% at 16-256 MiB: %s (%d of %d rows fail, worst %.2f%%)\n",
         kMaxGemmSlowdownPct, v.gemmFails ? "FAIL" : "PASS", v.gemmFails, v.rows, v.worstSlowdown);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Args a = parseArgs(argc, argv);
  perf::Context ctx;
  perf::initContext(&ctx);
  if (strcmp(ctx.device->kind(), "cuda") != 0) {
    fprintf(stderr, "rmacc-overlap: needs a GPU (backend is %s)\n", ctx.device->kind());
    return 2;
  }
  Libs libs(ctx, a.ncclLib);
  GemmLoop gemm(a.dim, a.gemms);
  cudaStream_t gemmStream = cudaStreamLegacy;
  if (!a.legacyStream) {
    if (cudaStreamCreateWithFlags(&gemmStream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  }
  Bench bench(ctx, libs, gemm, gemmStream);
  for (int i = 0; i < 2; ++i) gemm.enqueue(gemmStream);  // clocks up, cuBLAS's choice made
  cudaStreamSynchronize(gemmStream);
  if (ctx.rank == 0) {
    int version = 0;
    rmaccGetVersion(&version);
    printf("# rmacc-overlap: %d ranks, rmacc %d, %s\n", ctx.nranks, version, libs.ncclDescription().c_str());
    printf("# compute: %d bf16 GEMMs %d^3 (cuBLAS) on the %s stream; all-to-alls on a non-blocking stream; "
           "medians of %d repetitions, max over ranks\n",
           a.gemms, a.dim, a.legacyStream ? "legacy default" : "own non-blocking", a.reps);
    printf("# N: %s\n", a.calls.empty() ? "per size, the slowest library's calls alone take about --target-ms"
                                        : "given (--calls)");
    printHeader();
  }
  Verdicts v;
  uint64_t wrong = 0;
  for (size_t i = 0; i < a.sizes.size(); ++i) wrong += runSize(ctx, libs, bench, a, i, &v);
  if (ctx.rank == 0) {
    printVerdicts(v);
    printf("# data check: %llu wrong values %s\n", static_cast<unsigned long long>(wrong), wrong ? "FAILED" : "OK");
  }
  if (!a.legacyStream) cudaStreamDestroy(gemmStream);
  perf::finalizeContext(&ctx);
  return wrong ? 1 : 0;
}
