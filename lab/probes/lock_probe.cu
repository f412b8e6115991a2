// Which CUDA calls of one thread hold back another thread's stream calls while the device
// waits? rmacc's user-stream part of a call waits, on the device, for a flag that work enqueued
// later by the progress thread writes. If the caller's thread meanwhile makes a CUDA call that
// waits for the device and keeps the progress thread's calls out while it waits, neither thread
// moves again. This probe tries one "blocker" in the main thread while a stream waits on a flag,
// and one "releaser" in a second thread that enqueues the flag's write the way the progress
// thread would. Each pair runs in a process of its own; a watchdog ends a stuck one and says
// which calls returned. bench/results §13 records what it found.
//
// Built by lab/CMakeLists.txt (build/lab/), or by hand in lab/probes/: nvcc -O2 -arch=sm_90 -o lock_probe lock_probe.cu -lcuda
// Usage: lock_probe BLOCKER RELEASER   (lock_probe list: the names)
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      _exit(2);                                                                            \
    }                                                                                      \
  } while (0)
#define CKD(x)                                                         \
  do {                                                                 \
    CUresult r_ = (x);                                                 \
    if (r_ != CUDA_SUCCESS) {                                          \
      fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)r_); \
      _exit(2);                                                        \
    }                                                                  \
  } while (0)

__global__ void lazyKernel(int* p) { p[threadIdx.x] += 1; }  // first launched by a blocker
__global__ void loadedKernel(int* p) { p[threadIdx.x] += 2; }  // launched once at setup

static double now() {
  using namespace std::chrono;
  static const auto t0 = steady_clock::now();
  return duration<double>(steady_clock::now() - t0).count();
}

struct Probe {
  CUdeviceptr flag = 0;     // the stream waits until it is >= 1
  volatile unsigned* hostFlag = nullptr;  // the flag's host view, when it lives in host memory
  CUcontext ctx = nullptr;  // made current in the releaser's thread, as rmacc's threads do
  cudaStream_t user = nullptr;      // a non-blocking "user" stream that waits on the flag
  cudaStream_t release = nullptr;   // the releaser's stream (non-blocking, greatest priority)
  cudaStream_t other = nullptr;     // a third stream, idle
  void *devA = nullptr, *devB = nullptr, *freeMe = nullptr;
  char* pageable = nullptr;
  void* pinned = nullptr;
  cudaEvent_t ev = nullptr;
  // Releasers from another context of the same device (ctx2_*, green_*): is the lock held per
  // context? Their flag lives in portable mapped host memory, which every context addresses.
  CUcontext ctx2 = nullptr;
  CUstream stream2 = nullptr;
  CUdeviceptr a2 = 0, b2 = 0;  // memory of ctx2
  CUdeviceptr vmm = 0;         // VMM memory (as rmaccMemAlloc's), mapped by the primary context
};

static const size_t kSmall = 4096;

