#include "table.h"

#include <cerrno>
#include <cstring>

namespace rmacc::perf {

Row makeRow(size_t bytes, size_t count, double timeUs, double busFactor, int64_t wrong) {
  Row r;
  r.bytes = bytes;
  r.count = count;
  r.timeUs = timeUs;
  r.algbw = timeUs > 0 ? static_cast<double>(bytes) / (timeUs * 1e-6) / 1e9 : 0;
  r.busbw = r.algbw * busFactor;
  r.wrong = wrong;
  return r;
}

Table::Table(FILE* out, const std::string& jsonPath, std::string tags) : out_(out), tags_(std::move(tags)) {
  if (jsonPath.empty()) return;
  json_ = fopen(jsonPath.c_str(), "a");
  // A benchmark that silently drops its results is worse than one that says so up front.
  if (!json_) fprintf(out_, "# warning: cannot open %s: %s (no JSON lines)\n", jsonPath.c_str(), strerror(errno));
}

Table::~Table() {
  if (json_) fclose(json_);
}

void Table::header() const {
  fprintf(out_, "#\n");
  fprintf(out_, "# %10s %12s %8s %10s %8s %8s %7s\n", "size", "count", "type", "time", "algbw", "busbw", "#wrong");
  fprintf(out_, "# %10s %12s %8s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(out_);
}

void Table::row(const Row& r, rmaccDataType_t type) {
  char wrong[32];
  if (r.wrong < 0) snprintf(wrong, sizeof wrong, "N/A");
  else snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(r.wrong));
  // Like nccl-tests: two decimals while the time is small, none once it is large.
  const char* timeFmt = r.timeUs < 10000 ? "  %10zu %12zu %8s %10.2f %8.2f %8.2f %7s\n"
                                         : "  %10zu %12zu %8s %10.0f %8.2f %8.2f %7s\n";
  fprintf(out_, timeFmt, r.bytes, r.count, dataTypeName(type), r.timeUs, r.algbw, r.busbw, wrong);
  fflush(out_);
  busbwSum_ += r.busbw;
  ++rows_;
  if (r.wrong >= 0) {
    checked_ = true;
    wrong_ += r.wrong;
  }
  if (!json_) return;
  fprintf(json_, "{%s%s\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"time_us\":%.3f,\"algbw\":%.4f,"
          "\"busbw\":%.4f,\"wrong\":%s}\n",
          tags_.c_str(), tags_.empty() ? "" : ",", r.bytes, r.count, dataTypeName(type), r.timeUs, r.algbw,
          r.busbw, r.wrong < 0 ? "null" : wrong);
  fflush(json_);
}

int64_t Table::footer() const {
  if (checked_) fprintf(out_, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_), wrong_ ? "FAILED" : "OK");
  fprintf(out_, "# Avg bus bandwidth    : %g\n", rows_ ? busbwSum_ / rows_ : 0.0);
  fprintf(out_, "#\n");
  fflush(out_);
  return wrong_;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace rmacc::perf
