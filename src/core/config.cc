#include "core/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

#include "core/error.h"

namespace rmacc {

std::optional<LogLevel> parseLogLevel(const char* text) {
  if (!text || !*text) return std::nullopt;
  if (!strcasecmp(text, "NONE")) return LogLevel::kNone;
  if (!strcasecmp(text, "WARN")) return LogLevel::kWarn;
  if (!strcasecmp(text, "INFO")) return LogLevel::kInfo;
  if (!strcasecmp(text, "TRACE")) return LogLevel::kTrace;
  return std::nullopt;
}

std::optional<uint32_t> parseSubsysMask(const char* text) {
  if (!text || !*text) return std::nullopt;
  static const struct { const char* name; uint32_t bit; } kNames[] = {
      {"INIT", kSubsysInit}, {"BOOT", kSubsysBoot},   {"PLAN", kSubsysPlan},
      {"EXEC", kSubsysExec}, {"NET", kSubsysNet},     {"PROXY", kSubsysProxy},
      {"ALLOC", kSubsysAlloc}, {"ENV", kSubsysEnv},   {"COLL", kSubsysColl},
      {"ALL", kSubsysAll}};
  // NCCL's syntax: a comma-separated list; a leading '^' inverts it.
  bool invert = text[0] == '^';
  std::string list(text + (invert ? 1 : 0));
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    bool found = false;
    for (const auto& n : kNames)
      if (!strcasecmp(item.c_str(), n.name)) mask |= n.bit, found = true;
    if (!found) return std::nullopt;
    pos = end + 1;
  }
  return invert ? ~mask : mask;
}

std::optional<size_t> parseBytes(const char* text) {
  if (!text || !*text) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text || text[0] == '-') return std::nullopt;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: return std::nullopt;
  }
  if (*end == 'i' || *end == 'B') ++end;  // accept "MiB"-ish spellings: 64Mi, 64MB
  if (*end == 'B') ++end;
  if (*end != '\0') return std::nullopt;
  if (shift && v > (~0ull >> shift)) return std::nullopt;
  return (size_t)(v << shift);
}

namespace {

const char* env(const char* name) {
  const char* v = getenv(name);
  return (v && *v) ? v : nullptr;
}

[[noreturn]] void reject(const char* name, const char* value, const char* expected) {
  RMACC_THROW(rmaccInvalidArgument, "%s='%s' is malformed: expected %s", name, value, expected);
}

long parseInt(const char* name, const char* v, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end != '\0' || x < lo || x > hi)
    reject(name, v, strprintf("an integer in [%ld, %ld]", lo, hi).c_str());
  return x;
}

bool parseBool(const char* name, const char* v) {
  if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes")) return true;
  if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no")) return false;
  reject(name, v, "0 or 1");
}

// A variable with two spellings: `off` gives false, `on` true.
bool parseSwitch(const char* name, const char* v, const char* off, const char* on) {
  if (!strcasecmp(v, off)) return false;
  if (!strcasecmp(v, on)) return true;
  reject(name, v, strprintf("%s or %s", off, on).c_str());
}

size_t parseBytesAtLeast(const char* name, const char* v, size_t min) {
  auto b = parseBytes(v);
  if (!b || *b < min)
    reject(name, v, strprintf("a byte size of at least %zu (e.g. 64M)", min).c_str());
  return *b;
}

}  // namespace

