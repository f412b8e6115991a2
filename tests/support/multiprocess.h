// Runs a test body in real processes, one per rank (Gloo's multiproc_test): fork, set the
// emulated host name of the rank's node, hand every rank the unique id that rank 0 made.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "rmacc.h"

namespace rmacc::test {

struct RankContext {
  int rank;
  int nRanks;
  rmaccUniqueId id;  // made by rank 0 with createUniqueId, shared before the body runs
  void* shared;      // MAP_SHARED scratch every rank of this run sees (RunOptions::sharedBytes)
};

struct RunOptions {
  std::vector<int> nodeOf;  // node of each rank (RMACC_HOSTNAME=node<k>); empty: all on one node
  double timeoutS = 300;    // the parent kills every rank after this long
  size_t sharedBytes = 1 << 20;
  // Set in every rank before the body: environment variables, and parameters that are not read
  // from the environment (core/config.h kFixed: "RMACC_NET_BOUNCE", "always"), which go through
  // setParamForTest (core/test_hooks.h).
  std::vector<std::pair<std::string, std::string>> env;
};

// Exit status of each rank: 0 when its body returned without a gtest failure; 1 on a gtest
// failure, 2 on an exception, 3 when LeakSanitizer (ASan builds) found a leak, 128+sig when
// killed; -1 when the parent killed it on timeout.
std::vector<int> runRanksStatus(int nRanks, const RunOptions& options,
                                const std::function<void(const RankContext&)>& body);

// Same, and records a gtest failure for every rank that did not exit 0.
void runRanks(int nRanks, const RunOptions& options,
              const std::function<void(const RankContext&)>& body);

// nodeOf for nNodes nodes of localSize ranks where rank r sits on node (r * stride) % nNodes
// style scattering: not contiguous blocks (every node still gets localSize ranks).
std::vector<int> scatteredNodes(int nNodes, int localSize);
std::vector<int> blockNodes(int nNodes, int localSize);

// Ranks on the emulated nodes `nodeOf` talking over libfabric tcp on loopback, as the data-path
// tests run them. Wrong data usually shows as a signal that never comes: its wait fails after
// RMACC_TIMEOUT_S = 60 s (not the default 300 s) and the parent kills the ranks at 240 s, so a
// broken data path is a failure within minutes, not a 900 s hang. `extra` comes after these
// settings, so it may override them.
RunOptions tcpRanks(std::vector<int> nodeOf,
                    std::vector<std::pair<std::string, std::string>> extra = {});

// A value derived from (rank, peer, index): fills that make any misrouted byte visible.
inline uint8_t patternByte(int src, int dst, uint64_t index, uint64_t salt = 0) {
  uint64_t x = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)dst * 0xC2B2AE3D27D4EB4Full ^
               (index + salt) * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (uint8_t)x;
}

}  // namespace rmacc::test
