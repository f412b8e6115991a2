#include "core/trace_file.h"

#include "core/clock.h"
#include "core/log.h"

namespace rmacc {

TraceFile::TraceFile(const std::string& pathIn, int rank) : rank_(rank) {
  std::string path = pathIn;
  size_t pos = path.find("%r");
  if (pos != std::string::npos) path.replace(pos, 2, std::to_string(rank));
  else path += "." + std::to_string(rank);
  f_ = fopen(path.c_str(), "w");
  if (!f_) {
    WARN("RMACC_TRACE_FILE: cannot open %s for writing; no trace", path.c_str());
    return;
  }
  fprintf(f_, "[\n");
}

TraceFile::~TraceFile() {
  if (!f_) return;
  fprintf(f_, "\n]\n");
  fclose(f_);
}

double TraceFile::nowUs() { return monotonicSeconds() * 1e6; }

void TraceFile::op(uint64_t call, int batch, const char* lane, const char* name, int peer,
                   uint64_t bytes, double startUs, double durUs) {
  if (!f_) return;
  std::lock_guard<std::mutex> lock(mu_);
  fprintf(f_,
          "%s{\"name\":\"%s\",\"cat\":\"b%d\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
          "\"pid\":%d,\"tid\":\"%s\",\"args\":{\"call\":%llu,\"batch\":%d,\"peer\":%d,"
          "\"bytes\":%llu}}",
          first_ ? "" : ",\n", name, batch, startUs, durUs < 0.001 ? 0.001 : durUs, rank_, lane,
          (unsigned long long)call, batch, peer, (unsigned long long)bytes);
  first_ = false;
}

}  // namespace rmacc
