// Issue 50: every order in which a user can end a communicator, on one node and across 2
// emulated nodes (tests/support/lifecycle_cases.h): no crash, no hang past the timeout, no
// success returned while data was lost, and a second destroy is a clean error. Real ranks over
// libfabric tcp on loopback, RMACC_TIMEOUT_S=3 so that each case ends within seconds.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "support/lifecycle_cases.h"

namespace rmacc::test {
namespace {

constexpr int kTimeoutS = 3;

class Lifecycle : public testing::TestWithParam<std::tuple<size_t, int>> {};

TEST_P(Lifecycle, NoCrashNoHangNoSilentLoss) {
  const auto [index, nodes] = GetParam();
  const LifecycleCase& c = lifecycleCases()[index];
  LifecycleResult r = runLifecycleCase(c, nodes, kTimeoutS);
  for (const std::string& p : r.problems) ADD_FAILURE() << c.name << " on " << nodes << " node(s): " << p;
  RecordProperty("summary", r.summary);
  printf("%s, %d node(s): %s (%.1f s)\n", c.name, nodes, r.summary.c_str(), r.seconds);
}

std::string caseName(const testing::TestParamInfo<std::tuple<size_t, int>>& info) {
  std::string name;
  for (const char* p = lifecycleCases()[std::get<0>(info.param)].name; *p; ++p)
    name += isalnum((unsigned char)*p) ? *p : '_';
  return name + "_" + std::to_string(std::get<1>(info.param)) + "node";
}

INSTANTIATE_TEST_SUITE_P(Orders, Lifecycle,
                         testing::Combine(testing::Range<size_t>(0, lifecycleCases().size()),
                                          testing::Values(1, 2)),
                         caseName);

}  // namespace
}  // namespace rmacc::test
