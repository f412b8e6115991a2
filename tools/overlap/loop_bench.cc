// rmacc-loopbench (issue 11): rmacc's same-device copies (exec/local_copy.h, the real
// LocalCopier on the CUDA backend) alone and beside a cuBLAS GEMM loop, `direct` (the driver's
// copy, an SM kernel) against `engines` (out and back through the next GPU's slots and pinned
// host memory). One process per GPU, all copying at once as in an AlltoAll:
//   tools/rmacc-run -n 2 -- build-gpu/tools/rmacc-loopbench [--sizes 1M,16M,64M,256M]
//       [--slot 4M] [--slots 4] [--target-ms 20] [--gemms 40] [--dim 8192] [--reps 3]
// Prints per mode and size: GB/s of the copy alone (bytes copied / time, max time over ranks),
// the copies' time beside the GEMMs over their time alone, and how much slower the GEMM loop
// ran beside them; and checks every copied byte once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/topology.h"
#include "cuda_check.h"
#include "exec/local_copy.h"
#include "gemm.h"

using namespace rmacc;
using namespace rmacc::overlap;

namespace {

struct Args {
  std::vector<size_t> sizes = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
  size_t slotBytes = 4u << 20;
  int slots = 4, gemms = 40, dim = 8192, reps = 3;
  double targetMs = 20;
};

size_t parseBytes(const std::string& s) {
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  size_t mult = *end == 'K' ? 1u << 10 : *end == 'M' ? 1u << 20 : *end == 'G' ? 1u << 30 : 1;
  if (v <= 0) { fprintf(stderr, "rmacc-loopbench: bad size %s\n", s.c_str()); exit(2); }
  return (size_t)(v * mult);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") {
      a.sizes.clear();
      for (size_t p = 0; p <= v.size();) {
        size_t c = v.find(',', p);
        a.sizes.push_back(parseBytes(v.substr(p, c == std::string::npos ? std::string::npos : c - p)));
        if (c == std::string::npos) break;
        p = c + 1;
      }
    } else if (k == "--slot") a.slotBytes = parseBytes(v);
    else if (k == "--slots") a.slots = atoi(v.c_str());
    else if (k == "--target-ms") a.targetMs = atof(v.c_str());
    else if (k == "--gemms") a.gemms = atoi(v.c_str());
    else if (k == "--dim") a.dim = atoi(v.c_str());
    else if (k == "--reps") a.reps = atoi(v.c_str());
    else { fprintf(stderr, "rmacc-loopbench: unknown option %s\n", k.c_str()); exit(2); }
  }
  return a;
}

int envInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v ? atoi(v) : dflt;
}

rmaccUniqueId idFromEnv() {
  rmaccUniqueId id{};
  const char* hex = getenv("RMACC_RUN_ID");
  if (!hex || strlen(hex) != 2 * sizeof(id.internal)) {
    fprintf(stderr, "rmacc-loopbench: start it with tools/rmacc-run (RMACC_RUN_ID missing)\n");
    exit(2);
  }
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    unsigned v = 0;
    sscanf(hex + 2 * i, "%2x", &v);
    id.internal[i] = (char)v;
  }
  return id;
}

class Timer {
 public:
  Timer() { cudaCheck(cudaEventCreate(&a_), "event"), cudaCheck(cudaEventCreate(&b_), "event"); }
  ~Timer() { cudaEventDestroy(a_), cudaEventDestroy(b_); }
  void start(cudaStream_t s) { cudaCheck(cudaEventRecord(a_, s), "record"); }
  void stop(cudaStream_t s) { cudaCheck(cudaEventRecord(b_, s), "record"); }
  double ms() {
    cudaCheck(cudaEventSynchronize(b_), "sync");
    float t = 0;
    cudaCheck(cudaEventElapsedTime(&t, a_, b_), "elapsed");
    return t;
  }

 private:
  cudaEvent_t a_, b_;
};

// One mode on this rank: copies of `bytes` from src to dst through the copier.
struct Run {
  Bootstrap& boot;
  LocalCopier& copier;
  Stream& stream;
  cudaStream_t cs, gs;
  GemmLoop& gemm;

