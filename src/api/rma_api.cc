// Memory, windows, streams and the one-sided primitives.
#include <cstddef>
#include <cstdint>

#include "api/api_guard.h"
#include "comm/window.h"
#include "exec/rma.h"
#include "coll/collective.h"
#include "coll/padded_calls.h"
#include "exec/signal_space.h"

using namespace rmacc;
using namespace rmacc::api;

namespace {

void checkSignal(int sigIdx, int ctx) {
  RMACC_ARG_CHECK(ctx >= 0 && ctx < RMACC_MAX_CONTEXTS, "ctx %d outside [0, %d)", ctx, RMACC_MAX_CONTEXTS);
  RMACC_ARG_CHECK(sigIdx >= 0 && sigIdx < RMACC_MAX_SIGNALS, "sigIdx %d outside [0, %d)", sigIdx,
                  RMACC_MAX_SIGNALS);
}

// The largest size rmaccMemAlloc takes: backends round a size up to whole pages (the host's
// 4 KiB, CUDA's 2 MiB granularity), and the result must still be an object's size (at most
// PTRDIFF_MAX, and an off_t for the host's shared memory). A larger size is a bad argument,
// where it used to reach the allocator as a wrapped or negative size (rmaccSystemError).
constexpr size_t kMaxAllocationBytes = (size_t)PTRDIFF_MAX & ~(size_t{2 << 20} - 1);

void checkPeer(const Comm& c, int peer) {
  RMACC_ARG_CHECK(peer >= 0 && peer < c.nRanks(), "peer %d outside [0, %d)", peer, c.nRanks());
}

// Runs `enqueue` on the stream behind `handle`; for a synchronous (NULL host) stream, waits.
template <class F>
void onStream(Comm& c, rmaccStream_t handle, F&& enqueue) {
  Stream& s = c.streamOf(handle);
  enqueue(s);
  if (c.synchronousStream(handle)) {
    s.synchronize();
    c.checkHealthy();
  }
}

}  // namespace

RMACC_API rmaccResult_t rmaccStreamCreate(rmaccComm_t comm, rmaccStream_t* stream) {
  return guarded(comm, "rmaccStreamCreate", [&] {
    Comm& c = commOf(comm);
    RMACC_ARG_CHECK(stream, "stream is NULL");
    *stream = c.createUserStream();
  });
}

RMACC_API rmaccResult_t rmaccStreamSynchronize(rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccStreamSynchronize", [&] {
    Comm& c = commOf(comm);
    Stream& s = c.streamOf(stream);
    // What this synchronisation reports (an error, or success) is reported for the stream's
    // calls: destroy does not report them again.
    struct Reported {
      Comm& c;
      rmaccStream_t stream;
      ~Reported() { c.noteStreamSynchronized(stream); }
    } reported{c, stream};
    s.synchronize();
    c.padded().check();  // counts above a padded call's capacity fail the communicator
    c.checkHealthy();
    std::string text;
    uint64_t seq = 0;
    rmaccResult_t e = c.coll().takeAnyCallError(&text, &seq);
    if (e != rmaccSuccess) c.padded().reported(seq);  // a padded call's two parts, told once
    if (e != rmaccSuccess) throw Error(e, text);
  });
}

RMACC_API rmaccResult_t rmaccStreamDestroy(rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccStreamDestroy", [&] { commOf(comm).destroyUserStream(stream); });
}

RMACC_API rmaccResult_t rmaccMemAlloc(rmaccComm_t comm, void** ptr, size_t size) {
  return guarded(comm, "rmaccMemAlloc", [&] {
    Comm& c = healthyComm(comm);
    RMACC_ARG_CHECK(ptr, "ptr is NULL");
    RMACC_ARG_CHECK(size <= kMaxAllocationBytes,
                    "size %zu is larger than any allocation can be (at most %zu: rounded up to "
                    "whole pages, more overflows an object's size)",
                    size, kMaxAllocationBytes);
    *ptr = c.windows().alloc(size);
  });
}

RMACC_API rmaccResult_t rmaccMemFree(rmaccComm_t comm, void* ptr) {
  return guarded(comm, "rmaccMemFree", [&] {
    if (ptr) commOf(comm).windows().free(ptr);
  });
}

RMACC_API rmaccResult_t rmaccCommWindowRegister(rmaccComm_t comm, void* buff, size_t size,
                                                rmaccWindow_t* win) {
  return guarded(comm, "rmaccCommWindowRegister", [&] {
    Comm& c = healthyComm(comm);
    if (win) *win = nullptr;
    collective(c, "rmaccCommWindowRegister", [&](uint64_t seq) {
      // Even without a place to return the window, the call joins (and fails everywhere).
      Window* w = c.windows().registerWindow(buff, size, seq, win ? "" : "win is NULL");
      *win = w;
    });
  });
}

