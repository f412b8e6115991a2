// The bounce ring's space bookkeeping (exec/bounce.h): a region handed out must never overlap
// bytes that a put still in flight reads, whatever the sizes, the wraps and how far behind the
// proxy is. Pure, so checked over many random histories against the full list of regions.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec/bounce.h"

namespace rmacc {
namespace {

struct Given {
  uint64_t offset, bytes, seq;
};

// Regions still being read once every put up to `done` is done, that overlap [off, off+bytes).
int overlapsInFlight(const std::vector<Given>& all, uint64_t off, uint64_t bytes, uint64_t done) {
  int n = 0;
  for (const Given& g : all)
    n += g.seq > done && g.offset < off + bytes && off < g.offset + g.bytes;
  return n;
}

TEST(RingSpace, WrapWaitsForRegionsBehindTheHead) {
  // Three regions, none done; the fourth fits after them, the fifth wraps onto the first.
  RingSpace ring(40);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    auto r = ring.reserve(10, 0);
    EXPECT_EQ(r.offset, (seq - 1) * 10);
    EXPECT_EQ(r.waitSeq, 0u);
    ring.used(seq);
  }
  auto r4 = ring.reserve(10, 0);
  EXPECT_EQ(r4.offset, 30u);
  EXPECT_EQ(r4.waitSeq, 0u);
  ring.used(4);
  auto r5 = ring.reserve(10, 0);
  EXPECT_EQ(r5.offset, 0u);
  EXPECT_EQ(r5.waitSeq, 1u) << "region 1 is still read by put 1";
  ring.used(5);
  auto r6 = ring.reserve(15, 1);
  EXPECT_EQ(r6.offset, 10u);
  EXPECT_EQ(r6.waitSeq, 3u) << "bytes 10..25 feed puts 2 and 3";
}

TEST(RingSpace, DoneRegionsAreFreeAtOnce) {
  RingSpace ring(32);
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    auto r = ring.reserve(8, seq - 1);
    EXPECT_EQ(r.waitSeq, 0u) << "seq " << seq;
    ring.used(seq);
  }
}

TEST(RingSpace, RandomHistoriesNeverOverwriteInFlightBytes) {
  std::mt19937_64 rng(7);
  for (int history = 0; history < 2000; ++history) {
    const uint64_t capacity = 1 + rng() % 64;
    RingSpace ring(capacity);
    std::vector<Given> all;
    uint64_t done = 0;        // what the host reads from the done flag
    uint64_t streamDone = 0;  // what the stream has waited for: its later copies come after
    for (uint64_t seq = 1; seq <= 200; ++seq) {
      // The proxy finishes puts in order, at any pace (sometimes not at all for a while).
      if (rng() % 3 == 0) done += rng() % (seq - done);
      uint64_t bytes = 1 + rng() % capacity;
      auto r = ring.reserve(bytes, done);
      ASSERT_LE(r.offset + bytes, capacity);
      ASSERT_LT(r.waitSeq, seq);
      streamDone = std::max(streamDone, r.waitSeq);  // the stream waits, then copies
      uint64_t after = std::max(done, streamDone);
      ASSERT_EQ(overlapsInFlight(all, r.offset, bytes, after), 0)
          << "history " << history << " seq " << seq << ": region " << r.offset << "+" << bytes
          << " overwrites bytes in flight (done " << done << ", wait " << r.waitSeq << ")";
      // Waiting no longer than needed: the put waited for does overlap (else no wait).
      if (r.waitSeq) {
        bool real = false;
        for (const Given& g : all)
          real |= g.seq == r.waitSeq && g.offset < r.offset + bytes && r.offset < g.offset + g.bytes;
        ASSERT_TRUE(real) << "history " << history << " seq " << seq;
      }
      ring.used(seq);
      all.push_back({r.offset, bytes, seq});
    }
  }
}

}  // namespace
}  // namespace rmacc
