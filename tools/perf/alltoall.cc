// alltoall: every rank sends the same count to every rank; the size is a rank's total send bytes
// (count per peer = size / (nranks * type size)), as in nccl-tests.
#include "collective.h"
#include "tests.h"

namespace rmacc::perf {

int runAlltoall(Context& ctx, const Options& opts) {
  CollectiveTest t;
  t.layout = [&](size_t bytes) {
    Options uniform = opts;
    uniform.pattern = Pattern::kUniform;
    size_t perPeer = bytes / dataTypeSize(opts.dtype) / ctx.nranks;
    // rmaccAlltoAll takes no displacements: blocks are contiguous, without gaps.
    return makeLayout(makeCounts(uniform, ctx.nranks, perPeer * ctx.nranks), ctx.rank, 0, 1);
  };
  t.launch = [&](const void* send, void* recv, const Layout& l) {
    RMACC_PERF_CHECK(ctx, rmaccAlltoAll(send, recv, l.sendCounts[0], opts.dtype, ctx.comm, ctx.stream));
  };
  return runCollective(ctx, opts, t);
}

}  // namespace rmacc::perf
