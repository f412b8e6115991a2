#include "launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

namespace rmacc::perf {
namespace {

[[noreturn]] void die(const std::string& why) {
  fprintf(stderr, "rmacc-perf: %s\n", why.c_str());
  exit(1);
}

const char* env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : nullptr;
}

int envInt(const char* name, int fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) die(std::string("malformed ") + name + "=" + v);
  return static_cast<int>(x);
}

// A file name made only of safe characters, derived from the job's identity.
std::string idFileFor(const std::string& job) {
  std::string safe;
  for (char c : job) safe += isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  const char* tmp = env("TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/rmacc-perf-id-" + safe;
}

std::string mpiJob() {
  if (const char* ns = env("PMIX_NAMESPACE")) return std::string("mpi-") + ns;
  if (const char* id = env("OMPI_MCA_orte_ess_jobid")) return std::string("mpi-") + id;
  die("under mpirun but neither PMIX_NAMESPACE nor OMPI_MCA_orte_ess_jobid is set: cannot name the id file");
}

std::string torchJob() {
  // The restart count is part of the name: an elastic restart is a new rendezvous.
  std::string job = "torch";
  for (const char* v : {"TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT"})
    job += std::string("-") + (env(v) ? env(v) : "");
  return job;
}

bool fromHex(const std::string& hex, rmaccUniqueId* id) {
  if (hex.size() != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned v = 0;
    if (sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    id->internal[i] = static_cast<char>(v);
  }
  return true;
}

rmaccUniqueId makeId() {
  rmaccUniqueId id;
  if (rmaccResult_t r = rmaccGetUniqueId(&id); r != rmaccSuccess)
    die(std::string("rmaccGetUniqueId failed: ") + rmaccGetErrorString(r));
  return id;
}

void writeFile(const std::string& path, const void* blob, size_t bytes) {
  // Write under a temporary name and rename: a poller never sees a half-written file.
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "wb");
  if (!f || fwrite(blob, bytes, 1, f) != 1 || fclose(f) != 0) die("cannot write " + tmp + ": " + strerror(errno));
  if (rename(tmp.c_str(), path.c_str()) != 0) die("cannot rename " + tmp + ": " + strerror(errno));
}

// Polls for rank 0's file. A file older than this process (minus slack for slow starters) is a
// leftover of an earlier job with the same name and is ignored rather than used.
void readFile(const std::string& path, void* blob, size_t bytes) {
  const time_t notBefore = time(nullptr) - 30;
  const int timeoutS = envInt("RMACC_TIMEOUT_S", 300);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutS);
  auto pause = std::chrono::milliseconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && st.st_mtime >= notBefore && static_cast<size_t>(st.st_size) == bytes) {
      FILE* f = fopen(path.c_str(), "rb");
      bool ok = f && fread(blob, bytes, 1, f) == 1;
      if (f) fclose(f);
      if (ok) return;
    }
    std::this_thread::sleep_for(pause);  // back off: ranks share few cores with rank 0
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  die("timed out after " + std::to_string(timeoutS) + " s waiting for rank 0's file " + path);
}

// The job's name for shared files: rmacc-run's id (unique per job) or, started with --no-id,
// the launcher's pid (every rank is its child); mpirun/torchrun: the name of their id file.
std::string jobFile(const Launch& l, const std::string& tag) {
  if (l.launcher == "rmacc-run") {
    std::string job = l.idHex.empty() ? "ppid" + std::to_string(getppid()) : l.idHex.substr(0, 32);
    return idFileFor("rmacc-run-" + job) + "-" + tag;
  }
  return l.idFile + "-" + tag;
}

}  // namespace

Launch detectLaunch() {
  Launch l;
  if (const char* r = env("RMACC_RUN_RANK")) {
    l.launcher = "rmacc-run";
    l.rank = envInt("RMACC_RUN_RANK", 0);
    l.nranks = envInt("RMACC_RUN_NRANKS", 1);
    l.localRank = envInt("RMACC_RUN_LOCAL_RANK", 0);
    l.idHex = env("RMACC_RUN_ID") ? env("RMACC_RUN_ID") : "";
    (void)r;
  } else if (env("OMPI_COMM_WORLD_RANK")) {
    l.launcher = "mpirun";
    l.rank = envInt("OMPI_COMM_WORLD_RANK", 0);
    l.nranks = envInt("OMPI_COMM_WORLD_SIZE", 1);
    l.localRank = envInt("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    l.idFile = idFileFor(mpiJob());
  } else if (env("RANK") && env("WORLD_SIZE")) {
    l.launcher = "torchrun";
    l.rank = envInt("RANK", 0);
    l.nranks = envInt("WORLD_SIZE", 1);
    l.localRank = envInt("LOCAL_RANK", 0);
    l.idFile = idFileFor(torchJob());
  }
  if (l.nranks < 1 || l.rank >= l.nranks)
    die("launcher " + l.launcher + " gave rank " + std::to_string(l.rank) + " of " + std::to_string(l.nranks));
  return l;
}

rmaccUniqueId obtainUniqueId(const Launch& l) {
  if (l.launcher == "rmacc-run") {
    rmaccUniqueId id;
    if (!fromHex(l.idHex, &id)) die("RMACC_RUN_ID is missing or not 256 hex digits (was rmacc-run started with --no-id?)");
    return id;
  }
  if (l.nranks == 1) return makeId();
  rmaccUniqueId id;
  if (l.rank != 0) {
    readFile(l.idFile, id.internal, sizeof id.internal);
    return id;
  }
  id = makeId();
  writeFile(l.idFile, id.internal, sizeof id.internal);
  return id;
}

void removeIdFile(const Launch& l) {
  if (l.rank == 0 && !l.idFile.empty()) unlink(l.idFile.c_str());
}

void shareFromRank0(const Launch& l, const std::string& tag, void* blob, size_t bytes) {
  if (l.nranks == 1) return;
  const std::string path = jobFile(l, tag);
  if (l.rank == 0) writeFile(path, blob, bytes);
  else readFile(path, blob, bytes);
}

void removeSharedFile(const Launch& l, const std::string& tag) {
  if (l.rank == 0 && l.nranks > 1) unlink(jobFile(l, tag).c_str());
}

}  // namespace rmacc::perf
