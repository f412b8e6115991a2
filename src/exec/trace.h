// RMACC_TRACE_FILE: a Chrome/Perfetto trace (JSON array of events) of the ops each call runs,
// one track per (rank, lane), so a person can see the batches and the pipeline. Times are when
// each op started and finished on its stream (host callbacks around it, so tracing slows calls).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

#include "backend/backend.h"

namespace rmacc {

class TraceWriter {
 public:
  TraceWriter(const std::string& path, int rank);  // path may hold %r for the rank
  ~TraceWriter();
  void op(uint64_t call, int batch, const char* lane, const char* name, int peer,
          uint64_t bytes, double startUs, double durUs);
  static double nowUs();
  // Runs `enqueue` (work it puts on `s`) between two stream-ordered host callbacks and records
  // the span as one event. `trace` may be null: then it only runs `enqueue`.
  static void span(TraceWriter* trace, Stream& s, uint64_t call, int batch, const char* lane,
                   const char* name, int peer, uint64_t bytes,
                   const std::function<void()>& enqueue);

 private:
  std::mutex mu_;
  FILE* f_ = nullptr;
  int rank_;
  bool first_ = true;
};

}  // namespace rmacc
