// The alltoallv count matrix and each rank's buffer layout.
//
// Every rank builds the whole n x n matrix from the shared seed, so rank i's send count to j is,
// by construction, rank j's receive count from i: no exchange is needed to make them agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "options.h"

namespace rmacc::perf {

// counts[i * n + j]: elements rank i sends to rank j. Every row sums to the per-rank total.
struct CountMatrix {
  int n = 0;
  std::vector<size_t> counts;
  size_t at(int src, int dst) const { return counts[static_cast<size_t>(src) * n + dst]; }
};

// Splits `totalElems` per rank over the n destinations by `pattern`:
//  uniform: equal shares (the remainder goes to the first destinations);
//  random:  uniformly random weights per (src, dst);
//  zipf:    MoE-like: n * expertsPerRank experts, popularity 1/k^s over a seeded random order
//           of the experts, a destination's weight is the load of its experts, with +-25%
//           jitter per source (tokens are not routed identically by every rank).
// Rounding is largest-remainder, so each row sums exactly to totalElems.
CountMatrix makeCounts(const Options& opts, int nranks, size_t totalElems);

// One rank's MPI-style arrays (elements) and buffer extents.
struct Layout {
  std::vector<size_t> sendCounts, sdispls, recvCounts, rdispls;
  size_t sendElems = 0;  // extent of the send buffer, gaps included
  size_t recvElems = 0;  // extent of the receive buffer, gaps included
};

// Layout of `rank` under `m`. With gapElems > 0 every block (and the buffer's end) is preceded by
// at least gapElems untouched elements and starts on an alignElems boundary, so a write to the
// wrong place, or past a block's end, lands in a gap that the check inspects.
Layout makeLayout(const CountMatrix& m, int rank, size_t gapElems, size_t alignElems);

// The alltoallv layout of `rank` for a per-rank size in bytes: counts from makeCounts, blocks
// 256-byte aligned with at least 64 bytes (and one element) of gap. rmacc-perf and mpi-alltoallv
// both use it, so they move exactly the same blocks to the same places.
Layout alltoallvLayout(const Options& opts, int nranks, int rank, size_t bytes);

// "alltoallv pattern zipf, seed 1, zipf s 1.00, 4 experts per rank": for table headers.
std::string describePattern(const Options& opts);

// The matrix as text, with row/column sums and the receive imbalance (max / mean).
void printCounts(FILE* out, const CountMatrix& m);

}  // namespace rmacc::perf
