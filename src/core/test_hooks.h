// Test hooks: how a test forces a code path or a small size that no user setting reaches (as
// Gloo's tests shrink maxSegmentSize). For tests only: nothing here is in the public header or
// read from the environment, and the library never calls the setters itself.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rmacc {

// Sets parameter `name` of RMACC_PARAMS (core/config.h; any visibility, the kFixed ones being
// what the hook is for) to `text`, spelt as its environment variable would be ("always", "64K").
// The process reads its configuration once, when its first communicator (or unique id) is
// made: set parameters before that. A test's ranks are forked processes that call it in the
// child (tests/support/multiprocess.h does it for RunOptions::env entries of kFixed
// parameters). Throws rmaccInvalidArgument for an unknown name or a malformed value.
void setParamForTest(const char* name, const char* text);
// Forgets every override (for single-process tests that read Config::fromEnvironment again).
void clearParamsForTest();

// What Config::fromEnvironment applies after the environment, in the order they were set.
std::vector<std::pair<std::string, std::string>> paramOverridesForTest();
bool paramOverriddenForTest(const char* name);

}  // namespace rmacc

namespace rmacc {

// Which path the AlltoAll(v) calls of this process took since it started (coll/direct_calls.h):
// set up on the caller's thread to the end (direct), begun there and finished by the progress
// thread after RMACC_ENQUEUE_WAIT_MS (handedOff), or queued for the progress thread (queued;
// calls triggered by their stream are not counted).
struct CallPathCounts {
  uint64_t direct = 0, handedOff = 0, queued = 0;
};
CallPathCounts callPathCountsForTest();

// The library's side: counts one call.
enum class CallPath { kDirect, kHandedOff, kQueued };
void countCallPath(CallPath path);

}  // namespace rmacc
