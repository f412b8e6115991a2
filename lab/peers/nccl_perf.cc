// nccl-perf: NCCL's own ncclAlltoAll through its C API, the peer rmacc-perf alltoall is judged
// against (bench/gpu.sh). Same sizes, same data check and the same nccl-tests table as rmacc-perf,
// for two paths in one run:
//   kernel: the default path (a communicator with the default config, cudaMalloc buffers), what
//           PyTorch's all_to_all_single runs without PyTorch's own overhead;
//   ce:     NCCL's copy-engine path (2.28+): buffers from ncclMemAlloc registered as symmetric
//           windows (NCCL_WIN_COLL_SYMMETRIC) on a communicator with NCCL_CTA_POLICY_ZERO.
// Times are CUDA events around `-n` calls on one stream (max over ranks). NCCL is loaded with
// dlopen ($RMACC_NCCL_LIB, or --nccl-lib, else libnccl.so.2 from the linker's search path).
// Ranks are started like rmacc-perf (rmacc-run, mpirun or torchrun; one GPU per rank):
//   tools/rmacc-run -n 2 --no-id -- build/lab/nccl-perf -b 1K -e 4G -f 4
#include <cuda_runtime.h>
#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "counts.h"
#include "launch.h"
#include "nccl_api.h"
#include "options.h"
#include "table.h"

using namespace rmacc;
using namespace rmacc::perf;

namespace {

struct Args {
  Options sweep;              // -b -e -f -n -w -c (sizes are per-rank send bytes)
  bool kernel = true, ce = true;
  std::string lib;
};

struct Ctx {
  Launch launch;
  nccl::Api api;
  nccl::Comm kernelComm = nullptr, ceComm = nullptr;
  cudaStream_t stream = nullptr;
  double* gatherSend = nullptr;  // device, nranks doubles: the control exchange
  double* gatherRecv = nullptr;
};

[[noreturn]] void die(const std::string& why) {
  fprintf(stderr, "nccl-perf: %s\n", why.c_str());
  exit(1);
}

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + " failed: " + cudaGetErrorString(e));
}

void ncclCheck(const Ctx& c, nccl::Result r, const char* what, nccl::Comm comm = nullptr) {
  if (r == nccl::kSuccess) return;
  const char* last = c.api.GetLastError ? c.api.GetLastError(comm) : "";
  die(std::string(what) + " failed: " + c.api.GetErrorString(r) + " (" + (last ? last : "") + ")");
}

[[noreturn]] void usageExit(const char* prog, const char* why) {
  if (why) fprintf(stderr, "nccl-perf: %s\n", why);
  fprintf(stderr, "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c 0|1] "
                  "[--path kernel|ce|both] [--nccl-lib PATH]\n", prog);
  exit(why ? 2 : 0);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  a.sweep.test = "alltoall";
  a.sweep.minBytes = 1024;
  a.sweep.maxBytes = size_t{1} << 30;
  a.sweep.factor = 4;
  enum { kPath = 1000, kLib };
  const option longOpts[] = {{"path", required_argument, nullptr, kPath},
                             {"nccl-lib", required_argument, nullptr, kLib},
                             {"help", no_argument, nullptr, 'h'},
                             {nullptr, 0, nullptr, 0}};
  auto usage = [&](const char* why) { usageExit(argv[0], why); };
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:h", longOpts, nullptr)) != -1) {
    char* end = nullptr;
    switch (c) {
      case 'b': if (!parseBytes(optarg, &a.sweep.minBytes)) usage("bad -b"); break;
      case 'e': if (!parseBytes(optarg, &a.sweep.maxBytes)) usage("bad -e"); break;
      case 'f': a.sweep.factor = strtod(optarg, &end); if (*end || a.sweep.factor <= 1) usage("bad -f"); break;
      case 'n': a.sweep.iters = static_cast<int>(strtol(optarg, &end, 10)); if (*end || a.sweep.iters < 1) usage("bad -n"); break;
      case 'w': a.sweep.warmup = static_cast<int>(strtol(optarg, &end, 10)); if (*end || a.sweep.warmup < 0) usage("bad -w"); break;
      case 'c': a.sweep.check = static_cast<int>(strtol(optarg, &end, 10)); if (*end) usage("bad -c"); break;
      case kPath:
        a.kernel = !strcmp(optarg, "kernel") || !strcmp(optarg, "both");
        a.ce = !strcmp(optarg, "ce") || !strcmp(optarg, "both");
        if (!a.kernel && !a.ce) usage("--path takes kernel, ce or both");
        break;
      case kLib: a.lib = optarg; break;
      case 'h': usageExit(argv[0], nullptr);
      default: usage("unknown option");
    }
  }
  if (optind != argc) usage("unexpected argument");
  if (a.sweep.maxBytes < a.sweep.minBytes) usage("-e must not be smaller than -b");
  return a;
}

