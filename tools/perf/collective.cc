#include "collective.h"

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "check.h"
#include "table.h"

namespace rmacc::perf {
namespace {

std::string jsonTags(const Context& ctx, const Options& opts) {
  std::string tags = "\"test\":" + jsonString(opts.test) + ",\"nranks\":" + std::to_string(ctx.nranks) +
                     ",\"nodes\":" + std::to_string(ctx.nNodes) + ",\"backend\":" + jsonString(ctx.device->kind()) +
                     ",\"registered\":" + std::to_string(opts.registered);
  if (opts.graph) tags += ",\"graph\":1";
  if (opts.test == "alltoallv")
    tags += ",\"pattern\":" + jsonString(patternName(opts.pattern)) + ",\"seed\":" + std::to_string(opts.seed) +
            ",\"counts\":" + jsonString(countsSourceName(opts.counts));
  return tags;
}

// Buffers are allocated once, for the largest layout of the sweep, so that registration (a
// collective) happens once and is not part of any timing. With the check on there are two send
// buffers with differently salted data, used by alternate calls: if a call's data is
// overwritten by the next call's (a relay slot reused too early), the blocks come out with the
// wrong salt and are counted. Identical data in every call would hide exactly that bug.
struct Buffers {
  Buffer send[2], recv;
  int nSend = 1;
  std::vector<uint8_t> hostSend, hostRecv;
};

Buffers allocFor(Context& ctx, const Options& opts, const std::vector<Layout>& layouts) {
  const size_t es = dataTypeSize(opts.dtype);
  size_t maxSend = 0, maxRecv = 0;
  for (const Layout& l : layouts) {
    maxSend = std::max(maxSend, l.sendElems * es);
    maxRecv = std::max(maxRecv, l.recvElems * es);
  }
  Buffers b;
  b.nSend = opts.check ? 2 : 1;
  for (int i = 0; i < b.nSend; ++i) b.send[i] = allocBuffer(ctx, maxSend, opts.registered);
  b.recv = allocBuffer(ctx, maxRecv, opts.registered);
  if (opts.check) {
    b.hostSend.resize(maxSend);
    b.hostRecv.resize(maxRecv);
  }
  return b;
}

void prepare(Context& ctx, const Options& opts, const Layout& l, Buffers& b) {
  const size_t es = dataTypeSize(opts.dtype);
  for (int i = 0; i < b.nSend; ++i) {
    fillSend(b.hostSend.data(), l, ctx.rank, es, i);
    ctx.device->copyToDevice(b.send[i].ptr, b.hostSend.data(), l.sendElems * es);
  }
  poison(b.hostRecv.data(), l.recvElems, es);
  ctx.device->copyToDevice(b.recv.ptr, b.hostRecv.data(), l.recvElems * es);
}

// `salt`: that of the send buffer the last call used.
uint64_t verify(Context& ctx, const Options& opts, const Layout& l, Buffers& b, uint64_t salt) {
  const size_t es = dataTypeSize(opts.dtype);
  ctx.device->copyToHost(b.hostRecv.data(), b.recv.ptr, l.recvElems * es);
  return verifyRecv(b.hostRecv.data(), l, ctx.rank, es, salt);
}

// The proxy's share while nothing is asked of it: its backoff should sleep (net/proxy_backoff.h).
void reportIdleProxy(Context& ctx) {
  RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
  ThreadCpuMeter proxy("rmacc-proxy");
  proxy.start();
  sleep(1);
  double cores = maxOverRanks(ctx, proxy.cores());
  if (ctx.rank == 0) printf("#   rmacc-proxy: %.3f cores over 1 s idle after the sweep (max over ranks)\n", cores);
}

}  // namespace

int runCollective(Context& ctx, const Options& opts, const CollectiveTest& test) {
  const std::vector<size_t> sizes = sweepSizes(opts);
  std::vector<Layout> layouts;
  for (size_t s : sizes) layouts.push_back(test.layout(s));
  Buffers b = allocFor(ctx, opts, layouts);
  printRankInfo(ctx, opts);
  if (ctx.rank == 0 && !test.description.empty()) printf("# %s\n", test.description.c_str());
  if (ctx.rank == 0 && opts.graph) printf("# each size's call captured into a CUDA graph once, timed as graph replays\n");
  Table table(stdout, ctx.rank == 0 ? opts.jsonPath : "", jsonTags(ctx, opts));
  if (ctx.rank == 0) table.header();
  const double busFactor = static_cast<double>(ctx.nranks - 1) / ctx.nranks;
  for (const Layout& l : layouts) {
    // The check covers every call of the size: buffers are filled and poisoned once, then the
    // warmup and timed calls run (alternating send buffers), then the receive buffer (blocks
    // against the last call's salt, and gaps) is verified.
    if (opts.check) prepare(ctx, opts, l, b);
    if (test.prepare) test.prepare(l);
    int calls = 0;
    ThreadCpuMeter proxy("rmacc-proxy");
    // --graph: the call on each send buffer captured once; the timed calls are replays.
    std::vector<void*> graphs;
    for (int i = 0; opts.graph && i < b.nSend; ++i)
      graphs.push_back(ctx.device->captureGraph(ctx.stream, [&] { test.launch(b.send[i].ptr, b.recv.ptr, l); }));
    // A captured call with device counts is enqueued at each replay by the progress thread: at
    // most 8 replays ahead of the device (docs/usage.md, CUDA graphs), so such replays are synchronised
    // every 8 (fixed counts and padded calls on one node are in the graph whole: no limit).
    auto launch = [&] {
      const int i = calls++ % b.nSend;
      // A padded replay across nodes holds two such calls (its slots, its counts): every 4.
      const bool padded = opts.counts == CountsSource::kPadded && ctx.nNodes > 1;
      const int window = padded ? 4 : 8;
      if (opts.graph && (opts.counts == CountsSource::kDevice || padded) && calls % window == 0)
        RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
      if (opts.graph) ctx.device->launchGraph(graphs[i], ctx.stream);
      else test.launch(b.send[i].ptr, b.recv.ptr, l);
    };
    HostCpuMeter host;
    double us = timeCalls(ctx, opts.warmup, opts.iters, launch, opts.proxyCpu ? &proxy : nullptr,
                          opts.hostCpu ? &host : nullptr);
    if (opts.graph) {
      RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
      for (void* g : graphs) ctx.device->destroyGraph(g);
    }
    double proxyCores = opts.proxyCpu ? maxOverRanks(ctx, proxy.cores()) : 0;
    uint64_t lastSalt = (calls - 1) % b.nSend;
    uint64_t mine = 0;
    if (opts.check) mine = verify(ctx, opts, l, b, lastSalt) + (test.checkOutputs ? test.checkOutputs(l) : 0);
    int64_t wrong = opts.check ? static_cast<int64_t>(sumOverRanks(ctx, mine)) : -1;
    size_t count = std::accumulate(l.sendCounts.begin(), l.sendCounts.end(), size_t{0});
    if (ctx.rank == 0) table.row(makeRow(count * dataTypeSize(opts.dtype), count, us, busFactor, wrong), opts.dtype);
    if (opts.hostCpu) {
      // Means over ranks (a sum then divided): every rank pays its own.
      const double n = ctx.nranks, it = opts.iters;
      const double caller = (double)sumOverRanks(ctx, (uint64_t)(host.callerSeconds() * 1e9)) / n / it / 1e3;
      const double all = (double)sumOverRanks(ctx, (uint64_t)(std::max(0.0, host.hostSeconds()) * 1e9)) / n / it / 1e3;
      if (ctx.rank == 0)
        printf("#   host CPU per call: %.2f us, %.2f us of it on the caller's thread (mean over ranks)\n",
               all, caller);
    }
    if (opts.proxyCpu && ctx.rank == 0) printf("#   rmacc-proxy: %.3f cores during the calls (max over ranks)\n", proxyCores);
  }
  if (opts.proxyCpu) reportIdleProxy(ctx);
  int64_t wrong = ctx.rank == 0 ? table.footer() : 0;
  freeBuffer(ctx, &b.recv);
  for (int i = b.nSend - 1; i >= 0; --i) freeBuffer(ctx, &b.send[i]);
  return checkedExitStatus(ctx, wrong);
}

}  // namespace rmacc::perf
