#include "options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rmacc::perf {
namespace {

struct TypeInfo {
  const char* name;
  rmaccDataType_t type;
  size_t size;
};

// The first name of each type is the one printed; the others are nccl-tests/torch aliases.
const TypeInfo kTypes[] = {
    {"int8", rmaccInt8, 1},         {"char", rmaccInt8, 1},        {"uint8", rmaccUint8, 1},
    {"int32", rmaccInt32, 4},       {"int", rmaccInt32, 4},        {"uint32", rmaccUint32, 4},
    {"int64", rmaccInt64, 8},       {"uint64", rmaccUint64, 8},    {"half", rmaccFloat16, 2},
    {"float16", rmaccFloat16, 2},   {"fp16", rmaccFloat16, 2},     {"float", rmaccFloat32, 4},
    {"float32", rmaccFloat32, 4},   {"fp32", rmaccFloat32, 4},     {"double", rmaccFloat64, 8},
    {"float64", rmaccFloat64, 8},   {"fp64", rmaccFloat64, 8},     {"bfloat16", rmaccBfloat16, 2},
    {"bf16", rmaccBfloat16, 2},
};

[[noreturn]] void fail(const char* prog, const std::string& why) {
  fprintf(stderr, "%s: %s\n", prog, why.c_str());
  printUsage(prog);
  exit(2);
}

size_t bytesArg(const char* prog, const char* flag, const char* text) {
  size_t v = 0;
  if (!parseBytes(text, &v)) fail(prog, std::string("bad size for ") + flag + ": " + text);
  return v;
}

long intArg(const char* prog, const char* flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi)
    fail(prog, std::string("bad value for ") + flag + ": " + text);
  return v;
}

double doubleArg(const char* prog, const char* flag, const char* text) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0)) fail(prog, std::string("bad value for ") + flag + ": " + text);
  return v;
}

Pattern patternArg(const char* prog, const char* text) {
  if (!strcmp(text, "uniform")) return Pattern::kUniform;
  if (!strcmp(text, "random")) return Pattern::kRandom;
  if (!strcmp(text, "zipf")) return Pattern::kZipf;
  fail(prog, std::string("unknown pattern: ") + text);
}

enum LongOnly { kPattern = 1000, kSeed, kZipfS, kExperts, kPeer, kPrintCounts, kNranks, kProxyCpu, kCounts, kGraph, kHostCpu };

const option kLongOptions[] = {
    {"minbytes", required_argument, nullptr, 'b'},   {"maxbytes", required_argument, nullptr, 'e'},
    {"stepfactor", required_argument, nullptr, 'f'}, {"stepbytes", required_argument, nullptr, 'i'},
    {"iters", required_argument, nullptr, 'n'},      {"warmup_iters", required_argument, nullptr, 'w'},
    {"check", required_argument, nullptr, 'c'},      {"datatype", required_argument, nullptr, 'd'},
    {"registered", required_argument, nullptr, 'm'}, {"json", required_argument, nullptr, 'j'},
    {"window", required_argument, nullptr, 'W'},
    {"pattern", required_argument, nullptr, kPattern}, {"seed", required_argument, nullptr, kSeed},
    {"zipf-s", required_argument, nullptr, kZipfS},  {"experts", required_argument, nullptr, kExperts},
    {"peer", required_argument, nullptr, kPeer},     {"print-counts", no_argument, nullptr, kPrintCounts},
    {"nranks", required_argument, nullptr, kNranks}, {"proxy-cpu", no_argument, nullptr, kProxyCpu},
    {"counts", required_argument, nullptr, kCounts}, {"graph", no_argument, nullptr, kGraph},
    {"host-cpu", no_argument, nullptr, kHostCpu},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0}};

