#include "support/alltoallv_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "support/multiprocess.h"

namespace rmacc::test {

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::kUniform: return "uniform";
    case Pattern::kRandom: return "random";
    case Pattern::kSparse: return "sparse";
    case Pattern::kHot: return "hot";
    case Pattern::kZipf: return "zipf";
  }
  return "?";
}

std::vector<size_t> makeCounts(Pattern p, int n, size_t scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> c(n * n, 0);
  auto uni = [&](size_t hi) { return std::uniform_int_distribution<size_t>(0, hi)(rng); };
  switch (p) {
    case Pattern::kUniform:
      std::fill(c.begin(), c.end(), scale);
      break;
    case Pattern::kRandom:
      for (auto& x : c) x = uni(2 * scale);
      break;
    case Pattern::kSparse: {
      // Some ranks send nothing, some receive nothing, the rest random.
      std::vector<char> mute(n), deaf(n);
      for (int r = 0; r < n; ++r) mute[r] = uni(3) == 0, deaf[r] = uni(3) == 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) c[i * n + j] = (mute[i] || deaf[j]) ? 0 : uni(2 * scale);
      break;
    }
    case Pattern::kHot: {
      int hot = (int)uni(n - 1);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) c[i * n + j] = j == hot ? scale * n : uni(scale / 8 + 1);
      break;
    }
    case Pattern::kZipf: {
      // MoE-like: each sender's tokens go to experts with Zipf(1.2) popularity; the experts'
      // ranking differs per sender.
      for (int i = 0; i < n; ++i) {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        double norm = 0;
        for (int k = 0; k < n; ++k) norm += 1.0 / std::pow(k + 1, 1.2);
        for (int k = 0; k < n; ++k)
          c[i * n + order[k]] = (size_t)(scale * n / std::pow(k + 1, 1.2) / norm);
      }
      break;
    }
  }
  return c;
}

Layout makeLayout(const std::vector<size_t>& counts, int n, int rank, uint64_t seed) {
  std::mt19937_64 rng(seed * 31 + rank);
  Layout l;
  l.sendcounts.resize(n);
  l.recvcounts.resize(n);
  l.sdispls.resize(n);
  l.rdispls.resize(n);
  for (int p = 0; p < n; ++p) {
    l.sendcounts[p] = counts[rank * n + p];
    l.recvcounts[p] = counts[p * n + rank];
  }
  auto place = [&](const std::vector<size_t>& cnt, std::vector<size_t>& displs) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t pos = 0;
    for (int p : order) {
      pos += rng() % 5;  // a gap of 0..4 elements
      displs[p] = pos;
      pos += cnt[p];
    }
    return pos + rng() % 3;
  };
  l.sendElems = place(l.sendcounts, l.sdispls);
  l.recvElems = place(l.recvcounts, l.rdispls);
  return l;
}

void fillSend(uint8_t* send, const Layout& l, size_t esize, int rank, uint64_t salt) {
  const int n = (int)l.sendcounts.size();
  memset(send, 0x5A, l.sendElems * esize);
  for (int p = 0; p < n; ++p) {
    uint8_t* block = send + l.sdispls[p] * esize;
    for (size_t k = 0; k < l.sendcounts[p] * esize; ++k) block[k] = patternByte(rank, p, k, salt);
  }
}

size_t checkRecv(const uint8_t* recv, const Layout& l, size_t esize, int rank, uint64_t salt,
                 std::string* first) {
  const int n = (int)l.recvcounts.size();
  std::vector<char> covered(l.recvElems * esize, 0);
  size_t wrong = 0;
  for (int p = 0; p < n; ++p) {
    const uint8_t* block = recv + l.rdispls[p] * esize;
    for (size_t k = 0; k < l.recvcounts[p] * esize; ++k) {
      covered[l.rdispls[p] * esize + k] = 1;
      if (block[k] == patternByte(p, rank, k, salt)) continue;
      if (!wrong++ && first)
        *first = "byte " + std::to_string(k) + " of the block from rank " + std::to_string(p);
    }
  }
  for (size_t b = 0; b < covered.size(); ++b) {
    if (covered[b] || recv[b] == kPoison) continue;
    if (!wrong++ && first) *first = "gap byte " + std::to_string(b) + " was written";
  }
  return wrong;
}

}  // namespace rmacc::test
