#include "check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

namespace rmacc::perf {
namespace {

constexpr uint64_t kPoison = 0xA5A5A5A5A5A5A5A5ull;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: neighbouring indices get unrelated values
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t lowBytes(uint64_t v, size_t elemSize) {
  return elemSize >= 8 ? v : v & ((1ull << (8 * elemSize)) - 1);
}

// Little-endian machines only (x86-64, aarch64): the low bytes of the u64 are the element.
void store(void* base, size_t i, size_t elemSize, uint64_t v) {
  memcpy(static_cast<char*>(base) + i * elemSize, &v, elemSize);
}

uint64_t load(const void* base, size_t i, size_t elemSize) {
  uint64_t v = 0;
  memcpy(&v, static_cast<const char*>(base) + i * elemSize, elemSize);
  return v;
}

// Elements of recvbuff outside every block that no longer hold the poison (a write past a
// block, or into the wrong place): counted, the first one reported.
uint64_t countWrongGap(const void* host, size_t from, size_t to, size_t elemSize, int me) {
  const uint64_t p = lowBytes(kPoison, elemSize);
  uint64_t wrong = 0;
  size_t first = 0;
  for (size_t i = from; i < to; ++i)
    if (load(host, i, elemSize) != p && wrong++ == 0) first = i;
  if (wrong)
    fprintf(stderr, "rank %d: %llu elements between blocks overwritten, the first at element %zu (byte %zu of "
            "recvbuff): expected the poison 0x%llx, got 0x%llx\n", me, (unsigned long long)wrong, first,
            first * elemSize, (unsigned long long)p, (unsigned long long)load(host, first, elemSize));
  return wrong;
}

}  // namespace

uint64_t expectedValue(int src, int dst, uint64_t index, size_t elemSize, uint64_t salt) {
  uint64_t block = mix(((static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst)) ^ mix(salt));
  uint64_t v = lowBytes(mix(block + index), elemSize);
  // A block element must never look like poison, or an element that was never written would
  // pass the check.
  return v == lowBytes(kPoison, elemSize) ? v ^ 1 : v;
}

void poison(void* host, size_t elems, size_t elemSize) { memset(host, 0xA5, elems * elemSize); }

void fillSend(void* host, const Layout& l, int me, size_t elemSize, uint64_t salt) {
  poison(host, l.sendElems, elemSize);
  for (size_t p = 0; p < l.sendCounts.size(); ++p)
    for (size_t k = 0; k < l.sendCounts[p]; ++k)
      store(host, l.sdispls[p] + k, elemSize, expectedValue(me, static_cast<int>(p), k, elemSize, salt));
}

uint64_t verifyRecv(const void* host, const Layout& l, int me, size_t elemSize, uint64_t salt) {
  // Walk the blocks in address order so the gaps between them are checked as well.
  std::vector<size_t> order(l.recvCounts.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l.rdispls[a] < l.rdispls[b]; });
  uint64_t wrong = 0;
  size_t pos = 0;
  for (size_t src : order) {
    if (l.recvCounts[src] == 0) continue;
    wrong += countWrongGap(host, pos, l.rdispls[src], elemSize, me);
    uint64_t bad = 0, first = 0;
    for (size_t k = 0; k < l.recvCounts[src]; ++k) {
      if (load(host, l.rdispls[src] + k, elemSize) == expectedValue(static_cast<int>(src), me, k, elemSize, salt)) continue;
      if (bad++ == 0) first = k;
    }
    // Which block went wrong, from where, and which bytes: the first thing a failure report
    // needs (the poison in "got" means the element was never written).
    if (bad) {
      const size_t at = l.rdispls[src] + first;
      fprintf(stderr, "rank %d: block from rank %zu: %llu of %zu elements wrong, first at element %llu (byte %zu of "
              "recvbuff): expected 0x%llx, got 0x%llx%s\n", me, src, (unsigned long long)bad, l.recvCounts[src],
              (unsigned long long)first, at * elemSize,
              (unsigned long long)expectedValue(static_cast<int>(src), me, first, elemSize, salt),
              (unsigned long long)load(host, at, elemSize),
              load(host, at, elemSize) == lowBytes(kPoison, elemSize) ? " (the poison: never written)" : "");
    }
    wrong += bad;
    pos = l.rdispls[src] + l.recvCounts[src];
  }
  return wrong + countWrongGap(host, pos, l.recvElems, elemSize, me);
}

}  // namespace rmacc::perf
