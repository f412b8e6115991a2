// rmaccMemAlloc of a size no allocation can have is a bad argument, not a system error: the
// backends round a size up to whole pages, and near SIZE_MAX that rounding overflowed
// (rmaccMemAlloc(SIZE_MAX - 4094) returned rmaccSystemError). The communicator stays usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

class MemAllocTooLarge : public testing::TestWithParam<size_t> {};

TEST_P(MemAllocTooLarge, InvalidArgumentAndCommUsable) {
  const size_t size = GetParam();
  RunOptions o;
  o.timeoutS = 60;
  runRanks(1, o, [size](const RankContext& ctx) {
    TestComm comm(ctx);
    void* p = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(rmaccMemAlloc(comm.get(), &p, size), rmaccInvalidArgument) << comm.lastError();
    EXPECT_NE(std::string(comm.lastError()).find("larger than any allocation"), std::string::npos)
        << comm.lastError();
    void* ok = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &ok, 4096));
    memset(ok, 1, 4096);
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), ok));
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, MemAllocTooLarge,
                         testing::Values(SIZE_MAX, SIZE_MAX - 4094, SIZE_MAX - 4095,
                                         (size_t)PTRDIFF_MAX + 1));

}  // namespace
}  // namespace rmacc::test