Config Config::fromEnvironment() {
  Config c;
  if (const char* v = env("RMACC_DEBUG")) {
    auto level = parseLogLevel(v);
    if (!level) reject("RMACC_DEBUG", v, "NONE, WARN, INFO or TRACE");
    c.debugLevel = *level;
  }
  if (const char* v = env("RMACC_DEBUG_SUBSYS")) {
    auto mask = parseSubsysMask(v);
    if (!mask) reject("RMACC_DEBUG_SUBSYS", v, "a list of INIT,BOOT,PLAN,EXEC,NET,PROXY,ALLOC,ENV,COLL,ALL");
    c.debugSubsys = *mask;
  }
  if (const char* v = env("RMACC_BACKEND")) {
    if (!strcasecmp(v, "host")) c.backend = BackendKind::kHost;
    else if (!strcasecmp(v, "cuda")) c.backend = BackendKind::kCuda;
    else if (!strcasecmp(v, "auto")) c.backend = BackendKind::kAuto;
    else reject("RMACC_BACKEND", v, "host, cuda or auto");
  }
  if (const char* v = env("RMACC_HOSTNAME")) {
    if (strlen(v) > 255) reject("RMACC_HOSTNAME", v, "at most 255 characters");
    c.hostname = v;
  }
  if (const char* v = env("RMACC_NET_PROVIDER")) c.netProvider = v;
  if (const char* v = env("RMACC_BOOTSTRAP_ADDR")) c.bootstrapAddr = v;
  if (const char* v = env("RMACC_RELAY_BYTES")) c.relayBytes = parseBytesAtLeast("RMACC_RELAY_BYTES", v, 4096);
  if (const char* v = env("RMACC_RELAY_SLOTS")) c.relaySlots = (int)parseInt("RMACC_RELAY_SLOTS", v, 2, 1024);
  if (c.relayBytes / c.relaySlots < 1024)
    RMACC_THROW(rmaccInvalidArgument,
                "RMACC_RELAY_BYTES / RMACC_RELAY_SLOTS = %zu bytes per slot: need at least 1024",
                c.relayBytes / c.relaySlots);
  if (const char* v = env("RMACC_ENTRY_SYNC")) {
    if (!strcasecmp(v, "signals")) c.entrySync = EntrySync::kSignals;
    else if (!strcasecmp(v, "barrier")) c.entrySync = EntrySync::kBarrier;
    else reject("RMACC_ENTRY_SYNC", v, "signals or barrier");
  }
  if (const char* v = env("RMACC_MAX_PUT_BYTES"))
    c.maxPutBytes = parseBytesAtLeast("RMACC_MAX_PUT_BYTES", v, 4096);
  if (const char* v = env("RMACC_TIMEOUT_S")) {
    errno = 0;
    char* end = nullptr;
    double t = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(t > 0) || !std::isfinite(t))
      reject("RMACC_TIMEOUT_S", v, "a positive number of seconds");
    c.timeoutS = t;
  }
  if (const char* v = env("RMACC_DUMP_PLAN")) c.dumpPlan = parseBool("RMACC_DUMP_PLAN", v);
  if (const char* v = env("RMACC_TRACE_FILE")) c.traceFile = v;
  if (const char* v = env("RMACC_LANES")) {
    if (!strcasecmp(v, "auto")) c.lanes = Config::Lanes::kAuto;
    else if (!strcasecmp(v, "split")) c.lanes = Config::Lanes::kSplit;
    else if (!strcasecmp(v, "serial")) c.lanes = Config::Lanes::kSerial;
    else reject("RMACC_LANES", v, "auto, split or serial");
  }
  if (const char* v = env("RMACC_PROXY_POLL")) {
    if (!strcasecmp(v, "auto")) c.proxyPoll = Config::ProxyPoll::kAuto;
    else if (!strcasecmp(v, "eager")) c.proxyPoll = Config::ProxyPoll::kEager;
    else if (!strcasecmp(v, "sleep")) c.proxyPoll = Config::ProxyPoll::kSleep;
    else reject("RMACC_PROXY_POLL", v, "auto, eager or sleep");
  }
  if (const char* v = env("RMACC_NET_BOUNCE")) c.bounceAlways = parseSwitch("RMACC_NET_BOUNCE", v, "auto", "always");
  if (const char* v = env("RMACC_NET_BOUNCE_BYTES"))
    c.bounceBytes = parseBytesAtLeast("RMACC_NET_BOUNCE_BYTES", v, 1);
  if (const char* v = env("RMACC_NET_BOUNCE_CHUNK"))
    c.bounceChunkBytes = parseBytesAtLeast("RMACC_NET_BOUNCE_CHUNK", v, 1);
  if (const char* v = env("RMACC_NET_GDR")) c.netGdr = parseSwitch("RMACC_NET_GDR", v, "off", "auto");
  if (const char* v = env("RMACC_NET_LANDING"))
    c.landingAlways = parseSwitch("RMACC_NET_LANDING", v, "auto", "always");
  if (const char* v = env("RMACC_NET_LANDING_BYTES"))
    c.landingBytes = parseBytesAtLeast("RMACC_NET_LANDING_BYTES", v, 1);
  if (const char* v = env("RMACC_LOCAL_COPY")) {
    if (!strcasecmp(v, "auto")) c.localCopy = Config::LocalCopy::kAuto;
    else if (!strcasecmp(v, "direct")) c.localCopy = Config::LocalCopy::kDirect;
    else if (!strcasecmp(v, "engines")) c.localCopy = Config::LocalCopy::kEngines;
    else reject("RMACC_LOCAL_COPY", v, "auto, direct or engines");
  }
  if (const char* v = env("RMACC_LOCAL_COPY_SLOT"))
    c.localCopySlotBytes = parseBytesAtLeast("RMACC_LOCAL_COPY_SLOT", v, 1);
  if (const char* v = env("RMACC_CE_STREAMS")) c.ceStreams = (int)parseInt("RMACC_CE_STREAMS", v, 1, 64);
  return c;
}

void Config::log() const {
  static const char* kVars[] = {"RMACC_DEBUG", "RMACC_DEBUG_SUBSYS", "RMACC_BACKEND",
                                "RMACC_HOSTNAME", "RMACC_NET_PROVIDER", "RMACC_RELAY_BYTES",
                                "RMACC_RELAY_SLOTS", "RMACC_ENTRY_SYNC", "RMACC_MAX_PUT_BYTES",
                                "RMACC_TIMEOUT_S", "RMACC_DUMP_PLAN", "RMACC_TRACE_FILE",
                                "RMACC_CE_STREAMS", "RMACC_LANES", "RMACC_BOOTSTRAP_ADDR",
                                "RMACC_NET_BOUNCE", "RMACC_NET_BOUNCE_BYTES", "RMACC_NET_BOUNCE_CHUNK",
                                "RMACC_PROXY_POLL", "RMACC_NET_LANDING", "RMACC_NET_GDR",
                                "RMACC_NET_LANDING_BYTES", "RMACC_LOCAL_COPY", "RMACC_LOCAL_COPY_SLOT"};
  for (const char* name : kVars)
    if (const char* v = env(name)) INFO(kSubsysEnv, "%s set by environment to %s", name, v);
  INFO(kSubsysEnv, "relay %zu bytes in %d slots, max put %zu bytes, timeout %.1f s", relayBytes,
       relaySlots, maxPutBytes, timeoutS);
}

const Config& config() {
  // Not a function-local static with a throwing initialiser: a malformed environment must keep
  // failing with the same message on every call, not once.
  static std::mutex mu;
  static std::optional<Config> cached;
  std::lock_guard<std::mutex> lock(mu);
  if (!cached) {
    cached = Config::fromEnvironment();
    cached->log();
  }
  return *cached;
}

}  // namespace rmacc
