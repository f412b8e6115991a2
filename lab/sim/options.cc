#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "core/error.h"
#include "plan/plan_build.h"

namespace rmacc::sim {
namespace {

const char* kUsage =
    "usage: rmacc-sim [options]\n"
    "cluster:  --preset h200|h200-loopback|h200-host (first)  --nodes N  --gpus L\n"
    "          --nic GBPS  --cross-rail GBPS | --no-cross-rail-penalty  --fabric GBPS\n"
    "          --latency US  --nic-queues K (messages at once: peers' queues take turns)\n"
    "          --nic-fifo (one message at a time, one FIFO, bottleneck sharing: the model\n"
    "          before bench/results §19)  --bottleneck-sharing\n"
    "          --signals-fifo  --signal-endpoint (signals never wait behind data, not\n"
    "          even to their own peer: an endpoint of their own, not the library's today)\n"
    "          --signals-by-completion (credits and entry signals as completion data that\n"
    "          the target's proxy applies, RMACC_NET_SIGNAL_WRITES=off; default: written as\n"
    "          values, no work at the target; by completion on h200-loopback)\n"
    "          --pace-lead US | --no-pace (the proxy hands data writes to the NIC in order at\n"
    "          its rate, the next once its backlog is at most US: the library's pacer; default\n"
    "          2, not paced on h200-loopback)\n"
    "          --ce GBPS  --ce-copies K  --local-copy GBPS  --pcie GBPS\n"
    "          --ce-op US  --memop US  --event US  --proxy-op US  --signal-latency US\n"
    "          --proxy-threads K (RMACC_PROXY_THREADS; 0, the default: the library's\n"
    "          choice for the node count; a pair of ranks talks through one thread)\n"
    "          --ce-batch-item US  --memop-batch-item US  --wait-batch-item US\n"
    "          --iov-limit K\n"
    "          --ce-streams K (RMACC_CE_STREAMS; default the library's, 2)\n"
    "host:     --host-us US  --exchange-us-per-node US  --plan-us-per-op US\n"
    "          --enqueue-us-per-op US  --enqueue-copy-call US  --enqueue-copy-item US\n"
    "          --enqueue-memop-call US  --enqueue-memop-item US\n"
    "traffic:  --traffic uniform|random|zipf|moe  --bytes SIZE (per rank)  --seed S\n"
    "          moe: --tokens T --hidden H --elem-bytes B --experts E --topk K\n"
    "               --node-limit M --skew S\n"
    "planner:  --relay-bytes SIZE  --relay-slots S  --max-put SIZE  --credit-window W\n"
    "          --rounds-per-batch R   (Options::creditWindow, ::roundsPerBatch; 0: default)\n"
    "          --min-chunks C  --min-chunk-bytes SIZE   (Options::minChunksPerRound,\n"
    "          ::minChunkBytes: cut each relay payload into >= C chunks of >= SIZE; 0: off;\n"
    "          default: the library's, 2 up to 5 nodes)  --last-chunks C (Options::\n"
    "          lastRoundMinChunks: the same for the call's last node round; default 3 from\n"
    "          3 nodes, 0 on 2)  --last-chunk-bytes SIZE (::lastRoundMinChunkBytes, its unit;\n"
    "          0: --min-chunk-bytes; default 512K)\n"
    "          --entry-lead P   (Options::entryLead: remote entry signals P positions ahead\n"
    "          of their round; -1: all at the start)  --round-order library|triangular|paired\n"
    "          (node rounds as the library orders them, NCCL's k(k+1)/2 order, or 1, N-1,\n"
    "          2, N-2, ...)\n"
    "          --no-fit-slots (Options::fitSlotsFrom 0: one relay geometry for every call)\n"
    "          --fit-window SIZE (Options::fitWindowBytes: fitted calls halve their slots\n"
    "          again while they hold less than SIZE of the largest payload; 0: once;\n"
    "          default the library's, 1.5M)  --deep-fit-below SIZE (Options::deepFitBelow:\n"
    "          and below SIZE of largest payload, again while the rounds outnumber 4 x the\n"
    "          slots; 0: never; default the library's, 160K)\n"
    "          --release-up-to N (Options::releaseRelayUpTo: relays release their next call's\n"
    "          first slots at the end of each call on up to N nodes; 0: never; default the\n"
    "          library's, 17)\n"
    "          --join-forwards-below SIZE (Options::joinForwardsBelow: a relay's steps at\n"
    "          one position with smaller chunks forward as one batch; 0: never; default\n"
    "          the library's, 384K)  --join-forwards-steps K (Options::joinForwardsSteps:\n"
    "          at most K steps a batch; 0: the whole position; default 2)\n"
    "          --loud-puts (Options::quietPuts off: every CE put with data writes its\n"
    "          signal, not only a rank's last to each receiver)\n"
    "run:      --schedule rmacc|direct|pxn|all  --no-verify  --trace FILE  --json\n";

double number(const std::string& opt, const char* v) {
  char* end = nullptr;
  errno = 0;
  double x = strtod(v, &end);
  RMACC_ARG_CHECK(end != v && *end == 0 && errno == 0 && x >= 0,
                  "%s: '%s' is not a number >= 0", opt.c_str(), v);
  return x;
}

int integer(const std::string& opt, const char* v, int lo, int hi) {
  double x = number(opt, v);
  RMACC_ARG_CHECK(x == (double)(int64_t)x && x >= lo && x <= hi,
                  "%s: '%s' is not an integer in %d..%d", opt.c_str(), v, lo, hi);
  return (int)x;
}

uint64_t size(const std::string& opt, const char* v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  RMACC_ARG_CHECK(end != v && errno == 0 && v[0] != '-', "%s: '%s' is not a size", opt.c_str(), v);
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) ++end;
  RMACC_ARG_CHECK(*end == 0 && x <= (~0ull >> shift), "%s: '%s' is not a size (e.g. 16M)",
                  opt.c_str(), v);
  return (uint64_t)x << shift;
}

}  // namespace

