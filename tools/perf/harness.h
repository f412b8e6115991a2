// The common part of every rmacc-perf test: communicator set-up from the launcher, buffers
// (plain or rmaccMemAlloc + window), small control exchanges between ranks, timing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device.h"
#include "launch.h"
#include "options.h"
#include "rmacc.h"
#include "thread_cpu.h"

namespace rmacc::perf {

// A buffer in backend memory. registered: from rmaccMemAlloc and registered as a window
// (collective: every rank must call allocBuffer with registered in the same order).
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool fromLibrary = false;
  bool host = false;  // from Device::allocHost
  rmaccWindow_t window = nullptr;
};

struct Context {
  Launch launch;
  std::unique_ptr<Device> device;
  rmaccComm_t comm = nullptr;
  rmaccStream_t stream = nullptr;
  int rank = 0, nranks = 1;
  int localRank = 0, localSize = 1, node = 0, nNodes = 1;
  std::string hostname;
  Buffer ctlSend, ctlRecv;  // registered scratch of allGather
};

// Exits with the failing call, its result and rmaccGetLastError when r is not success: a
// benchmark has nothing sensible to do after a failed call, and the non-zero exit makes
// rmacc-run stop the other ranks.
void checkResult(const Context& ctx, rmaccResult_t r, const char* call);
#define RMACC_PERF_CHECK(ctx, call) ::rmacc::perf::checkResult((ctx), (call), #call)

// Device selection, unique id, rmaccCommInitRank, stream. Collective.
void initContext(Context* ctx);
void finalizeContext(Context* ctx);

// Every rank's `bytes` (<= 128) bytes, in rank order, through one rmaccAlltoAll.
std::vector<uint8_t> allGather(Context& ctx, const void* mine, size_t bytes);
uint64_t sumOverRanks(Context& ctx, uint64_t v);
// The process's exit status after a test whose wrong-value count rank 0 holds (collective):
// 1 on every rank, each saying why, when any value was wrong anywhere; else 0.
int checkedExitStatus(Context& ctx, int64_t wrongOnRank0);
double maxOverRanks(Context& ctx, double v);

// Rank 0 prints the launcher, backend and one line per rank (pid, node, device), as nccl-tests.
void printRankInfo(Context& ctx, const Options& opts);

// registered: from rmaccMemAlloc and registered as a window (collective).
Buffer allocBuffer(Context& ctx, size_t bytes, bool registered);
// A window in host memory (pinned on CUDA) instead of rmaccMemAlloc memory: only where no rank
// of the node needs to map it (one rank per node). Collective like allocBuffer.
Buffer allocHostWindow(Context& ctx, size_t bytes);
void freeBuffer(Context& ctx, Buffer* buf);

// Runs `launch` warmup times, aligns the ranks with a barrier, then runs it `iters` times on the
// stream and synchronises. Returns the mean microseconds per call, the max over ranks.
// `meter`, when given, is started when the timed calls start (after the barrier).
// `host`, when given, measures the timed calls up to the synchronisation after them.
double timeCalls(Context& ctx, int warmup, int iters, const std::function<void()>& launch,
                 ThreadCpuMeter* meter = nullptr, HostCpuMeter* host = nullptr);

}  // namespace rmacc::perf
