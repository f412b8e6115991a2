// Every parameter of the library, declared once in RMACC_PARAMS below (NCCL's NCCL_PARAM,
// MSCCL++'s Env): the row gives the field, its default, the parser, who may set it and a
// one-line doc. Parsing, the INFO log of the effective configuration and the tables of README.md
// and docs/configuration.md (checked by config_test) all come from that list. A malformed value
// is rejected with a message naming the parameter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/log.h"

namespace rmacc {

enum class BackendKind { kAuto, kHost, kCuda };
enum class EntrySync { kSignals, kBarrier };
enum class GraphCalls { kInGraph, kTriggered, kAlways };

// Who sets a parameter. kPublic: a user, through the environment (README.md). kInternal: the
// environment too, for diagnosis and A/B benchmarks; not a stable interface
// (docs/configuration.md). kFixed: nobody outside the tests: the environment is not read, the
// default is the library's choice, and a test forces another value or a code path through
// setParamForTest (core/test_hooks.h), as Gloo's tests shrink maxSegmentSize.
enum class ParamVisibility { kPublic, kInternal, kFixed };

// X(type, field, default, name, parser, visibility, default as documented, doc). The parser is
// a type of config.cc with static parse(name, text, field&) and show(field). Comments beside a
// row say why its default is what it is.
#define RMACC_PARAMS(X)                                                                           \
  X(LogLevel, debugLevel, LogLevel::kWarn, "RMACC_DEBUG", LevelParam, kPublic, "`WARN`",          \
    "log level: `NONE`, `WARN`, `INFO`, `TRACE`")                                                 \
  X(uint32_t, debugSubsys, kSubsysAll, "RMACC_DEBUG_SUBSYS", SubsysParam, kPublic, "`ALL`",       \
    "comma list of `INIT,BOOT,PLAN,EXEC,NET,PROXY,ALLOC,ENV,COLL,ALL`; `^` inverts")              \
  X(BackendKind, backend, BackendKind::kAuto, "RMACC_BACKEND", EnumParam<BackendKind>, kPublic,   \
    "`auto`", "`host`, `cuda`, or `auto` (CUDA when built with it and a GPU is present)")         \
  X(std::string, hostname, "", "RMACC_HOSTNAME", HostnameParam, kPublic, "host name",             \
    "the node a rank belongs to; tests emulate nodes with it")                                    \
  X(std::string, netProvider, "", "RMACC_NET_PROVIDER", TextParam, kPublic, "libfabric's choice", \
    "libfabric provider between nodes (`tcp`, `verbs`, `efa`, ...)")                              \
  X(double, timeoutS, 300, "RMACC_TIMEOUT_S", SecondsParam, kPublic, "`300`",                     \
    "a peer that does not answer within this many seconds is an error")                           \
  X(std::string, traceFile, "", "RMACC_TRACE_FILE", TextParam, kPublic, "unset",                  \
    "write a Chrome/Perfetto trace per rank (`%r` is replaced by the rank)")                      \
  X(size_t, relayBytes, 64ull << 20, "RMACC_RELAY_BYTES", BytesParam<4096>, kPublic, "`64M`",     \
    "relay memory per rank for receive-side PXN (suffixes K, M, G)")                              \
  /* A call whose device work another thread enqueues later is exposed to the caller's own   */   \
  /* next CUDA calls: a synchronous copy to pageable memory or cudaFree holds back other     */   \
  /* threads' copies, and a kernel's first (lazy) load holds back all work, while they wait  */   \
  /* for the device, which waits for that work (docs/decisions.md#enqueue-wait).             */   \
  X(int, enqueueWaitMs, 50, "RMACC_ENQUEUE_WAIT_MS", IntParam<0 COMMA 600000>, kInternal, "`50`",   \
    "how long a collective call waits for late peers (or device counts) so that its work is "   \
    "enqueued before it returns; past it, the call returns and the work is enqueued later")     \
  X(bool, streamTriggerAlways, false, "RMACC_STREAM_TRIGGER", SwitchParam<kAutoAlways>,          \
    kFixed, "`auto`",                                                                          \
    "`auto`: a call's work is enqueued when the call is made, except under CUDA graph capture, "  \
    "where each replay enqueues it when the stream reaches the call; `always`: every call on a "  \
    "stream takes that path (exercises it without CUDA graphs)")                                  \
  /* A captured call whose work the progress thread enqueues at each replay deadlocks with a */   \
  /* caller more than ~8 replays ahead (cudaGraphLaunch waits in the driver holding a lock   */   \
  /* the enqueue needs: docs/decisions.md#replay-triggered-limit); work built into the       */   \
  /* graph needs no enqueue.                                                                 */   \
  X(GraphCalls, graphCalls, GraphCalls::kInGraph, "RMACC_GRAPH_CALLS", EnumParam<GraphCalls>,     \
    kFixed, "`in-graph`",                                                                      \
    "`in-graph`: a captured fixed-count call on a one-node communicator puts its copies and "     \
    "signals into the graph; `triggered`: every captured call is enqueued at each replay; "       \
    "`always`: uncaptured fixed-count calls on a stream take the in-graph path too (tests)")      \
  X(std::string, bootstrapAddr, "", "RMACC_BOOTSTRAP_ADDR", TextParam, kInternal,                 \
    "first non-loopback IPv4", "address the rendezvous root listens on")                          \
  /* Each call queues a few stream ops on the caller's stream and more on rmacc's; CUDA     */   \
  /* blocks a thread whose stream's command queue is full, and a deep enough backlog of    */   \
  /* small cross-node calls stalled every rank for good (H200, 2 x 1, 3,000 calls).        */   \
  X(int, maxCallsInFlight, 32, "RMACC_MAX_CALLS_IN_FLIGHT", IntParam<1 COMMA 4096>, kFixed,    \
    "`32`", "collective calls a rank may have enqueued and not yet finished; the next call "     \
    "waits on the host until one finishes")                                                       \
  X(int, relaySlots, 4, "RMACC_RELAY_SLOTS", IntParam<2 COMMA 1024>, kFixed, "`4`",            \
    "slots the relay memory is split into (≥ 2); relay step t uses slot t mod S. On 4 × S + 2 "  \
    "nodes or more, a call whose every relay payload fits half a slot gets 2 × S slots of half "  \
    "the size, and node rounds go in pairs (docs/decisions.md#fitted-slots)")                         \
  X(int, creditWindow, 0, "RMACC_CREDIT_WINDOW", IntParam<0 COMMA 1024>, kFixed, "`0`",        \
    "relay steps a writer may run ahead of its relay's forwards (pacing; `0`: the slot count)")   \
  X(EntrySync, entrySync, EntrySync::kSignals, "RMACC_ENTRY_SYNC", EnumParam<EntrySync>,          \
    kFixed, "`signals`",                                                                       \
    "`signals` (per-peer readiness signals) or `barrier` before each AlltoAllV")                  \
  X(size_t, maxPutBytes, 1ull << 30, "RMACC_MAX_PUT_BYTES", BytesParam<4096>, kFixed, "`1G`",  \
    "the planner splits larger puts into pieces")                                                 \
  X(bool, dumpPlan, false, "RMACC_DUMP_PLAN", BoolParam, kFixed, "`0`",                        \
    "`1` prints each new AlltoAllV plan of the rank")                                             \
  /* Two by default: a relay's forwards to its even and odd node-mates run side by side, so   */   \
  /* its copy stream does not bound many-node calls (docs/decisions.md#ce-streams). Every     */   \
  /* internal stream holds stream-memory waits and CUDA maps streams onto                     */   \
  /* CUDA_DEVICE_MAX_CONNECTIONS hardware queues: a wait at the head of a shared queue        */   \
  /* blocks the copies behind it, which across ranks can deadlock (H200, MPS, with the        */   \
  /* default 8), hence the 16-32 that tools/rmacc-run and the Python package set.             */   \
  X(int, ceStreams, 2, "RMACC_CE_STREAMS", IntParam<1 COMMA 64>, kFixed, "`2`",                \
    "internal copy streams per rank; more let copies to different peers overlap, but on CUDA "    \
    "all internal streams must fit in `CUDA_DEVICE_MAX_CONNECTIONS` hardware queues")             \
  X(LanesMode, lanes, LanesMode::kAuto, "RMACC_LANES", EnumParam<LanesMode>, kFixed, "`auto`", \
    "`split`: the plan's four lanes (CE put, CE wait, proxy put, proxy wait) on their own "        \
    "streams; `serial`: one stream per call in plan order (fewest stream hand-offs and hardware "  \
    "queues); `auto`: serial on one node, split across nodes")                                                               \
  X(ProxyPollMode, proxyPoll, ProxyPollMode::kAuto, "RMACC_PROXY_POLL", EnumParam<ProxyPollMode>, \
    kFixed, "`auto`",                                                                          \
    "`eager`: the proxy polls without sleeping while puts are pending (a core per proxy during "  \
    "a call); `sleep`: it backs off up to 100 µs; `auto`: eager when the process may use at "     \
    "least 4 cores per rank of its node")                                                         \
  X(int, proxyThreads, 0, "RMACC_PROXY_THREADS", IntParam<0 COMMA 16>, kInternal, "`0`",          \
    "proxy threads per rank, each with its own fabric endpoint, issuing writes side by side "    \
    "(the provider must be `FI_THREAD_SAFE`, else one); `0` (auto): 16 from 96 nodes, 8 from "  \
    "32, 4 from 4, on a provider that reports a link speed (verbs, efa), else 1 (tcp: 1); the "  \
    "ranks of a job use the smallest count any of them asks for")                                 \
  X(bool, bounceAlways, false, "RMACC_NET_BOUNCE", SwitchParam<kAutoAlways>, kFixed, "`auto`", \
    "`auto`: a proxy put's source goes through a pinned bounce ring only when the network "       \
    "cannot read it; `always`: every source does (exercises that path without GPUs)")             \
  X(size_t, bounceBytes, 64ull << 20, "RMACC_NET_BOUNCE_BYTES", BytesParam<1>, kFixed, "`64M`",\
    "smallest bounce ring per posting stream (it grows to twice the largest put)")                \
  X(size_t, bounceChunkBytes, 4ull << 20, "RMACC_NET_BOUNCE_CHUNK", BytesParam<1>, kFixed,     \
    "`4M`", "a staged put goes out in chunks of this size, so that staging chunk k+1 overlaps "   \
    "sending chunk k (at most 255 chunks a put; larger puts use larger chunks)")                  \
  X(bool, netGdr, true, "RMACC_NET_GDR", SwitchParam<kOffAuto>, kInternal, "`auto`",              \
    "`auto`: on GPUs, let the network read and write device memory in place when the provider "   \
    "offers `FI_HMEM` and registers this GPU's memory (tried at init); `off`: always stage "      \
    "device data through pinned memory")                                                          \
  X(bool, landingAlways, false, "RMACC_NET_LANDING", SwitchParam<kAutoAlways>, kFixed,         \
    "`auto`", "`auto`: other nodes' puts land in the target's pinned slots (copied in by its "    \
    "proxy) only for windows the network cannot write; `always`: for every window")               \
  /* Writes posted together to several peers share the NIC and all finish late; paced, they */   \
  /* leave in order and a relay's chunk lands early enough to be forwarded under the wire's */   \
  /* later writes (docs/decisions.md#nic-pacing; src/core/nic_pacer.h).                     */   \
  X(double, netPaceGBps, -1, "RMACC_NET_PACE_GBPS", PaceParam, kInternal, "`auto`",              \
    "the rate in GB/s at which the proxy hands data writes to the NIC, in order; `auto`: the "   \
    "link speed the provider reports (none on tcp: not paced); `0`: not paced")                  \
  X(SignalWritesSetting, netSignalWrites, SignalWritesSetting::kAuto, "RMACC_NET_SIGNAL_WRITES", \
    EnumParam<SignalWritesSetting>, kFixed, "`auto`",                                          \
    "how credits and entry signals reach other nodes: `auto`: the NIC writes the counter's value "\
    "into the receiver's signal array, with no work for its proxy, where the receiver's stream " \
    "waits poll memory (GPUs); `off`: as completion "                                            \
    "data its proxy turns into the signal; `always`: value writes on the host backend too, whose"\
    " waits then notice them within a 50 ms sleep slice (exercises that path without GPUs)")     \
  X(bool, netMrLocal, false, "RMACC_NET_MR_LOCAL", BoolParam, kFixed, "`0`",                  \
    "`1`: register the sources of network writes as providers with `FI_MR_LOCAL` (verbs, efa) "   \
    "require, on any provider (exercises that path on tcp)")                                      \
  X(size_t, landingBytes, 64ull << 20, "RMACC_NET_LANDING_BYTES", BytesParam<1>, kFixed,       \
    "`64M`", "pinned landing memory of a rank with such windows, for all its remote sources "     \
    "together (4 slots each, 64 KiB–4 MiB a slot)")                                               \
  X(LocalCopySetting, localCopy, LocalCopySetting::kAuto, "RMACC_LOCAL_COPY", EnumParam<LocalCopySetting>, \
    kInternal, "`auto`",                                                                          \
    "how bytes move within one device (the block a rank sends itself, staged blocks): `direct` "  \
    "(one device copy: on CUDA an SM kernel, which waits for compute kernels), `engines` (out "    \
    "and back through the next local GPU's slots and pinned host memory, copy engines only), "     \
    "`auto` (direct until engines is measured across GPUs: docs/decisions.md#local-copy-direct)") \
  X(size_t, localCopySlotBytes, 4ull << 20, "RMACC_LOCAL_COPY_SLOT", BytesParam<1>, kFixed,    \
    "`4M`", "each slot a local-copy route uses (in the next local rank's device memory, and in "  \
    "pinned host memory); copies up to min(1M, this) take both hops on the caller's stream")     \
  /* Four: a chunk's in-hop may run up to three chunks ahead of the out-hops (two would keep  */  \
  /* the hops overlapped only while both take exactly as long).                               */  \
  X(int, localCopySlots, 4, "RMACC_LOCAL_COPY_SLOTS", IntParam<2 COMMA 1024>, kFixed, "`4`",   \
    "slots per local-copy route (≥ 2); each route's memory is this many slots plus one for "      \
    "small copies")

enum class LanesMode { kAuto, kSplit, kSerial };
enum class ProxyPollMode { kAuto, kEager, kSleep };
enum class LocalCopySetting { kAuto, kDirect, kEngines };
enum class SignalWritesSetting { kOff, kAuto, kAlways };

struct Config {
  using Lanes = LanesMode;
  using ProxyPoll = ProxyPollMode;
  using LocalCopy = LocalCopySetting;
  using SignalWrites = SignalWritesSetting;

#define RMACC_PARAM_FIELD(type, field, init, ...) type field = init;
  RMACC_PARAMS(RMACC_PARAM_FIELD)
#undef RMACC_PARAM_FIELD

