// Tests that need something the machine may lack (libfabric's tcp provider, a GPU) skip on a
// developer's machine, but in CI (CI=true, as GitHub Actions and .ci/run set it) a missing
// prerequisite is a failure: otherwise CI could pass without running them.
#pragma once

namespace rmacc::test {

bool runningInCi();

// Records a skip (off CI) or a fatal failure (in CI) when `available` is false; the caller
// returns when ::testing::Test::IsSkipped() or HasFatalFailure() (RETURN_UNLESS_AVAILABLE).
void skipOrFailUnless(bool available, const char* what);

}  // namespace rmacc::test

#define RETURN_UNLESS_AVAILABLE(available, what)                                              \
  do {                                                                                        \
    ::rmacc::test::skipOrFailUnless((available), (what));                                     \
    if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;           \
  } while (0)