RMACC_API rmaccResult_t rmaccCommWindowDeregister(rmaccComm_t comm, rmaccWindow_t win) {
  return guarded(comm, "rmaccCommWindowDeregister", [&] {
    Comm& c = healthyComm(comm);
    collective(c, "rmaccCommWindowDeregister",
               [&](uint64_t seq) { c.windows().deregisterWindow(win, seq); });
  });
}

RMACC_API rmaccResult_t rmaccPutSignal(const void* localbuff, size_t count, rmaccDataType_t datatype,
                                       int peer, rmaccWindow_t peerWin, size_t peerWinOffset,
                                       int sigIdx, int ctx, unsigned int flags, rmaccComm_t comm,
                                       rmaccStream_t stream) {
  return guarded(comm, "rmaccPutSignal", [&] {
    Comm& c = healthyComm(comm);
    size_t esize = typeSize(rawValue(datatype));
    RMACC_ARG_CHECK(esize > 0, "unknown datatype %d", rawValue(datatype));
    checkPeer(c, peer);
    checkSignal(sigIdx, ctx);
    RMACC_ARG_CHECK(flags == 0, "flags %u: no flags are defined", flags);
    RMACC_ARG_CHECK(count <= SIZE_MAX / esize, "count %zu overflows", count);
    size_t bytes = count * esize;
    RMACC_ARG_CHECK(localbuff || bytes == 0, "localbuff is NULL with count %zu", count);
    uint64_t past = bytes ? c.windows().overrun(localbuff, bytes) : 0;
    RMACC_ARG_CHECK(past == 0, "%zu bytes at localbuff %p run %llu bytes past the end of its "
                    "rmaccMemAlloc buffer", bytes, localbuff, (unsigned long long)past);
    Window& w = c.windows().get(peerWin);
    const PeerTarget& t = w.peers[peer];
    RMACC_ARG_CHECK(peerWinOffset <= t.size && bytes <= t.size - peerWinOffset,
                    "%zu bytes at offset %zu do not fit rank %d's window of %zu bytes", bytes,
                    peerWinOffset, peer, t.size);
    onStream(c, stream, [&](Stream& s) {
      c.rma().put(s, localbuff, bytes, peer, t, peerWinOffset, ctx, sigIdx);
    });
  });
}

RMACC_API rmaccResult_t rmaccSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                    rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccSignal", [&] {
    Comm& c = healthyComm(comm);
    checkPeer(c, peer);
    checkSignal(sigIdx, ctx);
    RMACC_ARG_CHECK(flags == 0, "flags %u: no flags are defined", flags);
    onStream(c, stream, [&](Stream& s) { c.rma().signal(s, peer, ctx, sigIdx); });
  });
}

RMACC_API rmaccResult_t rmaccWaitSignal(int nDesc, const rmaccWaitSignalDesc_t* signalDescs,
                                        rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccWaitSignal", [&] {
    Comm& c = healthyComm(comm);
    RMACC_ARG_CHECK(nDesc >= 0, "nDesc %d is negative", nDesc);
    RMACC_ARG_CHECK(signalDescs || nDesc == 0, "signalDescs is NULL with nDesc %d", nDesc);
    std::vector<SignalWait> waits;
    // Check everything before consuming any expectation, so a rejected call changes nothing.
    for (int i = 0; i < nDesc; ++i) {
      const rmaccWaitSignalDesc_t& d = signalDescs[i];
      checkPeer(c, d.peer);
      checkSignal(d.sigIdx, d.ctx);
      RMACC_ARG_CHECK(d.opCnt >= 0, "opCnt %d is negative", d.opCnt);
      waits.push_back({d.peer, d.ctx, d.sigIdx, (uint64_t)d.opCnt});
    }
    onStream(c, stream, [&](Stream& s) { c.rma().wait(s, waits.data(), waits.size()); });
  });
}

RMACC_API rmaccResult_t rmaccBarrier(rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccBarrier", [&] {
    Comm& c = healthyComm(comm);
    collective(c, "rmaccBarrier", [&](uint64_t seq) {
      // A barrier has no exchange to carry a local error to the peers: a rank that cannot join
      // poisons the communicator instead, so the peers fail now rather than at the timeout.
      try {
        c.streamOf(stream);
      } catch (const Error& e) {
        c.poison(rmaccInvalidUsage, strprintf("rank %d could not join rmaccBarrier (call #%llu): %s",
                                              c.rank(), (unsigned long long)seq, e.what()));
        throw;
      }
      onStream(c, stream, [&](Stream& s) { c.rma().barrier(s, kCtxBarrier); });
    });
  });
}
