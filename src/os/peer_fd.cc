#include "os/peer_fd.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace rmacc {
namespace {

// Syscall numbers spelled out so that libc headers without the wrappers still build (the
// unified numbers, the same on x86-64 and aarch64).
constexpr long kSysPidfdOpen = 434;
constexpr long kSysPidfdGetfd = 438;

}  // namespace

int openPidfd(int pid) { return (int)syscall(kSysPidfdOpen, pid, 0); }

int fetchPeerFd(int pid, int fd, std::string* how) {
  int pidfd = openPidfd(pid);
  if (pidfd >= 0) {
    int got = (int)syscall(kSysPidfdGetfd, pidfd, fd, 0);
    int err = errno;
    close(pidfd);
    if (got >= 0) {
      *how = "pidfd_getfd";
      return got;
    }
    *how = strprintf("pidfd_getfd: %s", strerror(err));
  } else {
    *how = strprintf("pidfd_open: %s", strerror(errno));
  }
  std::string path = strprintf("/proc/%d/fd/%d", pid, fd);
  int got = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (got >= 0) {
    *how = "/proc (" + *how + ")";
    return got;
  }
  *how += strprintf("; open %s: %s", path.c_str(), strerror(errno));
  return -1;
}

}  // namespace rmacc
