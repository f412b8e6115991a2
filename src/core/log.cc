#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/config.h"

namespace rmacc {

namespace {

std::atomic<int> gLogRank{-1};

struct LogSettings {
  LogLevel level = LogLevel::kWarn;
  uint32_t subsys = kSubsysAll;
  char host[64] = {0};
};

// The log settings are read once, through Config's parsers but without the rest of Config, so
// that logging works even before (or while) Config validates the rest; a malformed value keeps
// the default here and is rejected by config() at init.
const LogSettings& settings() {
  static const LogSettings s = [] {
    LogSettings s;
    Config c;
    c.readOne("RMACC_DEBUG");
    c.readOne("RMACC_DEBUG_SUBSYS");
    s.level = c.debugLevel;
    s.subsys = c.debugSubsys;
    gethostname(s.host, sizeof(s.host) - 1);
    return s;
  }();
  return s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void setLogRank(int rank) { gLogRank.store(rank, std::memory_order_relaxed); }

bool logEnabled(LogLevel level, uint32_t subsys) {
  const LogSettings& s = settings();
  if (level > s.level) return false;
  return level == LogLevel::kWarn || (subsys & s.subsys) != 0;
}

void logMessage(LogLevel level, uint32_t /*subsys*/, const char* file, int line, const char* fmt,
                ...) {
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  // One fprintf per line so that lines of concurrent threads do not interleave.
  fprintf(stderr, "%s:%d:%d [rmacc] %s %s:%d %s\n", settings().host, (int)getpid(),
          gLogRank.load(std::memory_order_relaxed), levelName(level), base, line, msg);
}

}  // namespace rmacc
