// Issue 50 item 5: after Backend::abort() returns, no host stream reads a wait's word again, so
// the memory waits point at may be freed at once (the communicator frees its flags right after
// an abort). The race (a worker woken by the abort, then loading the word after it was freed)
// hit 1 in 50 CI runs; the wait-wake hook holds the woken worker in the window every run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/host/host_stream_test_hook.h"
#include "core/error.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

std::atomic<bool> holdWokenWorkers{false};

void holdAfterWake() {
  if (holdWokenWorkers.load()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

class HostAbort : public testing::TestWithParam<int> {};

// `streams` workers wait on words of one allocation; abort, free the allocation, then let the
// streams go: every wait must fail as aborted, and no worker may touch the freed memory (the
// rank dies of SIGSEGV when one does).
TEST_P(HostAbort, WordsMayBeFreedOnceAbortReturns) {
  const int streams = GetParam();
  RunOptions o;
  o.timeoutS = 60;
  std::vector<int> status = runRanksStatus(1, o, [&](const RankContext&) {
    host::setWaitWakeHookForTest(holdAfterWake);
    auto backend = createHostBackend(30);
    auto words = backend->allocateHostVisible(4096);
    auto* word = static_cast<volatile uint64_t*>(words->ptr());
    std::vector<std::unique_ptr<Stream>> s;
    for (int i = 0; i < streams; ++i) {
      s.push_back(backend->createStream());
      WaitDesc w{word + 8 * i, 1};
      s.back()->waitValues(&w, 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // every worker asleep in its wait
    holdWokenWorkers.store(true);
    backend->abort();
    words.reset();  // unmapped: a load of a word now faults
    for (auto& st : s) {
      try {
        st->synchronize();
        ADD_FAILURE() << "a wait on an aborted backend succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), rmaccRemoteError) << e.what();
      }
    }
    host::setWaitWakeHookForTest(nullptr);
  });
  EXPECT_EQ(status[0], 0) << "exit status " << status[0] << " (139 or 128+11: a worker read a freed word)";
}

INSTANTIATE_TEST_SUITE_P(Streams, HostAbort, testing::Values(1, 4));

}  // namespace
}  // namespace rmacc::test
