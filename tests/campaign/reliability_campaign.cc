// The reliability campaign of issue #17 (bench/reliability.sh runs it): bad input on every entry
// point, and ranks killed in each phase, on the host backend with 4 ranks as 2 emulated nodes x 2
// over libfabric tcp on loopback, RMACC_TIMEOUT_S=10. Each case runs in fresh processes.
//
// A case's bad call is made by rank 1 (for a local call) or by every rank with rank 1's
// arguments bad (for a collective). Afterwards every rank runs an AlltoAll with known data on
// the synchronous stream. A case is
//   clean     the bad call failed with a reason and nothing below happened;
//   accepted  the bad call returned rmaccSuccess;
//   wrong     any call returned rmaccSuccess with wrong data (must be 0);
//   crash     a rank died of a signal or an exception;
//   hang      a rank did not finish within 3 x RMACC_TIMEOUT_S.
// Then, per phase (init, barrier, AlltoAllV across nodes), rank 3 is killed while the others
// are in the call, and the time from the kill to each survivor's error is printed.
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rmacc.h"
#include "support/lifecycle_cases.h"
#include "support/multiprocess.h"

using namespace rmacc::test;

namespace {

constexpr int kRanks = 4;
constexpr int kBad = 1;  // the rank whose arguments are bad
constexpr double kTimeoutS = 10;
constexpr size_t kMem = 4096;
constexpr size_t kCount = 8;  // elements per peer in the follow-up AlltoAll

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct RankResult {
  int ran;
  int code;        // of the bad call (on every rank for a collective case)
  double seconds;  // how long it took
  int followCode;  // of the follow-up AlltoAll
  uint32_t wrong;  // misrouted elements of the follow-up (and of the case's own data check)
  char msg[200];
};

struct Shared {
  RankResult r[kRanks];
  std::atomic<double> killedAt;
  std::atomic<int> entering;
};

struct Ctx {
  rmaccComm_t comm;
  rmaccStream_t stream;
  int me, n;
  void* mem;  // kMem bytes from rmaccMemAlloc
  rmaccWindow_t win;
  bool bad() const { return me == kBad; }
};

struct Case {
  const char* klass;
  const char* name;
  bool collective;  // every rank calls; otherwise only rank kBad
  std::function<rmaccResult_t(Ctx&, uint32_t* wrong)> call;
};

rmaccResult_t checkedAlltoAll(rmaccComm_t comm, int me, int n, uint32_t* wrong) {
  uint32_t send[kRanks * kCount], recv[kRanks * kCount];
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < kCount; ++i) send[p * kCount + i] = (uint32_t)(me << 24 | p << 16 | i);
  memset(recv, 0xEE, sizeof(recv));
  rmaccResult_t r = rmaccAlltoAll(send, recv, kCount, rmaccUint32, comm, nullptr);
  *wrong = 0;
  if (r == rmaccSuccess)
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i) *wrong += recv[p * kCount + i] != (uint32_t)(p << 24 | me << 16 | i);
  return r;
}

RunOptions options() {
  RunOptions o;
  o.nodeOf = blockNodes(2, 2);
  o.timeoutS = 3 * kTimeoutS + 10;
  o.sharedBytes = sizeof(Shared);
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", std::to_string((int)kTimeoutS)}, {"RMACC_DEBUG", "NONE"}};
  return o;
}

void record(RankResult& r, rmaccResult_t code, double t, const char* msg) {
  r.ran = 1;
  r.code = code;
  r.seconds = t;
  snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
}

Shared* gShared = nullptr;  // MAP_SHARED before the ranks fork: survives them

