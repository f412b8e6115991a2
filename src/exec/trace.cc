#include "exec/trace.h"

#include <memory>

namespace rmacc {

void TraceWriter::span(TraceWriter* trace, Stream& s, uint64_t call, int batch, const char* lane,
                       const char* name, int peer, uint64_t bytes,
                       const std::function<void()>& enqueue) {
  if (!trace) {
    enqueue();
    return;
  }
  auto t0 = std::make_shared<double>(0);
  s.hostCallback([t0] { *t0 = nowUs(); });
  enqueue();
  s.hostCallback([=] { trace->op(call, batch, lane, name, peer, bytes, *t0, nowUs() - *t0); });
}

}  // namespace rmacc
