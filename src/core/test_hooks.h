// Test hooks: how a test forces a code path or a small size that no user setting reaches (as
// Gloo's tests shrink maxSegmentSize). For tests only: nothing here is in the public header or
// read from the environment, and the library never calls the setters itself.
#pragma once

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
