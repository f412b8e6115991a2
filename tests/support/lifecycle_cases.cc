#include "support/lifecycle_cases.h"

#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "rmacc.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

constexpr int kRanks = 4;
constexpr int kActor = 0;   // ends its communicator in the case's order
constexpr int kVictim = 2;  // late, stopped or killed; on node 1 of 2
constexpr int kWatcher = 1; // kills a stopped victim once the survivors are done
constexpr size_t kSmallCount = 1024;      // uint32 a peer
constexpr size_t kLargeCount = 4u << 20;  // 16 MiB a peer: still moving 30 ms in
// Beyond RMACC_TIMEOUT_S, what a loaded 2-core machine may add to a failure (the failing call
// also asks every rank where it is, for a second).
constexpr double kMarginS = 4;
constexpr double kOtherThreadDelayS = 0.3;  // the other thread ends the communicator then

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint32_t valueOf(int src, int dst, size_t i) {
  uint32_t x = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)dst * 0x85EBCA77u ^ (uint32_t)i * 0xC2B2AE3Du;
  return x ^ (x >> 15);
}

struct Buffers {
  size_t count;
  std::vector<uint32_t> send, recv;
  Buffers(size_t c, int me, int n) : count(c), send(c * n), recv(c * n, 0xEEEEEEEEu) {
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < c; ++i) send[p * c + i] = valueOf(me, p, i);
  }
  long long wrong(int me, int n) const {
    long long w = 0;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i) w += recv[p * count + i] != valueOf(p, me, i);
    return w;
  }
  rmaccResult_t call(rmaccComm_t comm, rmaccStream_t stream) {
    return rmaccAlltoAll(send.data(), recv.data(), count, rmaccUint32, comm, stream);
  }
};

// What one rank saw, in the run's shared memory (zeroed: `finished` 0 until the body ends).
struct RankRecord {
  int finished;
  int callCode;
  int syncCode;           // the stream's synchronisation, when made
  int teardownCode;
  int abortAfterRefusal;  // after a refused destroy on another thread: the abort that follows
  int againCode;          // destroy once more
  int callAfterCode;      // a call on the ended handle
  long long wrong;        // wrong elements received, -1 when not checked
  double callS, teardownS;
  char callMsg[240];
  char teardownMsg[240];
};

struct Shared {
  RankRecord r[kRanks];
  std::atomic<int> victimPid;
  std::atomic<int> survivorsDone;
  std::atomic<int> actorEnded;
};

constexpr int kUnset = -100;

void copyText(char* dst, size_t size, const char* text) {
  snprintf(dst, size, "%s", text ? text : "");
}

bool waitUntil(const std::atomic<int>& flag, int value, double seconds) {
  const double deadline = nowS() + seconds;
  while (flag.load() < value) {
    if (nowS() > deadline) return false;
    usleep(1000);
  }
  return true;
}

rmaccResult_t teardown(Teardown how, rmaccComm_t comm) {
  return how == Teardown::kDestroy ? rmaccCommDestroy(comm) : rmaccCommAbort(comm);
}

void actorBody(const LifecycleCase& c, const RankContext& ctx, Shared* sh, rmaccComm_t comm,
               Buffers& b, RankRecord& rec) {
  const int me = ctx.rank, n = ctx.nRanks;
  rmaccStream_t stream = nullptr;
  rmaccStreamCreate(comm, &stream);
  auto end = [&](rmaccComm_t h) {
    const double t0 = nowS();
    rec.teardownCode = teardown(c.how, h);
    rec.teardownS = nowS() - t0;
    copyText(rec.teardownMsg, sizeof(rec.teardownMsg), rmaccGetLastError(nullptr));
  };
  auto call = [&](rmaccStream_t s) {
    const double t0 = nowS();
    rec.callCode = b.call(comm, s);
    rec.callS = nowS() - t0;
    copyText(rec.callMsg, sizeof(rec.callMsg), rmaccGetLastError(comm));
  };
  switch (c.when) {
    case When::kBeforeCall:
      end(comm);
      sh->actorEnded.store(1);
      break;
    case When::kAfterCall:
      call(nullptr);  // synchronous on the host backend
      if (rec.callCode == rmaccSuccess) rec.wrong = b.wrong(me, n);
      end(comm);
      break;
    case When::kDuringCall:
      if (!c.otherThread) {
        call(stream);
        end(comm);
        // A destroy that returned 0 finished the call: its data must be there.
        if (c.how == Teardown::kDestroy && rec.callCode == rmaccSuccess && rec.teardownCode == rmaccSuccess)
          rec.wrong = b.wrong(me, n);
        break;
      }
      {
        std::thread ender([&] {
          usleep((useconds_t)(kOtherThreadDelayS * 1e6));
          end(comm);
          if (c.how == Teardown::kDestroy && rec.teardownCode == rmaccInvalidUsage)
            rec.abortAfterRefusal = rmaccCommAbort(comm);
        });
        call(nullptr);
        ender.join();
        if (rec.callCode == rmaccSuccess) rec.wrong = b.wrong(me, n);
      }
      break;
  }
  rec.againCode = rmaccCommDestroy(comm);
  rec.callAfterCode = b.call(comm, nullptr);
}

