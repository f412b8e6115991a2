// The RMACC_TRACE_FILE format: a Chrome/Perfetto trace (JSON array of events), one file per
// rank, one track per (rank, lane). The executor writes what its streams ran (exec/trace.h
// TraceWriter); rmacc-sim writes what its model ran in the same format (lab/sim), so both open
// in one viewer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace rmacc {

class TraceFile {
 public:
  TraceFile(const std::string& path, int rank);  // path may hold %r for the rank
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  // One op of call `call`, batch `batch`, on track `lane`: from startUs for durUs. Any thread.
  void op(uint64_t call, int batch, const char* lane, const char* name, int peer,
          uint64_t bytes, double startUs, double durUs);
  static double nowUs();  // CLOCK_MONOTONIC

 private:
  std::mutex mu_;
  FILE* f_ = nullptr;
  int rank_;
  bool first_ = true;
};

}  // namespace rmacc
