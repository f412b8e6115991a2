#include "support/multiprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "core/test_hooks.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace rmacc::test {

namespace {

// Cache-line aligned, so that the tests' shared area right after it is aligned for any struct
// they put there (it started at offset 132: a misaligned 8-byte member is undefined, UBSan).
struct alignas(64) SharedHeader {
  std::atomic<int> idReady;
  rmaccUniqueId id;
};

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

[[noreturn]] void runChild(int rank, int nRanks, const RunOptions& options, SharedHeader* header,
                           void* shared, const std::function<void(const RankContext&)>& body) {
  // Die with the parent: a test run must never leave ranks behind.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int node = options.nodeOf.empty() ? 0 : options.nodeOf[rank];
  setenv("RMACC_HOSTNAME", ("node" + std::to_string(node)).c_str(), 1);
  for (const auto& [k, v] : options.env) {
    // Fixed parameters are not read from the environment: the test hook sets them.
    const ParamInfo* p = findParam(k.c_str());
    if (p && p->visibility == ParamVisibility::kFixed) setParamForTest(k.c_str(), v.c_str());
    else setenv(k.c_str(), v.c_str(), 1);
  }
  int code = 0;
  try {
    if (rank == 0) {
      createUniqueId(&header->id);
      header->idReady.store(1, std::memory_order_release);
    } else {
      while (!header->idReady.load(std::memory_order_acquire)) usleep(1000);
    }
    RankContext ctx{rank, nRanks, header->id, shared};
    body(ctx);
    code = ::testing::Test::HasFailure() ? 1 : 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "rank %d: exception: %s\n", rank, e.what());
    code = 2;
  }
  fflush(stdout);
  fflush(stderr);
#if defined(__SANITIZE_ADDRESS__)
  // _exit skips LeakSanitizer's exit-time check, so a rank's leaks would never be reported:
  // check here, after the body's objects are gone, and fail the rank when something leaked.
  if (__lsan_do_recoverable_leak_check() && code == 0) code = 3;
  fflush(stderr);
#endif
  _exit(code);
}

}  // namespace

std::vector<int> runRanksStatus(int nRanks, const RunOptions& options,
                                const std::function<void(const RankContext&)>& body) {
  size_t bytes = sizeof(SharedHeader) + options.sharedBytes;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    ADD_FAILURE() << "mmap of the shared scratch failed";
    return std::vector<int>(nRanks, -1);
  }
  auto* header = new (mem) SharedHeader();
  header->idReady.store(0);
  void* shared = (char*)mem + sizeof(SharedHeader);

  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(nRanks, -1);
  for (int r = 0; r < nRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) runChild(r, nRanks, options, header, shared, body);
    pids[r] = pid;
  }
  std::vector<int> status(nRanks, -1);
  int remaining = nRanks;
  double deadline = now() + options.timeoutS;
  while (remaining > 0) {
    int ws = 0;
    pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nRanks; ++r) {
        if (pids[r] != pid) continue;
        status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        pids[r] = -1;
        --remaining;
      }
      continue;
    }
    if (now() > deadline) {
      for (int r = 0; r < nRanks; ++r)
        if (pids[r] > 0) kill(pids[r], SIGKILL);
      for (int r = 0; r < nRanks; ++r)
        if (pids[r] > 0) waitpid(pids[r], nullptr, 0), status[r] = -1;
      break;
    }
    usleep(2000);
  }
  munmap(mem, bytes);
  return status;
}

void runRanks(int nRanks, const RunOptions& options,
              const std::function<void(const RankContext&)>& body) {
  std::vector<int> status = runRanksStatus(nRanks, options, body);
  for (int r = 0; r < nRanks; ++r)
    EXPECT_EQ(status[r], 0) << "rank " << r << " of " << nRanks
                            << (status[r] == -1 ? " timed out" : " failed");
}

std::vector<int> scatteredNodes(int nNodes, int localSize) {
  // Rank r goes to node r % nNodes: every node has localSize ranks, none contiguous (for
  // nNodes > 1 and localSize > 1).
  std::vector<int> nodeOf(nNodes * localSize);
  for (int r = 0; r < nNodes * localSize; ++r) nodeOf[r] = r % nNodes;
  return nodeOf;
}

std::vector<int> blockNodes(int nNodes, int localSize) {
  std::vector<int> nodeOf(nNodes * localSize);
  for (int r = 0; r < nNodes * localSize; ++r) nodeOf[r] = r / localSize;
  return nodeOf;
}

RunOptions tcpRanks(std::vector<int> nodeOf, std::vector<std::pair<std::string, std::string>> extra) {
  RunOptions o;
  o.nodeOf = std::move(nodeOf);
  o.timeoutS = 240;
  o.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}, {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "60"}};
  for (auto& e : extra) o.env.push_back(std::move(e));
  return o;
}

}  // namespace rmacc::test
