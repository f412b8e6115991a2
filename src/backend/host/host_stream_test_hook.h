// Tests only: widen the host streams' race windows so that a test hits them every run.
#pragma once

namespace rmacc::host {

// When set, every stream worker calls `hook` each time a wait's futex sleep returns (woken,
// or a slice over), before it looks at the word again: a hook that sleeps there holds a woken
// worker between the wake-up of an abort and its next look at the word. Process-wide.
void setWaitWakeHookForTest(void (*hook)());

}  // namespace rmacc::host
