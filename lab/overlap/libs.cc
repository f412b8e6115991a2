#include "libs.h"
#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rmacc::overlap {
namespace {

void ncclCheck(const nccl::Api& api, nccl::Result r, const char* what, nccl::Comm comm) {
  if (r == nccl::kSuccess) return;
  const char* last = api.GetLastError(comm);
  fprintf(stderr, "rmacc-overlap: %s failed: %s (%s)\n", what, api.GetErrorString(r), last ? last : "");
  exit(1);
}

// Rank 0's id, through the harness's all-gather (an rmaccAlltoAll).
nccl::UniqueId idFromRank0(perf::Context& ctx, const nccl::Api& api) {
  nccl::UniqueId id{};
  if (ctx.rank == 0) ncclCheck(api, api.GetUniqueId(&id), "ncclGetUniqueId", nullptr);
  std::vector<uint8_t> all = perf::allGather(ctx, &id, sizeof id);
  memcpy(&id, all.data(), sizeof id);
  return id;
}

constexpr size_t kOffsetAlign = 512;  // PyTorch's caching allocator rounds blocks to 512 bytes

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

const char* libName(Lib lib) {
  switch (lib) {
    case Lib::kRmacc: return "rmacc";
    case Lib::kNcclKernel: return "nccl-kernel";
    case Lib::kNcclCe: return "nccl-ce";
  }
  return "?";
}

const char* kindName(BufKind kind) {
  switch (kind) {
    case BufKind::kCudaMalloc: return "cudaMalloc";
    case BufKind::kOffset: return "cudaMalloc+off";
    case BufKind::kLibAlloc: return "lib-alloc";
  }
  return "?";
}

Libs::Libs(perf::Context& ctx, const std::string& ncclLib) : ctx_(ctx) {
  std::string why;
  // Every rank must take the same decision (the inits below are collective): NCCL counts only
  // when it loaded everywhere.
  int gpus = 0;
  cudaGetDeviceCount(&gpus);
  bool ok = nccl::load(ncclLib, &api_, &why);
  if (ok && ctx.localSize > gpus) {
    ok = false;
    why = "NCCL needs one GPU per rank";
  }
  if (perf::sumOverRanks(ctx, ok ? 0 : 1) != 0) {
    ncclDesc_ = "NCCL not measured: " + (why.empty() ? std::string("not loaded on every rank") : why);
    return;
  }
  nccl::UniqueId kid = idFromRank0(ctx, api_), cid = idFromRank0(ctx, api_);
  nccl::Config kc = nccl::defaultConfig();
  ncclCheck(api_, api_.CommInitRankConfig(&kernelComm_, ctx.nranks, kid, ctx.rank, &kc), "ncclCommInitRankConfig",
            nullptr);
  ncclDesc_ = "NCCL " + api_.versionString() + " (" + api_.path + ")";
  if (!api_.hasCopyEngineAlltoAll()) {
    ncclDesc_ += ", no copy-engine path (needs 2.28)";
    return;
  }
  nccl::Config cc = nccl::defaultConfig();
  cc.CTAPolicy = nccl::kCtaPolicyZero;
  ncclCheck(api_, api_.CommInitRankConfig(&ceComm_, ctx.nranks, cid, ctx.rank, &cc), "ncclCommInitRankConfig (CE)",
            nullptr);
}

Libs::~Libs() {
  if (ceComm_) api_.CommDestroy(ceComm_);
  if (kernelComm_) api_.CommDestroy(kernelComm_);
}

bool Libs::has(Lib lib) const {
  switch (lib) {
    case Lib::kRmacc: return true;
    case Lib::kNcclKernel: return kernelComm_ != nullptr;
    case Lib::kNcclCe: return ceComm_ != nullptr;
  }
  return false;
}

A2aBuffers Libs::alloc(Lib lib, BufKind kind, size_t bytes) {
  A2aBuffers b;
  b.bytes = bytes;
  if (kind == BufKind::kCudaMalloc) {
    cudaCheck(cudaMalloc(&b.send, bytes), "cudaMalloc");
    cudaCheck(cudaMalloc(&b.recv, bytes), "cudaMalloc");
  } else if (kind == BufKind::kOffset) {
    // [1 MiB + 512 | send | 512 | recv | 1 MiB]: neither buffer starts its allocation, and
    // both share one, as blocks of a caching allocator's segment do.
    const size_t head = (1 << 20) + kOffsetAlign, stride = roundUp(bytes, kOffsetAlign) + kOffsetAlign;
    cudaCheck(cudaMalloc(&b.segment, head + 2 * stride + (1 << 20)), "cudaMalloc");
    b.send = static_cast<char*>(b.segment) + head;
    b.recv = static_cast<char*>(b.send) + stride;
  } else if (lib == Lib::kRmacc) {
    b.rmaccSend = perf::allocBuffer(ctx_, bytes, true);
    b.rmaccRecv = perf::allocBuffer(ctx_, bytes, true);
    b.send = b.rmaccSend.ptr;
    b.recv = b.rmaccRecv.ptr;
  } else {
    void** ptrs[2] = {&b.send, &b.recv};
    for (int i = 0; i < 2; ++i) {
      ncclCheck(api_, api_.MemAlloc(ptrs[i], bytes), "ncclMemAlloc", nullptr);
      nccl::Comm comm = lib == Lib::kNcclCe ? ceComm_ : kernelComm_;
      ncclCheck(api_, api_.CommWindowRegister(comm, *ptrs[i], bytes, &b.win[i], nccl::kWinCollSymmetric),
                "ncclCommWindowRegister", comm);
    }
  }
  return b;
}

void Libs::release(Lib lib, BufKind kind, A2aBuffers* b) {
  if (kind == BufKind::kCudaMalloc) {
    cudaFree(b->send);
    cudaFree(b->recv);
  } else if (kind == BufKind::kOffset) {
    cudaFree(b->segment);
  } else if (lib == Lib::kRmacc) {
    perf::freeBuffer(ctx_, &b->rmaccRecv);
    perf::freeBuffer(ctx_, &b->rmaccSend);
  } else {
    nccl::Comm comm = lib == Lib::kNcclCe ? ceComm_ : kernelComm_;
    void* ptrs[2] = {b->send, b->recv};
    for (int i = 1; i >= 0; --i) {
      ncclCheck(api_, api_.CommWindowDeregister(comm, b->win[i]), "ncclCommWindowDeregister", comm);
      ncclCheck(api_, api_.MemFree(ptrs[i]), "ncclMemFree", nullptr);
    }
  }
  *b = A2aBuffers{};
}

void Libs::call(Lib lib, const A2aBuffers& b, size_t countPerPeer, cudaStream_t stream) {
  if (lib == Lib::kRmacc) {
    RMACC_PERF_CHECK(ctx_, rmaccAlltoAll(b.send, b.recv, countPerPeer, rmaccFloat32, ctx_.comm, stream));
    return;
  }
  nccl::Comm comm = lib == Lib::kNcclCe ? ceComm_ : kernelComm_;
  ncclCheck(api_, api_.AlltoAll(b.send, b.recv, countPerPeer, nccl::kFloat32, comm, stream), "ncclAlltoAll", comm);
}

void Libs::barrier() {
  RMACC_PERF_CHECK(ctx_, rmaccBarrier(ctx_.comm, ctx_.stream));
  RMACC_PERF_CHECK(ctx_, rmaccStreamSynchronize(ctx_.comm, ctx_.stream));
}

}  // namespace rmacc::overlap
