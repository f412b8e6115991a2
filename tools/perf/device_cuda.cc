// The CUDA half of device.h. Compiled only when CMake found the toolkit (RMACC_HAVE_CUDA), so a
// host-only build never needs cuda_runtime.h.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "device.h"

namespace rmacc::perf {
namespace {

void cudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "rmacc-perf: %s failed: %s\n", what, cudaGetErrorString(e));
  exit(1);
}

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}
  const char* kind() const override { return "cuda"; }
  int index() const override { return ordinal_; }
  std::string description() const override {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, ordinal_);
    char bus[32] = "";
    snprintf(bus, sizeof bus, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    return std::string(prop.name) + " " + bus;
  }

  void* alloc(size_t bytes) override {
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
  }
  void release(void* ptr) override { cudaFree(ptr); }
  void* allocHost(size_t bytes) override {
    void* p = nullptr;
    cudaCheck(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
    return p;
  }
  void releaseHost(void* ptr) override { cudaFreeHost(ptr); }
  void copyToDevice(void* dst, const void* src, size_t bytes) override {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    // From pageable memory cudaMemcpy may return before the DMA into `dst` is done (CUDA's
    // "API synchronization behavior"), and rmacc's non-blocking streams are not ordered after
    // the legacy stream that carries it: without this, a call could read the old contents
    // (seen: a stale value in rmacc-perf's own all-gather, one run in two on 2 x H200).
    cudaCheck(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  void copyToHost(void* dst, const void* src, size_t bytes) override {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }

  rmaccStream_t createStream(rmaccComm_t) override {
    // Non-blocking: the legacy default stream must not serialise rmacc's work with ours.
    cudaStream_t s = nullptr;
    cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }
  void destroyStream(rmaccComm_t, rmaccStream_t s) override { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }

  // Global mode, as torch.cuda.graph captures by default: the strictest for the library's
  // other threads.
  void* captureGraph(rmaccStream_t s, const std::function<void()>& enqueue) override {
    auto stream = static_cast<cudaStream_t>(s);
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    enqueue();
    cudaGraph_t graph = nullptr;
    cudaCheck(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    cudaCheck(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    cudaCheck(cudaGraphDestroy(graph), "cudaGraphDestroy");
    return exec;
  }
  void launchGraph(void* g, rmaccStream_t s) override {
    cudaCheck(cudaGraphLaunch(static_cast<cudaGraphExec_t>(g), static_cast<cudaStream_t>(s)), "cudaGraphLaunch");
  }
  void destroyGraph(void* g) override { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)); }

 private:
  int ordinal_;
};

}  // namespace

std::unique_ptr<Device> makeCudaDevice(int localRank) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return nullptr;
  }
  int ordinal = localRank % count;
  cudaCheck(cudaSetDevice(ordinal), "cudaSetDevice");
  return std::make_unique<CudaDevice>(ordinal);
}

}  // namespace rmacc::perf