int main(int argc, char** argv) {
  Probe p;
  // Blockers: run in the main thread while the legacy stream and `user` both wait on the flag.
  std::map<std::string, std::function<void()>> blockers = {
      {"none", [] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); }},
      {"memcpy_d2h_pageable_legacy",
       [&] { CK(cudaMemcpy(p.pageable, p.devA, kSmall, cudaMemcpyDeviceToHost)); }},
      {"memcpy_h2d_pageable_legacy",
       [&] { CK(cudaMemcpy(p.devA, p.pageable, kSmall, cudaMemcpyHostToDevice)); }},
      {"memcpyasync_d2h_pageable_user",
       [&] {
         CK(cudaMemcpyAsync(p.pageable, p.devA, kSmall, cudaMemcpyDeviceToHost, p.user));
         CK(cudaStreamSynchronize(p.user));
       }},
      {"memcpyasync_d2h_pinned_user_sync",
       [&] {
         CK(cudaMemcpyAsync(p.pinned, p.devA, kSmall, cudaMemcpyDeviceToHost, p.user));
         CK(cudaStreamSynchronize(p.user));
       }},
      {"streamsync_user", [&] { CK(cudaStreamSynchronize(p.user)); }},
      {"streamsync_legacy", [&] { CK(cudaStreamSynchronize(0)); }},
      {"eventsync_user",
       [&] {
         CK(cudaEventRecord(p.ev, p.user));
         CK(cudaEventSynchronize(p.ev));
       }},
      {"devicesync", [&] { CK(cudaDeviceSynchronize()); }},
      {"malloc_1g",
       [&] {
         void* q;
         CK(cudaMalloc(&q, 1ull << 30));
       }},
      {"free", [&] { CK(cudaFree(p.freeMe)); }},
      {"hostalloc_64m",
       [&] {
         void* q;
         CK(cudaHostAlloc(&q, 64 << 20, cudaHostAllocDefault));
       }},
      {"memset_legacy", [&] { CK(cudaMemset(p.devA, 0, kSmall)); }},
      {"lazy_kernel_other",
       [&] {
         lazyKernel<<<1, 32, 0, p.other>>>((int*)p.devB);
         CK(cudaGetLastError());
       }},
      {"loaded_kernel_other",
       [&] {
         loadedKernel<<<1, 32, 0, p.other>>>((int*)p.devB);
         CK(cudaGetLastError());
       }},
      {"memcpyasync_d2h_pageable_legacy",  // PyTorch's .tolist() / .item() on its default stream
       [&] {
         CK(cudaMemcpyAsync(p.pageable, p.devA, kSmall, cudaMemcpyDeviceToHost, 0));
         CK(cudaStreamSynchronize(0));
       }},
      {"kernel_legacy",
       [&] {
         lazyKernel<<<1, 32>>>((int*)p.devB);
         CK(cudaGetLastError());
       }},
      {"memcpyasync_d2d_legacy",
       [&] { CK(cudaMemcpyAsync(p.devB, p.devA, kSmall, cudaMemcpyDeviceToDevice, 0)); }},
  };
  // Releasers: run in a second thread 200 ms into the blocker; each ends with the flag's write.
  auto write = [&] { CKD(cuStreamWriteValue32((CUstream)p.release, p.flag, 1, 0)); };
  std::map<std::string, std::function<void()>> releasers = {
      {"writevalue", [&] { write(); }},
      {"batchmemop",
       [&] {
         CUstreamBatchMemOpParams op;
         memset(&op, 0, sizeof op);
         op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
         op.writeValue.address = p.flag;
         op.writeValue.value = 1;
         CKD(cuStreamBatchMemOp((CUstream)p.release, 1, &op, 0));
       }},
      {"memcpyasync_d2d",
       [&] {
         CK(cudaMemcpyAsync(p.devB, p.devA, kSmall, cudaMemcpyDeviceToDevice, p.release));
         write();
       }},
      {"memcpybatch_d2d",
       [&] {
         void* dst[1] = {p.devB};
         void* src[1] = {p.devA};
         size_t sz[1] = {kSmall};
         cudaMemcpyAttributes attr;
         memset(&attr, 0, sizeof attr);
         attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
         size_t idx = 0;
         CK(cudaMemcpyBatchAsync(dst, src, sz, 1, &attr, &idx, 1, p.release));
         write();
       }},
      {"event_wait",
       [&] {
         cudaEvent_t e;
         CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
         CK(cudaEventRecord(e, p.other));
         CK(cudaStreamWaitEvent(p.release, e, 0));
         write();
       }},
      {"pointer_attrs",
       [&] {
         cudaPointerAttributes a;
         CK(cudaPointerGetAttributes(&a, p.devA));
         write();
       }},
      {"stream_create",
       [&] {
         cudaStream_t s;
         CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
         write();
       }},
      {"hostfunc",
       [&] {
         CK(cudaLaunchHostFunc(p.release, [](void*) {}, nullptr));
         write();
       }},
  };
  // A plain CPU store to a flag in mapped host memory: no CUDA call at all.
  releasers["cpu_store"] = [&] { *p.hostFlag = 1; };
  // The same through the driver API (rmacc's progress thread could make these instead).
  releasers["cu_memcpyasync"] = [&] {
    CKD(cuMemcpyAsync((CUdeviceptr)p.devB, (CUdeviceptr)p.devA, kSmall, (CUstream)p.release));
    write();
  };
  releasers["cu_memcpybatch"] = [&] {
    CUdeviceptr dst[1] = {(CUdeviceptr)p.devB}, src[1] = {(CUdeviceptr)p.devA};
    size_t sz[1] = {kSmall}, idx = 0;
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attr.srcLocHint.type = attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;  // id 0
    CKD(cuMemcpyBatchAsync(dst, src, sz, 1, &attr, &idx, 1, (CUstream)p.release));
    write();
  };
  releasers["cu_event_wait"] = [&] {
    CUevent e;
    CKD(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CKD(cuEventRecord(e, (CUstream)p.other));
    CKD(cuStreamWaitEvent((CUstream)p.release, e, 0));
    write();
  };
  releasers["cu_hostfunc"] = [&] {
    CKD(cuLaunchHostFunc((CUstream)p.release, [](void*) {}, nullptr));
    write();
  };
  releasers["cu_stream_create"] = [&] {
    CUstream s;
    CKD(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    write();
  };
  // Another (regular) context: copies of its own memory, then of the primary context's.
  auto write2 = [&] { CKD(cuStreamWriteValue32(p.stream2, p.flag, 1, 0)); };
  releasers["ctx2_memcpy_own"] = [&] {
    CKD(cuCtxSetCurrent(p.ctx2));
    CKD(cuMemcpyAsync(p.b2, p.a2, kSmall, p.stream2));
    write2();
  };
  releasers["ctx2_memcpy_primary"] = [&] {
    CKD(cuCtxSetCurrent(p.ctx2));
    CKD(cuMemcpyAsync((CUdeviceptr)p.devB, (CUdeviceptr)p.devA, kSmall, p.stream2));
    write2();
  };
  // VMM memory belongs to no context: does a second context's copy of it pass?
  releasers["ctx2_memcpy_vmm"] = [&] {
    CKD(cuCtxSetCurrent(p.ctx2));
    CKD(cuMemcpyAsync(p.vmm + kSmall, p.vmm, kSmall, p.stream2));
    write2();
  };
  releasers["ctx2_writevalue"] = [&] {
    CKD(cuCtxSetCurrent(p.ctx2));
    write2();
  };
  // A green context (a partition of the SMs): its stream copies the primary context's memory.
  releasers["green_memcpy_primary"] = [&] {
    CKD(cuCtxSetCurrent(p.ctx2));
    CKD(cuMemcpyAsync((CUdeviceptr)p.devB, (CUdeviceptr)p.devA, kSmall, p.stream2));
    write2();
  };
  if (argc < 3) {
    printf("blockers:");
    for (auto& b : blockers) printf(" %s", b.first.c_str());
    printf("\nreleasers:");
    for (auto& r : releasers) printf(" %s", r.first.c_str());
    printf("\n");
    return argc == 2 ? 0 : 1;
  }
  const std::string bname = argv[1], rname = argv[2];
  if (!blockers.count(bname) || !releasers.count(rname)) {
    fprintf(stderr, "unknown blocker or releaser\n");
    return 1;
  }

  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  CKD(cuCtxGetCurrent(&p.ctx));
  const bool other = rname.rfind("ctx2_", 0) == 0 || rname.rfind("green_", 0) == 0;
  if (rname == "cpu_store" || other) {
    void* h;
    CK(cudaHostAlloc(&h, 64, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(h, 0, 64);
    p.hostFlag = (volatile unsigned*)h;
    CK(cudaHostGetDevicePointer((void**)&p.flag, h, 0));
  } else {
    CKD(cuMemAlloc(&p.flag, 64));
    CKD(cuMemsetD8(p.flag, 0, 64));
  }
  CK(cudaStreamCreateWithFlags(&p.user, cudaStreamNonBlocking));
  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CK(cudaStreamCreateWithPriority(&p.release, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithFlags(&p.other, cudaStreamNonBlocking));
  CK(cudaMalloc(&p.devA, kSmall));
  CK(cudaMalloc(&p.devB, kSmall));
  CK(cudaMalloc(&p.freeMe, 1 << 20));
  CK(cudaMemset(p.devA, 1, kSmall));
  p.pageable = (char*)malloc(kSmall);
  CK(cudaHostAlloc(&p.pinned, kSmall, cudaHostAllocDefault));
  CK(cudaEventCreateWithFlags(&p.ev, cudaEventDisableTiming));
  loadedKernel<<<1, 32, 0, p.other>>>((int*)p.devB);
  CK(cudaDeviceSynchronize());
  if (rname.rfind("ctx2_", 0) == 0) {
    CUdevice dev;
    CKD(cuDeviceGet(&dev, 0));
    CKD(cuCtxCreate(&p.ctx2, nullptr, 0, dev));  // becomes current: allocate in it, then back
    CKD(cuMemAlloc(&p.a2, kSmall));
    CKD(cuMemAlloc(&p.b2, kSmall));
    CKD(cuStreamCreate(&p.stream2, CU_STREAM_NON_BLOCKING));
    CKD(cuCtxSetCurrent(p.ctx));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CKD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CKD(cuMemCreate(&h, gran, &prop, 0));
    CKD(cuMemAddressReserve(&p.vmm, gran, 0, 0, 0));
    CKD(cuMemMap(p.vmm, gran, 0, h, 0));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CKD(cuMemSetAccess(p.vmm, gran, &access, 1));
  } else if (rname.rfind("green_", 0) == 0) {
    CUdevice dev;
    CKD(cuDeviceGet(&dev, 0));
    CUdevResource sms, part, rest;
    CKD(cuDeviceGetDevResource(dev, &sms, CU_DEV_RESOURCE_TYPE_SM));
    unsigned groups = 1;
    CKD(cuDevSmResourceSplitByCount(&part, &groups, &sms, &rest, 0, 8));
    CUdevResourceDesc desc;
    CKD(cuDevResourceGenerateDesc(&desc, &part, 1));
    CUgreenCtx green;
    CKD(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    CKD(cuCtxFromGreenCtx(&p.ctx2, green));
    CKD(cuGreenCtxStreamCreate(&p.stream2, green, CU_STREAM_NON_BLOCKING, 0));
  }

  // Both the legacy stream and `user` wait for the flag, as a user stream waits for rmacc's
  // done flag.
  CKD(cuStreamWaitValue32((CUstream)0, p.flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  CKD(cuStreamWaitValue32((CUstream)p.user, p.flag, 1, CU_STREAM_WAIT_VALUE_GEQ));

  std::atomic<double> blockerDone{-1}, releaseDone{-1};
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    printf("%-34s %-16s STUCK blocker %s releaser %s\n", bname.c_str(), rname.c_str(),
           blockerDone >= 0 ? "returned" : "blocked", releaseDone >= 0 ? "returned" : "blocked");
    fflush(stdout);
    _exit(3);
  });
  std::thread releaser([&] {
    CKD(cuCtxSetCurrent(p.ctx));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    releasers[rname]();
    releaseDone = now();
  });
  now();
  blockers[bname]();
  blockerDone = now();
  releaser.join();
  CK(cudaDeviceSynchronize());
  printf("%-34s %-16s ok      blocker returned at %.3f s, releaser at %.3f s\n", bname.c_str(),
         rname.c_str(), blockerDone.load(), releaseDone.load());
  fflush(stdout);
  _exit(0);
}
