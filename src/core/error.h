// Errors inside rmacc are exceptions that carry the rmaccResult_t the C API returns.
// Every C entry point catches them (src/api/api_guard.h); nothing crosses the C ABI.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

#include "rmacc.h"

namespace rmacc {

class Error : public std::runtime_error {
 public:
  Error(rmaccResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  rmaccResult_t code() const { return code_; }

 private:
  rmaccResult_t code_;
};

// printf-style formatting into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void throwError(rmaccResult_t code, const char* file, int line, const std::string& msg);

}  // namespace rmacc

// Throws an Error with a printf-style message and the source location.
#define RMACC_THROW(code, ...) \
  ::rmacc::throwError((code), __FILE__, __LINE__, ::rmacc::strprintf(__VA_ARGS__))

// Argument checks: bad input from the caller.
#define RMACC_ARG_CHECK(cond, ...)                          \
  do {                                                      \
    if (!(cond)) RMACC_THROW(rmaccInvalidArgument, __VA_ARGS__); \
  } while (0)

// Invariants of rmacc itself: a failure is a bug, reported as rmaccInternalError.
#define RMACC_ENFORCE(cond, ...)                                                 \
  do {                                                                           \
    if (!(cond))                                                                 \
      RMACC_THROW(rmaccInternalError, "invariant '%s' broken: %s", #cond,       \
                  ::rmacc::strprintf(__VA_ARGS__).c_str());                      \
  } while (0)

#define RMACC_ENFORCE_EQ(a, b)                                                      \
  do {                                                                              \
    auto va_ = (a);                                                                 \
    auto vb_ = (b);                                                                 \
    if (!(va_ == vb_))                                                              \
      RMACC_THROW(rmaccInternalError, "invariant %s == %s broken: %lld != %lld", #a, #b, \
                  (long long)va_, (long long)vb_);                                  \
  } while (0)

// System calls: -1 with errno becomes rmaccSystemError naming the call.
#define RMACC_SYSCHECK(call, name)                                                   \
  do {                                                                               \
    if ((call) == -1) RMACC_THROW(rmaccSystemError, "%s failed: %s", name, strerror(errno)); \
  } while (0)
