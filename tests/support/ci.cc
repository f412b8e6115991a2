#include "support/ci.h"

#include <gtest/gtest.h>
#include <strings.h>

#include <cstdlib>

namespace rmacc::test {

bool runningInCi() {
  const char* ci = getenv("CI");
  return ci && (!strcasecmp(ci, "true") || !strcmp(ci, "1"));
}

void skipOrFailUnless(bool available, const char* what) {
  if (available) return;
  if (runningInCi()) FAIL() << what << " not available, and CI=true: these tests must run in CI";
  GTEST_SKIP() << what << " not available";
}

}  // namespace rmacc::test
