#include "os/shm.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "os/peer_fd.h"

namespace rmacc::os {

namespace {

// mmap cannot map 0 bytes; a 0-byte allocation still gets a valid, distinct pointer.
size_t mapBytes(size_t size) { return size ? size : 1; }

std::string memfdName(uint64_t id) { return strprintf("rmacc:%016llx", (unsigned long long)id); }

uint64_t nextId() {
  static std::atomic<uint32_t> counter{0};
  return ((uint64_t)(uint32_t)getpid() << 32) | counter.fetch_add(1);
}

// `populate`: fault every page in now, as the owner does. The memory stands for device and
// pinned host memory, which CUDA makes resident at allocation; lazily faulted pages made the
// first use of each region pay a page fault per 4 KiB (seen: a staging ring twice as slow).
void* mapFd(int fd, size_t size, bool populate) {
  void* p = mmap(nullptr, mapBytes(size), PROT_READ | PROT_WRITE,
                 MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The fd number in the handle may by now name another file of the owner: check the memfd's
// name carries the allocation id, and that it is large enough to map.
void checkFetchedFd(int fd, const ShmHandle& h) {
  char link[256];
  ssize_t n = readlink(strprintf("/proc/self/fd/%d", fd).c_str(), link, sizeof(link) - 1);
  if (n > 0) {
    link[n] = '\0';
    if (!strstr(link, memfdName(h.id).c_str()))
      RMACC_THROW(rmaccSystemError,
                  "import: fd %d of pid %d is '%s', not allocation %016llx (freed by its owner?)",
                  h.fd, h.pid, link, (unsigned long long)h.id);
  }
  struct stat st;
  RMACC_SYSCHECK(fstat(fd, &st), "fstat");
  if ((uint64_t)st.st_size < mapBytes(h.size))
    RMACC_THROW(rmaccSystemError, "import: allocation %016llx has %lld bytes, handle says %llu",
                (unsigned long long)h.id, (long long)st.st_size, (unsigned long long)h.size);
}

// Closes an fd on every path out of a scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

ShmSegment::ShmSegment(size_t bytes) : size_(bytes), id_(nextId()) {
  fd_ = memfd_create(memfdName(id_).c_str(), MFD_CLOEXEC);
  RMACC_SYSCHECK(fd_, "memfd_create");
  if (ftruncate(fd_, (off_t)mapBytes(bytes)) == -1 || !(ptr_ = mapFd(fd_, bytes, true))) {
    int err = errno;
    close(fd_);
    RMACC_THROW(rmaccSystemError, "cannot allocate %zu bytes of shared memory: %s", bytes,
                strerror(err));
  }
  INFO(kSubsysAlloc, "host alloc %zu bytes at %p (memfd %d, id %016llx)", bytes, ptr_, fd_,
       (unsigned long long)id_);
}

ShmSegment::~ShmSegment() {
  munmap(ptr_, mapBytes(size_));
  close(fd_);
  INFO(kSubsysAlloc, "host free %p (id %016llx)", ptr_, (unsigned long long)id_);
}

ShmHandle ShmSegment::handle() const {
  return ShmHandle{ShmHandle::kMagic, (int32_t)getpid(), fd_, size_, id_};
}

ShmMapping::ShmMapping(const ShmHandle& h) : size_(h.size) {
  RMACC_ARG_CHECK(h.magic == ShmHandle::kMagic, "import: not a host-backend handle");
  std::string how;
  FdCloser fd{fetchPeerFd(h.pid, h.fd, &how)};
  if (fd.fd < 0)
    RMACC_THROW(rmaccSystemError,
                "cannot import allocation %016llx from pid %d (fd %d): %s. Both processes must "
                "run as the same user and be allowed to inspect each other (ptrace access)",
                (unsigned long long)h.id, h.pid, h.fd, how.c_str());
  checkFetchedFd(fd.fd, h);
  ptr_ = mapFd(fd.fd, h.size, false);
  if (!ptr_)
    RMACC_THROW(rmaccSystemError, "import: mmap of %llu bytes failed: %s",
                (unsigned long long)h.size, strerror(errno));
  INFO(kSubsysAlloc, "host import id %016llx from pid %d (%s): %llu bytes at %p",
       (unsigned long long)h.id, h.pid, how.c_str(), (unsigned long long)h.size, ptr_);
}

ShmMapping::~ShmMapping() { munmap(ptr_, mapBytes(size_)); }

}  // namespace rmacc::os
