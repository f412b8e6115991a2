#include "core/error.h"

#include <cstdarg>

#include "core/log.h"

namespace rmacc {

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? n : 0, '\0');
  if (n > 0) vsnprintf(s.data(), n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

void throwError(rmaccResult_t code, const char* file, int line, const std::string& msg) {
  // The breadcrumb: where the error was raised, at INFO so that expected rejections of bad
  // input stay quiet by default.
  if (logEnabled(LogLevel::kInfo, kSubsysAll))
    logMessage(LogLevel::kInfo, kSubsysAll, file, line, "error %d (%s): %s", code,
               rmaccGetErrorString(code), msg.c_str());
  throw Error(code, msg);
}

}  // namespace rmacc
