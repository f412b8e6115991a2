// The orders in which a user can end a communicator (issue 50): destroy or abort before,
// during and after a call, from the calling thread or another one, after a timeout or a
// peer's death, and then once more. Each case runs 4 real ranks (one node, or 2 emulated nodes
// x 2) over libfabric tcp on loopback with a small RMACC_TIMEOUT_S; rank 0 is the one that
// ends its communicator in the case's order, rank 2 (on the other node when there are two)
// is the one that is late, stopped or killed. tests/lifecycle_test.cc runs every case under
// gtest; the reliability campaign (tests/campaign) prints a row for each.
#pragma once

#include <string>
#include <vector>

namespace rmacc::test {

enum class Teardown { kDestroy, kAbort };
enum class When {
  kBeforeCall,  // right after init; the other ranks then call
  kDuringCall,  // while a call is unfinished (on a stream, or blocking on another thread)
  kAfterCall,   // once the call returned (and its stream was synchronised)
};
enum class Fault {
  kNone,
  kLatePeer,     // rank 2 comes to the call well after the timeout
  kStoppedPeer,  // rank 2 is SIGSTOPped 30 ms into a 16 MiB-a-peer AlltoAll: a timeout
  kDeadPeer,     // rank 2 is SIGKILLed 30 ms into it
};

struct LifecycleCase {
  const char* name;
  Teardown how;
  When when;
  bool otherThread;  // kDuringCall: rank 0 blocks in a NULL-stream call, another thread ends it
  Fault fault;
};

// Every case, in the order the campaign prints them.
const std::vector<LifecycleCase>& lifecycleCases();

struct LifecycleResult {
  std::vector<std::string> problems;  // empty: no crash, no hang, no success with lost data
  std::string summary;                // what rank 0's calls returned, and how long they took
  double seconds = 0;                 // the whole run
};

// Runs `c` on `nodes` emulated nodes (1 or 2) of 4 / nodes ranks, RMACC_TIMEOUT_S=timeoutS.
LifecycleResult runLifecycleCase(const LifecycleCase& c, int nodes, int timeoutS);

}  // namespace rmacc::test