// One case in fresh processes.
[[noreturn]] void rankBody(const Case& c, const RankContext& rc) {
  RankResult& res = gShared->r[rc.rank];
  Ctx ctx{nullptr, nullptr, rc.rank, rc.nRanks, nullptr, nullptr};
  if (rmaccCommInitRank(&ctx.comm, rc.nRanks, rc.id, rc.rank) != rmaccSuccess) _exit(3);
  rmaccStreamCreate(ctx.comm, &ctx.stream);
  rmaccMemAlloc(ctx.comm, &ctx.mem, kMem);
  rmaccCommWindowRegister(ctx.comm, ctx.mem, kMem, &ctx.win);
  uint32_t wrong = 0;
  if (c.collective || ctx.bad()) {
    double t0 = nowS();
    rmaccResult_t code = c.call(ctx, &wrong);
    // The thread's text: every failed call sets it, also those that name no usable
    // communicator (GetVersion(NULL), CommCount on a non-communicator), which the
    // communicator's own text never sees.
    record(res, code, nowS() - t0, code == rmaccSuccess ? "" : rmaccGetLastError(nullptr));
  }
  uint32_t followWrong = 0;
  res.followCode = checkedAlltoAll(ctx.comm, ctx.me, ctx.n, &followWrong);
  res.wrong = wrong + followWrong;
  rmaccResult_t async = rmaccSuccess;
  rmaccCommGetAsyncError(ctx.comm, &async);
  if (async == rmaccSuccess) {
    rmaccStreamDestroy(ctx.comm, ctx.stream);
    rmaccCommDestroy(ctx.comm);
  } else {
    rmaccCommAbort(ctx.comm);
  }
  _exit(0);
}

// Init cases: every rank calls init itself (rank kBad with the bad arguments); ctx.mem holds
// the unique id.
[[noreturn]] void initBody(const Case& c, const RankContext& rc) {
  rmaccUniqueId id = rc.id;
  Ctx ctx{nullptr, nullptr, rc.rank, rc.nRanks, &id, nullptr};
  uint32_t wrong = 0;
  double t0 = nowS();
  rmaccResult_t code = c.call(ctx, &wrong);
  record(gShared->r[rc.rank], code, nowS() - t0, rmaccGetLastError(nullptr));
  gShared->r[rc.rank].followCode = -1;
  if (ctx.comm) rmaccCommAbort(ctx.comm);
  _exit(0);
}

struct Totals {
  int cases = 0, clean = 0, accepted = 0, wrong = 0, crash = 0, hang = 0;
};

void runCase(const Case& c, bool init, Totals& t) {
  memset((void*)gShared, 0, sizeof(Shared));
  std::vector<int> status = runRanksStatus(kRanks, options(), [&](const RankContext& rc) {
    init ? initBody(c, rc) : rankBody(c, rc);
  });
  bool crash = false, hang = false, wrong = false, accepted = false;
  double slowest = 0;
  for (int r = 0; r < kRanks; ++r) {
    const RankResult& x = gShared->r[r];
    if (status[r] == -1) hang = true;
    else if (status[r] != 0) crash = true;
    if (x.wrong) wrong = true;
    if (x.ran && x.code == rmaccSuccess && r == kBad) accepted = true;
    if (x.ran) slowest = std::max(slowest, x.seconds);
  }
  const RankResult& b = gShared->r[kBad];
  const bool clean = !crash && !hang && !wrong && !accepted && b.ran && b.msg[0];
  const char* label = clean ? "clean" : crash ? "CRASH" : hang ? "HANG" : wrong ? "WRONG"
                     : accepted ? "ACCEPTED" : "NOREASON";  // failed, but said nothing
  ++t.cases;
  t.clean += clean, t.accepted += accepted, t.wrong += wrong, t.crash += crash, t.hang += hang;
  printf("%-10s %-44s %-8s bad rank: %-22s slowest rank %.3f s, follow-up %s | %s\n", c.klass,
         c.name, label,
         rmaccGetErrorString((rmaccResult_t)b.code), slowest,
         b.followCode == -1 ? "-" : b.followCode == rmaccSuccess ? "ok" : "error", b.msg);
  fflush(stdout);
}

// --- the cases

rmaccResult_t onBad(Ctx& c, const std::function<rmaccResult_t()>& bad,
                    const std::function<rmaccResult_t()>& good) {
  return c.bad() ? bad() : good();
}

rmaccResult_t a2a(Ctx& c, const void* s, void* r, size_t count, rmaccDataType_t t, rmaccStream_t st) {
  return rmaccAlltoAll(s, r, count, t, c.comm, st);
}

