// The loop routes' schedule (exec/local_copy.h): every destination byte comes from the right
// source byte, no copy of a step reads a slot another copy of that step writes, and a slot is
// emptied before it is filled again. Steps run here one after another with plain memcpy, the
// copies of a step in reverse order (any order must give the same bytes).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "exec/local_copy.h"

namespace rmacc {
namespace {

bool overlaps(const char* a, size_t an, const char* b, size_t bn) { return a < b + bn && b < a + an; }

void checkSchedule(size_t bytes, std::vector<size_t> slotBytes, std::vector<double> shares) {
  std::vector<char> src(bytes), dst(bytes, 0);
  std::mt19937 rng(bytes);
  for (auto& c : src) c = (char)rng();
  std::vector<std::vector<char>> slotMem;
  std::vector<LoopRoute> routes;
  for (size_t i = 0; i < slotBytes.size(); ++i) slotMem.emplace_back(2 * slotBytes[i], 0);
  for (size_t i = 0; i < slotBytes.size(); ++i)
    routes.push_back({{slotMem[i].data(), slotMem[i].data() + slotBytes[i]}, slotBytes[i], shares[i]});
  auto steps = loopbackSteps(dst.data(), src.data(), bytes, routes);
  for (const auto& step : steps) {
    for (size_t a = 0; a < step.size(); ++a)
      for (size_t b = 0; b < step.size(); ++b)
        if (a != b)
          ASSERT_FALSE(overlaps((const char*)step[a].dst, step[a].bytes, (const char*)step[b].src,
                                step[b].bytes))
              << "a copy writes what another copy of its step reads";
    for (size_t i = step.size(); i-- > 0;) memcpy(step[i].dst, step[i].src, step[i].bytes);
  }
  EXPECT_EQ(memcmp(dst.data(), src.data(), bytes), 0) << bytes << " bytes";
  size_t moved = 0;
  for (const auto& step : steps)
    for (const auto& c : step) moved += c.bytes;
  EXPECT_EQ(moved, 2 * bytes) << "every byte goes out once and back once";
}

TEST(LoopbackSteps, EveryByteArrivesThroughOneRoute) {
  for (size_t bytes : {1ul, 7ul, 4096ul, 4097ul, 100000ul, 1ul << 20})
    for (size_t slot : {1ul, 3ul, 4096ul, 1ul << 22}) checkSchedule(bytes, {slot}, {1.0});
}

TEST(LoopbackSteps, SplitsOverRoutesByShare) {
  for (size_t bytes : {1ul, 2ul, 999ul, 65536ul, 300001ul})
    for (double share : {0.0, 0.3, 0.5, 0.92, 1.0})
      checkSchedule(bytes, {4097, 1000}, {1 - share, share});
}

TEST(LoopbackSteps, ChunksAreBalancedAcrossRoutes) {
  // 70/30 of 1 MiB through slots of 64 KiB and 16 KiB: the smaller slots set the step count
  // and the other route's chunks shrink to match, so both finish in the same step.
  std::vector<char> a(2 << 16), b(2 << 14), src(1 << 20), dst(1 << 20);
  std::vector<LoopRoute> routes = {{{a.data(), a.data() + (1 << 16)}, 1 << 16, 0.7},
                                   {{b.data(), b.data() + (1 << 14)}, 1 << 14, 0.3}};
  auto steps = loopbackSteps(dst.data(), src.data(), src.size(), routes);
  size_t hostPart = src.size() - (size_t)(0.7 * src.size() + 0.5);
  EXPECT_EQ(steps.size(), (hostPart + (1 << 14) - 1) / (1 << 14) + 1);
  EXPECT_EQ(steps.front().size(), 2u);  // both routes fill a slot in the first step
  EXPECT_EQ(steps.back().size(), 2u);   // and both empty their last one in the last
}

TEST(LoopbackSteps, HostShareFollowsTheLinkModel) {
  // Two GPUs: NVLink carries the peer block plus both hops of the loop: 31% goes by host.
  EXPECT_NEAR(hostShare(2, 50, 390), 150.0 / 490, 1e-12);
  EXPECT_NEAR(hostShare(8, 50, 390), 450.0 / 490, 1e-12);
  EXPECT_EQ(hostShare(64, 50, 390), 1.0);
  EXPECT_EQ(hostShare(2, 0, 390), 0.0);
}

}  // namespace
}  // namespace rmacc
