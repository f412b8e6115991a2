#include "core/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

#include "core/error.h"
#include "core/test_hooks.h"

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

[[noreturn]] void reject(const char* name, const char* value, const std::string& expected) {
  RMACC_THROW(rmaccInvalidArgument, "%s='%s' is malformed: expected %s", name, value,
              expected.c_str());
}

// The parsers of RMACC_PARAMS: parse() stores a well-formed value and says whether it was,
// expected() describes the well-formed ones, show() prints the effective value. They do not
// throw, so that logging can read its two parameters through them before anything else.

struct LevelParam {
  static bool parse(const char* v, LogLevel& out) {
    auto level = parseLogLevel(v);
    if (level) out = *level;
    return level.has_value();
  }
  static std::string expected() { return "NONE, WARN, INFO or TRACE"; }
  static std::string show(LogLevel l) {
    switch (l) {
      case LogLevel::kNone: return "NONE";
      case LogLevel::kWarn: return "WARN";
      case LogLevel::kInfo: return "INFO";
      default: return "TRACE";
    }
  }
};

struct SubsysParam {
  static bool parse(const char* v, uint32_t& out) {
    auto mask = parseSubsysMask(v);
    if (mask) out = *mask;
    return mask.has_value();
  }
  static std::string expected() { return "a list of INIT,BOOT,PLAN,EXEC,NET,PROXY,ALLOC,ENV,COLL,ALL"; }
  static std::string show(uint32_t mask) { return strprintf("0x%x", mask); }
};

struct TextParam {
  static bool parse(const char* v, std::string& out) { return out = v, true; }
  static std::string expected() { return "text"; }
  static std::string show(const std::string& s) { return s.empty() ? "(unset)" : s; }
};

struct HostnameParam : TextParam {
  static bool parse(const char* v, std::string& out) {
    if (strlen(v) > 255) return false;
    return out = v, true;
  }
  static std::string expected() { return "at most 255 characters"; }
};

struct SecondsParam {
  static bool parse(const char* v, double& out) {
    errno = 0;
    char* end = nullptr;
    double t = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(t > 0) || !std::isfinite(t)) return false;
    return out = t, true;
  }
  static std::string expected() { return "a positive number of seconds"; }
  static std::string show(double t) { return strprintf("%g", t); }
};

// A rate in GB/s (0: off), or `auto` (-1).
struct PaceParam {
  static bool parse(const char* v, double& out) {
    if (!strcasecmp(v, "auto")) return out = -1, true;
    errno = 0;
    char* end = nullptr;
    double r = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(r >= 0) || !std::isfinite(r)) return false;
    return out = r, true;
  }
  static std::string expected() { return "auto, 0, or a rate in GB/s"; }
  static std::string show(double r) { return r < 0 ? "auto" : strprintf("%g", r); }
};

template <size_t kMin>
struct BytesParam {
  static bool parse(const char* v, size_t& out) {
    auto b = parseBytes(v);
    if (!b || *b < kMin) return false;
    return out = *b, true;
  }
  static std::string expected() { return strprintf("a byte size of at least %zu (e.g. 64M)", kMin); }
  static std::string show(size_t b) { return std::to_string(b); }
};

template <long kLo, long kHi>
struct IntParam {
  static bool parse(const char* v, int& out) {
    errno = 0;
    char* end = nullptr;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < kLo || x > kHi) return false;
    return out = (int)x, true;
  }
  static std::string expected() { return strprintf("an integer in [%ld, %ld]", kLo, kHi); }
  static std::string show(int x) { return std::to_string(x); }
};

struct BoolParam {
  static bool parse(const char* v, bool& out) {
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes")) return out = true, true;
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no")) return out = false, true;
    return false;
  }
  static std::string expected() { return "0 or 1"; }
  static std::string show(bool b) { return b ? "1" : "0"; }
};

// A variable with two spellings: the first gives false, the second true.
struct SwitchNames { const char* off; const char* on; };
constexpr SwitchNames kAutoAlways{"auto", "always"};
constexpr SwitchNames kOffAuto{"off", "auto"};

template <const SwitchNames& kNames>
struct SwitchParam {
  static bool parse(const char* v, bool& out) {
    if (!strcasecmp(v, kNames.off)) return out = false, true;
    if (!strcasecmp(v, kNames.on)) return out = true, true;
    return false;
  }
  static std::string expected() { return strprintf("%s or %s", kNames.off, kNames.on); }
  static std::string show(bool b) { return b ? kNames.on : kNames.off; }
};

// The spellings of each enumerated parameter, in the order the error message lists them.
template <class T> struct Spelling { const char* text; T value; };
template <class T> struct Spellings;
template <> struct Spellings<BackendKind> {
  static constexpr Spelling<BackendKind> kAll[] = {
      {"host", BackendKind::kHost}, {"cuda", BackendKind::kCuda}, {"auto", BackendKind::kAuto}};
};
template <> struct Spellings<EntrySync> {
  static constexpr Spelling<EntrySync> kAll[] = {{"signals", EntrySync::kSignals},
                                                 {"barrier", EntrySync::kBarrier}};
};
template <> struct Spellings<GraphCalls> {
  static constexpr Spelling<GraphCalls> kAll[] = {{"in-graph", GraphCalls::kInGraph},
                                                  {"triggered", GraphCalls::kTriggered},
                                                  {"always", GraphCalls::kAlways}};
};
template <> struct Spellings<LanesMode> {
  static constexpr Spelling<LanesMode> kAll[] = {
      {"auto", LanesMode::kAuto}, {"split", LanesMode::kSplit}, {"serial", LanesMode::kSerial}};
};
template <> struct Spellings<ProxyPollMode> {
  static constexpr Spelling<ProxyPollMode> kAll[] = {{"auto", ProxyPollMode::kAuto},
                                                     {"eager", ProxyPollMode::kEager},
                                                     {"sleep", ProxyPollMode::kSleep}};
};
template <> struct Spellings<LocalCopySetting> {
  static constexpr Spelling<LocalCopySetting> kAll[] = {{"auto", LocalCopySetting::kAuto},
                                                     {"direct", LocalCopySetting::kDirect},
                                                     {"engines", LocalCopySetting::kEngines}};
};