// AlltoAllv with every rank's arrays good except what `spoil` changes on rank kBad.
rmaccResult_t a2av(Ctx& c, uint32_t* wrong,
                   const std::function<void(std::vector<size_t>* arrays, const void** sb, void** rb,
                                            rmaccDataType_t* t, rmaccStream_t* st, bool* nullArr)>& spoil) {
  std::vector<uint32_t> send(kRanks * kCount), recv(kRanks * kCount, 0xEEEEEEEE);
  for (int p = 0; p < c.n; ++p)
    for (size_t i = 0; i < kCount; ++i) send[p * kCount + i] = (uint32_t)(c.me << 24 | p << 16 | i);
  std::vector<size_t> a[4];  // sendcounts, sdispls, recvcounts, rdispls
  for (auto& v : a) v.resize(c.n);
  for (int p = 0; p < c.n; ++p) a[0][p] = a[2][p] = kCount, a[1][p] = a[3][p] = p * kCount;
  const void* sb = send.data();
  void* rb = recv.data();
  rmaccDataType_t t = rmaccUint32;
  rmaccStream_t st = nullptr;
  bool nullArr[4] = {false, false, false, false};
  if (c.bad()) spoil(a, &sb, &rb, &t, &st, nullArr);
  auto arr = [&](int k) { return nullArr[k] ? nullptr : a[k].data(); };
  rmaccResult_t r = rmaccAlltoAllv(sb, arr(0), arr(1), rb, arr(2), arr(3), t, c.comm, st);
  if (r == rmaccSuccess && !c.bad())
    for (int p = 0; p < c.n; ++p)
      for (size_t i = 0; i < kCount; ++i) *wrong += recv[p * kCount + i] != (uint32_t)(p << 24 | c.me << 16 | i);
  return r;
}

using Spoil = std::function<void(std::vector<size_t>*, const void**, void**, rmaccDataType_t*,
                                 rmaccStream_t*, bool*)>;

