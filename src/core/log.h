// Logging in NCCL's shape: WARN always, INFO and TRACE filtered by level (RMACC_DEBUG) and
// subsystem (RMACC_DEBUG_SUBSYS). Each line carries host, pid, rank and source location.
#pragma once

#include <cstdint>

namespace rmacc {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum LogSubsys : uint32_t {
  kSubsysInit = 1u << 0,
  kSubsysBoot = 1u << 1,
  kSubsysPlan = 1u << 2,
  kSubsysExec = 1u << 3,
  kSubsysNet = 1u << 4,
  kSubsysProxy = 1u << 5,
  kSubsysAlloc = 1u << 6,
  kSubsysEnv = 1u << 7,
  kSubsysColl = 1u << 8,
  kSubsysAll = ~0u,
};

// Sets the rank shown in this process's log lines (-1 until a communicator exists).
void setLogRank(int rank);
bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace rmacc

#define RMACC_LOG_(level, subsys, ...)                                               \
  do {                                                                               \
    if (::rmacc::logEnabled(level, subsys))                                          \
      ::rmacc::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__);           \
  } while (0)
#define WARN(...) RMACC_LOG_(::rmacc::LogLevel::kWarn, ::rmacc::kSubsysAll, __VA_ARGS__)
#define INFO(subsys, ...) RMACC_LOG_(::rmacc::LogLevel::kInfo, subsys, __VA_ARGS__)
#define TRACE(subsys, ...) RMACC_LOG_(::rmacc::LogLevel::kTrace, subsys, __VA_ARGS__)
