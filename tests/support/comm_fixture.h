// A communicator for one rank of a multi-process test, destroyed when the scope ends.
#pragma once

#include <gtest/gtest.h>

#include "rmacc.h"
#include "support/multiprocess.h"

namespace rmacc::test {

#define RMACC_ASSERT_OK(call)                                                          \
  do {                                                                                 \
    rmaccResult_t r_ = (call);                                                         \
    ASSERT_EQ(r_, rmaccSuccess) << #call << ": " << rmaccGetErrorString(r_) << " / "   \
                                << rmaccGetLastError(nullptr);                         \
  } while (0)

class TestComm {
 public:
  explicit TestComm(const RankContext& ctx) {
    rmaccResult_t r = rmaccCommInitRank(&comm_, ctx.nRanks, ctx.id, ctx.rank);
    EXPECT_EQ(r, rmaccSuccess) << "init: " << rmaccGetLastError(nullptr);
    if (r != rmaccSuccess) throw std::runtime_error("rmaccCommInitRank failed");
    rmaccStreamCreate(comm_, &stream_);
  }
  ~TestComm() {
    if (!comm_) return;
    rmaccStreamDestroy(comm_, stream_);
    rmaccCommDestroy(comm_);
  }
  rmaccComm_t get() const { return comm_; }
  rmaccStream_t stream() const { return stream_; }
  const char* lastError() const { return rmaccGetLastError(comm_); }
  rmaccResult_t sync() { return rmaccStreamSynchronize(comm_, stream_); }

 private:
  rmaccComm_t comm_ = nullptr;
  rmaccStream_t stream_ = nullptr;
};

// Resident memory of this process in bytes (VmRSS), for growth checks.
size_t residentBytes();

}  // namespace rmacc::test