std::vector<Case> dataCases() {
  static uint64_t buf[64];
  static rmaccStream_t bogusStream = reinterpret_cast<rmaccStream_t>(&buf[3]);
  static rmaccWindow_t bogusWin = reinterpret_cast<rmaccWindow_t>(&buf[5]);
  std::vector<Case> v;
  auto local = [&](const char* k, const char* n, std::function<rmaccResult_t(Ctx&)> f) {
    v.push_back({k, n, false, [f](Ctx& c, uint32_t*) { return f(c); }});
  };
  // No communicator, handles, queries.
  local("handles", "GetVersion(NULL)", [](Ctx&) { return rmaccGetVersion(nullptr); });
  local("handles", "GetUniqueId(NULL)", [](Ctx&) { return rmaccGetUniqueId(nullptr); });
  local("handles", "CommCount(NULL comm)", [](Ctx&) { int x; return rmaccCommCount(nullptr, &x); });
  local("handles", "CommCount(comm, NULL)", [](Ctx& c) { return rmaccCommCount(c.comm, nullptr); });
  local("handles", "CommUserRank(comm, NULL)", [](Ctx& c) { return rmaccCommUserRank(c.comm, nullptr); });
  local("handles", "CommGetAsyncError(comm, NULL)", [](Ctx& c) { return rmaccCommGetAsyncError(c.comm, nullptr); });
  local("handles", "CommCount(not a communicator)", [](Ctx&) {
    int x;
    return rmaccCommCount(reinterpret_cast<rmaccComm_t>(buf), &x);
  });
  local("handles", "CommDestroy(not a communicator)", [](Ctx&) {
    return rmaccCommDestroy(reinterpret_cast<rmaccComm_t>(buf));
  });
  // Streams.
  local("streams", "StreamCreate(comm, NULL)", [](Ctx& c) { return rmaccStreamCreate(c.comm, nullptr); });
  local("streams", "StreamSynchronize(unknown stream)", [](Ctx& c) { return rmaccStreamSynchronize(c.comm, bogusStream); });
  local("streams", "StreamDestroy(unknown stream)", [](Ctx& c) { return rmaccStreamDestroy(c.comm, bogusStream); });
  // Memory.
  local("memory", "MemAlloc(ptr NULL)", [](Ctx& c) { return rmaccMemAlloc(c.comm, nullptr, 64); });
  local("memory", "MemAlloc(SIZE_MAX)", [](Ctx& c) { void* p; return rmaccMemAlloc(c.comm, &p, SIZE_MAX); });
  local("memory", "MemFree(stack pointer)", [](Ctx& c) { return rmaccMemFree(c.comm, buf); });
  local("memory", "MemFree(interior pointer)", [](Ctx& c) { return rmaccMemFree(c.comm, (char*)c.mem + 64); });
  local("memory", "MemFree twice", [](Ctx& c) {
    void* p = nullptr;
    rmaccMemAlloc(c.comm, &p, 64);
    rmaccMemFree(c.comm, p);
    return rmaccMemFree(c.comm, p);
  });
  // One-sided.
  auto put = [](Ctx& c, const void* src, size_t count, rmaccDataType_t t, int peer, rmaccWindow_t w,
                size_t off, int sig, int ctx, unsigned flags) {
    return rmaccPutSignal(src, count, t, peer, w, off, sig, ctx, flags, c.comm, nullptr);
  };
  local("put", "peer = nranks", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, c.n, c.win, 0, 0, 0, 0); });
  local("put", "peer = -1", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, -1, c.win, 0, 0, 0, 0); });
  local("put", "offset past window", [put](Ctx& c) { return put(c, buf, 8, rmaccUint64, 0, c.win, kMem - 8, 0, 0, 0); });
  local("put", "offset SIZE_MAX", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, 0, c.win, SIZE_MAX, 0, 0, 0); });
  local("put", "count SIZE_MAX", [put](Ctx& c) { return put(c, buf, SIZE_MAX, rmaccUint64, 0, c.win, 0, 0, 0, 0); });
  local("put", "NULL localbuff", [put](Ctx& c) { return put(c, nullptr, 4, rmaccUint64, 0, c.win, 0, 0, 0, 0); });
  local("put", "bad datatype", [put](Ctx& c) { return put(c, buf, 1, (rmaccDataType_t)77, 0, c.win, 0, 0, 0, 0); });
  local("put", "unregistered window", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, 0, bogusWin, 0, 0, 0, 0); });
  local("put", "sigIdx out of range", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, 0, c.win, 0, RMACC_MAX_SIGNALS, 0, 0); });
  local("put", "ctx out of range", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, 0, c.win, 0, 0, -1, 0); });
  local("put", "flags != 0", [put](Ctx& c) { return put(c, buf, 1, rmaccUint64, 0, c.win, 0, 0, 0, 1); });
  local("put", "localbuff past its buffer", [put](Ctx& c) { return put(c, (char*)c.mem + 2048, kMem, rmaccUint8, 0, c.win, 0, 0, 0, 0); });
  local("put", "unknown stream", [](Ctx& c) {
    return rmaccPutSignal(buf, 1, rmaccUint64, 0, c.win, 0, 0, 0, 0, c.comm, bogusStream);
  });
  local("signal", "peer = nranks", [](Ctx& c) { return rmaccSignal(c.n, 0, 0, 0, c.comm, nullptr); });
  local("signal", "ctx out of range", [](Ctx& c) { return rmaccSignal(0, 0, RMACC_MAX_CONTEXTS, 0, c.comm, nullptr); });
  local("signal", "sigIdx -1", [](Ctx& c) { return rmaccSignal(0, -1, 0, 0, c.comm, nullptr); });
  local("signal", "flags != 0", [](Ctx& c) { return rmaccSignal(0, 0, 0, 7, c.comm, nullptr); });
  local("wait", "nDesc -1", [](Ctx& c) { return rmaccWaitSignal(-1, nullptr, c.comm, nullptr); });
  local("wait", "descs NULL", [](Ctx& c) { return rmaccWaitSignal(2, nullptr, c.comm, nullptr); });
  local("wait", "peer out of range", [](Ctx& c) {
    rmaccWaitSignalDesc_t d{1, c.n + 5, 0, 0};
    return rmaccWaitSignal(1, &d, c.comm, nullptr);
  });
  local("wait", "opCnt -1", [](Ctx& c) {
    rmaccWaitSignalDesc_t d{-1, 0, 0, 0};
    return rmaccWaitSignal(1, &d, c.comm, nullptr);
  });
  local("wait", "ctx out of range", [](Ctx& c) {
    rmaccWaitSignalDesc_t d{1, 0, 0, RMACC_MAX_CONTEXTS};
    return rmaccWaitSignal(1, &d, c.comm, nullptr);
  });
  // Collectives: rank kBad's arguments are bad, the others' good.
  auto coll = [&](const char* k, const char* n, std::function<rmaccResult_t(Ctx&, uint32_t*)> f) {
    v.push_back({k, n, true, f});
  };
  auto reg = [](Ctx& c, void* b, size_t s, bool nullWin) {
    rmaccWindow_t w = nullptr;
    rmaccResult_t r = rmaccCommWindowRegister(c.comm, b, s, nullWin ? nullptr : &w);
    if (r == rmaccSuccess && w) rmaccCommWindowDeregister(c.comm, w);
    return r;
  };
  coll("register", "NULL buffer", [reg](Ctx& c, uint32_t*) { return reg(c, c.bad() ? nullptr : c.mem, kMem, false); });
  coll("register", "win NULL", [reg](Ctx& c, uint32_t*) { return reg(c, c.mem, kMem, c.bad()); });
  coll("register", "128 bytes past its buffer", [reg](Ctx& c, uint32_t*) { return reg(c, (char*)c.mem + 128, c.bad() ? kMem : kMem - 128, false); });
  coll("register", "size SIZE_MAX", [reg](Ctx& c, uint32_t*) { return reg(c, c.mem, c.bad() ? SIZE_MAX : kMem, false); });
  coll("register", "malloc memory", [reg](Ctx& c, uint32_t*) { return reg(c, c.bad() ? (void*)buf : c.mem, c.bad() ? sizeof(buf) : kMem, false); });
  coll("deregister", "unregistered handle", [](Ctx& c, uint32_t*) {
    rmaccResult_t r = rmaccCommWindowDeregister(c.comm, c.bad() ? bogusWin : c.win);
    if (r != rmaccSuccess && !c.bad()) rmaccCommWindowDeregister(c.comm, c.win);  // all again
    if (c.bad()) rmaccCommWindowDeregister(c.comm, c.win);
    return r;
  });
  coll("deregister", "NULL handle", [](Ctx& c, uint32_t*) {
    rmaccResult_t r = rmaccCommWindowDeregister(c.comm, c.bad() ? nullptr : c.win);
    rmaccCommWindowDeregister(c.comm, c.win);
    return r;
  });
  coll("deregister", "twice (every rank)", [](Ctx& c, uint32_t*) {
    rmaccCommWindowDeregister(c.comm, c.win);
    return rmaccCommWindowDeregister(c.comm, c.win);
  });
  coll("barrier", "unknown stream", [](Ctx& c, uint32_t*) { return rmaccBarrier(c.comm, c.bad() ? bogusStream : nullptr); });
  auto a2aCase = [&](const char* n, std::function<rmaccResult_t(Ctx&, uint32_t*, uint32_t*, uint32_t*)> f) {
    coll("alltoall", n, [f](Ctx& c, uint32_t* wrong) {
      uint32_t s[kRanks * kCount], r[kRanks * kCount];
      for (int p = 0; p < c.n; ++p)
        for (size_t i = 0; i < kCount; ++i) s[p * kCount + i] = (uint32_t)(c.me << 24 | p << 16 | i);
      memset(r, 0xEE, sizeof(r));
      rmaccResult_t res = f(c, s, r, wrong);
      if (res == rmaccSuccess)
        for (int p = 0; p < c.n; ++p)
          for (size_t i = 0; i < kCount; ++i) *wrong += r[p * kCount + i] != (uint32_t)(p << 24 | c.me << 16 | i);
      return res;
    });
  };
  a2aCase("count SIZE_MAX", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, r, c.bad() ? SIZE_MAX : kCount, rmaccUint32, nullptr); });
  a2aCase("count x nranks overflows", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, r, c.bad() ? SIZE_MAX / 4 / 3 : kCount, rmaccUint32, nullptr); });
  a2aCase("NULL sendbuff", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, c.bad() ? nullptr : s, r, kCount, rmaccUint32, nullptr); });
  a2aCase("NULL recvbuff", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, c.bad() ? nullptr : r, kCount, rmaccUint32, nullptr); });
  a2aCase("bad datatype", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, r, kCount, c.bad() ? (rmaccDataType_t)-3 : rmaccUint32, nullptr); });
  a2aCase("unknown stream", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, r, kCount, rmaccUint32, c.bad() ? bogusStream : nullptr); });
  a2aCase("count differs on one rank", [](Ctx& c, uint32_t* s, uint32_t* r, uint32_t*) { return a2a(c, s, r, c.bad() ? kCount - 1 : kCount, rmaccUint32, nullptr); });
  // Blocks of 256 bytes (1 KiB a rank) inside the rmaccMemAlloc'd region: the good ranks send
  // from mem[0, 1024) and receive into mem[2048, 3072); rank kBad's receive (or send) buffer
  // starts at mem + 3584, so its last blocks run 512 bytes past the 4 KiB allocation.
  auto pastCase = [&](const char* n, bool badRecv) {
    coll("alltoall", n, [badRecv](Ctx& c, uint32_t* wrong) {
      constexpr size_t kBlock = 256;
      uint8_t* mem = static_cast<uint8_t*>(c.mem);
      uint8_t* s = mem;
      uint8_t* r = mem + 2048;
      if (c.bad()) (badRecv ? r : s) = mem + kMem - 512;
      if (!c.bad() || badRecv)
        for (int p = 0; p < c.n; ++p) memset(s + p * kBlock, c.me << 4 | p, kBlock);
      if (!c.bad() || !badRecv) memset(r, 0xEE, c.n * kBlock);
      rmaccResult_t res = a2a(c, s, r, kBlock, rmaccUint8, nullptr);
      if (res == rmaccSuccess && !c.bad())
        for (int p = 0; p < c.n; ++p)
          for (size_t i = 0; i < kBlock; ++i) *wrong += r[p * kBlock + i] != (uint8_t)(p << 4 | c.me);
      return res;
    });
  };
  pastCase("recvbuff past its buffer", true);
  pastCase("sendbuff past its buffer", false);
  auto v2 = [&](const char* n, Spoil sp) { coll("alltoallv", n, [sp](Ctx& c, uint32_t* w) { return a2av(c, w, sp); }); };
  v2("sendcounts NULL", [](auto*, auto, auto, auto, auto, bool* nul) { nul[0] = true; });
  v2("rdispls NULL", [](auto*, auto, auto, auto, auto, bool* nul) { nul[3] = true; });
  v2("sendcounts[2] SIZE_MAX", [](std::vector<size_t>* a, auto, auto, auto, auto, auto) { a[0][2] = SIZE_MAX; });
  v2("sdispls[0] SIZE_MAX/2", [](std::vector<size_t>* a, auto, auto, auto, auto, auto) { a[1][0] = SIZE_MAX / 2; });
  v2("receive blocks overlap", [](std::vector<size_t>* a, auto, auto, auto, auto, auto) { a[3][1] = a[3][0] + 1; });
  v2("send count mismatch", [](std::vector<size_t>* a, auto, auto, auto, auto, auto) { a[0][3] += 1; });
  v2("recv count mismatch", [](std::vector<size_t>* a, auto, auto, auto, auto, auto) { a[2][0] -= 1; });
  v2("NULL sendbuff with counts", [](auto*, const void** sb, auto, auto, auto, auto) { *sb = nullptr; });
  v2("NULL recvbuff with counts", [](auto*, auto, void** rb, auto, auto, auto) { *rb = nullptr; });
  v2("bad datatype", [](auto*, auto, auto, rmaccDataType_t* t, auto, auto) { *t = (rmaccDataType_t)99; });
  v2("unknown stream", [](auto*, auto, auto, auto, rmaccStream_t* st, auto) { *st = bogusStream; });
  // Mismatched collectives: these may time out, but must poison, never succeed wrongly.
  coll("mismatch", "AlltoAll against Barrier", [](Ctx& c, uint32_t* wrong) {
    if (c.bad()) return rmaccBarrier(c.comm, nullptr);
    return checkedAlltoAll(c.comm, c.me, c.n, wrong);
  });
  coll("mismatch", "skipped window registration", [reg](Ctx& c, uint32_t* wrong) {
    if (c.bad()) return checkedAlltoAll(c.comm, c.me, c.n, wrong);  // the scenario
    return reg(c, c.mem, kMem, false);
  });
  return v;
}

