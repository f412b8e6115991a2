// Communicator lifecycle, errors and queries.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "api/api_guard.h"
#include "bootstrap/bootstrap.h"
#include "coll/collective.h"
#include "coll/padded_calls.h"

using namespace rmacc;

namespace rmacc::api {

std::string& threadLastError() {
  thread_local std::string text;
  return text;
}

namespace {

// The handles rmaccCommInitRank gave out and no destroy or abort has taken back: a handle is
// checked against this set, never by reading through it (it may point at freed memory).
struct LiveComms {
  std::mutex mu;
  std::unordered_set<rmaccComm_t> handles;
  std::condition_variable left;  // a CallScope ended (rmaccComm::callers went down)
};

LiveComms& liveComms() {
  static LiveComms* live = new LiveComms;  // never destroyed: calls may come during exit
  return *live;
}


// Takes the handle out of the set (one of two racing destroys wins) and hands it back. With
// `refuseWhileCalled`, a handle that a call on another thread still holds stays live and the
// caller is told to abort first: destroying it would free what that call is using.
std::unique_ptr<rmaccComm> retire(rmaccComm_t comm, bool refuseWhileCalled) {
  RMACC_ARG_CHECK(comm != nullptr, "communicator is NULL");
  LiveComms& live = liveComms();
  std::lock_guard<std::mutex> lock(live.mu);
  RMACC_ARG_CHECK(live.handles.count(comm), "%p is not a live communicator", (void*)comm);
  if (refuseWhileCalled && comm->callers > 0)
    RMACC_THROW(rmaccInvalidUsage, "%d call%s in progress on another thread: abort first "
                "(rmaccCommAbort releases %s), or wait for %s to return", comm->callers,
                comm->callers == 1 ? " is" : "s are", comm->callers == 1 ? "it" : "them",
                comm->callers == 1 ? "it" : "them");
  live.handles.erase(comm);
  return std::unique_ptr<rmaccComm>(comm);
}

// After an abort released them: waits for the calls still inside `comm` to leave. Returns how
// many had not left after `seconds` (the communicator must then not be freed).
int waitForCallers(rmaccComm_t comm, double seconds) {
  LiveComms& live = liveComms();
  std::unique_lock<std::mutex> lock(live.mu);
  live.left.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return comm->callers == 0; });
  return comm->callers;
}

}  // namespace

CallScope::CallScope(rmaccComm_t comm) : comm_(comm) {
  if (!comm) return;
  LiveComms& live = liveComms();
  std::lock_guard<std::mutex> lock(live.mu);
  if (!live.handles.count(comm)) return;
  ++comm->callers;
  held_ = true;
}

CallScope::~CallScope() {
  if (!held_) return;
  LiveComms& live = liveComms();
  {
    std::lock_guard<std::mutex> lock(live.mu);
    --comm_->callers;
  }
  live.left.notify_all();
}

bool isLive(rmaccComm_t comm) {
  LiveComms& live = liveComms();
  std::lock_guard<std::mutex> lock(live.mu);
  return comm && live.handles.count(comm);
}

Comm& commOf(rmaccComm_t comm) {
  RMACC_ARG_CHECK(comm != nullptr, "communicator is NULL");
  RMACC_ARG_CHECK(isLive(comm), "%p is not a live communicator", (void*)comm);
  return *comm->impl;
}

Comm& healthyComm(rmaccComm_t comm) {
  Comm& c = commOf(comm);
  c.checkHealthy();
  return c;
}

}  // namespace rmacc::api

using namespace rmacc::api;

RMACC_API const char* rmaccGetErrorString(rmaccResult_t result) {
  switch (result) {
    case rmaccSuccess: return "no error";
    case rmaccUnhandledCudaError: return "unhandled cuda error";
    case rmaccSystemError: return "unhandled system error";
    case rmaccInternalError: return "internal error";
    case rmaccInvalidArgument: return "invalid argument";
    case rmaccInvalidUsage: return "invalid usage";
    case rmaccRemoteError: return "remote process exited or there was a network error";
    case rmaccInProgress: return "operation in progress";
    case rmaccTimeout: return "operation timed out";
    case rmaccNetworkError: return "network error";
    default: return "unknown result code";
  }
}

RMACC_API const char* rmaccGetLastError(rmaccComm_t comm) {
  // The text must outlive the call: keep a per-thread copy of the communicator's text.
  thread_local std::string copy;
  const CallScope scope(comm);
  if (scope.held()) copy = comm->impl->lastError();
  else copy = threadLastError();
  return copy.c_str();
}

RMACC_API rmaccResult_t rmaccGetVersion(int* version) {
  return guarded(nullptr, "rmaccGetVersion", [&] {
    RMACC_ARG_CHECK(version, "version is NULL");
    *version = RMACC_VERSION_CODE;
  });
}

