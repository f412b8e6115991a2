#include "thread_cpu.h"

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace rmacc::perf {
namespace {

std::string readSmallFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return {};
  char buf[1024];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  return std::string(buf, n);
}

// One thread's CPU seconds; -1 when it has gone.
double taskCpuSeconds(const std::string& dir) {
  // schedstat: "<ns on cpu> <ns waiting> <timeslices>"; some kernels keep it at 0.
  std::string sched = readSmallFile(dir + "/schedstat");
  unsigned long long ns = 0;
  if (!sched.empty() && sscanf(sched.c_str(), "%llu", &ns) == 1 && ns > 0) return ns * 1e-9;
  // stat: fields 14 and 15 (utime, stime) after the ")" that closes the name.
  std::string stat = readSmallFile(dir + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  unsigned long long utime = 0, stime = 0;
  if (sscanf(stat.c_str() + close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
             &stime) != 2)
    return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

double threadCpuSeconds(const std::string& name) {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return 0;
  double total = 0;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::string comm = readSmallFile(dir + "/comm");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm != name) continue;
    double s = taskCpuSeconds(dir);
    if (s > 0) total += s;
  }
  closedir(tasks);
  return total;
}

namespace {

double clockSeconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double hostNow() {
  return clockSeconds(CLOCK_PROCESS_CPUTIME_ID) - threadCpuSeconds("rmacc-stream") -
         threadCpuSeconds("rmacc-proxy");
}

}  // namespace

void HostCpuMeter::start() {
  caller0_ = clockSeconds(CLOCK_THREAD_CPUTIME_ID);
  host0_ = hostNow();
}

void HostCpuMeter::stop() {
  caller_ = clockSeconds(CLOCK_THREAD_CPUTIME_ID) - caller0_;
  host_ = hostNow() - host0_;
}

ThreadCpuMeter::ThreadCpuMeter(std::string name) : name_(std::move(name)) {}

void ThreadCpuMeter::start() {
  cpu0_ = threadCpuSeconds(name_);
  wall0_ = wallSeconds();
}

double ThreadCpuMeter::cores() const {
  double wall = wallSeconds() - wall0_;
  return wall > 0 ? (threadCpuSeconds(name_) - cpu0_) / wall : 0;
}

}  // namespace rmacc::perf