std::vector<Case> initCases() {
  std::vector<Case> v;
  auto init = [&](const char* n, std::function<rmaccResult_t(Ctx&)> f) {
    v.push_back({"init", n, true, [f](Ctx& c, uint32_t*) { return f(c); }});
  };
  auto id = [](Ctx& c) { return *static_cast<rmaccUniqueId*>(c.mem); };
  init("comm NULL", [id](Ctx& c) { return rmaccCommInitRank(c.bad() ? nullptr : &c.comm, kRanks, id(c), c.me); });
  init("nranks 0", [id](Ctx& c) { return rmaccCommInitRank(&c.comm, c.bad() ? 0 : kRanks, id(c), c.me); });
  init("rank -1", [id](Ctx& c) { return rmaccCommInitRank(&c.comm, kRanks, id(c), c.bad() ? -1 : c.me); });
  init("rank = nranks", [id](Ctx& c) { return rmaccCommInitRank(&c.comm, kRanks, id(c), c.bad() ? kRanks : c.me); });
  init("unique id with a bad magic", [id](Ctx& c) {
    rmaccUniqueId u = id(c);
    if (c.bad()) u.internal[0] ^= 1;
    return rmaccCommInitRank(&c.comm, kRanks, u, c.me);
  });
  init("nranks disagree (5 on one rank)", [id](Ctx& c) { return rmaccCommInitRank(&c.comm, c.bad() ? 5 : kRanks, id(c), c.me); });
  init("duplicate rank", [id](Ctx& c) { return rmaccCommInitRank(&c.comm, kRanks, id(c), c.bad() ? 0 : c.me); });
  return v;
}

