// Control-plane cost of one AlltoAllV call against rank count (issue 18), on the host alone:
// - global: the reference planner building every rank's ops (what the library ran before);
// - inputs: the reference derivation of one rank's RankInputs from the whole byte matrix
//   (O(n^2); tests only: the library gets them from the count exchange);
// - rank plan: one rank's own plan from its inputs into a fresh result (what the library runs
//   per call), "kept": into a result kept across calls, and the grouping of its ops into
//   backend calls (plan/op_groups.h). The collective's plan cache in front of the rank planner
//   is not the planner's face and is not timed here: a miss costs the rank plan above;
// - batches, ops and groups per rank with small node rounds sharing a batch (the default) and
//   with one round per batch (Options::roundsPerBatch = 1, as before), and the count-exchange bytes per rank per call of the old
//   full-matrix protocol against the library's count exchange, computed from the message layouts.
// New counts on every call (~1 MiB blocks, +-50%), default options, 8 ranks per node. Times
// per call are medians: each call's rank plan is built `reps` times (the machine is shared, so a
// mean is mostly other people's builds).
// Usage: rmacc-planbench [maxRanks=1024] [calls=20] [globalMaxRanks=256] [reps=20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "plan/op_groups.h"
#include "plan/planner.h"
#include "plan/rank_planner.h"

using namespace rmacc;
using namespace rmacc::plan;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<uint64_t> moeCounts(std::mt19937_64& rng, int n) {
  std::vector<uint64_t> b((size_t)n * n);
  std::uniform_int_distribution<uint64_t> d(512 << 10, 1536 << 10);
  for (auto& v : b) v = d(rng);
  return b;
}

// Bytes one rank sends plus receives per call on the control plane, plus what it reads from
// its node-mates' shared records, from the message layouts (a 184-byte MetaHeader, a 32-byte
// verdict). The per-rank formula matches what RMACC_DEBUG=INFO logs per call on emulated nodes.
// Full-matrix protocol (before issue 18): each rank's record is the header plus 3 x n u64; the
// node gather reads L-1 records, the rail round sends the node's L records to each of nNodes-1
// rail peers and receives as many.
double fullMatrixBytes(int nNodes, int L) {
  const double rec = 184 + 24.0 * nNodes * L;
  return (L - 1) * rec + 2.0 * (nNodes - 1) * L * rec;
}
// Per-rank protocol (the library's count exchange), equal node sizes, averaged over ranks (a rank
// handles h = (nNodes - 1) / L node pairs on average). Node gather 1 reads from each mate its
// header, verdict, round chunks (nNodes), its count to this rank, its offset for this rank's
// block and, per writer of this rank (nNodes - 1), an expectation and an offset. Per handled
// pair: the node's L x L counts read from the mates' records, then sent (24 + 32 + 8L^2) and
// as many received; the relays' entries for the other node's writers read (24 per mate) and
// sent (16 + 32 + 48L), as many received. Gathers 2 to 4 read a verdict per mate and, from the
// handlers' records of the pairs this rank does not handle, a round maximum and a row of L
// counts per writer (gather 2) and a round maximum and this rank's 48-byte entry (gather 4);
// gather 5 a verdict and (signals, last batch).
double perRankBytes(int nNodes, int L) {
  const double h = (nNodes - 1.0) / L, others = nNodes - 1 - h;
  const double gather1 = (L - 1) * (184 + 32 + 8.0 * (nNodes + 2 + 2 * (nNodes - 1)));
  const double pairsRead = h * (8.0 * L * (L - 1) + 24.0 * (L - 1));
  const double gathers = (L - 1) * 32.0 * 3 + others * (8 + 8.0 * L) + others * (8 + 48.0) +
                         (L - 1) * (32.0 + 16);
  const double rail = h * 2 * ((24 + 32 + 8.0 * L * L) + (16 + 32 + 48.0 * L));
  return gather1 + pairsRead + gathers + rail;
}

}  // namespace

int main(int argc, char** argv) {
  const int maxRanks = argc > 1 ? atoi(argv[1]) : 1024;
  const int calls = argc > 2 ? atoi(argv[2]) : 20;
  const int globalMax = argc > 3 ? atoi(argv[3]) : 256;
  const int reps = argc > 4 ? std::max(1, atoi(argv[4])) : 20;
  const int L = 8;
  printf("%6s %6s %11s %11s %13s %9s %13s %9s %9s %9s %9s %9s %13s %13s\n", "ranks", "nodes",
         "global(ms)", "inputs(ms)", "rankplan(ms)", "kept(ms)", "+groups(ms)", "ops/rank", "batches",
         "groups", "batches1", "groups1", "xchg old(B)", "xchg new(B)");
  for (int n = 16; n <= maxRanks; n *= 2) {
    const Topology topo = Topology::blocks(n / L, L);
    const Options o;
    std::mt19937_64 rng(n);
    double tGlobal = -1;
    std::vector<double> tInputs, tPlan, tKept, tGroups;
    RankPlanResult kept;
    size_t ops = 0, groups = 0, batches = 0, batches1 = 0, groups1 = 0;
    Options one;
    one.roundsPerBatch = 1;
    Carry carry;
    for (int c = 0; c < calls; ++c) {
      const auto bytes = moeCounts(rng, n);
      const int me = (int)(rng() % n);
      double t0 = now();
      const MatrixInputs inputs(topo, bytes, o, carry);
      const RankInputs in = inputs.of(me);
      tInputs.push_back(now() - t0);
      RankPlanResult r;
      for (int k = 0; k < reps; ++k) {
        const double t1 = now();
        r = makeRankPlan(topo, o, in);
        const double t2 = now();
        const size_t g = groupOps(r.plan).size();
        tGroups.push_back(now() - t2);
        tPlan.push_back(t2 - t1);
        const double t3 = now();
        makeRankPlan(topo, o, in, kept);
        tKept.push_back(now() - t3);
        if (k == 0) groups += g;
      }
      ops += r.plan.ops.size();
      for (const Op& op : r.plan.ops)
        batches = std::max<size_t>(batches, op.batch + 1);
      const RankPlanResult r1 = makeRankPlan(topo, one, MatrixInputs(topo, bytes, one, carry).of(me));
      groups1 += groupOps(r1.plan).size();
      for (const Op& op : r1.plan.ops) batches1 = std::max<size_t>(batches1, op.batch + 1);
      if (c == 0 && n <= globalMax) {
        const double g0 = now();
        const Plan p = makeAlltoallvPlan(topo, bytes, o, carry);
        tGlobal = now() - g0;
      }
      carry = inputs.after();
    }
    printf("%6d %6d %11.3f %11.3f %13.4f %9.4f %13.4f %9zu %9zu %9zu %9zu %9zu %13.0f %13.0f\n", n, n / L,
           tGlobal < 0 ? -1.0 : tGlobal * 1e3, median(tInputs) * 1e3, median(tPlan) * 1e3,
           median(tKept) * 1e3, median(tGroups) * 1e3, ops / calls, batches, groups / calls, batches1, groups1 / calls,
           fullMatrixBytes(n / L, L),
           perRankBytes(n / L, L));
  }
  return 0;
}
