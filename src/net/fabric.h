// One libfabric domain with RDM endpoints for RMA, each with its completion queue and address
// vector: the transport under the proxy (MSCCL++'s Connection verbs: write with data, and
// completions). One endpoint per proxy thread; registrations belong to the domain, so a key
// is valid whichever endpoint writes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

struct fid_fabric;
struct fid_domain;
struct fid_ep;
struct fid_cq;
struct fid_av;
struct fid_mr;
struct fi_info;

namespace rmacc {

// What a peer needs to write into a registered region: key and the address base that the
// provider's mr_mode wants (the virtual address with FI_MR_VIRT_ADDR, else 0 = offsets).
struct RemoteRegion {
  uint64_t base = 0;
  uint64_t key = 0;
  uint64_t size = 0;
  uint64_t addrOf(uint64_t offset) const { return base + offset; }
};

// A registration; closed when destroyed. Destroy every MemoryRegion before its Fabric.
class MemoryRegion {
 public:
  // `domainLock` (the owning Fabric's lock) serialises the close with the data path, since the
  // domain is not opened FI_THREAD_SAFE.
  MemoryRegion(fid_mr* mr, void* ptr, size_t size, RemoteRegion remote,
               std::mutex* domainLock = nullptr);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  void* desc() const;  // local descriptor for fi_writedata (nullptr when not needed)
  const RemoteRegion& remote() const { return remote_; }
  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  fid_mr* mr_;
  void* ptr_;
  size_t size_;
  RemoteRegion remote_;
  std::mutex* domainLock_;
};

// One source of a gathering write (Fabric::writev).
struct FabricIov {
  const void* src = nullptr;
  size_t bytes = 0;
  void* desc = nullptr;  // MemoryRegion::desc() of its registration, when the provider needs one
};
// The most sources rmacc gives one gathering write, whatever the provider allows.
constexpr size_t kMaxFabricIov = 16;

// A completion the proxy reads off the CQ.
struct Completion {
  enum Kind { kWriteDone, kRemoteData } kind;
  void* context = nullptr;  // kWriteDone: the context passed to write()
  uint64_t data = 0;        // kRemoteData: the 32-bit completion data
};

// Threading: with one endpoint the domain is opened FI_THREAD_DOMAIN (FI_THREAD_SAFE is not
// required): the data path (write, poll) is meant for one thread, the proxy's. Every call that
// touches the domain still takes one internal mutex, so registerMemory and MemoryRegion
// destruction from other threads are safe; the lock is uncontended on the data path.
// With several endpoints the domain must be FI_THREAD_SAFE (one proxy thread drives each
// endpoint, side by side): each endpoint's data path takes a lock of its own, registration the
// domain's. A provider without FI_THREAD_SAFE gets one endpoint (endpoints() says).
//
// The `context` of write() must point to at least kOpContextBytes bytes that stay untouched
// until its kWriteDone (or error) completion: in FI_CONTEXT mode the provider uses them.
constexpr size_t kOpContextBytes = 64;  // >= sizeof(struct fi_context2)

// Test knobs (Gloo's maxSegmentSize idea): make the tcp provider take the paths that other
// providers need, so loopback tests cover them. Production code leaves them false.
struct FabricOptions {
  bool assumeUnorderedWrites = false;   // act as if FI_ORDER_RMA_WAW were absent
  bool forceLocalRegistration = false;  // act as if mr_mode had FI_MR_LOCAL
  // Ask for FI_HMEM first (device memory registered in place, GPU-direct), falling back to a
  // provider without it. Set by communicators on a GPU backend (RMACC_NET_GDR).
  bool wantHmem = false;
  // Processes in the job (0: not known). The first Fabric of a process sizes libfabric's
  // universe from it (net/fabric_universe.h).
  int universeSize = 0;
  // Endpoints wanted on the domain (one per proxy thread, at most kMaxFabricEndpoints).
  int endpoints = 1;
  // Several endpoints only on a provider that reports its NIC's link speed (verbs, efa: a NIC
  // that moves the data itself); else one, on an FI_THREAD_DOMAIN domain. tcp reports none and
  // moves the bytes on the CPU, under the locks of an FI_THREAD_SAFE domain, where more threads
  // only contend (docs/decisions.md#proxy-threads). The communicator's default thread count sets it.
  bool endpointsNeedLinkSpeed = false;
};
constexpr int kMaxFabricEndpoints = 16;

class Fabric {
 public:
  // Opens provider `provider` (empty: libfabric's choice) with FI_EP_RDM + FI_RMA and remote
  // CQ data of at least 4 bytes. Throws rmaccNetworkError when none fits.
  explicit Fabric(const std::string& provider, const FabricOptions& options = {});
  // Virtual data path (write, poll, readyToBlock): tests wrap the real endpoint in a double
  // that holds back and reorders completions, as an unordered network may deliver them.
  virtual ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  std::string providerName() const;
  // Endpoints opened: FabricOptions::endpoints, or 1 where the provider is not FI_THREAD_SAFE.
  // The data path below takes an endpoint index `ep` in [0, endpoints()).
  int endpoints() const { return (int)eps_.size(); }
  std::vector<char> address(int ep = 0) const;  // fi_getname, for the control plane
  // addrs[r] is the address(ep) of rank r's endpoint that endpoint `ep` writes to; afterwards
  // the endpoint's writes take ranks.
  void insertPeers(int ep, const std::vector<std::vector<char>>& addrs);
  void insertPeers(const std::vector<std::vector<char>>& addrs) { insertPeers(0, addrs); }
  // Registers [ptr, ptr+size) for local use and remote writes, honouring mr_mode. Memory of
  // CUDA device `cudaDevice` (>= 0) is registered as FI_HMEM_CUDA: only with hmem().
  std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t size, int cudaDevice = -1);
  bool needsLocalRegistration() const;  // FI_MR_LOCAL: sources of writes must be registered
  // The endpoint was opened with FI_HMEM. Whether the provider can register CUDA memory
  // (it also needs to be built with CUDA support) is known only by trying.
  bool hmem() const { return hmem_; }
  // FI_MR_HMEM: device memory sources must be registered even where host memory need not be.
  bool deviceNeedsRegistration() const { return hmemLocalReg_; }
  size_t maxMessageBytes() const;
  // True when writes from one endpoint land in the order they were posted (FI_ORDER_RMA_WAW):
  // then the last piece of a split put arriving implies the earlier pieces have landed. When
  // false, the endpoints use FI_DELIVERY_COMPLETE so that a local completion means "landed".
  bool orderedWrites() const;
  // The NIC's active link rate in bytes per second, as the provider reports it (fi_nic's
  // link_attr->speed); 0 when it reports none (tcp, sockets).
  double linkBytesPerSecond() const;
  // The write() context of the error completion that poll(ep) last threw for (nullptr when
  // the failed entry was not one of our writes), so the caller can name the peer.
  void* lastErrorContext(int ep) const { return endpoint(ep).lastErrorContext; }

