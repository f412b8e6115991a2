// Count matrices and buffer layouts for AlltoAllV tests: every rank derives the same global
// matrix from a seed, so rank i's send count to j always equals j's receive count from i.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rmacc::test {

enum class Pattern { kUniform, kRandom, kSparse, kHot, kZipf };
const char* patternName(Pattern p);

// counts[i * n + j]: elements rank i sends to rank j, about `scale` elements per pair.
std::vector<size_t> makeCounts(Pattern p, int n, size_t scale, uint64_t seed);

// One rank's view: displacements placed out of peer order with gaps between blocks.
struct Layout {
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
  size_t sendElems = 0, recvElems = 0;  // buffer sizes, gaps included
};
Layout makeLayout(const std::vector<size_t>& counts, int n, int rank, uint64_t seed);

// Fills the send buffer from (rank, destination, byte index) and poisons the receive buffer.
void fillSend(uint8_t* send, const Layout& l, size_t esize, int rank, uint64_t salt);
constexpr uint8_t kPoison = 0xEE;
// Checks every received byte and that the gaps still hold the poison; returns the number of
// wrong bytes and describes the first in *first.
size_t checkRecv(const uint8_t* recv, const Layout& l, size_t esize, int rank, uint64_t salt,
                 std::string* first);

}  // namespace rmacc::test
