#include "core/test_hooks.h"

#include <mutex>

#include "core/config.h"
#include "core/error.h"

namespace rmacc {

namespace {

struct Overrides {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> list;
};

Overrides& overrides() {
  static Overrides* o = new Overrides;  // never destroyed: the configuration may be read at exit
  return *o;
}

}  // namespace

void setParamForTest(const char* name, const char* text) {
  RMACC_ARG_CHECK(name && text, "setParamForTest: name and text must not be NULL");
  RMACC_ARG_CHECK(findParam(name), "setParamForTest: %s is not a parameter (core/config.h)", name);
  Config probe;
  RMACC_ARG_CHECK(probe.parse(name, text) == Config::Read::kSet,
                  "setParamForTest: %s='%s' is malformed: expected %s", name, text,
                  Config::expected(name).c_str());
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.list.emplace_back(name, text);
}

void clearParamsForTest() {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.list.clear();
}

std::vector<std::pair<std::string, std::string>> paramOverridesForTest() {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  return o.list;
}

bool paramOverriddenForTest(const char* name) {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  for (const auto& e : o.list)
    if (e.first == name) return true;
  return false;
}

}  // namespace rmacc
