#include "harness.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rmacc::perf {
namespace {

std::string hostName() {
  if (const char* h = getenv("RMACC_HOSTNAME"); h && *h) return h;  // emulated node (rmacc-run)
  char buf[256] = "";
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Largest per-rank record allGather carries (RankInfo below).
constexpr size_t kMaxGatherBytes = 128;

// What rank 0 prints for each rank: fixed size so that it travels through allGather.
struct RankInfo {
  int64_t pid;
  int32_t node, localRank, device, pad;
  char host[40];
  char deviceDesc[64];
};
static_assert(sizeof(RankInfo) <= kMaxGatherBytes);

}  // namespace

void checkResult(const Context& ctx, rmaccResult_t r, const char* call) {
  if (r == rmaccSuccess) return;
  fprintf(stderr, "rmacc-perf: rank %d: %s failed: %s (%s)\n", ctx.rank, call, rmaccGetErrorString(r),
          rmaccGetLastError(ctx.comm));
  exit(1);
}

void initContext(Context* ctx) {
  ctx->launch = detectLaunch();
  ctx->rank = ctx->launch.rank;
  ctx->nranks = ctx->launch.nranks;
  ctx->hostname = hostName();
  // The device must be current before the communicator is made: the library picks its backend
  // from it (DESIGN.md §4).
  ctx->device = makeDevice(ctx->launch.localRank);
  rmaccUniqueId id = obtainUniqueId(ctx->launch);
  RMACC_PERF_CHECK(*ctx, rmaccCommInitRank(&ctx->comm, ctx->nranks, id, ctx->rank));
  removeIdFile(ctx->launch);  // init is collective: every rank has read the id by now
  RMACC_PERF_CHECK(*ctx, rmaccCommLocalInfo(ctx->comm, &ctx->localRank, &ctx->localSize, &ctx->node, &ctx->nNodes));
  ctx->stream = ctx->device->createStream(ctx->comm);
  // The control exchange uses registered windows, the path every configuration must support,
  // so that the table can be printed even when a test explores a less travelled one (-m 0).
  ctx->ctlSend = allocBuffer(*ctx, kMaxGatherBytes * ctx->nranks, true);
  ctx->ctlRecv = allocBuffer(*ctx, kMaxGatherBytes * ctx->nranks, true);
}

void finalizeContext(Context* ctx) {
  freeBuffer(*ctx, &ctx->ctlSend);
  freeBuffer(*ctx, &ctx->ctlRecv);
  ctx->device->destroyStream(ctx->comm, ctx->stream);
  RMACC_PERF_CHECK(*ctx, rmaccCommDestroy(ctx->comm));
  ctx->comm = nullptr;
}

std::vector<uint8_t> allGather(Context& ctx, const void* mine, size_t bytes) {
  const size_t total = bytes * ctx.nranks;
  std::vector<uint8_t> out(total);
  std::vector<uint8_t> replicated(total);
  for (int p = 0; p < ctx.nranks; ++p) memcpy(replicated.data() + p * bytes, mine, bytes);
  if (bytes > kMaxGatherBytes) {
    fprintf(stderr, "rmacc-perf: internal error: allGather of %zu bytes\n", bytes);
    exit(1);
  }
  ctx.device->copyToDevice(ctx.ctlSend.ptr, replicated.data(), total);
  RMACC_PERF_CHECK(ctx, rmaccAlltoAll(ctx.ctlSend.ptr, ctx.ctlRecv.ptr, bytes, rmaccUint8, ctx.comm, ctx.stream));
  RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
  ctx.device->copyToHost(out.data(), ctx.ctlRecv.ptr, total);
  return out;
}

uint64_t sumOverRanks(Context& ctx, uint64_t v) {
  std::vector<uint8_t> all = allGather(ctx, &v, sizeof v);
  uint64_t sum = 0;
  for (int p = 0; p < ctx.nranks; ++p) {
    uint64_t x;
    memcpy(&x, all.data() + p * sizeof x, sizeof x);
    sum += x;
  }
  return sum;
}

int checkedExitStatus(Context& ctx, int64_t wrongOnRank0) {
  uint64_t wrong = sumOverRanks(ctx, static_cast<uint64_t>(ctx.rank == 0 ? wrongOnRank0 : 0));
  if (wrong == 0) return 0;
  fprintf(stderr, "rmacc-perf: rank %d: the check found %lld wrong values: exit status 1\n",
          ctx.rank, static_cast<long long>(wrong));
  return 1;
}

double maxOverRanks(Context& ctx, double v) {
  std::vector<uint8_t> all = allGather(ctx, &v, sizeof v);
  double m = v;
  for (int p = 0; p < ctx.nranks; ++p) {
    double x;
    memcpy(&x, all.data() + p * sizeof x, sizeof x);
    m = x > m ? x : m;
  }
  return m;
}

void printRankInfo(Context& ctx, const Options& opts) {
  RankInfo me{};
  me.pid = getpid();
  me.node = ctx.node;
  me.localRank = ctx.localRank;
  me.device = ctx.device->index();
  snprintf(me.host, sizeof me.host, "%s", ctx.hostname.c_str());
  snprintf(me.deviceDesc, sizeof me.deviceDesc, "%s", ctx.device->description().c_str());
  std::vector<uint8_t> all = allGather(ctx, &me, sizeof me);
  if (ctx.rank != 0) return;
  int version = 0;
  rmaccGetVersion(&version);
  printf("# rmacc-perf %s: rmacc version %d, launcher %s, backend %s\n", opts.test.c_str(), version,
         ctx.launch.launcher.c_str(), ctx.device->kind());
  printf("# nranks %d, nodes %d, ranks per node %d, registered windows %d\n", ctx.nranks, ctx.nNodes,
         ctx.localSize, opts.registered);
  char step[64];
  if (opts.factor > 0) snprintf(step, sizeof step, "%g(factor)", opts.factor);
  else snprintf(step, sizeof step, "%zu(bytes)", opts.stepBytes);
  printf("#  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d validation: %d\n", opts.minBytes,
         opts.maxBytes, step, opts.warmup, opts.iters, opts.check);
  printf("#\n# Using devices\n");
  for (int p = 0; p < ctx.nranks; ++p) {
    RankInfo r;
    memcpy(&r, all.data() + p * sizeof r, sizeof r);
    printf("#  Rank %3d Pid %7lld on %10s node %2d local %2d device %2d [%s]\n", p, static_cast<long long>(r.pid),
           r.host, r.node, r.localRank, r.device, r.deviceDesc);
  }
  fflush(stdout);
}

Buffer allocBuffer(Context& ctx, size_t bytes, bool registered) {
  Buffer b;
  b.bytes = bytes ? bytes : 1;  // a zero-byte rank still takes part in the collective register
  if (!registered) {
    b.ptr = ctx.device->alloc(b.bytes);
    return b;
  }
  b.fromLibrary = true;
  RMACC_PERF_CHECK(ctx, rmaccMemAlloc(ctx.comm, &b.ptr, b.bytes));
  RMACC_PERF_CHECK(ctx, rmaccCommWindowRegister(ctx.comm, b.ptr, b.bytes, &b.window));
  return b;
}

Buffer allocHostWindow(Context& ctx, size_t bytes) {
  Buffer b;
  b.bytes = bytes ? bytes : 1;
  b.host = true;
  b.ptr = ctx.device->allocHost(b.bytes);
  RMACC_PERF_CHECK(ctx, rmaccCommWindowRegister(ctx.comm, b.ptr, b.bytes, &b.window));
  return b;
}

void freeBuffer(Context& ctx, Buffer* b) {
  if (!b->ptr) return;
  if (b->window) RMACC_PERF_CHECK(ctx, rmaccCommWindowDeregister(ctx.comm, b->window));
  if (b->fromLibrary) RMACC_PERF_CHECK(ctx, rmaccMemFree(ctx.comm, b->ptr));
  else if (b->host) ctx.device->releaseHost(b->ptr);
  else ctx.device->release(b->ptr);
  *b = Buffer{};
}

double timeCalls(Context& ctx, int warmup, int iters, const std::function<void()>& launch,
                 ThreadCpuMeter* meter, HostCpuMeter* host) {
  for (int i = 0; i < warmup; ++i) launch();
  // Start together: without the barrier a rank that arrives late charges its lateness to the
  // others' first call.
  RMACC_PERF_CHECK(ctx, rmaccBarrier(ctx.comm, ctx.stream));
  RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
  if (meter) meter->start();
  if (host) host->start();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) launch();
  RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
  if (host) host->stop();
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return maxOverRanks(ctx, us / iters);
}

}  // namespace rmacc::perf