  // Posts a write from endpoint `ep` of `bytes` from `src` to (peer, remoteAddr, key) carrying
  // completion data `data`. Returns false on -FI_EAGAIN (progress, then retry); throws
  // rmaccNetworkError on other errors. `context` comes back in a kWriteDone completion.
  virtual bool write(int ep, int peer, const void* src, size_t bytes, void* localDesc,
                     uint64_t remoteAddr, uint64_t key, uint32_t data, void* context);
  // As write(), from `count` sources (1 <= count <= iovLimit()) written back to back from
  // remoteAddr: one message (fi_writemsg), so one local completion and, at the peer, one
  // completion data for all of them.
  virtual bool writev(int ep, int peer, const FabricIov* iov, size_t count, uint64_t remoteAddr,
                      uint64_t key, uint32_t data, void* context);
  // Sources one writev may take: the provider's tx iov_limit (tcp;ofi_rxm: 4), at most
  // kMaxFabricIov.
  size_t iovLimit() const;
  // Posts a write of the 8 bytes at `value` to (peer, remoteAddr, key) with no completion data:
  // the NIC stores it and nothing runs at the peer (a signal counter set by its writer, as
  // NCCL's receivers write their clear-to-send into the sender's memory). The value is copied
  // before the call returns (FI_INJECT: no registration needed); `context` comes back in a
  // kWriteDone completion. Returns and throws as write(). Only where canWriteValues().
  virtual bool writeValue(int ep, int peer, const uint64_t* value, uint64_t remoteAddr,
                          uint64_t key, void* context);
  // Whether writeValue() is usable: 8 bytes can be injected. (Where writes may land out of
  // order, the caller keeps one value write per counter in flight: orderedWrites().)
  bool canWriteValues() const;
  // Reads up to `max` completions of endpoint `ep` (progressing the provider). Throws
  // rmaccNetworkError or rmaccRemoteError for an error completion, naming the peer when known.
  virtual size_t poll(int ep, Completion* out, size_t max);
  // The completion queue's wait object, for an idle proxy to block on instead of sleeping
  // blind: a file descriptor that turns readable when the provider has something to
  // progress (an incoming write, a completion), or -1 where the provider offers none.
  int waitFd(int ep) const { return endpoint(ep).waitFd; }
  // fi_trywait: true when nothing is pending and blocking on waitFd(ep) is safe now; false
  // means poll() first (the provider may have work that the fd would not signal).
  virtual bool readyToBlock(int ep);

