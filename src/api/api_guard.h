// The one wrapper every C entry point goes through: C++ exceptions never cross the C ABI; each
// becomes an rmaccResult_t, and its text becomes the communicator's last error (or the
// thread's, for calls without a communicator).
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "rmacc.h"

#define RMACC_API extern "C" __attribute__((visibility("default")))

struct rmaccComm {
  std::unique_ptr<rmacc::Comm> impl;
  // Entry points running on this communicator right now (api::CallScope), guarded by the set
  // of live handles' mutex (comm_api.cc): destroy refuses while it is not 0, abort waits for it.
  int callers = 0;
};

namespace rmacc::api {

// The last error of calls made without a usable communicator, per thread.
std::string& threadLastError();

// The communicator behind a public handle; throws rmaccInvalidArgument for NULL or a handle
// that is not a live communicator.
Comm& commOf(rmaccComm_t comm);
// Whether rmaccCommInitRank gave out `comm` and nothing destroyed it since (comm_api.cc keeps
// the set; a handle is never validated by reading through it).
bool isLive(rmaccComm_t comm);
// Same, and fails with the communicator's fatal error if it has one.
Comm& healthyComm(rmaccComm_t comm);

// Holds a communicator for one entry point: while a scope holds it, `comm->impl` is not
// destroyed (rmaccCommDestroy refuses, rmaccCommAbort releases the call and waits for the
// scope to end). A handle that is not live is not held, and nothing reads through it.
class CallScope {
 public:
  explicit CallScope(rmaccComm_t comm);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  bool held() const { return held_; }

 private:
  rmaccComm_t comm_;
  bool held_ = false;
};

// A datatype as the caller passed it. C callers may pass any int, and a value outside the C++
// enum's range must not be loaded as the enum (undefined; UBSan's enum check stops there): read
// its bits instead, and look the size up from them.
inline int rawValue(const rmaccDataType_t& datatype) {
  int v;
  static_assert(sizeof(v) == sizeof(datatype), "rmaccDataType_t is an int-sized enum");
  memcpy(&v, &datatype, sizeof(v));
  return v;
}
size_t typeSize(int datatype);  // 0 for an unknown datatype

// Errors after which a communicator cannot go on: a peer or the network failed, or a wait ran
// out (the ranks are then out of step). They poison it (Comm::failCall).
inline bool fatalError(rmaccResult_t code) {
  return code == rmaccTimeout || code == rmaccRemoteError || code == rmaccNetworkError;
}

// Numbers a collective call (Comm::beginCall) for as long as `body(seq)` runs.
template <class F>
void collective(Comm& c, const char* kind, F&& body) {
  struct Leave {
    Comm& c;
    ~Leave() { c.endCall(); }
  } leave{c};
  body(c.beginCall(kind));
}

template <class F>
rmaccResult_t guarded(rmaccComm_t comm, const char* what, F&& body) {
  const CallScope scope(comm);
  auto record = [&](rmaccResult_t code, const std::string& text) {
    std::string msg = std::string(what) + ": " + text;
    const bool live = scope.held();
    if (live && fatalError(code)) msg = std::string(what) + ": " + comm->impl->failCall(code, text);
    if (live) comm->impl->setLastError(msg);
    threadLastError() = msg;
    if (code != rmaccInvalidArgument && code != rmaccInvalidUsage) WARN("%s", msg.c_str());
    return code;
  };
  try {
    body();
    return rmaccSuccess;
  } catch (const Error& e) {
    return record(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return record(rmaccSystemError, "out of memory");
  } catch (const std::exception& e) {
    return record(rmaccInternalError, e.what());
  } catch (...) {
    return record(rmaccInternalError, "unknown exception");
  }
}

}  // namespace rmacc::api
