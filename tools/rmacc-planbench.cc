// Control-plane cost of one AlltoAllV call against rank count (issue 18), on the host alone:
// - global: the reference planner building every rank's ops (what the library ran before);
// - inputs: deriving one rank's RankInputs from the full byte matrix (what the library does
//   while the count exchange still gathers the matrix; O(n^2));
// - rank plan: one rank's own plan from its inputs (what the library runs per call);
// - ops per rank, and the count-exchange bytes per rank per call of the full-matrix protocol
//   against the per-rank protocol of DESIGN.md §2, computed from the message layouts.
// New counts on every call (~1 MiB blocks, +-50%), default options, 8 ranks per node.
// Usage: rmacc-planbench [maxRanks=1024] [calls=20] [globalMaxRanks=256]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "plan/planner.h"
#include "plan/rank_planner.h"

using namespace rmacc;
using namespace rmacc::plan;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<uint64_t> moeCounts(std::mt19937_64& rng, int n) {
  std::vector<uint64_t> b((size_t)n * n);
  std::uniform_int_distribution<uint64_t> d(512 << 10, 1536 << 10);
  for (auto& v : b) v = d(rng);
  return b;
}

// Bytes one rank sends plus receives per call (control plane and shared memory reads).
// Full-matrix protocol (collective.cc before issue 18): each rank's record is a ~128-byte
// header plus 3 x n u64; the node gather reads L-1 records, the rail round sends the node's L
// records to each of nNodes-1 rail peers and receives as many.
double fullMatrixBytes(int nNodes, int L) {
  const double rec = 128 + 24.0 * nNodes * L;
  return (L - 1) * rec + 2.0 * (nNodes - 1) * L * rec;
}
// Per-rank protocol (DESIGN.md §2 "Count exchange"): node gather 1 reads from each of L-1
// mates its header, its count to this rank, and for this rank's rail: nNodes expectations,
// nNodes receive offsets and nNodes round chunks; rail round 1 trades with each rail peer a
// 64-byte header plus L counts and one reduction value; rail round 2 a 24-byte reply; node
// gather 2 reads (signals, last batch) and a verdict from each mate.
double perRankBytes(int nNodes, int L) {
  const double gather1 = (L - 1) * (128 + 8 + 3 * 8.0 * nNodes);
  const double rail1 = 2.0 * (nNodes - 1) * (64 + 8.0 * L + 8);
  const double rail2 = 2.0 * (nNodes - 1) * 24;
  const double gather2 = (L - 1) * (8 + 16.0);
  return gather1 + rail1 + rail2 + gather2;
}

}  // namespace

int main(int argc, char** argv) {
  const int maxRanks = argc > 1 ? atoi(argv[1]) : 1024;
  const int calls = argc > 2 ? atoi(argv[2]) : 20;
  const int globalMax = argc > 3 ? atoi(argv[3]) : 256;
  const int L = 8;
  printf("%6s %7s %12s %12s %12s %10s %14s %14s\n", "ranks", "nodes", "global(ms)",
         "inputs(ms)", "rankplan(ms)", "ops/rank", "xchg full(B)", "xchg rank(B)");
  for (int n = 16; n <= maxRanks; n *= 2) {
    const Topology topo = Topology::blocks(n / L, L);
    const Options o;
    std::mt19937_64 rng(n);
    double tGlobal = -1, tInputs = 0, tPlan = 0;
    size_t ops = 0;
    Carry carry;
    for (int c = 0; c < calls; ++c) {
      const auto bytes = moeCounts(rng, n);
      const int me = (int)(rng() % n);
      double t0 = now();
      const MatrixInputs inputs(topo, bytes, o, carry);
      const RankInputs in = inputs.of(me);
      double t1 = now();
      const RankPlanResult r = makeRankPlan(topo, o, in);
      double t2 = now();
      tInputs += t1 - t0;
      tPlan += t2 - t1;
      ops += r.plan.ops.size();
      if (c == 0 && n <= globalMax) {
        const double g0 = now();
        const Plan p = makeAlltoallvPlan(topo, bytes, o, carry);
        tGlobal = now() - g0;
      }
      carry = inputs.after();
    }
    printf("%6d %7d %12.3f %12.3f %12.4f %10zu %14.0f %14.0f\n", n, n / L,
           tGlobal < 0 ? -1.0 : tGlobal * 1e3, tInputs / calls * 1e3, tPlan / calls * 1e3,
           ops / calls, fullMatrixBytes(n / L, L), perRankBytes(n / L, L));
  }
  return 0;
}
