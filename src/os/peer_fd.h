// File descriptors of other processes of the node: how both backends import the memory a peer
// exported (memfd, VMM POSIX-fd handles) and how a rank watches whether a peer is still alive.
#pragma once

#include <string>

namespace rmacc {

// A pidfd for `pid` (readable once the process exited), or -1 with errno set.
int openPidfd(int pid);

// Process `pid`'s file descriptor `fd`, duplicated into this process. pidfd_getfd duplicates the
// very open file (what a VMM import needs); /proc/<pid>/fd/<fd> is the fallback where
// pidfd_getfd is refused (Yama ptrace_scope=1 between sibling processes, seccomp filters) and
// opens the file anew, which yields the same object only for some kinds of fd. Returns the fd
// and sets `how` to the route that worked, or returns -1 and sets `how` to why every route
// failed.
int fetchPeerFd(int pid, int fd, std::string* how);

}  // namespace rmacc