// --- killed peers

enum class Phase { kInit, kBarrier, kAlltoAllv };
const char* phaseName(Phase p) {
  return p == Phase::kInit ? "init" : p == Phase::kBarrier ? "barrier" : "AlltoAllV 2x2";
}

[[noreturn]] void killBody(Phase phase, const RankContext& rc) {
  constexpr int kVictim = 3;
  const int me = rc.rank, n = rc.nRanks;
  RankResult& res = gShared->r[me];
  rmaccComm_t comm = nullptr;
  if (phase == Phase::kInit) {
    if (me == kVictim) {
      while (gShared->entering.load() < n - 1) usleep(1000);
      usleep(100000);  // the others wait at the root
      std::thread([&] { rmaccCommInitRank(&comm, n, rc.id, me); }).detach();
      usleep(30000);   // init is under way (its hello reached the root: the mesh is forming)
      gShared->killedAt.store(nowS());
      raise(SIGKILL);
    }
    gShared->entering.fetch_add(1);
    rmaccResult_t r = rmaccCommInitRank(&comm, n, rc.id, me);
    if (r == rmaccSuccess) r = rmaccBarrier(comm, nullptr);  // the death came after init
    record(res, r, nowS() - gShared->killedAt.load(), rmaccGetLastError(comm));
    _exit(0);
  }
  if (rmaccCommInitRank(&comm, n, rc.id, me) != rmaccSuccess) _exit(3);
  const size_t perPeer = 16 << 20;  // 16 MiB to every peer: 64 MiB a rank, well on the wire
  std::vector<char> send(phase == Phase::kAlltoAllv ? perPeer * n : 0, (char)me), recv(send.size());
  std::vector<size_t> counts(n, perPeer), displs(n);
  for (int p = 0; p < n; ++p) displs[p] = p * perPeer;
  rmaccStream_t stream = nullptr;
  rmaccStreamCreate(comm, &stream);
  rmaccBarrier(comm, nullptr);
  if (me != kVictim) gShared->entering.fetch_add(1);
  auto call = [&](rmaccStream_t s) {
    if (phase == Phase::kBarrier) return rmaccBarrier(comm, s);
    return rmaccAlltoAllv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(),
                          displs.data(), rmaccUint8, comm, s);
  };
  if (me == kVictim) {
    while (gShared->entering.load() < n - 1) usleep(1000);  // their barrier returned
    if (phase == Phase::kAlltoAllv) call(stream);
    usleep(phase == Phase::kBarrier ? 300000 : 50000);
    gShared->killedAt.store(nowS());
    raise(SIGKILL);
  }
  rmaccResult_t r = call(nullptr);
  record(res, r, nowS() - gShared->killedAt.load(), rmaccGetLastError(comm));
  rmaccResult_t async = rmaccSuccess;
  rmaccCommGetAsyncError(comm, &async);
  res.followCode = async;
  rmaccCommAbort(comm);
  _exit(0);
}

}  // namespace