template <> struct Spellings<SignalWritesSetting> {
  static constexpr Spelling<SignalWritesSetting> kAll[] = {{"off", SignalWritesSetting::kOff},
                                                        {"auto", SignalWritesSetting::kAuto},
                                                        {"always", SignalWritesSetting::kAlways}};
};

template <class T>
struct EnumParam {
  static bool parse(const char* v, T& out) {
    for (const auto& s : Spellings<T>::kAll)
      if (!strcasecmp(v, s.text)) return out = s.value, true;
    return false;
  }
  static std::string expected() {
    std::string list;
    for (const auto& s : Spellings<T>::kAll) list += (list.empty() ? "" : ", ") + std::string(s.text);
    return "one of " + list;
  }
  static std::string show(T value) {
    for (const auto& s : Spellings<T>::kAll)
      if (s.value == value) return s.text;
    return "?";
  }
};

#define COMMA ,
constexpr ParamVisibility kPublic = ParamVisibility::kPublic;
constexpr ParamVisibility kInternal = ParamVisibility::kInternal;
constexpr ParamVisibility kFixed = ParamVisibility::kFixed;

const ParamInfo kParams[] = {
#define RMACC_PARAM_INFO(type, field, init, name, parser, vis, defaultText, doc) \
  {name, vis, defaultText, doc},
    RMACC_PARAMS(RMACC_PARAM_INFO)
#undef RMACC_PARAM_INFO
};

}  // namespace

const ParamInfo* paramTable(size_t* count) {
  *count = sizeof(kParams) / sizeof(kParams[0]);
  return kParams;
}

const ParamInfo* findParam(const char* name) {
  for (const ParamInfo& p : kParams)
    if (!strcmp(p.name, name)) return &p;
  return nullptr;
}

std::string paramMarkdown(ParamVisibility visibility) {
  std::string out = "| variable | default | meaning |\n|---|---|---|\n";
  for (const ParamInfo& p : kParams)
    if (p.visibility == visibility)
      out += strprintf("| `%s` | %s | %s |\n", p.name, p.defaultText, p.doc);
  return out;
}

Config::Read Config::parse(const char* name, const char* text) {
#define RMACC_PARAM_READ(type, field, init, pname, parser, ...) \
  if (!strcmp(name, pname)) return parser::parse(text, field) ? Read::kSet : Read::kMalformed;
  RMACC_PARAMS(RMACC_PARAM_READ)
#undef RMACC_PARAM_READ
  return Read::kUnset;
}

namespace {

// The environment of a kFixed parameter is not read: those values are the library's, and only
// tests change them (core/test_hooks.h).
const char* envOf(const char* name) {
  const ParamInfo* p = findParam(name);
  return p && p->visibility != ParamVisibility::kFixed ? env(name) : nullptr;
}

}  // namespace

Config::Read Config::readOne(const char* name) {
  const char* v = envOf(name);
  return v ? parse(name, v) : Read::kUnset;
}

std::string Config::expected(const char* name) {
#define RMACC_PARAM_EXPECTED(type, field, init, pname, parser, ...) \
  if (!strcmp(name, pname)) return parser::expected();
  RMACC_PARAMS(RMACC_PARAM_EXPECTED)
#undef RMACC_PARAM_EXPECTED
  return "";
}

Config Config::fromEnvironment() {
  Config c;
  for (const ParamInfo& p : kParams)
    if (c.readOne(p.name) == Read::kMalformed) reject(p.name, envOf(p.name), expected(p.name));
  // A test's overrides come last (setParamForTest checked each when it was set).
  for (const auto& [name, text] : paramOverridesForTest())
    if (c.parse(name.c_str(), text.c_str()) != Read::kSet) reject(name.c_str(), text.c_str(), expected(name.c_str()));
  // The one constraint between two parameters.
  if (c.relayBytes / c.relaySlots < 1024)
    RMACC_THROW(rmaccInvalidArgument,
                "RMACC_RELAY_BYTES / RMACC_RELAY_SLOTS = %zu bytes per slot: need at least 1024",
                c.relayBytes / c.relaySlots);
  return c;
}

void Config::log() const {
#define RMACC_PARAM_LOG(type, field, init, name, parser, ...)                               \
  INFO(kSubsysEnv, "%s=%s%s", name, parser::show(field).c_str(),                            \
       paramOverriddenForTest(name) ? " (set by a test)" : envOf(name) ? " (set by environment)" : "");
  RMACC_PARAMS(RMACC_PARAM_LOG)
#undef RMACC_PARAM_LOG
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
