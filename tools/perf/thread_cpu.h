// CPU time of this process's threads by name (issue 15, item 4: the proxy must not need a core
// per rank to be fast, and must cost ~nothing when idle). rmacc names its threads
// (rmacc-proxy, rmacc-stream), so the time of a named thread is read from /proc without any
// hook in the library.
#pragma once

#include <string>

namespace rmacc::perf {

// Seconds of CPU (user + system) used so far by the live threads of this process whose name
// is `name`, summed. From /proc/self/task/*/schedstat (nanoseconds) where the kernel keeps it,
// else /proc/self/task/*/stat (clock ticks). 0 when no thread has that name.
double threadCpuSeconds(const std::string& name);

// Measures one named thread's CPU share over an interval: cores = CPU seconds / wall seconds.
class ThreadCpuMeter {
 public:
  explicit ThreadCpuMeter(std::string name);
  void start();
  double cores() const;  // since start()

 private:
  std::string name_;
  double cpu0_ = 0, wall0_ = 0;
};

// The host CPU a call costs (issue 49): the calling thread's own (CLOCK_THREAD_CPUTIME_ID), and
// the whole process's but for the threads that stand for the device and the network
// (rmacc-stream: the host backend's streams; rmacc-proxy), so that whichever thread the
// library sets a call up on (the caller's, a progress thread, the control plane's reader) counts.
// start() and stop() on the calling thread.
class HostCpuMeter {
 public:
  void start();
  void stop();
  double callerSeconds() const { return caller_; }
  double hostSeconds() const { return host_; }

 private:
  double caller0_ = 0, host0_ = 0, caller_ = 0, host_ = 0;
};

}  // namespace rmacc::perf