SimOptions parseOptions(int argc, char** argv) {
  SimOptions o;
  o.planner.minChunksPerRound = -1;  // the library's for the node count, unless --min-chunks
  o.planner.lastRoundMinChunks = -1;  // the library's, unless --last-chunks
  o.planner.releaseRelayUpTo = plan::libraryReleaseRelayUpTo();
  o.planner.joinForwardsBelow = plan::libraryJoinForwardsBelow();
  o.planner.fitWindowBytes = plan::libraryFitWindowBytes();
  o.planner.deepFitBelow = plan::libraryDeepFitBelow();
  o.planner.lastRoundMinChunkBytes = ~0ull;  // the library's, unless --last-chunk-bytes
  Cluster& c = o.cluster;
  MoeRouter& m = o.traffic.moe;
  int slots = 4;
  bool fit = true;
  using Setter = std::function<void(const std::string&, const char*)>;
  const std::map<std::string, Setter> withValue = {
      {"--preset", [&](auto&, auto v) { c = preset(v); }},
      {"--release-up-to", [&](auto& k, auto v) { o.planner.releaseRelayUpTo = integer(k, v, 0, 4096); }},
      {"--join-forwards-below", [&](auto& k, auto v) { o.planner.joinForwardsBelow = size(k, v); }},
      {"--fit-window", [&](auto& k, auto v) { o.planner.fitWindowBytes = size(k, v); }},
      {"--deep-fit-below", [&](auto& k, auto v) { o.planner.deepFitBelow = size(k, v); }},
      {"--join-forwards-steps",
       [&](auto& k, auto v) { o.planner.joinForwardsSteps = integer(k, v, 0, 1024); }},
      {"--nodes", [&](auto& k, auto v) { c.nodes = integer(k, v, 1, 4096); }},
      {"--gpus", [&](auto& k, auto v) { c.gpusPerNode = integer(k, v, 1, 64); }},
      {"--nic", [&](auto& k, auto v) { c.nicGBps = number(k, v); }},
      {"--cross-rail", [&](auto& k, auto v) { c.crossRailGBps = number(k, v); }},
      {"--fabric", [&](auto& k, auto v) { c.fabricGBps = number(k, v); }},
      {"--latency", [&](auto& k, auto v) { c.netLatencyUs = number(k, v); }},
      {"--pace-lead", [&](auto& k, auto v) { c.paceLeadUs = number(k, v); }},
      {"--nic-queues", [&](auto& k, auto v) { c.nicQueues = integer(k, v, 1, 1024); }},
      {"--ce", [&](auto& k, auto v) { c.ceGBps = number(k, v); }},
      {"--ce-copies", [&](auto& k, auto v) { c.ceConcurrent = integer(k, v, 1, 64); }},
      {"--local-copy", [&](auto& k, auto v) { c.localCopyGBps = number(k, v); }},
      {"--pcie", [&](auto& k, auto v) { c.pcieGBps = number(k, v); }},
      {"--ce-op", [&](auto& k, auto v) { c.ceOpUs = number(k, v); }},
      {"--memop", [&](auto& k, auto v) { c.memopUs = number(k, v); }},
      {"--ce-batch-item", [&](auto& k, auto v) { c.ceBatchItemUs = number(k, v); }},
      {"--memop-batch-item", [&](auto& k, auto v) { c.memopBatchItemUs = number(k, v); }},
      {"--wait-batch-item", [&](auto& k, auto v) { c.waitBatchItemUs = number(k, v); }},
      {"--iov-limit", [&](auto& k, auto v) { c.iovLimit = (int)number(k, v); }},
      {"--event", [&](auto& k, auto v) { c.eventUs = number(k, v); }},
      {"--proxy-op", [&](auto& k, auto v) { c.proxyOpUs = number(k, v); }},
      {"--proxy-threads", [&](auto& k, auto v) { c.proxyThreads = integer(k, v, 0, 16); }},
      {"--signal-latency", [&](auto& k, auto v) { c.signalLatencyUs = number(k, v); }},
      {"--ce-streams", [&](auto& k, auto v) { c.ceStreams = integer(k, v, 1, 64); }},
      {"--host-us", [&](auto& k, auto v) { c.hostFixedUs = number(k, v); }},
      {"--exchange-us-per-node", [&](auto& k, auto v) { c.exchangeUsPerNode = number(k, v); }},
      {"--plan-us-per-op", [&](auto& k, auto v) { c.planUsPerOp = number(k, v); }},
      {"--enqueue-us-per-op", [&](auto& k, auto v) { c.enqueueUsPerOp = number(k, v); }},
      {"--enqueue-copy-call", [&](auto& k, auto v) { c.enqueueCopyCallUs = number(k, v); }},
      {"--enqueue-copy-item", [&](auto& k, auto v) { c.enqueueCopyItemUs = number(k, v); }},
      {"--enqueue-memop-call", [&](auto& k, auto v) { c.enqueueMemopCallUs = number(k, v); }},
      {"--enqueue-memop-item", [&](auto& k, auto v) { c.enqueueMemopItemUs = number(k, v); }},
      {"--traffic", [&](auto&, auto v) { o.traffic.kind = trafficKind(v); }},
      {"--bytes", [&](auto& k, auto v) { o.traffic.bytesPerRank = size(k, v); }},
      {"--seed", [&](auto& k, auto v) { o.traffic.seed = (uint64_t)number(k, v); }},
      {"--tokens", [&](auto& k, auto v) { m.tokensPerGpu = integer(k, v, 0, 1 << 24); }},
      {"--hidden", [&](auto& k, auto v) { m.hidden = integer(k, v, 1, 1 << 20); }},
      {"--elem-bytes", [&](auto& k, auto v) { m.bytesPerElem = integer(k, v, 1, 16); }},
      {"--experts", [&](auto& k, auto v) { m.experts = integer(k, v, 1, 1 << 20); }},
      {"--topk", [&](auto& k, auto v) { m.topK = integer(k, v, 1, 1024); }},
      {"--node-limit", [&](auto& k, auto v) { m.nodesPerToken = integer(k, v, 0, 4096); }},
      {"--skew", [&](auto& k, auto v) { m.skew = number(k, v); }},
      {"--relay-bytes", [&](auto& k, auto v) { o.relayBytes = size(k, v); }},
      {"--relay-slots", [&](auto& k, auto v) { slots = integer(k, v, 2, 1024); }},
      {"--max-put", [&](auto& k, auto v) { o.planner.maxPutBytes = size(k, v); }},
      {"--credit-window",
       [&](auto& k, auto v) { o.planner.creditWindow = integer(k, v, 0, 1024); }},
      {"--min-chunks",
       [&](auto& k, auto v) { o.planner.minChunksPerRound = integer(k, v, 0, 1024); }},
      {"--last-chunks",
       [&](auto& k, auto v) { o.planner.lastRoundMinChunks = integer(k, v, 0, 1024); }},
      {"--entry-lead",  // number() takes no sign: -1 is spelt out
       [&](auto& k, auto v) {
         o.planner.entryLead = std::string(v) == "-1" ? -1 : integer(k, v, 0, 1024);
       }},
      {"--last-chunk-bytes",
       [&](auto& k, auto v) { o.planner.lastRoundMinChunkBytes = size(k, v); }},
      {"--min-chunk-bytes", [&](auto& k, auto v) { o.planner.minChunkBytes = size(k, v); }},
      {"--rounds-per-batch",
       [&](auto& k, auto v) { o.planner.roundsPerBatch = integer(k, v, 0, 1024); }},
      {"--trace", [&](auto&, auto v) { o.tracePath = v; }},
      {"--round-order",
       [&](auto& k, auto v) {
         const std::string order = v;
         RMACC_ARG_CHECK(order == "library" || order == "triangular" || order == "paired",
                         "%s: library, triangular or paired, got '%s'", k.c_str(), v);
         o.roundOrder = order;
       }},
      {"--schedule",
       [&](auto&, auto v) {
         o.schedules = std::string(v) == "all"
                           ? std::vector<Schedule>{Schedule::kRmacc, Schedule::kDirect,
                                                   Schedule::kPxn}
                           : std::vector<Schedule>{scheduleByName(v)};
       }},
  };
  for (int a = 1; a < argc; ++a) {
    const std::string k = argv[a];
    if (k == "--help" || k == "-h") {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (k == "--no-verify") o.verify = false;
    else if (k == "--json") o.json = true;
    else if (k == "--no-cross-rail-penalty") c.crossRailPenalised = false;
    else if (k == "--signals-fifo") c.signalsBypassNicQueue = false;
    else if (k == "--signal-endpoint") c.signalEndpoint = true;
    else if (k == "--signals-by-completion") c.signalWrites = false;
    else if (k == "--no-pace") c.paceLeadUs = -1;
    else if (k == "--no-fit-slots") fit = false;
    else if (k == "--loud-puts") o.planner.quietPuts = false;
    else if (k == "--bottleneck-sharing") c.maxMinSharing = false;
    else if (k == "--nic-fifo") {
      c.nicQueuePerPeer = c.maxMinSharing = false;
      c.nicQueues = 1;
    }
    else {
      auto it = withValue.find(k);
      RMACC_ARG_CHECK(it != withValue.end(), "unknown option '%s' (see --help)", k.c_str());
      RMACC_ARG_CHECK(a + 1 < argc, "%s needs a value", k.c_str());
      it->second(k, argv[++a]);
    }
  }
  c.validate();
  RMACC_ARG_CHECK(o.relayBytes / slots >= 1024, "relay slot of %llu bytes: need at least 1024",
                  (unsigned long long)(o.relayBytes / slots));
  o.planner.slots = slots;
  o.planner.slotBytes = o.relayBytes / slots;
  o.planner.fitSlotsFrom = fit ? plan::libraryFitSlotsFrom(slots) : 0;
  if (o.planner.minChunksPerRound < 0) o.planner.minChunksPerRound = plan::libraryMinChunks(c.nodes);
  if (o.planner.lastRoundMinChunks < 0)
    o.planner.lastRoundMinChunks = plan::libraryLastRoundMinChunks(c.nodes);
  if (o.planner.lastRoundMinChunkBytes == ~0ull)
    o.planner.lastRoundMinChunkBytes = plan::libraryLastRoundMinChunkBytes();
  RMACC_ARG_CHECK(o.planner.maxPutBytes > 0, "--max-put must be > 0");
  return o;
}

}  // namespace rmacc::sim
