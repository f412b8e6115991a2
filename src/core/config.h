// Every RMACC_* environment variable, read once and validated (MSCCL++'s Env, NCCL's params).
// A malformed value is rejected with a message naming the variable; the README lists each one
// with its default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/log.h"

namespace rmacc {

enum class BackendKind { kAuto, kHost, kCuda };
enum class EntrySync { kSignals, kBarrier };

struct Config {
  LogLevel debugLevel = LogLevel::kWarn;        // RMACC_DEBUG
  uint32_t debugSubsys = kSubsysAll;            // RMACC_DEBUG_SUBSYS
  BackendKind backend = BackendKind::kAuto;     // RMACC_BACKEND
  std::string hostname;                         // RMACC_HOSTNAME (empty: gethostname)
  std::string netProvider;                      // RMACC_NET_PROVIDER (empty: libfabric's choice)
  std::string bootstrapAddr;                    // RMACC_BOOTSTRAP_ADDR (empty: first non-loopback
                                                // IPv4 address; the bootstrap validates it)
  size_t relayBytes = 64ull << 20;              // RMACC_RELAY_BYTES
  int relaySlots = 4;                           // RMACC_RELAY_SLOTS (>= 2)
  EntrySync entrySync = EntrySync::kSignals;    // RMACC_ENTRY_SYNC
  size_t maxPutBytes = 1ull << 30;              // RMACC_MAX_PUT_BYTES
  double timeoutS = 300;                        // RMACC_TIMEOUT_S
  bool dumpPlan = false;                        // RMACC_DUMP_PLAN
  std::string traceFile;                        // RMACC_TRACE_FILE
  // RMACC_CE_STREAMS: internal copy streams. One by default: every internal stream also holds
  // stream-memory waits, and CUDA maps streams onto CUDA_DEVICE_MAX_CONNECTIONS (8) hardware
  // queues; a wait at the head of a shared queue blocks the copies behind it, which across
  // ranks can deadlock (seen on an H200 with 4 copy streams under MPS).
  int ceStreams = 1;
  // RMACC_LANES: `split` runs the plan's four lanes on their own streams (overlap); `serial`
  // runs every op of a call on one stream in plan order, which the planner keeps deadlock-free
  // (every signal precedes its wait in the order): fewest hand-offs between streams, fewest
  // hardware queues. `auto`: serial on one node (no network hop to overlap), split across nodes.
  enum class Lanes { kAuto, kSplit, kSerial } lanes = Lanes::kAuto;
  // RMACC_NET_BOUNCE: `auto` stages a proxy put's source in pinned bounce memory only when the
  // network cannot read it (device memory, no GPU-direct provider); `always` stages every
  // source, so machines without GPUs exercise that path too.
  bool bounceAlways = false;
  // RMACC_PROXY_POLL: `eager` polls without sleeping while puts are pending (lowest hop
  // latency, one core per proxy while a call runs), `sleep` backs off (oversubscribed CPUs),
  // `auto` is eager when the process may use at least 4 cores per rank of its node.
  enum class ProxyPoll { kAuto, kEager, kSleep } proxyPoll = ProxyPoll::kAuto;
  size_t bounceBytes = 64ull << 20;             // RMACC_NET_BOUNCE_BYTES: smallest bounce ring
  // RMACC_NET_BOUNCE_CHUNK: a staged put goes out in chunks of this size, so that staging one
  // chunk overlaps sending the previous one (at most 255 chunks a put: larger puts use
  // larger chunks).
  size_t bounceChunkBytes = 4ull << 20;
  // RMACC_NET_LANDING: `auto` lands cross-node puts in pinned slots on the target (copied in by
  // its proxy) only for windows the network cannot write (device memory, no GPU-direct
  // provider); `always` does it for every window, so machines without GPUs exercise that path.
  bool landingAlways = false;
  // RMACC_NET_GDR: `auto` lets the network read and write device memory in place when the
  // provider offers FI_HMEM and registers this GPU's memory (checked at init); `off` always
  // stages device data through pinned memory.
  bool netGdr = true;
  // RMACC_NET_LANDING_BYTES: pinned landing memory a rank with such windows sets aside for all
  // its remote sources together (4 slots each, 64 KiB to 4 MiB a slot).
  size_t landingBytes = 64ull << 20;
  // RMACC_LOCAL_COPY: how bytes move inside one device (the block a rank sends itself, staged
  // blocks). `direct`: one device copy (on CUDA the driver runs it on the SMs, so it waits for
  // compute kernels); `engines`: out and back through a peer GPU and pinned host memory, copy
  // engines only (exec/local_copy.h); `auto`: engines where device copies need compute units
  // (CUDA) and the node has another GPU, else direct.
  enum class LocalCopy { kAuto, kDirect, kEngines } localCopy = LocalCopy::kAuto;
  size_t localCopySlotBytes = 4ull << 20;       // RMACC_LOCAL_COPY_SLOT: each of the 2 slots a route has

  // Reads and validates the environment; throws Error(rmaccInvalidArgument) naming the
  // variable when a value is malformed.
  static Config fromEnvironment();
  // Prints every value at INFO/ENV, marking those set by the environment.
  void log() const;
};

// The process's configuration, read on first use. Throws like fromEnvironment() (and again on
// the next call) while the environment is malformed.
const Config& config();

// Parsers shared with the logger and the tests; nullopt when the text is malformed or empty.
std::optional<LogLevel> parseLogLevel(const char* text);
std::optional<uint32_t> parseSubsysMask(const char* text);
// "64M", "1G", "4096", "2k": a byte size with an optional binary suffix.
std::optional<size_t> parseBytes(const char* text);

}  // namespace rmacc