  void copies(char* dst, const char* src, size_t bytes, int n) {
    CopyDesc c{dst, src, bytes};
    for (int i = 0; i < n; ++i) copier.copy(stream, &c, 1);
  }
  // Max over ranks of `v`.
  double maxOver(double v) {
    std::vector<double> all(boot.nRanks());
    all[boot.rank()] = v;
    boot.allGather(all.data(), sizeof(double));
    return *std::max_element(all.begin(), all.end());
  }
  double copiesAlone(char* dst, const char* src, size_t bytes, int n) {
    boot.barrier();
    Timer t;
    t.start(cs);
    copies(dst, src, bytes, n);
    t.stop(cs);
    return maxOver(t.ms());
  }
  double gemmAlone() {
    boot.barrier();
    Timer t;
    t.start(gs);
    gemm.enqueue(gs);
    t.stop(gs);
    return maxOver(t.ms());
  }
  void beside(char* dst, const char* src, size_t bytes, int n, double* gemmMs, double* copyMs) {
    boot.barrier();
    Timer g, c;
    g.start(gs);
    gemm.enqueue(gs);
    g.stop(gs);
    c.start(cs);
    copies(dst, src, bytes, n);
    c.stop(cs);
    *copyMs = maxOver(c.ms());
    *gemmMs = maxOver(g.ms());
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void measureMode(const Args& a, Backend& be, Bootstrap& boot, const Topology& topo, GemmLoop& gemm,
                 cudaStream_t gs, LocalCopyMode mode) {
  LocalCopier copier(be, boot, topo, boot.rank(), mode, a.slotBytes, a.slots);
  auto stream = be.createStream();
  Run run{boot, copier, *stream, static_cast<cudaStream_t>(stream->handle()), gs, gemm};
  const char* name = mode == LocalCopyMode::kEngines ? "engines" : "direct";
  for (size_t bytes : a.sizes) {
    char *src = nullptr, *dst = nullptr;
    cudaCheck(cudaMalloc(&src, bytes), "cudaMalloc");
    cudaCheck(cudaMalloc(&dst, bytes), "cudaMalloc");
    std::vector<unsigned char> host(bytes), back(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = (unsigned char)(i * 131 + (i >> 20) * 7 + boot.rank());
    cudaCheck(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice), "H2D");
    cudaCheck(cudaMemset(dst, 0, bytes), "memset");
    run.copiesAlone(dst, src, bytes, 2);  // warm-up
    cudaCheck(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost), "D2H");
    bool ok = memcmp(host.data(), back.data(), bytes) == 0;
    double one = run.copiesAlone(dst, src, bytes, 1);
    int n = std::clamp((int)(a.targetMs / std::max(one, 1e-3)), 3, 5000);
    std::vector<double> alone, gAlone, gBeside, cBeside;
    for (int r = 0; r < a.reps; ++r) {
      alone.push_back(run.copiesAlone(dst, src, bytes, n));
      gAlone.push_back(run.gemmAlone());
      double g, c;
      run.beside(dst, src, bytes, n, &g, &c);
      gBeside.push_back(g), cBeside.push_back(c);
    }
    double t = median(alone), tb = median(cBeside), ga = median(gAlone), gb = median(gBeside);
    if (boot.rank() == 0)
      printf("%-8s %10zu %6d %9.1f %10.3f %10.3f %8.2f %8.1f%%  %s\n", name, bytes, n,
             (double)bytes * n / (t * 1e6), t, tb, tb / t, 100 * (gb / ga - 1), ok ? "ok" : "WRONG");
    fflush(stdout);
    cudaFree(src);
    cudaFree(dst);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parseArgs(argc, argv);
  const int rank = envInt("RMACC_RUN_RANK", 0), n = envInt("RMACC_RUN_NRANKS", 1);
  int ngpu = 0;
  cudaCheck(cudaGetDeviceCount(&ngpu), "cudaGetDeviceCount");
  cudaCheck(cudaSetDevice(envInt("RMACC_RUN_LOCAL_RANK", 0) % ngpu), "cudaSetDevice");
  auto boot = createTcpBootstrap(idFromEnv(), rank, n, 120);
  const Topology topo = Topology::blocks(1, n);
  auto be = createCudaBackend(120);
  GemmLoop gemm(a.dim, a.gemms);
  cudaStream_t gs;
  cudaCheck(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking), "stream");
  if (rank == 0)
    printf("# rmacc-loopbench: %d ranks, slots %d x %zu B, %d GEMMs %d^3 beside; times max over ranks\n"
           "# mode       bytes  calls      GB/s   alone ms  beside ms   ratio  GEMM slower  data\n",
           n, a.slots, a.slotBytes, a.gemms, a.dim);
  for (LocalCopyMode m : {LocalCopyMode::kDirect, LocalCopyMode::kEngines})
    measureMode(a, *be, *boot, topo, gemm, gs, m);
  cudaStreamDestroy(gs);
  boot->barrier();
  return 0;
}
