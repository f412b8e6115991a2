// The random campaign CI runs: many seeded shapes (topology, rank placement, count pattern,
// tiny relay slots, small puts, 1-3 consecutive calls with carry), each planned and verified.
// A failure prints its seed; RMACC_CAMPAIGN_SEED=<seed> reruns just that case, and
// RMACC_CAMPAIGN_CASES=<n> changes how many cases run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "core/error.h"
#include "plan/plan_internal.h"
#include "plan/planner.h"
#include "plan/verifier.h"

namespace rmacc::plan {
namespace {

constexpr uint64_t kBaseSeed = 0x5eed0000;
constexpr int kDefaultCases = 10000;

enum class Pattern { kUniform, kRandom, kZeroRowsCols, kHotDest, kZipf, kAllZero, kCount };
const char* patternName(Pattern p) {
  static const char* names[] = {"uniform", "random", "zero-rows-cols", "hot-dest", "zipf",
                                "all-zero"};
  return names[(int)p];
}

struct Case {
  std::vector<int> nodeOf;
  Options options;
  std::vector<std::vector<uint64_t>> calls;  // byte matrix per call
  std::string text;                          // what the case is, for failure reports
};

using Rng = std::mt19937_64;
uint64_t uniform(Rng& rng, uint64_t lo, uint64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

// Nodes log-uniform in 1..16 (small shapes are cheap, so most cases are small, but every size
// appears), ranks per node uniform in 1..8 (in a third of the cases drawn per node, so nodes
// differ in size), ranks scattered over nodes at random.
std::vector<int> randomPlacement(Rng& rng) {
  const int nodes = std::clamp((int)std::lround(std::exp(std::uniform_real_distribution<double>(
                                   0, std::log(16.49))(rng))),
                               1, 16);
  const int local = (int)uniform(rng, 1, 8);
  const bool unequal = uniform(rng, 0, 2) == 0;
  std::vector<int> nodeOf;
  for (int a = 0; a < nodes; ++a)
    nodeOf.insert(nodeOf.end(), unequal ? (int)uniform(rng, 1, 8) : local, a);
  if (uniform(rng, 0, 3) != 0) std::shuffle(nodeOf.begin(), nodeOf.end(), rng);
  return nodeOf;
}

// One call's counts. `unit` is the typical block size: a fraction of a slot up to a few slots,
// so rounds are cut into chunks and credits run.
std::vector<uint64_t> randomCounts(Rng& rng, int n, uint64_t unit, Pattern pattern) {
  std::vector<uint64_t> b((size_t)n * n, 0);
  auto at = [&](int s, int d) -> uint64_t& { return b[(size_t)s * n + d]; };
  switch (pattern) {
    case Pattern::kUniform: {
      const uint64_t v = uniform(rng, 1, unit);
      std::fill(b.begin(), b.end(), v);
      break;
    }
    case Pattern::kRandom:
    case Pattern::kZeroRowsCols:
      for (auto& v : b) v = uniform(rng, 0, 2 * unit);
      if (pattern == Pattern::kZeroRowsCols) {
        for (int r = 0; r < n; ++r) {
          if (uniform(rng, 0, 2) == 0)
            for (int d = 0; d < n; ++d) at(r, d) = 0;
          if (uniform(rng, 0, 2) == 0)
            for (int s = 0; s < n; ++s) at(s, r) = 0;
        }
      }
      break;
    case Pattern::kHotDest: {
      const int hot = (int)uniform(rng, 0, n - 1);
      for (int s = 0; s < n; ++s)
        for (int d = 0; d < n; ++d) at(s, d) = d == hot ? uniform(rng, unit, 4 * unit)
                                                        : uniform(rng, 0, unit / 8);
      break;
    }
    case Pattern::kZipf: {  // MoE-like: expert popularity ~ 1/rank^1.2, over a random order
      std::vector<int> order(n);
      for (int d = 0; d < n; ++d) order[d] = d;
      std::shuffle(order.begin(), order.end(), rng);
      const double tokens = (double)unit * std::min(n, 8);
      for (int s = 0; s < n; ++s)
        for (int k = 0; k < n; ++k) {
          const double share = 1.0 / std::pow(k + 1, 1.2) / 3.0;
          at(s, order[k]) = (uint64_t)(tokens * share *
                                       std::uniform_real_distribution<double>(0.5, 1.5)(rng));
        }
      break;
    }
    case Pattern::kAllZero:
    case Pattern::kCount:
      break;
  }
  return b;
}

Case makeCase(uint64_t seed) {
  Rng rng(seed);
  Case c;
  c.nodeOf = randomPlacement(rng);
  const int n = (int)c.nodeOf.size();
  static const uint64_t slotSizes[] = {1, 2, 3, 5, 8, 16, 64};
  c.options.slotBytes = slotSizes[uniform(rng, 0, 6)];
  c.options.slots = (int)uniform(rng, 2, 5);
  c.options.maxPutBytes = uniform(rng, 0, 2) == 0 ? (1ull << 30) : uniform(rng, 1, 24);
  c.options.entrySignals = uniform(rng, 0, 7) != 0;
  c.options.roundsPerBatch = (int)uniform(rng, 0, 3);
  c.options.creditWindow = (int)(seed % 4);  // not from rng: the cases' other draws stay
  c.options.minChunksPerRound = (int)(seed / 4 % 4);  // 0, 1: chunks of a slot; 2, 3: smaller
  c.options.minChunkBytes = seed / 16 % 3 + 1;
  c.options.entryLead = (int)(seed / 48 % 4) - 1;  // -1 (all at the start), 0, 1, 2
  c.options.releaseRelayUpTo = (int)(seed / 192 % 2) * 6;  // 0 (never) or up to 6 nodes
  c.options.joinForwardsBelow = seed / 384 % 2 * 32;  // never, or chunks below 32 bytes
  c.options.joinForwardsSteps = (int)(seed % 3);  // a whole position, 1 (none), 2
  c.options.quietPuts = seed / 768 % 2 == 0;
  c.options.fitSlotsFrom = seed / 7 % 3 == 1 ? 2 : 0;  // fitted slots from 2 nodes, a third
  c.options.fitWindowBytes = seed / 21 % 2 * 32;  // halved once, or again below 32 bytes
  const int nCalls = (int)uniform(rng, 1, 3);
  const Topology topo = Topology::fromNodeOf(c.nodeOf);
  c.text = strprintf("seed %#llx: %d nodes of up to %d%s, nodeOf {", (unsigned long long)seed,
                     topo.nNodes(), topo.maxNodeSize(), topo.uniform() ? "" : " (unequal)");
  for (int r = 0; r < n; ++r) c.text += strprintf(r ? ",%d" : "%d", c.nodeOf[r]);
  c.text += strprintf("}, slot %llu B x %d, maxPut %llu B, entry %s, rounds/batch %d, window %d, "
                      ">= %d chunks of >= %llu B, entry lead %d, release up to %d, join below %llu B "
                      "by %d, %s puts, fit from %d nodes within %llu B, calls:",
                      (unsigned long long)c.options.slotBytes, c.options.slots,
                      (unsigned long long)c.options.maxPutBytes,
                      c.options.entrySignals ? "signals" : "barrier", roundsPerBatch(c.options),
                      creditWindow(c.options), c.options.minChunksPerRound,
                      (unsigned long long)c.options.minChunkBytes, c.options.entryLead,
                      c.options.releaseRelayUpTo,
                      (unsigned long long)c.options.joinForwardsBelow, c.options.joinForwardsSteps,
                      c.options.quietPuts ? "quiet" : "loud", c.options.fitSlotsFrom,
                      (unsigned long long)c.options.fitWindowBytes);
  for (int k = 0; k < nCalls; ++k) {
    // Blocks of a tenth of a slot up to ~3 slots, capped so the op count stays small.
    const uint64_t tenths = uniform(rng, 1, 30);
    const uint64_t unit = std::clamp<uint64_t>(c.options.slotBytes * tenths / 10, 1, 48);
    const auto pattern = (Pattern)(uniform(rng, 0, 19) == 0 ? (int)Pattern::kAllZero
                                                            : (int)uniform(rng, 0, 4));
    c.calls.push_back(randomCounts(rng, n, unit, pattern));
    c.text += strprintf(" %s(unit %llu)", patternName(pattern), (unsigned long long)unit);
  }
  return c;
}

// What the campaign exercised, so a change that stops reaching the hard paths shows.
struct Coverage {
  size_t ops = 0;
  int relayCases = 0;     // some relay step
  int creditCases = 0;    // a credit within a call (a slot reused)
  int carriedCases = 0;   // a credit carried over from an earlier call
  int splitCases = 0;     // a put cut at maxPutBytes
};

void tally(const std::vector<Plan>& plans, Coverage* cov) {
  bool relay = false, credit = false, carried = false, split = false;
  for (const Plan& p : plans) {
    relay = relay || p.relayBytes > 0;
    for (const auto& rp : p.ranks) {
      cov->ops += rp.ops.size();
      for (const Op& op : rp.ops) {
        const bool isCredit = op.kind == OpKind::kPut && op.ctx == kPlanCtxCredit;
        credit = credit || (isCredit && !op.deps.empty());
        carried = carried || (isCredit && op.deps.empty());
        split = split || (op.kind == OpKind::kPut && op.bytes == p.options.maxPutBytes);
      }
    }
  }
  cov->relayCases += relay;
  cov->creditCases += credit;
  cov->carriedCases += carried;
  cov->splitCases += split;
}

// Plans and verifies one case; returns "" or the reason it failed.
std::string runCase(const Case& c, Coverage* cov) {
  const Topology topo = Topology::fromNodeOf(c.nodeOf);
  std::vector<Plan> plans;
  Carry carry;
  try {
    for (const auto& bytes : c.calls) {
      plans.push_back(makeAlltoallvPlan(topo, bytes, c.options, carry));
      carry = plans.back().after;
    }
  } catch (const Error& e) {
    return std::string("planner threw: ") + e.what();
  }
  tally(plans, cov);
  const Verdict v = verify(plans);
  return v.ok ? "" : v.error;
}

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

TEST(VerifierCampaign, RandomPlansVerify) {
  const char* only = getenv("RMACC_CAMPAIGN_SEED");
  const int cases = only && *only ? 1 : envInt("RMACC_CAMPAIGN_CASES", kDefaultCases);
  const auto start = std::chrono::steady_clock::now();
  Coverage cov;
  int failures = 0;
  for (int k = 0; k < cases && failures < 5; ++k) {
    const uint64_t seed = only && *only ? strtoull(only, nullptr, 0) : kBaseSeed + k;
    const Case c = makeCase(seed);
    const std::string error = runCase(c, &cov);
    if (!error.empty()) {
      ++failures;
      ADD_FAILURE() << c.text << "\n" << error << "\nrerun: RMACC_CAMPAIGN_SEED="
                    << strprintf("%#llx", (unsigned long long)seed) << " ./verifier_campaign_test";
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("campaign: %d cases, %zu ops planned and verified in %.1f s; cases with relay steps "
         "%d, slot credits %d, carried credits %d, split puts %d\n",
         cases, cov.ops, s, cov.relayCases, cov.creditCases, cov.carriedCases, cov.splitCases);
  if (cases >= 1000) {  // the hard paths must keep being reached
    EXPECT_GT(cov.creditCases, cases / 10);
    EXPECT_GT(cov.carriedCases, cases / 20);
    EXPECT_GT(cov.splitCases, cases / 10);
  }
}

// Provenance by ranges: a GiB per rank verifies as fast as a KiB.
TEST(VerifierCampaign, LargeShapesVerifyFast) {
  struct Shape {
    int nodes, local;
    uint64_t block;
  };
  for (const Shape& sh : {Shape{2, 8, 64ull << 20}, Shape{16, 8, 8ull << 20}}) {
    const Topology topo = Topology::blocks(sh.nodes, sh.local);
    const int n = topo.nRanks();
    std::vector<uint64_t> bytes((size_t)n * n);
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = sh.block + (k % 7) * 4096;
    Options o;  // the defaults: 4 slots of 16 MiB, 1 GiB puts
    const auto start = std::chrono::steady_clock::now();
    Plan first = makeAlltoallvPlan(topo, bytes, o, {});
    Plan second = makeAlltoallvPlan(topo, bytes, o, first.after);
    const Verdict v = verify({first, second});
    EXPECT_TRUE(v.ok) << v.error;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    printf("%d x %d, %llu MiB blocks: %d batches, planned and verified twice in %.2f s\n",
           sh.nodes, sh.local, (unsigned long long)(sh.block >> 20), first.nBatches, s);
  }
}

}  // namespace
}  // namespace rmacc::plan