void applyOption(const char* prog, int c, const char* arg, Options* o) {
  switch (c) {
    case 'b': o->minBytes = bytesArg(prog, "-b", arg); break;
    case 'e': o->maxBytes = bytesArg(prog, "-e", arg); break;
    case 'f': o->factor = doubleArg(prog, "-f", arg); break;
    case 'i': o->stepBytes = bytesArg(prog, "-i", arg); o->factor = 0; break;
    case 'n': o->iters = intArg(prog, "-n", arg, 1, 1 << 30); break;
    case 'w': o->warmup = intArg(prog, "-w", arg, 0, 1 << 30); break;
    case 'c': o->check = intArg(prog, "-c", arg, 0, 1); break;
    case 'm': o->registered = intArg(prog, "-m", arg, 0, 1); break;
    case 'W':
      if (!strcmp(arg, "host")) o->hostWindow = true;
      else if (!strcmp(arg, "device")) o->hostWindow = false;
      else fail(prog, "--window takes device or host");
      break;
    case 'j': o->jsonPath = arg; break;
    case 'd':
      if (!parseDataType(arg, &o->dtype)) fail(prog, std::string("unknown datatype: ") + arg);
      break;
    case kPattern: o->pattern = patternArg(prog, arg); break;
    case kSeed: o->seed = intArg(prog, "--seed", arg, 0, __LONG_MAX__); break;
    case kZipfS: o->zipfS = doubleArg(prog, "--zipf-s", arg); break;
    case kExperts: o->expertsPerRank = intArg(prog, "--experts", arg, 1, 1 << 16); break;
    case kPeer:
      if (strcmp(arg, "half") && strcmp(arg, "xor")) fail(prog, std::string("bad --peer: ") + arg);
      o->peerMode = arg;
      break;
    case kPrintCounts: o->printCounts = true; break;
    case kProxyCpu: o->proxyCpu = true; break;
    case kHostCpu: o->hostCpu = true; break;
    case kGraph: o->graph = true; break;
    case kCounts:
      if (!strcmp(arg, "host")) o->counts = CountsSource::kHost;
      else if (!strcmp(arg, "sync")) o->counts = CountsSource::kSync;
      else if (!strcmp(arg, "device")) o->counts = CountsSource::kDevice;
      else if (!strcmp(arg, "padded")) o->counts = CountsSource::kPadded;
      else fail(prog, std::string("--counts takes host, sync, device or padded: ") + arg);
      break;
    case kNranks: o->nranksOverride = intArg(prog, "--nranks", arg, 1, 1 << 20); break;
    case 'h': printUsage(prog); exit(0);
    default: fail(prog, "unknown option");
  }
}

}  // namespace

void printUsage(const char* prog) {
  fprintf(stderr,
          "usage: %s <putsignal|alltoall|alltoallv> [flags]\n"
          "  -b, --minbytes N     smallest size (K/M/G suffixes; default 32M)\n"
          "  -e, --maxbytes N     largest size (default 32M; -b or -e alone: that one size)\n"
          "  -f, --stepfactor F   multiply the size by F between steps\n"
          "  -i, --stepbytes N    add N between steps (when no -f; default 1M)\n"
          "  -n, --iters N        timed iterations per size (20)\n"
          "  -w, --warmup_iters N warmup iterations per size (5)\n"
          "  -c, --check 0|1      verify every received element and the gaps (1)\n"
          "  -d, --datatype T     float, half, bfloat16, double, int8, uint8, int32, ... (float)\n"
          "  -m, --registered 0|1 buffers from rmaccMemAlloc, registered as windows (1)\n"
          "  --window device|host putsignal's target window: rmaccMemAlloc memory (device), or\n"
          "                       pinned host memory (host; one rank per node) (device)\n"
          "  -j, --json FILE      append one JSON line per size to FILE (rank 0)\n"
          "  --pattern P          alltoallv counts: uniform, random or zipf (uniform)\n"
          "  --seed S             seed of the count matrix, the same on every rank (1)\n"
          "  --zipf-s X           Zipf exponent of the expert load (1.0)\n"
          "  --experts E          experts per rank for zipf (4)\n"
          "  --peer half|xor      putsignal partner: (r + n/2) %% n or r ^ 1 (half)\n"
          "  --print-counts       print the alltoallv count matrices and exit\n"
          "  --nranks N           rank count for --print-counts outside a launcher\n"
          "  --counts host|sync|device|padded  alltoallv's counts: host arrays; device arrays\n"
          "                       copied to the host after a stream sync, then the call (what\n"
          "                       frameworks do); device arrays read by rmaccAlltoAllvDynamic;\n"
          "                       device arrays sent with slots as large as the largest block\n"
          "                       by rmaccAlltoAllvPadded (the size column: the slots) (host)\n"
          "  --proxy-cpu          after each size, the rmacc-proxy thread's CPU share during the\n"
          "                       timed calls (cores, max over ranks); after the sweep, idle\n"
          "  --host-cpu           after each size, host CPU microseconds per call during the\n"
          "                       timed calls: on the caller's thread, and in all (every thread\n"
          "                       but the streams' and the proxy's; mean over ranks)\n"
          "  --graph              alltoall/alltoallv: capture each size's call into a CUDA graph\n"
          "                       once (one per send buffer) and time its replays\n"
          "Sizes are per-rank totals: the bytes one rank sends in one call.\n",
          prog);
}

