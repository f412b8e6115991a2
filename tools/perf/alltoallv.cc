// alltoallv: per-destination counts from counts.h (uniform, random or MoE-like zipf); the size
// is a rank's total send bytes. Blocks sit at gapped, aligned displacements on both sides, so
// the check sees any write outside a block.
#include <cstdio>

#include "collective.h"
#include "tests.h"

namespace rmacc::perf {

int runAlltoallv(Context& ctx, const Options& opts) {
  CollectiveTest t;
  t.layout = [&](size_t bytes) { return alltoallvLayout(opts, ctx.nranks, ctx.rank, bytes); };
  t.launch = [&](const void* send, void* recv, const Layout& l) {
    RMACC_PERF_CHECK(ctx, rmaccAlltoAllv(send, l.sendCounts.data(), l.sdispls.data(), recv, l.recvCounts.data(),
                                         l.rdispls.data(), opts.dtype, ctx.comm, ctx.stream));
  };
  t.description = describePattern(opts);
  return runCollective(ctx, opts, t);
}

int printCountsOnly(const Options& opts, int nranks) {
  for (size_t bytes : sweepSizes(opts)) {
    printf("# size %zu B per rank, %s pattern, seed %llu, %d ranks\n", bytes, patternName(opts.pattern),
           static_cast<unsigned long long>(opts.seed), nranks);
    printCounts(stdout, makeCounts(opts, nranks, bytes / dataTypeSize(opts.dtype)));
  }
  return 0;
}

}  // namespace rmacc::perf
