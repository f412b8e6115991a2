// Traffic patterns: the byte matrix bytes[src * n + dst] one AlltoAllV call moves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rmacc::sim {

struct MoeRouter {
  int tokensPerGpu = 4096;
  int hidden = 7168;
  int bytesPerElem = 2;     // bf16
  int experts = 256;        // spread evenly over the ranks, contiguous
  int topK = 8;
  int nodesPerToken = 0;    // > 0: node-limited routing (DeepSeek-V3: 4)
  double skew = 0;          // Zipf exponent of expert popularity (0: uniform router)
};

struct Traffic {
  enum class Kind { kUniform, kRandom, kZipf, kMoe } kind = Kind::kUniform;
  uint64_t bytesPerRank = 16ull << 20;  // uniform, random, zipf: what each rank sends
  uint64_t seed = 1;
  MoeRouter moe;
  std::string describe() const;
};

// uniform, random and zipf are rmacc-perf's generators (tools/perf/counts.h, float32 elements),
// so predictions see the same matrix a measured run moved. moe routes every token of every
// rank to topK experts (at most nodesPerToken nodes) and sends it once to each rank that holds
// one of them (dispatch; combine is the transpose). Throws rmaccInvalidArgument on bad sizes.
std::vector<uint64_t> makeTraffic(const Traffic& t, int nodes, int gpusPerNode);

// Parses "uniform", "random", "zipf" or "moe".
Traffic::Kind trafficKind(const std::string& name);

}  // namespace rmacc::sim
