// One libfabric RDM endpoint with RMA, its completion queue and address vector: the transport
// under the proxy (MSCCL++'s Connection verbs: write with data, and completions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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

class MemoryRegion {
 public:
  MemoryRegion(fid_mr* mr, void* ptr, size_t size, RemoteRegion remote);
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
};

// A completion the proxy reads off the CQ.
struct Completion {
  enum Kind { kWriteDone, kRemoteData } kind;
  void* context = nullptr;  // kWriteDone: the context passed to write()
  uint64_t data = 0;        // kRemoteData: the 32-bit completion data
};

class Fabric {
 public:
  // Opens provider `provider` (empty: libfabric's choice) with FI_EP_RDM + FI_RMA and remote
  // CQ data of at least 4 bytes. Throws rmaccNetworkError when none fits.
  explicit Fabric(const std::string& provider);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  std::string providerName() const;
  std::vector<char> address() const;  // fi_getname, for the control plane
  // addrs[r] is rank r's address(); afterwards write() takes ranks.
  void insertPeers(const std::vector<std::vector<char>>& addrs);
  // Registers [ptr, ptr+size) for local use and remote writes, honouring mr_mode.
  std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t size);
  bool needsLocalRegistration() const;  // FI_MR_LOCAL: sources of writes must be registered
  size_t maxMessageBytes() const;

  // Posts a write of `bytes` from `src` to (peer, remoteAddr, key) carrying completion data
  // `data`. Returns false on -FI_EAGAIN (progress, then retry); throws rmaccNetworkError on
  // other errors. `context` comes back in a kWriteDone completion.
  bool write(int peer, const void* src, size_t bytes, void* localDesc, uint64_t remoteAddr,
             uint64_t key, uint32_t data, void* context);
  // Reads up to `max` completions (progressing the provider). Throws rmaccNetworkError or
  // rmaccRemoteError for an error completion, naming the peer when known.
  size_t poll(Completion* out, size_t max);

 private:
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  std::vector<uint64_t> peerAddrs_;  // fi_addr_t per rank
  uint64_t nextKey_ = 1;
};

}  // namespace rmacc