void init(Ctx* c, const Args& a) {
  c->launch = detectLaunch();
  int count = 0;
  cudaCheck(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) die("no GPU");
  cudaCheck(cudaSetDevice(c->launch.localRank % count), "cudaSetDevice");
  std::string why;
  if (!nccl::load(a.lib, &c->api, &why)) die(why);
  nccl::UniqueId ids[2];
  if (c->launch.rank == 0) {
    ncclCheck(*c, c->api.GetUniqueId(&ids[0]), "ncclGetUniqueId");
    ncclCheck(*c, c->api.GetUniqueId(&ids[1]), "ncclGetUniqueId");
  }
  shareFromRank0(c->launch, "nccl-id", ids, sizeof ids);
  const int n = c->launch.nranks, r = c->launch.rank;
  nccl::Config kernelConfig = nccl::defaultConfig();
  ncclCheck(*c, c->api.CommInitRankConfig(&c->kernelComm, n, ids[0], r, &kernelConfig), "ncclCommInitRankConfig");
  if (a.ce && c->api.hasCopyEngineAlltoAll()) {
    nccl::Config ceConfig = nccl::defaultConfig();
    ceConfig.CTAPolicy = nccl::kCtaPolicyZero;
    ncclCheck(*c, c->api.CommInitRankConfig(&c->ceComm, n, ids[1], r, &ceConfig), "ncclCommInitRankConfig (CE)");
  }
  removeSharedFile(c->launch, "nccl-id");  // init is collective: every rank has read the ids
  cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaCheck(cudaMalloc(&c->gatherSend, n * sizeof(double)), "cudaMalloc");
  cudaCheck(cudaMalloc(&c->gatherRecv, n * sizeof(double)), "cudaMalloc");
}