  // Reads and validates the environment; throws Error(rmaccInvalidArgument) naming the
  // variable when a value is malformed.
  static Config fromEnvironment();
  // Reads one variable (by name) into this configuration, leaving the field as it was when the
  // variable is unset, unknown, malformed or a kFixed parameter (whose environment is not read).
  // Never throws nor logs (logging reads its own two parameters through it).
  enum class Read { kUnset, kSet, kMalformed };
  Read readOne(const char* name);
  // Parses `text` into the parameter `name` (any visibility); kUnset when there is no such
  // parameter (core/test_hooks.h sets parameters through it).
  Read parse(const char* name, const char* text);
  // What a well-formed value of the variable looks like, for error messages.
  static std::string expected(const char* name);
  // Prints every parameter's effective value at INFO/ENV, marking those set by the environment.
  void log() const;
};

// One parameter of RMACC_PARAMS as data, for the log, the tools and the tables' check.
struct ParamInfo {
  const char* name;
  ParamVisibility visibility;
  const char* defaultText;
  const char* doc;
};
// Every parameter, in declaration order.
const ParamInfo* paramTable(size_t* count);
// The row of parameter `name`, nullptr when there is none.
const ParamInfo* findParam(const char* name);
// The markdown table (header included) of the parameters of one visibility: README.md holds
// the public one, docs/configuration.md the others.
std::string paramMarkdown(ParamVisibility visibility);

// The process's configuration, read on first use. Throws like fromEnvironment() (and again on
// the next call) while the environment is malformed.
const Config& config();

// Parsers shared with the tests and the table; nullopt when the text is malformed or empty.
std::optional<LogLevel> parseLogLevel(const char* text);
std::optional<uint32_t> parseSubsysMask(const char* text);
// "64M", "1G", "4096", "2k": a byte size with an optional binary suffix.
std::optional<size_t> parseBytes(const char* text);

}  // namespace rmacc
