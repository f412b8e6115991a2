// putsignal: rank pairs. Every rank puts `size` bytes with a signal into its target's window
// and waits for the signal of its source, so each pair streams both ways at once; the row is
// the one-way bandwidth of a rank. Afterwards an 8-byte ping-pong gives the latency of
// put + signal + wait (half a round trip).
//
// Pairing: --peer half: target (r + n/2) % n (across the emulated nodes with contiguous blocks);
// --peer xor: target r ^ 1 (inside a node). A rank without a partner (xor, odd n) idles but
// still takes part in the collectives.
#include <algorithm>
#include <vector>

#include "check.h"
#include "table.h"
#include "tests.h"

namespace rmacc::perf {
namespace {

constexpr int kDataSignal = 0;  // signal index of the bandwidth puts
constexpr int kPingSignal = 1;  // its own index, so ping-pong counts never mix with data counts

struct Peers {
  int target = -1;  // the rank this rank puts to
  int source = -1;  // the rank that puts to this rank
};

Peers pairOf(const Options& opts, int r, int n) {
  Peers p;
  if (opts.peerMode == "xor") {
    if ((r ^ 1) < n) p.target = p.source = r ^ 1;
    if (n == 1) p.target = p.source = 0;
    return p;
  }
  p.target = (r + n / 2) % n;
  p.source = (r - n / 2 + n) % n;
  return p;
}

// The put lands at offset 0 of the window; everything after it is gap that must stay poison.
Layout pairLayout(const Peers& p, int n, size_t count, size_t windowElems) {
  Layout l;
  l.sendCounts.assign(n, 0);
  l.sdispls.assign(n, 0);
  l.recvCounts.assign(n, 0);
  l.rdispls.assign(n, 0);
  if (p.target >= 0) l.sendCounts[p.target] = count;
  if (p.source >= 0) l.recvCounts[p.source] = count;
  l.sendElems = count;
  l.recvElems = windowElems;
  return l;
}

void putAndWait(Context& ctx, const Options& opts, const Peers& p, const void* send, size_t count,
                const Buffer& win, int sig) {
  if (p.target >= 0)
    RMACC_PERF_CHECK(ctx, rmaccPutSignal(send, count, opts.dtype, p.target, win.window, 0, sig, 0, 0, ctx.comm,
                                         ctx.stream));
  if (p.source >= 0) {
    rmaccWaitSignalDesc_t d{1, p.source, sig, 0};
    RMACC_PERF_CHECK(ctx, rmaccWaitSignal(1, &d, ctx.comm, ctx.stream));
  }
}

// Ping-pong needs a true pair (my target's target is me); half-shift with odd n has none.
void pingPong(Context& ctx, const Options& opts, const Peers& p, const Buffer& send, const Buffer& win) {
  const bool paired = p.target >= 0 && pairOf(opts, p.target, ctx.nranks).target == ctx.rank && p.target != ctx.rank;
  const size_t count = 8 / dataTypeSize(opts.dtype);
  rmaccWaitSignalDesc_t d{1, p.target, kPingSignal, 0};
  auto one = [&] {
    if (!paired) return;
    bool initiator = ctx.rank < p.target;
    if (!initiator) RMACC_PERF_CHECK(ctx, rmaccWaitSignal(1, &d, ctx.comm, ctx.stream));
    RMACC_PERF_CHECK(ctx, rmaccPutSignal(send.ptr, count, opts.dtype, p.target, win.window, 0, kPingSignal, 0, 0,
                                         ctx.comm, ctx.stream));
    if (initiator) RMACC_PERF_CHECK(ctx, rmaccWaitSignal(1, &d, ctx.comm, ctx.stream));
  };
  double us = timeCalls(ctx, 10, std::max(opts.iters, 100), one);
  if (ctx.rank != 0) return;
  if (paired) printf("# 8-byte ping-pong latency (put + signal + wait, half round trip): %.2f us\n", us / 2);
  else printf("# no 8-byte ping-pong: rank 0 has no pair partner\n");
}

}  // namespace

int runPutSignal(Context& ctx, const Options& opts) {
  const size_t es = dataTypeSize(opts.dtype);
  const size_t gap = std::max<size_t>(1, 64 / es);
  const size_t windowElems = opts.maxBytes / es + gap;
  const Peers p = pairOf(opts, ctx.rank, ctx.nranks);
  // The target window is always from rmaccMemAlloc (a put needs a window); -m decides the source.
  Buffer win = opts.hostWindow ? allocHostWindow(ctx, windowElems * es)
                               : allocBuffer(ctx, windowElems * es, true);
  Buffer send = allocBuffer(ctx, std::max<size_t>(opts.maxBytes, 8), opts.registered);
  std::vector<uint8_t> hostSend(send.bytes), hostRecv(win.bytes);
  printRankInfo(ctx, opts);
  if (ctx.rank == 0)
    printf("# putsignal pairs: --peer %s, rank 0 -> %d\n", opts.peerMode.c_str(), p.target);
  Table table(stdout, ctx.rank == 0 ? opts.jsonPath : "",
              "\"test\":\"putsignal\",\"nranks\":" + std::to_string(ctx.nranks) + ",\"peer\":" + jsonString(opts.peerMode));
  if (ctx.rank == 0) table.header();
  for (size_t bytes : sweepSizes(opts)) {
    const size_t count = bytes / es;
    Layout l = pairLayout(p, ctx.nranks, count, windowElems);
    if (opts.check) {
      fillSend(hostSend.data(), l, ctx.rank, es);
      ctx.device->copyToDevice(send.ptr, hostSend.data(), count * es);
      poison(hostRecv.data(), windowElems, es);
      ctx.device->copyToDevice(win.ptr, hostRecv.data(), windowElems * es);
    }
    double us = timeCalls(ctx, opts.warmup, opts.iters, [&] { putAndWait(ctx, opts, p, send.ptr, count, win, kDataSignal); });
    int64_t wrong = -1;
    if (opts.check) {
      ctx.device->copyToHost(hostRecv.data(), win.ptr, windowElems * es);
      wrong = static_cast<int64_t>(sumOverRanks(ctx, verifyRecv(hostRecv.data(), l, ctx.rank, es)));
    }
    if (ctx.rank == 0) table.row(makeRow(count * es, count, us, 1.0, wrong), opts.dtype);
  }
  int64_t wrong = ctx.rank == 0 ? table.footer() : 0;
  pingPong(ctx, opts, p, send, win);
  freeBuffer(ctx, &send);
  freeBuffer(ctx, &win);
  return checkedExitStatus(ctx, wrong);
}

}  // namespace rmacc::perf