// Ranks other than the actor: one NULL-stream call (the victim late, stopped or killed in it),
// then destroy.
void peerBody(const LifecycleCase& c, const RankContext& ctx, Shared* sh, int timeoutS,
              rmaccComm_t comm, Buffers& b, RankRecord& rec) {
  const int me = ctx.rank, n = ctx.nRanks;
  if (c.when == When::kBeforeCall) waitUntil(sh->actorEnded, 1, 60);
  if (me == kVictim && c.fault == Fault::kLatePeer) usleep((useconds_t)((timeoutS * 1.5 + 1) * 1e6));
  if (me == kVictim && (c.fault == Fault::kStoppedPeer || c.fault == Fault::kDeadPeer)) {
    const int sig = c.fault == Fault::kStoppedPeer ? SIGSTOP : SIGKILL;
    std::thread([sig] {
      usleep(30000);
      kill(getpid(), sig);
    }).detach();
  }
  const double t0 = nowS();
  rec.callCode = b.call(comm, nullptr);
  rec.callS = nowS() - t0;
  copyText(rec.callMsg, sizeof(rec.callMsg), rmaccGetLastError(comm));
  if (rec.callCode == rmaccSuccess) rec.wrong = b.wrong(me, n);
  const double t1 = nowS();
  rec.teardownCode = rmaccCommDestroy(comm);
  rec.teardownS = nowS() - t1;
  copyText(rec.teardownMsg, sizeof(rec.teardownMsg), rmaccGetLastError(nullptr));
}

void rankBody(const LifecycleCase& c, const RankContext& ctx, Shared* sh, int timeoutS) {
  RankRecord& rec = sh->r[ctx.rank];
  rec.callCode = rec.syncCode = rec.teardownCode = rec.abortAfterRefusal = kUnset;
  rec.againCode = rec.callAfterCode = kUnset;
  rec.wrong = -1;
  if (ctx.rank == kVictim) sh->victimPid.store(getpid());
  const bool large = c.fault == Fault::kStoppedPeer || c.fault == Fault::kDeadPeer;
  Buffers b(large ? kLargeCount : kSmallCount, ctx.rank, ctx.nRanks);
  rmaccComm_t comm = nullptr;
  rmaccResult_t init = rmaccCommInitRank(&comm, ctx.nRanks, ctx.id, ctx.rank);
  if (init != rmaccSuccess) {
    copyText(rec.callMsg, sizeof(rec.callMsg), rmaccGetLastError(nullptr));
    rec.callCode = init;
    rec.finished = 1;
    return;
  }
  if (ctx.rank == kActor) actorBody(c, ctx, sh, comm, b, rec);
  else peerBody(c, ctx, sh, timeoutS, comm, b, rec);
  rec.finished = 1;
  sh->survivorsDone.fetch_add(1);
  // A stopped victim never finishes on its own: once everyone else is done, it goes.
  if (ctx.rank == kWatcher && c.fault == Fault::kStoppedPeer) {
    waitUntil(sh->survivorsDone, kRanks - 1, 60);
    if (int pid = sh->victimPid.load()) kill(pid, SIGKILL);
  }
}

std::string codeName(int code) {
  if (code == kUnset) return "-";
  return rmaccGetErrorString((rmaccResult_t)code);
}