// Every rank's v, through one ncclAlltoAll on the kernel communicator (also the barrier).
std::vector<double> gather(Ctx& c, double v) {
  const int n = c.launch.nranks;
  std::vector<double> mine(n, v), all(n);
  cudaCheck(cudaMemcpy(c.gatherSend, mine.data(), n * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
  ncclCheck(c, c.api.AlltoAll(c.gatherSend, c.gatherRecv, sizeof(double), nccl::kUint8, c.kernelComm, c.stream),
            "ncclAlltoAll (gather)", c.kernelComm);
  cudaCheck(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize");
  cudaCheck(cudaMemcpy(all.data(), c.gatherRecv, n * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return all;
}

double maxOver(Ctx& c, double v) {
  double m = v;
  for (double x : gather(c, v)) m = x > m ? x : m;
  return m;
}

double sumOver(Ctx& c, double v) {
  double s = 0;
  for (double x : gather(c, v)) s += x;
  return s;
}

// Two send buffers with differently salted data, used by alternate calls (as rmacc-perf: a
// call whose data is overwritten by the next one's shows up as the wrong salt), one receive.
struct Buffers {
  void* send[2] = {nullptr, nullptr};
  void* recv = nullptr;
  nccl::Window win[3] = {nullptr, nullptr, nullptr};
};

Buffers allocBuffers(Ctx& c, bool ce, size_t bytes) {
  Buffers b;
  void** ptrs[3] = {&b.send[0], &b.send[1], &b.recv};
  for (int i = 0; i < 3; ++i) {
    if (!ce) {
      cudaCheck(cudaMalloc(ptrs[i], bytes), "cudaMalloc");
      continue;
    }
    ncclCheck(c, c.api.MemAlloc(ptrs[i], bytes), "ncclMemAlloc");
    // Collective: every rank registers its three buffers in the same order.
    ncclCheck(c, c.api.CommWindowRegister(c.ceComm, *ptrs[i], bytes, &b.win[i], nccl::kWinCollSymmetric),
              "ncclCommWindowRegister", c.ceComm);
  }
  return b;
}

void freeBuffers(Ctx& c, bool ce, Buffers* b) {
  void* ptrs[3] = {b->send[0], b->send[1], b->recv};
  for (int i = 2; i >= 0; --i) {
    if (!ce) {
      cudaFree(ptrs[i]);
      continue;
    }
    ncclCheck(c, c.api.CommWindowDeregister(c.ceComm, b->win[i]), "ncclCommWindowDeregister", c.ceComm);
    ncclCheck(c, c.api.MemFree(ptrs[i]), "ncclMemFree");
  }
  *b = Buffers{};
}

Layout layoutFor(const Args& a, int nranks, int rank, size_t bytes) {
  Options uniform = a.sweep;
  uniform.pattern = Pattern::kUniform;
  size_t perPeer = bytes / sizeof(float) / nranks;
  return makeLayout(makeCounts(uniform, nranks, perPeer * nranks), rank, 0, 1);
}

// One size: fill and poison, warm up, time with events, verify. Returns the row.
Row runSize(Ctx& c, const Args& a, bool ce, Buffers& b, size_t bytes, std::vector<uint8_t>& hostSend,
            std::vector<uint8_t>& hostRecv) {
  const int rank = c.launch.rank, n = c.launch.nranks;
  const Layout l = layoutFor(a, n, rank, bytes);
  const size_t es = sizeof(float), count = l.sendCounts[0];
  if (a.sweep.check) {
    for (int i = 0; i < 2; ++i) {
      fillSend(hostSend.data(), l, rank, es, i);
      cudaCheck(cudaMemcpy(b.send[i], hostSend.data(), l.sendElems * es, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    poison(hostRecv.data(), l.recvElems, es);
    cudaCheck(cudaMemcpy(b.recv, hostRecv.data(), l.recvElems * es, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  nccl::Comm comm = ce ? c.ceComm : c.kernelComm;
  int calls = 0;
  auto one = [&] {
    ncclCheck(c, c.api.AlltoAll(b.send[calls++ % 2], b.recv, count, nccl::kFloat32, comm, c.stream), "ncclAlltoAll",
              comm);
  };
  for (int i = 0; i < a.sweep.warmup; ++i) one();
  cudaCheck(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize");
  gather(c, 0);  // start together: a late rank would charge its lateness to the others
  cudaEvent_t ev[2];
  for (auto& e : ev) cudaCheck(cudaEventCreate(&e), "cudaEventCreate");
  cudaCheck(cudaEventRecord(ev[0], c.stream), "cudaEventRecord");
  for (int i = 0; i < a.sweep.iters; ++i) one();
  cudaCheck(cudaEventRecord(ev[1], c.stream), "cudaEventRecord");
  cudaCheck(cudaEventSynchronize(ev[1]), "cudaEventSynchronize");
  float ms = 0;
  cudaCheck(cudaEventElapsedTime(&ms, ev[0], ev[1]), "cudaEventElapsedTime");
  for (auto& e : ev) cudaEventDestroy(e);
  double us = maxOver(c, 1000.0 * ms / a.sweep.iters);
  int64_t wrong = -1;
  if (a.sweep.check) {
    cudaCheck(cudaMemcpy(hostRecv.data(), b.recv, l.recvElems * es, cudaMemcpyDeviceToHost), "cudaMemcpy");
    wrong = static_cast<int64_t>(sumOver(c, static_cast<double>(verifyRecv(hostRecv.data(), l, rank, es, (calls - 1) % 2))));
  }
  return makeRow(count * n * es, count * n, us, static_cast<double>(n - 1) / n, wrong);
}

int64_t runPath(Ctx& c, const Args& a, bool ce) {
  const std::vector<size_t> sizes = sweepSizes(a.sweep);
  const size_t maxBytes = sizes.empty() ? 0 : (sizes.back() / sizeof(float) / c.launch.nranks) * c.launch.nranks * sizeof(float);
  Buffers b = allocBuffers(c, ce, maxBytes ? maxBytes : 4096);
  std::vector<uint8_t> hostSend(a.sweep.check ? maxBytes : 0), hostRecv(a.sweep.check ? maxBytes : 0);
  const bool root = c.launch.rank == 0;
  if (root) {
    printf("# nccl-perf path: %s\n", ce ? "ce" : "kernel");
    printf("# %s\n", ce ? "copy engine: ncclMemAlloc buffers in NCCL_WIN_COLL_SYMMETRIC windows, NCCL_CTA_POLICY_ZERO"
                        : "kernel: cudaMalloc buffers, default communicator config");
  }
  Table table(stdout, "", "");
  if (root) table.header();
  for (size_t bytes : sizes) {
    Row r = runSize(c, a, ce, b, bytes, hostSend, hostRecv);
    if (root) table.row(r, rmaccFloat32);
  }
  int64_t wrong = root ? table.footer() : 0;
  freeBuffers(c, ce, &b);
  return static_cast<int64_t>(sumOver(c, static_cast<double>(wrong)));
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Args a = parseArgs(argc, argv);
  Ctx c;
  init(&c, a);
  if (c.launch.rank == 0) {
    printf("# nccl-perf alltoall: NCCL %s (%s), %d ranks, launcher %s, CUDA-event timing\n",
           c.api.versionString().c_str(), c.api.path.c_str(), c.launch.nranks, c.launch.launcher.c_str());
    printf("#  minBytes %zu maxBytes %zu factor %g warmup iters: %d iters: %d validation: %d\n", a.sweep.minBytes,
           a.sweep.maxBytes, a.sweep.factor, a.sweep.warmup, a.sweep.iters, a.sweep.check);
    if (a.ce && !c.ceComm) printf("# copy-engine path skipped: NCCL %s has none (needs 2.28)\n", c.api.versionString().c_str());
  }
  int64_t wrong = 0;
  if (a.kernel) wrong += runPath(c, a, false);
  if (c.ceComm) wrong += runPath(c, a, true);
  cudaFree(c.gatherSend);
  cudaFree(c.gatherRecv);
  if (c.ceComm) ncclCheck(c, c.api.CommDestroy(c.ceComm), "ncclCommDestroy");
  ncclCheck(c, c.api.CommDestroy(c.kernelComm), "ncclCommDestroy");
  cudaStreamDestroy(c.stream);
  if (wrong) fprintf(stderr, "nccl-perf: rank %d: %lld wrong values\n", c.launch.rank, static_cast<long long>(wrong));
  return wrong ? 1 : 0;
}
