// The loop shared by alltoall and alltoallv: per size, fill and poison, warm up, time, verify,
// print a row. A test only says how a size becomes a layout and how to launch one call.
#pragma once

#include <functional>
#include <string>

#include "counts.h"
#include "harness.h"

namespace rmacc::perf {

struct CollectiveTest {
  std::string description;  // a header line of its own (rank 0), e.g. the count pattern
  // This rank's layout for a per-rank size in bytes (every rank must agree on the matrix).
  std::function<Layout(size_t bytes)> layout;
  // Enqueues one call on ctx.stream.
  std::function<void(const void* send, void* recv, const Layout& layout)> launch;
  // Optional: called once per size before its calls (e.g. to upload device-side counts).
  std::function<void(const Layout& layout)> prepare;
  // Optional, with the check on: wrong values outside the receive buffer after the size's
  // calls (e.g. the counts a dynamic call wrote back).
  std::function<uint64_t(const Layout& layout)> checkOutputs;
};

// Runs the sweep and prints the table on rank 0; returns the process exit code (1 when any
// element was wrong on any rank).
int runCollective(Context& ctx, const Options& opts, const CollectiveTest& test);

}  // namespace rmacc::perf
