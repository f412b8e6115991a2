#include "traffic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "core/error.h"
#include "counts.h"

namespace rmacc::sim {
namespace {

std::vector<uint64_t> fromPerf(const Traffic& t, int n) {
  perf::Options o;
  o.seed = t.seed;
  o.pattern = t.kind == Traffic::Kind::kUniform  ? perf::Pattern::kUniform
              : t.kind == Traffic::Kind::kRandom ? perf::Pattern::kRandom
                                                 : perf::Pattern::kZipf;
  const uint64_t elem = 4;
  perf::CountMatrix m = perf::makeCounts(o, n, t.bytesPerRank / elem);
  std::vector<uint64_t> bytes(m.counts.size());
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = m.counts[k] * elem;
  return bytes;
}

// Draws `k` distinct indices of `weights` (cumulative `cum`), weighted, without replacement:
// rejection of repeats keeps it simple and is cheap while k is much smaller than the range.
void drawDistinct(const std::vector<double>& cum, int lo, int hi, int k, std::mt19937_64& rng,
                  std::vector<int>& out) {
  const double base = lo ? cum[lo - 1] : 0, span = cum[hi - 1] - base;
  while ((int)out.size() < k) {
    const double u = base + span * ((double)(rng() >> 11) * 0x1.0p-53);
    int e = (int)(std::upper_bound(cum.begin() + lo, cum.begin() + hi, u) - cum.begin());
    e = std::min(e, hi - 1);
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
}

std::vector<uint64_t> moeDispatch(const MoeRouter& m, uint64_t seed, int nodes, int L) {
  const int n = nodes * L;
  // More experts than ranks: each rank holds experts/n of them. Fewer: each expert has n/experts
  // replicas on consecutive ranks, and a source uses replica (src mod replicas), so replicas
  // share the load evenly.
  RMACC_ARG_CHECK(m.experts % n == 0 || n % m.experts == 0,
                  "moe: %d experts do not spread evenly over %d ranks", m.experts, n);
  RMACC_ARG_CHECK(m.experts % nodes == 0, "moe: %d experts do not spread evenly over %d nodes",
                  m.experts, nodes);
  RMACC_ARG_CHECK(m.topK >= 1 && m.topK <= m.experts, "moe: top-k %d of %d experts", m.topK,
                  m.experts);
  RMACC_ARG_CHECK(m.tokensPerGpu >= 0 && m.hidden > 0 && m.bytesPerElem > 0,
                  "moe: tokens, hidden and bytes per element must be positive");
  const int perNode = m.experts / nodes;
  const int limit = m.nodesPerToken > 0 ? std::min(m.nodesPerToken, nodes) : 0;
  RMACC_ARG_CHECK(limit == 0 || limit * perNode >= m.topK,
                  "moe: %d nodes of %d experts cannot hold top-%d", limit, perNode, m.topK);
  std::mt19937_64 rng(seed);
  // Popularity 1/k^skew over a seeded random order of the experts.
  std::vector<int> order(m.experts);
  std::iota(order.begin(), order.end(), 0);
  for (int k = m.experts - 1; k > 0; --k) std::swap(order[k], order[rng() % (k + 1)]);
  std::vector<double> weight(m.experts), cum(m.experts), nodeCum(nodes);
  for (int k = 0; k < m.experts; ++k) weight[order[k]] = 1.0 / std::pow(k + 1.0, m.skew);
  std::partial_sum(weight.begin(), weight.end(), cum.begin());
  for (int b = 0; b < nodes; ++b)
    nodeCum[b] = cum[(b + 1) * perNode - 1];
  const uint64_t tokenBytes = (uint64_t)m.hidden * m.bytesPerElem;
  const int perRank = m.experts >= n ? m.experts / n : 0, replicas = perRank ? 1 : n / m.experts;
  std::vector<uint64_t> bytes((size_t)n * n, 0);
  std::vector<int> picked, chosenNodes, ranks;
  for (int src = 0; src < n; ++src) {
    for (int tok = 0; tok < m.tokensPerGpu; ++tok) {
      picked.clear();
      if (limit == 0) {
        drawDistinct(cum, 0, m.experts, m.topK, rng, picked);
      } else {
        // Node-limited: the token's nodes first (by their experts' total weight), then its
        // experts among theirs, split as evenly as the top-k allows.
        chosenNodes.clear();
        drawDistinct(nodeCum, 0, nodes, limit, rng, chosenNodes);
        for (int q = 0; q < limit; ++q) {
          const int want = m.topK / limit + (q < m.topK % limit ? 1 : 0);
          std::vector<int> local;
          const int b = chosenNodes[q];
          drawDistinct(cum, b * perNode, (b + 1) * perNode, std::min(want, perNode), rng, local);
          picked.insert(picked.end(), local.begin(), local.end());
        }
      }
      ranks.clear();
      for (int e : picked) {
        const int r = perRank ? e / perRank : e * replicas + src % replicas;
        if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
      }
      for (int r : ranks) bytes[(size_t)src * n + r] += tokenBytes;
    }
  }
  return bytes;
}

}  // namespace

std::string Traffic::describe() const {
  char text[256];
  switch (kind) {
    case Kind::kMoe:
      snprintf(text, sizeof text,
               "moe dispatch: %d tokens/GPU, hidden %d x %d B, top-%d of %d experts%s, skew %.2f, "
               "seed %llu",
               moe.tokensPerGpu, moe.hidden, moe.bytesPerElem, moe.topK, moe.experts,
               moe.nodesPerToken > 0 ? (", <= " + std::to_string(moe.nodesPerToken) + " nodes")
                                           .c_str()
                                     : "",
               moe.skew, (unsigned long long)seed);
      break;
    default:
      snprintf(text, sizeof text, "%s, %llu bytes per rank, seed %llu",
               kind == Kind::kUniform ? "uniform" : kind == Kind::kRandom ? "random" : "zipf",
               (unsigned long long)bytesPerRank, (unsigned long long)seed);
  }
  return text;
}

std::vector<uint64_t> makeTraffic(const Traffic& t, int nodes, int gpusPerNode) {
  RMACC_ARG_CHECK(nodes >= 1 && gpusPerNode >= 1, "traffic needs at least one rank");
  if (t.kind == Traffic::Kind::kMoe) return moeDispatch(t.moe, t.seed, nodes, gpusPerNode);
  return fromPerf(t, nodes * gpusPerNode);
}

Traffic::Kind trafficKind(const std::string& name) {
  if (name == "uniform") return Traffic::Kind::kUniform;
  if (name == "random") return Traffic::Kind::kRandom;
  if (name == "zipf") return Traffic::Kind::kZipf;
  if (name == "moe") return Traffic::Kind::kMoe;
  RMACC_THROW(rmaccInvalidArgument, "unknown traffic '%s' (uniform, random, zipf, moe)",
              name.c_str());
}

}  // namespace rmacc::sim