// Issue 50: every order in which a user can end a communicator (tests/support/
// lifecycle_cases.h), on one node and across 2 emulated nodes, RMACC_TIMEOUT_S=3.
bool runLifecycle() {
  constexpr int kLifecycleTimeoutS = 3;
  printf("\n# lifecycle: rank 0 ends its communicator; rank 2 late, stopped or killed; "
         "4 ranks, RMACC_TIMEOUT_S=%d\n", kLifecycleTimeoutS);
  int clean = 0, total = 0;
  for (const LifecycleCase& c : lifecycleCases()) {
    for (int nodes : {1, 2}) {
      LifecycleResult r = runLifecycleCase(c, nodes, kLifecycleTimeoutS);
      ++total;
      clean += r.problems.empty();
      printf("%-44s %d node%s  %-6s %5.1f s  %s\n", c.name, nodes, nodes == 1 ? " " : "s",
             r.problems.empty() ? "clean" : "FAIL", r.seconds, r.summary.c_str());
      for (const std::string& p : r.problems) printf("    %s\n", p.c_str());
      fflush(stdout);
    }
  }
  printf("SUMMARY lifecycle: %d of %d orders clean (no crash, no hang past the timeout, no "
         "success with lost data, a second destroy a clean error)\n", clean, total);
  return clean == total;
}

