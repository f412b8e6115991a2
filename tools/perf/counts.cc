#include "counts.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

namespace rmacc::perf {
namespace {

// Weights of one source row, before normalisation. The generator is std::mt19937_64 fed only
// from the seed, and the distributions are written by hand (std::uniform_real_distribution's
// output is not specified across standard libraries): every rank and every build agrees.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::vector<double> zipfDestinationLoad(const Options& o, int n, std::mt19937_64& rng) {
  const int experts = n * o.expertsPerRank;
  // A seeded shuffle decides which experts are hot, so the hot rank is not always rank 0.
  std::vector<int> order(experts);
  std::iota(order.begin(), order.end(), 0);
  for (int k = experts - 1; k > 0; --k) std::swap(order[k], order[rng() % (k + 1)]);
  std::vector<double> load(n, 0.0);
  for (int k = 0; k < experts; ++k) {
    int expert = order[k];
    load[expert / o.expertsPerRank] += 1.0 / std::pow(k + 1.0, o.zipfS);
  }
  return load;
}

std::vector<double> rowWeights(const Options& o, int n, const std::vector<double>& zipfLoad,
                               std::mt19937_64& rng) {
  std::vector<double> w(n, 1.0);
  for (int j = 0; j < n; ++j) {
    if (o.pattern == Pattern::kRandom) w[j] = uniform01(rng);
    if (o.pattern == Pattern::kZipf) w[j] = zipfLoad[j] * (0.75 + 0.5 * uniform01(rng));
  }
  return w;
}

// Largest-remainder rounding: floor every share, then hand the leftover elements to the largest
// fractional parts (ties to the lower index), so the row sums to exactly `total`.
std::vector<size_t> apportion(const std::vector<double>& w, size_t total) {
  const int n = static_cast<int>(w.size());
  double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<size_t> out(n, 0);
  std::vector<double> frac(n, 0.0);
  size_t given = 0;
  for (int j = 0; j < n; ++j) {
    double share = sum > 0 ? static_cast<double>(total) * w[j] / sum : static_cast<double>(total) / n;
    out[j] = std::min(static_cast<size_t>(share), total - given);
    frac[j] = share - static_cast<double>(out[j]);
    given += out[j];
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return frac[a] > frac[b]; });
  for (int k = 0; given < total; k = (k + 1) % n, ++given) out[idx[k]]++;
  return out;
}

size_t roundUp(size_t v, size_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

}  // namespace

CountMatrix makeCounts(const Options& o, int n, size_t totalElems) {
  CountMatrix m;
  m.n = n;
  m.counts.resize(static_cast<size_t>(n) * n);
  std::mt19937_64 rng(o.seed);
  std::vector<double> zipfLoad;
  if (o.pattern == Pattern::kZipf) zipfLoad = zipfDestinationLoad(o, n, rng);
  for (int i = 0; i < n; ++i) {
    std::vector<size_t> row = apportion(rowWeights(o, n, zipfLoad, rng), totalElems);
    std::copy(row.begin(), row.end(), m.counts.begin() + static_cast<size_t>(i) * n);
  }
  return m;
}

Layout makeLayout(const CountMatrix& m, int rank, size_t gapElems, size_t alignElems) {
  Layout l;
  l.sendCounts.resize(m.n);
  l.sdispls.resize(m.n);
  l.recvCounts.resize(m.n);
  l.rdispls.resize(m.n);
  size_t s = 0, r = 0;
  for (int p = 0; p < m.n; ++p) {
    // Send blocks go to peers in rank order; receive blocks likewise, indexed by source.
    l.sendCounts[p] = m.at(rank, p);
    l.sdispls[p] = s = roundUp(s + gapElems, alignElems);
    s += l.sendCounts[p];
    l.recvCounts[p] = m.at(p, rank);
    l.rdispls[p] = r = roundUp(r + gapElems, alignElems);
    r += l.recvCounts[p];
  }
  l.sendElems = s + gapElems;
  l.recvElems = r + gapElems;
  return l;
}

Layout alltoallvLayout(const Options& opts, int nranks, int rank, size_t bytes) {
  const size_t es = dataTypeSize(opts.dtype);
  // At least one element (and 64 B) of gap; blocks start 256 B aligned, which copy engines like.
  const size_t gap = std::max<size_t>(1, 64 / es);
  const size_t align = std::max<size_t>(1, 256 / es);
  return makeLayout(makeCounts(opts, nranks, bytes / es), rank, gap, align);
}

std::string describePattern(const Options& opts) {
  char text[160];
  int n = snprintf(text, sizeof text, "alltoallv pattern %s, seed %llu", patternName(opts.pattern),
                   static_cast<unsigned long long>(opts.seed));
  if (opts.pattern == Pattern::kZipf)
    snprintf(text + n, sizeof text - n, ", zipf s %.2f, %d experts per rank", opts.zipfS, opts.expertsPerRank);
  return text;
}

void printCounts(FILE* out, const CountMatrix& m) {
  std::vector<size_t> colSum(m.n, 0);
  fprintf(out, "# counts (elements), row = source rank, column = destination rank\n");
  for (int i = 0; i < m.n; ++i) {
    size_t rowSum = 0;
    fprintf(out, "%5d:", i);
    for (int j = 0; j < m.n; ++j) {
      fprintf(out, " %10zu", m.at(i, j));
      rowSum += m.at(i, j);
      colSum[j] += m.at(i, j);
    }
    fprintf(out, " | send %zu\n", rowSum);
  }
  fprintf(out, " recv:");
  size_t maxRecv = 0, total = 0;
  for (int j = 0; j < m.n; ++j) {
    fprintf(out, " %10zu", colSum[j]);
    maxRecv = std::max(maxRecv, colSum[j]);
    total += colSum[j];
  }
  double mean = m.n ? static_cast<double>(total) / m.n : 0;
  fprintf(out, "\n# receive imbalance (max / mean): %.3f\n", mean > 0 ? maxRecv / mean : 0.0);
}

}  // namespace rmacc::perf
