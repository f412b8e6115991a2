// RMACC_TRACE_FILE: the ops each call runs, in core/trace_file.h's format, so a person can see
// the batches and the pipeline. Times are when each op started and finished on its stream
// (host callbacks around it, so tracing slows calls).
#pragma once

#include <cstdint>
#include <functional>

#include "backend/backend.h"
#include "core/trace_file.h"

namespace rmacc {

class TraceWriter : public TraceFile {
 public:
  using TraceFile::TraceFile;
  // Runs `enqueue` (work it puts on `s`) between two stream-ordered host callbacks and records
  // the span as one event. `trace` may be null: then it only runs `enqueue`.
  static void span(TraceWriter* trace, Stream& s, uint64_t call, int batch, const char* lane,
                   const char* name, int peer, uint64_t bytes,
                   const std::function<void()>& enqueue);
};

}  // namespace rmacc