Options parseOptions(int argc, char** argv) {
  const char* prog = argc > 0 ? argv[0] : "rmacc-perf";
  Options o;
  optind = 1;
  int c;
  bool minGiven = false, maxGiven = false;
  while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:m:j:h", kLongOptions, nullptr)) != -1) {
    minGiven |= c == 'b';
    maxGiven |= c == 'e';
    applyOption(prog, c, optarg, &o);
  }
  // One of -b / -e alone means that one size (nccl-tests would sweep up to its 32M default).
  if (minGiven && !maxGiven) o.maxBytes = o.minBytes;
  if (maxGiven && !minGiven) o.minBytes = o.maxBytes;
  if (optind != argc - 1) fail(prog, "expected exactly one test name");
  o.test = argv[optind];
  if (o.test != "putsignal" && o.test != "alltoall" && o.test != "alltoallv")
    fail(prog, "unknown test: " + o.test);
  if (o.maxBytes < o.minBytes) fail(prog, "-e must not be smaller than -b");
  if (o.graph && (o.test == "putsignal" || o.counts == CountsSource::kSync))
    fail(prog, "--graph captures alltoall or alltoallv with host or device counts");
  return o;
}

bool parseBytes(const std::string& text, size_t* bytes) {
  char* end = nullptr;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || text[0] == '-') return false;
  unsigned long long mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; ++end; break;
    case 'm': case 'M': mult = 1ull << 20; ++end; break;
    case 'g': case 'G': mult = 1ull << 30; ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > (~0ull) / mult) return false;
  *bytes = v * mult;
  return true;
}

bool parseDataType(const std::string& name, rmaccDataType_t* type) {
  for (const auto& t : kTypes) {
    if (name == t.name) {
      *type = t.type;
      return true;
    }
  }
  return false;
}

const char* dataTypeName(rmaccDataType_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.name;
  return "?";
}

size_t dataTypeSize(rmaccDataType_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.size;
  return 0;
}

const char* countsSourceName(CountsSource c) {
  switch (c) {
    case CountsSource::kHost: return "host";
    case CountsSource::kSync: return "sync";
    case CountsSource::kDevice: return "device";
    case CountsSource::kPadded: return "padded";
  }
  return "?";
}

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::kUniform: return "uniform";
    case Pattern::kRandom: return "random";
    case Pattern::kZipf: return "zipf";
  }
  return "?";
}

std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes;) {
    sizes.push_back(s);
    // A factor that does not grow the size (f <= 1 or s == 0) would loop forever: stop.
    size_t next = o.factor > 0 ? static_cast<size_t>(static_cast<double>(s) * o.factor) : s + o.stepBytes;
    if (next <= s) break;
    s = next;
  }
  return sizes;
}

}  // namespace rmacc::perf
