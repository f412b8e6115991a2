// rmacc-perf: nccl-tests style benchmark of rmacc. See `rmacc-perf --help`.
//   tools/rmacc-run -n 4 --nodes 2 -- build/tools/rmacc-perf alltoallv -b 1K -e 64M -f 4
#include <cstdio>

#include "tests.h"

using namespace rmacc::perf;

int main(int argc, char** argv) {
  // Line-buffered even into a pipe: rmacc-run prefixes whole lines, and a crash should not
  // swallow the rows printed so far.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opts = parseOptions(argc, argv);
  if (opts.printCounts) {
    Launch launch = detectLaunch();
    int nranks = opts.nranksOverride ? opts.nranksOverride : launch.nranks;
    return launch.rank == 0 ? printCountsOnly(opts, nranks) : 0;
  }
  Context ctx;
  initContext(&ctx);
  int rc = 0;
  if (opts.test == "alltoall") rc = runAlltoall(ctx, opts);
  else if (opts.test == "alltoallv") rc = runAlltoallv(ctx, opts);
  else rc = runPutSignal(ctx, opts);
  finalizeContext(&ctx);
  return rc;
}
