// The rmacc-perf tests; each returns the process exit code.
#pragma once

#include "harness.h"

namespace rmacc::perf {

int runAlltoall(Context& ctx, const Options& opts);
int runAlltoallv(Context& ctx, const Options& opts);
int runPutSignal(Context& ctx, const Options& opts);

// --print-counts: the alltoallv count matrix of every size of the sweep; no communicator.
int printCountsOnly(const Options& opts, int nranks);

}  // namespace rmacc::perf
