#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "device.h"

namespace rmacc::perf {
namespace {

[[noreturn]] void die(const char* what, rmaccResult_t r) {
  fprintf(stderr, "rmacc-perf: %s failed: %s\n", what, rmaccGetErrorString(r));
  exit(1);
}

class HostDevice : public Device {
 public:
  const char* kind() const override { return "host"; }
  int index() const override { return 0; }
  std::string description() const override { return "host"; }

  void* alloc(size_t bytes) override {
    // Page-aligned like cudaMalloc, so host runs see the same alignment as GPU runs.
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
      fprintf(stderr, "rmacc-perf: out of memory allocating %zu bytes\n", bytes);
      exit(1);
    }
    return p;
  }
  void release(void* ptr) override { free(ptr); }
  void* allocHost(size_t bytes) override { return alloc(bytes); }
  void releaseHost(void* ptr) override { free(ptr); }
  void copyToDevice(void* dst, const void* src, size_t bytes) override { memcpy(dst, src, bytes); }
  void copyToHost(void* dst, const void* src, size_t bytes) override { memcpy(dst, src, bytes); }

  rmaccStream_t createStream(rmaccComm_t comm) override {
    rmaccStream_t s = nullptr;
    if (rmaccResult_t r = rmaccStreamCreate(comm, &s); r != rmaccSuccess) die("rmaccStreamCreate", r);
    return s;
  }
  void destroyStream(rmaccComm_t comm, rmaccStream_t s) override { rmaccStreamDestroy(comm, s); }

  void* captureGraph(rmaccStream_t, const std::function<void()>&) override {
    fprintf(stderr, "rmacc-perf: --graph needs CUDA graphs (a GPU)\n");
    exit(2);
  }
  void launchGraph(void*, rmaccStream_t) override {}
  void destroyGraph(void*) override {}
};

}  // namespace

std::unique_ptr<Device> makeDevice(int localRank) {
#ifdef RMACC_PERF_CUDA
  const char* backend = getenv("RMACC_BACKEND");
  if (!backend || strcmp(backend, "host") != 0) {
    if (auto cuda = makeCudaDevice(localRank)) return cuda;
  }
#endif
  (void)localRank;
  return std::make_unique<HostDevice>();
}

}  // namespace rmacc::perf