RMACC_API rmaccResult_t rmaccGetUniqueId(rmaccUniqueId* uniqueId) {
  return guarded(nullptr, "rmaccGetUniqueId", [&] {
    RMACC_ARG_CHECK(uniqueId, "uniqueId is NULL");
    config();  // a malformed environment fails here, before any thread starts
    createUniqueId(uniqueId);
  });
}

RMACC_API rmaccResult_t rmaccCommInitRank(rmaccComm_t* comm, int nranks, rmaccUniqueId commId,
                                          int rank) {
  return guarded(nullptr, "rmaccCommInitRank", [&] {
    try {
      RMACC_ARG_CHECK(comm, "comm is NULL");
      *comm = nullptr;
      auto c = std::make_unique<rmaccComm>();
      c->impl = Comm::create(nranks, commId, rank);
      LiveComms& live = liveComms();
      std::lock_guard<std::mutex> lock(live.mu);
      live.handles.insert(c.get());
      *comm = c.release();
    } catch (...) {
      // The other ranks wait for this one at the root: tell it, so that they fail now rather
      // than at RMACC_TIMEOUT_S. After the rendezvous the root is gone and this is a refusal.
      abortRendezvous(commId, rank, nranks);
      throw;
    }
  });
}

RMACC_API rmaccResult_t rmaccCommDestroy(rmaccComm_t comm) {
  return guarded(nullptr, "rmaccCommDestroy", [&] {
    std::unique_ptr<rmaccComm> handle = retire(comm, /*refuseWhileCalled=*/true);
    std::string unfinished;
    const rmaccResult_t code = handle->impl->finish(&unfinished);
    handle.reset();
    if (code != rmaccSuccess) throw Error(code, unfinished);
  });
}

RMACC_API rmaccResult_t rmaccCommAbort(rmaccComm_t comm) {
  return guarded(nullptr, "rmaccCommAbort", [&] {
    std::unique_ptr<rmaccComm> handle = retire(comm, /*refuseWhileCalled=*/false);
    handle->impl->setAsyncError(rmaccRemoteError, "aborted by rmaccCommAbort");
    handle->impl->abort();
    // Calls on other threads are released by the abort; they leave within a wait slice or
    // two. One that does not (it would be a bug) keeps the communicator: leaked, not freed
    // under it.
    const double patienceS = handle->impl->cfg().timeoutS + 5;
    if (const int callers = waitForCallers(handle.get(), patienceS)) {
      (void)handle.release();
      RMACC_THROW(rmaccInternalError, "%d call%s on other threads did not return within %.0f s of "
                  "the abort; the communicator is left allocated", callers, callers == 1 ? "" : "s",
                  patienceS);
    }
  });
}

RMACC_API rmaccResult_t rmaccCommGetAsyncError(rmaccComm_t comm, rmaccResult_t* asyncError) {
  return guarded(comm, "rmaccCommGetAsyncError", [&] {
    Comm& c = commOf(comm);
    RMACC_ARG_CHECK(asyncError, "asyncError is NULL");
    c.padded().check();  // counts above a padded call's capacity fail the communicator
    *asyncError = c.asyncError();
  });
}

RMACC_API rmaccResult_t rmaccCommCount(rmaccComm_t comm, int* count) {
  return guarded(comm, "rmaccCommCount", [&] {
    Comm& c = commOf(comm);
    RMACC_ARG_CHECK(count, "count is NULL");
    *count = c.nRanks();
  });
}

RMACC_API rmaccResult_t rmaccCommUserRank(rmaccComm_t comm, int* rank) {
  return guarded(comm, "rmaccCommUserRank", [&] {
    Comm& c = commOf(comm);
    RMACC_ARG_CHECK(rank, "rank is NULL");
    *rank = c.rank();
  });
}

RMACC_API rmaccResult_t rmaccCommLocalInfo(rmaccComm_t comm, int* localRank, int* localSize,
                                           int* node, int* nNodes) {
  return guarded(comm, "rmaccCommLocalInfo", [&] {
    Comm& c = commOf(comm);
    const Topology& t = c.topo();
    if (localRank) *localRank = t.localRankOf(c.rank());
    if (localSize) *localSize = t.nodeSize(t.nodeOf(c.rank()));
    if (node) *node = t.nodeOf(c.rank());
    if (nNodes) *nNodes = t.nNodes();
  });
}

size_t rmacc::api::typeSize(int datatype) {
  switch (datatype) {
    case rmaccInt8: case rmaccUint8: return 1;
    case rmaccFloat16: case rmaccBfloat16: return 2;
    case rmaccInt32: case rmaccUint32: case rmaccFloat32: return 4;
    case rmaccInt64: case rmaccUint64: case rmaccFloat64: return 8;
    default: return 0;
  }
}

RMACC_API size_t rmaccTypeSize(rmaccDataType_t datatype) { return typeSize(rawValue(datatype)); }