int main(int argc, char** argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 3;
  gShared = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (gShared == MAP_FAILED) return 1;
  Totals t;
  printf("# bad input: rank %d's arguments bad; 4 ranks = 2 emulated nodes x 2, tcp on loopback, "
         "RMACC_TIMEOUT_S=%g\n", kBad, kTimeoutS);
  std::vector<std::string> classes;
  for (const Case& c : initCases()) runCase(c, true, t);
  for (const Case& c : dataCases()) runCase(c, false, t);
  for (const Case& c : initCases()) classes.push_back(c.klass);
  for (const Case& c : dataCases()) classes.push_back(c.klass);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  printf("\nSUMMARY bad input: %zu classes, %d cases: %d clean errors, %d accepted, %d crashes, "
         "%d hangs, %d success with wrong data\n", classes.size(), t.cases, t.clean, t.accepted,
         t.crash, t.hang, t.wrong);

  printf("\n# killed peer (rank 3, SIGKILL): seconds from the kill to each survivor's error\n");
  bool allFast = true;
  for (Phase p : {Phase::kInit, Phase::kBarrier, Phase::kAlltoAllv}) {
    double worst = 0;
    for (int i = 0; i < repeats; ++i) {
      memset((void*)gShared, 0, sizeof(Shared));
      std::vector<int> status = runRanksStatus(kRanks, options(), [&](const RankContext& rc) { killBody(p, rc); });
      printf("%-14s run %d:", phaseName(p), i + 1);
      for (int r = 0; r < kRanks - 1; ++r) {
        const RankResult& x = gShared->r[r];
        if (!x.ran || status[r] != 0) {
          printf("  rank %d: no result (status %d)", r, status[r]);
          allFast = false;
          continue;
        }
        printf("  rank %d: %s %.3f s", r, rmaccGetErrorString((rmaccResult_t)x.code), x.seconds);
        if (p != Phase::kInit) printf(" (async %s)", x.followCode == rmaccRemoteError ? "RemoteError" : rmaccGetErrorString((rmaccResult_t)x.followCode));
        worst = std::max(worst, x.seconds);
        if (x.code == rmaccSuccess) allFast = false;
      }
      printf("\n");
      fflush(stdout);
    }
    printf("SUMMARY killed peer during %s: slowest survivor %.3f s over %d runs (target <= 1 s)\n",
           phaseName(p), worst, repeats);
    allFast = allFast && worst <= 1.0;
  }
  const bool lifecycleClean = runLifecycle();
  return t.wrong == 0 && t.crash == 0 && t.hang == 0 && allFast && lifecycleClean ? 0 : 1;
}