void check(const LifecycleCase& c, const Shared& sh, const std::vector<int>& status, int timeoutS,
           std::vector<std::string>& problems) {
  auto problem = [&](int r, const std::string& what) {
    problems.push_back("rank " + std::to_string(r) + ": " + what);
  };
  const double bound = timeoutS + kMarginS;
  for (int r = 0; r < kRanks; ++r) {
    const RankRecord& rec = sh.r[r];
    const bool killed = r == kVictim && (c.fault == Fault::kStoppedPeer || c.fault == Fault::kDeadPeer);
    if (status[r] == -1) problem(r, "hang: killed by the harness");
    else if (killed) {
      if (status[r] != 128 + SIGKILL) problem(r, "exit status " + std::to_string(status[r]) + ", expected SIGKILL");
      continue;
    } else if (status[r] != 0) problem(r, "crash: exit status " + std::to_string(status[r]));
    if (!rec.finished) continue;
    if (rec.wrong > 0)
      problem(r, "success with " + std::to_string(rec.wrong) + " wrong elements (call: " +
                     codeName(rec.callCode) + ", teardown: " + codeName(rec.teardownCode) + ")");
    if (rec.callS > bound)
      problem(r, "the call took " + std::to_string(rec.callS) + " s, past the timeout: " + rec.callMsg);
    if (rec.teardownS > bound)
      problem(r, "the teardown took " + std::to_string(rec.teardownS) + " s: " + rec.teardownMsg);
    if (r != kActor) {
      if (rec.teardownCode == rmaccSuccess || rec.callCode != rmaccSuccess) continue;
      problem(r, std::string("destroy after a good call failed: ") + rec.teardownMsg);
      continue;
    }
    if (rec.againCode != rmaccInvalidArgument)
      problem(r, "destroy of an ended handle returned " + codeName(rec.againCode));
    if (rec.callAfterCode != rmaccInvalidArgument)
      problem(r, "a call on an ended handle returned " + codeName(rec.callAfterCode));
    if (c.when == When::kDuringCall && c.otherThread) {
      if (c.how == Teardown::kDestroy) {
        if (rec.teardownCode != rmaccInvalidUsage)
          problem(r, "destroy while a call blocks on another thread returned " + codeName(rec.teardownCode) +
                         " (expected a refusal): " + rec.teardownMsg);
        if (rec.abortAfterRefusal != rmaccSuccess)
          problem(r, "the abort after the refused destroy returned " + codeName(rec.abortAfterRefusal));
      } else if (rec.teardownCode != rmaccSuccess) {
        problem(r, "abort from another thread returned " + codeName(rec.teardownCode) + ": " + rec.teardownMsg);
      }
      if (rec.callCode == rmaccSuccess && c.fault == Fault::kLatePeer)
        problem(r, "the call returned 0 though a peer came only after the timeout");
      continue;
    }
    if (c.how == Teardown::kAbort && rec.teardownCode != rmaccSuccess)
      problem(r, "abort returned " + codeName(rec.teardownCode) + ": " + rec.teardownMsg);
    // A destroy with a call it could not finish must say so, naming the call.
    if (c.how == Teardown::kDestroy && c.when == When::kDuringCall && c.fault == Fault::kLatePeer &&
        (rec.teardownCode == rmaccSuccess || !strstr(rec.teardownMsg, "call #")))
      problem(r, "destroy with a call a late peer never joined returned " + codeName(rec.teardownCode) +
                     ": " + rec.teardownMsg);
    if (c.how == Teardown::kDestroy && c.fault == Fault::kNone && rec.teardownCode != rmaccSuccess)
      problem(r, "destroy of a healthy communicator returned " + codeName(rec.teardownCode) + ": " +
                     rec.teardownMsg);
  }
}

}  // namespace

const std::vector<LifecycleCase>& lifecycleCases() {
  using T = Teardown;
  using W = When;
  using F = Fault;
  static const std::vector<LifecycleCase> cases = {
      {"destroy before a call", T::kDestroy, W::kBeforeCall, false, F::kNone},
      {"abort before a call", T::kAbort, W::kBeforeCall, false, F::kNone},
      {"destroy after a call", T::kDestroy, W::kAfterCall, false, F::kNone},
      {"abort after a call", T::kAbort, W::kAfterCall, false, F::kNone},
      {"destroy with a call on a stream", T::kDestroy, W::kDuringCall, false, F::kNone},
      {"abort with a call on a stream", T::kAbort, W::kDuringCall, false, F::kNone},
      {"destroy with a call a late peer misses", T::kDestroy, W::kDuringCall, false, F::kLatePeer},
      {"destroy from another thread during a call", T::kDestroy, W::kDuringCall, true, F::kLatePeer},
      {"abort from another thread during a call", T::kAbort, W::kDuringCall, true, F::kLatePeer},
      {"destroy after a timeout", T::kDestroy, W::kAfterCall, false, F::kStoppedPeer},
      {"abort after a timeout", T::kAbort, W::kAfterCall, false, F::kStoppedPeer},
      {"destroy after a peer's death", T::kDestroy, W::kAfterCall, false, F::kDeadPeer},
      {"abort after a peer's death", T::kAbort, W::kAfterCall, false, F::kDeadPeer},
  };
  return cases;
}

LifecycleResult runLifecycleCase(const LifecycleCase& c, int nodes, int timeoutS) {
  RunOptions o;
  o.nodeOf = blockNodes(nodes, kRanks / nodes);
  o.timeoutS = 6.0 * timeoutS + 60;
  o.sharedBytes = 64;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", std::to_string(timeoutS)}};
  // The ranks' records outlive the run (runRanksStatus unmaps its own scratch area).
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  LifecycleResult result;
  if (mem == MAP_FAILED) {
    result.problems.push_back("mmap of the shared records failed");
    return result;
  }
  auto* shared = new (mem) Shared();
  const double t0 = nowS();
  std::vector<int> status = runRanksStatus(kRanks, o, [&](const RankContext& ctx) {
    rankBody(c, ctx, shared, timeoutS);
  });
  result.seconds = nowS() - t0;
  const Shared& sh = *shared;
  check(c, sh, status, timeoutS, result.problems);
  const RankRecord& a = sh.r[kActor];
  char text[400];
  snprintf(text, sizeof(text), "call %s in %.2f s; %s %s in %.2f s; again %s",
           codeName(a.callCode).c_str(), a.callS, c.how == Teardown::kDestroy ? "destroy" : "abort",
           codeName(a.teardownCode).c_str(), a.teardownS, codeName(a.againCode).c_str());
  result.summary = text;
  munmap(mem, sizeof(Shared));
  return result;
}

}  // namespace rmacc::test