  // Leaves the endpoints, their queues, the domain and the fabric open when this Fabric is
  // destroyed, for the rest of the process; registrations are still closed by their owners.
  // For a communicator that failed, or whose writes never completed: an endpoint may then be
  // part way through an incoming write whose peer stopped or vanished, and closing it (or the
  // peer's connection dropping while it is progressed) makes tcp;ofi_rxm cancel that write
  // with a null op context, which rxm itself dereferences (SIGSEGV inside fi_close, libfabric
  // 1.17). Nothing may progress an abandoned fabric (poll, write, readyToBlock): with manual
  // progress the provider then touches no memory of ours, and it costs one fabric's sockets
  // and provider buffers per failed communicator. Any thread; idempotent.
  void abandon() { abandoned_.store(true, std::memory_order_release); }
  bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }

 private:
  // One endpoint with its completion queue and address vector.
  struct Endpoint {
    fid_ep* ep = nullptr;
    fid_cq* cq = nullptr;
    fid_av* av = nullptr;
    std::vector<uint64_t> peerAddrs;  // fi_addr_t per rank
    void* lastErrorContext = nullptr;
    int waitFd = -1;
    std::unique_ptr<std::mutex> lock;  // its data path's, when there are several (see above)
  };
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  std::vector<Endpoint> eps_;
  uint64_t nextKey_ = 1;
  bool ordered_ = false;
  bool localReg_ = false;
  bool hmem_ = false;
  bool hmemLocalReg_ = false;
  mutable std::mutex mutex_;  // the domain's; see "Threading" above
  std::atomic<bool> abandoned_{false};

  void open(const std::string& provider, const FabricOptions& options);
  void openEndpoint(Endpoint& e);
  const Endpoint& endpoint(int ep) const;
  Endpoint& endpoint(int ep) { return const_cast<Endpoint&>(std::as_const(*this).endpoint(ep)); }
  // The lock of endpoint `ep`'s data path: the domain's while it is the only one.
  std::mutex& dataLock(int ep) const { return eps_.size() == 1 ? mutex_ : *endpoint(ep).lock; }
  void closeAll();
};

}  // namespace rmacc
