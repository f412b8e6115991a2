// libfabric endpoint: provider selection, memory registration, fi_writedata and CQ reading.
// Provider rules we rely on (PRIOR_ART.md §3): FI_EP_RDM + FI_RMA, remote CQ data carries the
// signal, progress is manual (the caller polls), rxm connects lazily (-FI_EAGAIN on a first
// write), and mr_mode must be honoured bit by bit as the provider returns it.
#include "net/fabric.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "net/fabric_universe.h"
#include "net/rxm_buffers.h"

namespace rmacc {

static_assert(kOpContextBytes >= sizeof(fi_context2), "op context too small for FI_CONTEXT");

namespace {

// The API version we ask for: new enough for explicit mr_mode bits and FI_MR_ENDPOINT, old
// enough for distro runtimes.
constexpr uint32_t kFiVersion = FI_VERSION(1, 10);

constexpr uint64_t kMrModeWanted =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;

std::string fiError(const char* call, int rc) {
  return strprintf("%s failed: %s (%d)", call, fi_strerror(-rc), rc);
}

#define FI_CHECK(call, name)                                               \
  do {                                                                     \
    int rc_ = (int)(call);                                                 \
    if (rc_ != 0) RMACC_THROW(rmaccNetworkError, "%s", fiError(name, rc_).c_str()); \
  } while (0)

// Errors that mean the peer (or the path to it) is gone rather than a local fault.
bool isRemoteErrno(int err) {
  switch (err) {
    case FI_ECONNRESET: case FI_ECONNREFUSED: case FI_ECONNABORTED: case FI_ENOTCONN:
    case FI_EHOSTUNREACH: case FI_ENETUNREACH: case FI_ENETDOWN: case FI_ESHUTDOWN:
    case EPIPE: case FI_ETIMEDOUT: case FI_EIO: case FI_EREMOTEIO: case FI_EADDRNOTAVAIL:
      return true;
    default:
      return false;
  }
}

fi_info* makeHints(const std::string& provider, fi_threading threading) {
  fi_info* hints = fi_allocinfo();
  if (!hints) RMACC_THROW(rmaccSystemError, "fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA | FI_MSG | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = kMrModeWanted;
  hints->domain_attr->cq_data_size = 4;  // the 32-bit ImmData; verbs and EFA give exactly 4
  // One endpoint: only the proxy thread drives the data path (see fabric.h) and registration
  // is serialised by our own mutex, so FI_THREAD_DOMAIN is enough and providers need not lock.
  // Several: their proxy threads drive them side by side, FI_THREAD_SAFE.
  hints->domain_attr->threading = threading;
  // With resource management the provider returns -FI_EAGAIN instead of overrunning queues.
  hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  return hints;
}

// What the provider reports of its NIC's link, in bytes per second; 0: nothing (tcp).
double linkBytesOf(const fi_info* info) {
  const fid_nic* nic = info->nic;
  return nic && nic->link_attr ? (double)nic->link_attr->speed / 8 : 0;
}

// Among the candidates, the one on interface FI_TCP_IFACE (IPv4 first) when the caller pinned
// one (tests: lo), else libfabric's first choice.
fi_info* choose(fi_info* list) {
  const char* iface = getenv("FI_TCP_IFACE");
  if (iface && *iface) {
    fi_info* anyOnIface = nullptr;
    for (fi_info* i = list; i; i = i->next) {
      if (!i->domain_attr->name || strcmp(i->domain_attr->name, iface) != 0) continue;
      if (i->addr_format == FI_SOCKADDR_IN) return i;
      if (!anyOnIface) anyOnIface = i;
    }
    if (anyOnIface) return anyOnIface;
  }
  return list;
}

}  // namespace

// ---------------------------------------------------------------------------- MemoryRegion

MemoryRegion::MemoryRegion(fid_mr* mr, void* ptr, size_t size, RemoteRegion remote,
                           std::mutex* domainLock)
    : mr_(mr), ptr_(ptr), size_(size), remote_(remote), domainLock_(domainLock) {}

MemoryRegion::~MemoryRegion() {
  if (!mr_) return;
  std::unique_lock<std::mutex> lock;
  if (domainLock_) lock = std::unique_lock<std::mutex>(*domainLock_);
  int rc = fi_close(&mr_->fid);
  if (rc) WARN("fi_close(mr) failed: %s", fi_strerror(-rc));
}

void* MemoryRegion::desc() const { return mr_ ? fi_mr_desc(mr_) : nullptr; }

// ---------------------------------------------------------------------------------- Fabric

Fabric::Fabric(const std::string& provider, const FabricOptions& options) {
  try {
    open(provider, options);
  } catch (...) {
    closeAll();  // the destructor does not run for a half-built object
    throw;
  }
}

Fabric::~Fabric() {
  if (!abandoned()) {
    closeAll();
    return;
  }
  WARN("the network endpoints of a failed communicator stay open until the process exits: "
       "closing them while a peer's write may be part way in crashes the provider");
  // Kept where the process can still reach them (never freed), so that they are what they
  // are, left open on purpose, and not a leak to LeakSanitizer.
  static auto* kept = new std::vector<fid*>;
  static std::mutex keptMu;
  std::lock_guard<std::mutex> lock(keptMu);
  for (Endpoint& e : eps_)
    for (fid* f : {e.ep ? &e.ep->fid : nullptr, e.av ? &e.av->fid : nullptr,
                   e.cq ? &e.cq->fid : nullptr})
      if (f) kept->push_back(f);
  if (domain_) kept->push_back(&domain_->fid);
  if (fabric_) kept->push_back(&fabric_->fid);
  static auto* keptInfo = new std::vector<fi_info*>;
  keptInfo->push_back(info_);
  eps_.clear();  // our bookkeeping only
}

void Fabric::open(const std::string& provider, const FabricOptions& options) {
  RMACC_ARG_CHECK(options.endpoints >= 1 && options.endpoints <= kMaxFabricEndpoints,
                  "%d fabric endpoints (1 to %d)", options.endpoints, kMaxFabricEndpoints);
  if (options.universeSize > 0) sizeFabricUniverse(options.universeSize);  // before fi_getinfo
  boundRxmBuffers();  // before fi_getinfo too
  fi_info* list = nullptr;
  int rc = -FI_ENODATA;
  // The provider's candidates for one combination of FI_HMEM and threading.
  auto query = [&](bool hmem, fi_threading threading) {
    fi_info* hints = makeHints(provider, threading);
    if (hmem) {
      hints->caps |= FI_HMEM;
      hints->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list);
    fi_freeinfo(hints);
    return rc == 0 && list;
  };
  // Several endpoints need FI_THREAD_SAFE; a provider without it gets one.
  int endpoints = 1;
  auto queryThreads = [&](bool hmem) {
    endpoints = options.endpoints;
    if (endpoints > 1 && query(hmem, FI_THREAD_SAFE)) {
      const fi_info* chosen = choose(list);
      if (!options.endpointsNeedLinkSpeed || linkBytesOf(chosen) > 0) return true;
      INFO(kSubsysNet, "provider %s reports no link speed: one endpoint, one proxy thread "
           "(RMACC_PROXY_THREADS)", chosen->fabric_attr->prov_name);
      fi_freeinfo(list);
      list = nullptr;
    }
    endpoints = 1;
    return query(hmem, FI_THREAD_DOMAIN);
  };
  if (options.wantHmem) {
    hmem_ = queryThreads(true);
    if (!hmem_)
      INFO(kSubsysNet, "no provider%s%s offers FI_HMEM with FI_RMA (%s): device data is staged "
           "through pinned memory", provider.empty() ? "" : " named ", provider.c_str(),
           fi_strerror(-rc));
  }
  if (!hmem_) queryThreads(false);
  if (rc != 0 || !list)
    RMACC_THROW(rmaccNetworkError,
                "no libfabric provider%s%s offers FI_EP_RDM with FI_RMA and remote CQ data: %s",
                provider.empty() ? "" : " named ", provider.c_str(), fi_strerror(-rc));
  info_ = fi_dupinfo(choose(list));
  fi_freeinfo(list);
  if (!info_) RMACC_THROW(rmaccSystemError, "fi_dupinfo failed");
  if (info_->domain_attr->cq_data_size < 4)
    RMACC_THROW(rmaccNetworkError, "provider %s has only %zu bytes of remote CQ data",
                info_->fabric_attr->prov_name, info_->domain_attr->cq_data_size);
  // A registration bound to one endpoint (FI_MR_ENDPOINT) could not be written through the
  // others: such providers get one.
  if (endpoints > 1 && (info_->domain_attr->mr_mode & FI_MR_ENDPOINT)) endpoints = 1;
  if (endpoints < options.endpoints)
    INFO(kSubsysNet, "provider %s: one endpoint instead of %d (it needs FI_THREAD_SAFE and "
         "registrations without FI_MR_ENDPOINT): one proxy thread", info_->fabric_attr->prov_name,
         options.endpoints);

  uint64_t order = info_->tx_attr->msg_order;
  ordered_ = (order & (FI_ORDER_RMA_WAW | FI_ORDER_WAW)) != 0 && !options.assumeUnorderedWrites;
  localReg_ = (info_->domain_attr->mr_mode & FI_MR_LOCAL) || options.forceLocalRegistration;
  hmemLocalReg_ = hmem_ && (localReg_ || (info_->domain_attr->mr_mode & FI_MR_HMEM));
  // Unordered writes (e.g. EFA's SRD): make a local completion mean the data has landed, so
  // the proxy can hold the signalling piece back until its siblings are in place.
  if (!ordered_) info_->tx_attr->op_flags |= FI_DELIVERY_COMPLETE;

  FI_CHECK(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  FI_CHECK(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");

  eps_.resize(endpoints);
  for (Endpoint& e : eps_) {
    if (endpoints > 1) e.lock = std::make_unique<std::mutex>();
    openEndpoint(e);
  }

  // fi_tostr uses one static buffer: one call per argument list entry would clobber it.
  std::string threading = fi_tostr(&info_->domain_attr->threading, FI_TYPE_THREADING);
  std::string progress = fi_tostr(&info_->domain_attr->data_progress, FI_TYPE_PROGRESS);
  INFO(kSubsysNet,
       "libfabric %s: fabric %s domain %s mr_mode 0x%llx max_msg %zu cq_data %zu "
       "threading %s data progress %s ordered writes %d wait fd %d hmem %d endpoints %d",
       info_->fabric_attr->prov_name, info_->fabric_attr->name, info_->domain_attr->name,
       (unsigned long long)info_->domain_attr->mr_mode, info_->ep_attr->max_msg_size,
       info_->domain_attr->cq_data_size, threading.c_str(), progress.c_str(), (int)ordered_,
       eps_[0].waitFd, (int)hmem_, endpoints);
}

void Fabric::openEndpoint(Endpoint& e) {
  // A CQ with a file-descriptor wait object lets the idle proxy sleep in the kernel and wake
  // the moment a write arrives (a timed sleep would add its length to every hop); progress
  // stays manual. Providers without one get a plain CQ and the proxy's timed back-off.
  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_DATA;
  cqAttr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(domain_, &cqAttr, &e.cq, nullptr) == 0) {
    int fd = -1;
    if (fi_control(&e.cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0) e.waitFd = fd;
  } else {
    e.cq = nullptr;
  }
  if (!e.cq) {
    cqAttr.wait_obj = FI_WAIT_NONE;
    FI_CHECK(fi_cq_open(domain_, &cqAttr, &e.cq, nullptr), "fi_cq_open");
  }

  fi_av_attr avAttr{};
  avAttr.type = FI_AV_TABLE;
  FI_CHECK(fi_av_open(domain_, &avAttr, &e.av, nullptr), "fi_av_open");

  FI_CHECK(fi_endpoint(domain_, info_, &e.ep, nullptr), "fi_endpoint");
  FI_CHECK(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  FI_CHECK(fi_ep_bind(e.ep, &e.av->fid, 0), "fi_ep_bind(av)");
  FI_CHECK(fi_enable(e.ep), "fi_enable");
}

const Fabric::Endpoint& Fabric::endpoint(int ep) const {
  RMACC_ARG_CHECK(ep >= 0 && ep < (int)eps_.size(), "fabric endpoint %d of %zu", ep, eps_.size());
  return eps_[ep];
}

void Fabric::closeAll() {
  // Children before parents: the provider refuses to close a domain with live endpoints.
  auto close = [](fid* f, const char* what) {
    if (!f) return;
    int rc = fi_close(f);
    if (rc) WARN("fi_close(%s) failed: %s", what, fi_strerror(-rc));
  };
  for (Endpoint& e : eps_) {
    if (e.ep) close(&e.ep->fid, "ep");
    if (e.av) close(&e.av->fid, "av");
    if (e.cq) close(&e.cq->fid, "cq");
  }
  eps_.clear();
  if (domain_) close(&domain_->fid, "domain");
  if (fabric_) close(&fabric_->fid, "fabric");
  if (info_) fi_freeinfo(info_);
  domain_ = nullptr, fabric_ = nullptr;
  info_ = nullptr;
}

std::string Fabric::providerName() const { return info_->fabric_attr->prov_name; }

std::vector<char> Fabric::address(int ep) const {
  const Endpoint& e = endpoint(ep);
  std::lock_guard<std::mutex> lock(dataLock(ep));
  size_t len = 0;
  fi_getname(&e.ep->fid, nullptr, &len);  // -FI_ETOOSMALL, sets len
  std::vector<char> addr(len);
  FI_CHECK(fi_getname(&e.ep->fid, addr.data(), &len), "fi_getname");
  addr.resize(len);
  return addr;
}

void Fabric::insertPeers(int ep, const std::vector<std::vector<char>>& addrs) {
  Endpoint& e = endpoint(ep);
  std::lock_guard<std::mutex> lock(dataLock(ep));
  RMACC_ARG_CHECK(!addrs.empty(), "insertPeers: no addresses");
  size_t len = addrs[0].size();
  std::vector<char> packed;
  packed.reserve(len * addrs.size());
  for (size_t r = 0; r < addrs.size(); ++r) {
    RMACC_ARG_CHECK(addrs[r].size() == len, "insertPeers: rank %zu address has %zu bytes, rank 0's %zu",
                    r, addrs[r].size(), len);
    packed.insert(packed.end(), addrs[r].begin(), addrs[r].end());
  }
  std::vector<fi_addr_t> out(addrs.size(), FI_ADDR_NOTAVAIL);
  int n = fi_av_insert(e.av, packed.data(), addrs.size(), out.data(), 0, nullptr);
  if (n != (int)addrs.size())
    RMACC_THROW(rmaccNetworkError, "fi_av_insert inserted %d of %zu addresses", n, addrs.size());
  e.peerAddrs.assign(out.begin(), out.end());
}

std::unique_ptr<MemoryRegion> Fabric::registerMemory(void* ptr, size_t size, int cudaDevice) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t mode = info_->domain_attr->mr_mode;
  // Keys we choose must be unique per domain; with FI_MR_PROV_KEY the provider picks.
  uint64_t requested = (mode & FI_MR_PROV_KEY) ? 0 : nextKey_++;
  fid_mr* mr = nullptr;
  int rc;
  if (cudaDevice >= 0) {
    RMACC_ARG_CHECK(hmem_, "registering CUDA memory at %p on an endpoint without FI_HMEM", ptr);
    iovec iov{ptr, size};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_REMOTE_WRITE | FI_WRITE;
    attr.requested_key = requested;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = cudaDevice;
    rc = fi_mr_regattr(domain_, &attr, 0, &mr);
  } else {
    rc = fi_mr_reg(domain_, ptr, size, FI_REMOTE_WRITE | FI_WRITE, 0, requested, 0, &mr, nullptr);
  }
  if (rc) RMACC_THROW(rmaccNetworkError, "registering %zu bytes at %p%s: %s", size, ptr,
                      cudaDevice >= 0 ? " (FI_HMEM_CUDA)" : "", fi_strerror(-rc));
  // Until a MemoryRegion owns it, a failure closes the raw fid (we already hold the lock).
  const char* failed = nullptr;
  if (mode & FI_MR_ENDPOINT) {
    if ((rc = fi_mr_bind(mr, &eps_[0].ep->fid, 0)) != 0) failed = "fi_mr_bind";  // the only one
    else if ((rc = fi_mr_enable(mr)) != 0) failed = "fi_mr_enable";
  }
  RemoteRegion remote;
  remote.base = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)ptr : 0;
  remote.key = failed ? 0 : fi_mr_key(mr);
  remote.size = size;
  if (!failed && remote.key == FI_KEY_NOTAVAIL) {
    failed = "fi_mr_key (raw keys are not supported)";
    rc = -FI_ENOSYS;
  }
  if (failed) {
    fi_close(&mr->fid);
    RMACC_THROW(rmaccNetworkError, "%s", fiError(failed, rc).c_str());
  }
  return std::make_unique<MemoryRegion>(mr, ptr, size, remote, &mutex_);
}

bool Fabric::needsLocalRegistration() const { return localReg_; }

size_t Fabric::maxMessageBytes() const { return info_->ep_attr->max_msg_size; }

bool Fabric::orderedWrites() const { return ordered_; }

double Fabric::linkBytesPerSecond() const { return linkBytesOf(info_); }

bool Fabric::write(int ep, int peer, const void* src, size_t bytes, void* localDesc,
                   uint64_t remoteAddr, uint64_t key, uint32_t data, void* context) {
  Endpoint& e = endpoint(ep);
  RMACC_ARG_CHECK(peer >= 0 && (size_t)peer < e.peerAddrs.size(), "write to unknown rank %d", peer);
  RMACC_ARG_CHECK(bytes <= maxMessageBytes(), "write of %zu bytes exceeds the provider's %zu",
                  bytes, maxMessageBytes());
  std::lock_guard<std::mutex> lock(dataLock(ep));
  ssize_t rc = fi_writedata(e.ep, src, bytes, localDesc, data, e.peerAddrs[peer], remoteAddr, key,
                            context);
  if (rc == 0) return true;
  if (rc == -FI_EAGAIN) return false;
  RMACC_THROW(isRemoteErrno((int)-rc) ? rmaccRemoteError : rmaccNetworkError,
              "fi_writedata of %zu bytes to rank %d: %s", bytes, peer, fi_strerror((int)-rc));
}

// Posts one fi_writemsg (with FI_COMPLETION added to `flags`) under the endpoint's data lock:
// true when the provider took it, false on -FI_EAGAIN; throws for any other error, naming the
// write by describe().
template <class Describe>
static bool postWriteMsg(fid_ep* ep, std::mutex& lock, const fi_msg_rma& msg, uint64_t flags,
                         Describe describe) {
  ssize_t rc;
  {
    std::lock_guard<std::mutex> guard(lock);
    rc = fi_writemsg(ep, &msg, flags | FI_COMPLETION);
  }
  if (rc == 0) return true;
  if (rc == -FI_EAGAIN) return false;
  RMACC_THROW(isRemoteErrno((int)-rc) ? rmaccRemoteError : rmaccNetworkError,
              "fi_writemsg of %s: %s", describe().c_str(), fi_strerror((int)-rc));
}

size_t Fabric::iovLimit() const {
  return std::max<size_t>(1, std::min(info_->tx_attr->iov_limit, kMaxFabricIov));
}

bool Fabric::writev(int ep, int peer, const FabricIov* iov, size_t count, uint64_t remoteAddr,
                    uint64_t key, uint32_t data, void* context) {
  Endpoint& e = endpoint(ep);
  RMACC_ARG_CHECK(peer >= 0 && (size_t)peer < e.peerAddrs.size(), "write to unknown rank %d", peer);
  RMACC_ARG_CHECK(count >= 1 && count <= iovLimit(), "write of %zu sources (the provider takes %zu)",
                  count, iovLimit());
  iovec iovs[kMaxFabricIov];
  void* descs[kMaxFabricIov];
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    iovs[i] = {const_cast<void*>(iov[i].src), iov[i].bytes};
    descs[i] = iov[i].desc;
    bytes += iov[i].bytes;
  }
  RMACC_ARG_CHECK(bytes <= maxMessageBytes(), "write of %zu bytes exceeds the provider's %zu",
                  bytes, maxMessageBytes());
  fi_rma_iov rma{remoteAddr, bytes, key};
  fi_msg_rma msg{};
  msg.msg_iov = iovs;
  msg.desc = descs;
  msg.iov_count = count;
  msg.addr = e.peerAddrs[peer];
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = context;
  msg.data = data;
  // fi_writemsg takes its flags from the caller, not the endpoint's defaults: the same ones
  // fi_writedata gets (FI_DELIVERY_COMPLETE on unordered providers), plus the data.
  return postWriteMsg(e.ep, dataLock(ep), msg, info_->tx_attr->op_flags | FI_REMOTE_CQ_DATA, [&] {
    return strprintf("%zu bytes in %zu parts to rank %d", bytes, count, peer);
  });
}

bool Fabric::canWriteValues() const {
  return info_->tx_attr->inject_size >= sizeof(uint64_t);
}

bool Fabric::writeValue(int ep, int peer, const uint64_t* value, uint64_t remoteAddr,
                        uint64_t key, void* context) {
  Endpoint& e = endpoint(ep);
  RMACC_ARG_CHECK(peer >= 0 && (size_t)peer < e.peerAddrs.size(), "write to unknown rank %d", peer);
  iovec iov{const_cast<uint64_t*>(value), sizeof(uint64_t)};
  fi_rma_iov rma{remoteAddr, sizeof(uint64_t), key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = e.peerAddrs[peer];
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = context;
  return postWriteMsg(e.ep, dataLock(ep), msg, info_->tx_attr->op_flags | FI_INJECT,
                      [&] { return strprintf("a signal value to rank %d", peer); });
}

bool Fabric::readyToBlock(int ep) {
  Endpoint& e = endpoint(ep);
  if (e.waitFd < 0) return false;
  std::lock_guard<std::mutex> lock(dataLock(ep));
  fid* fids[1] = {&e.cq->fid};
  return fi_trywait(fabric_, fids, 1) == FI_SUCCESS;
}

size_t Fabric::poll(int ep, Completion* out, size_t max) {
  constexpr size_t kBatch = 32;
  fi_cq_data_entry entries[kBatch];
  if (max == 0) return 0;
  Endpoint& e = endpoint(ep);
  std::lock_guard<std::mutex> lock(dataLock(ep));
  ssize_t n = fi_cq_read(e.cq, entries, max < kBatch ? max : kBatch);
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    ssize_t rc = fi_cq_readerr(e.cq, &err, 0);
    if (rc < 0) RMACC_THROW(rmaccNetworkError, "fi_cq_readerr: %s", fi_strerror((int)-rc));
    bool incoming = (err.flags & FI_REMOTE_CQ_DATA) != 0;
    e.lastErrorContext = incoming ? nullptr : err.op_context;
    char buf[256];
    const char* text = fi_cq_strerror(e.cq, err.prov_errno, err.err_data, buf, sizeof(buf));
    // tcp reports a lost peer as FI_ECANCELED with the socket's errno (ENOTCONN) beside it.
    bool remote = isRemoteErrno(err.err) ||
                  (err.err == FI_ECANCELED && isRemoteErrno(err.prov_errno));
    RMACC_THROW(remote ? rmaccRemoteError : rmaccNetworkError,
                "%s completed with error: %s (%s, provider errno %d)",
                incoming ? "an incoming write" : "a write", fi_strerror(err.err),
                text ? text : "?", err.prov_errno);
  }
  if (n < 0) RMACC_THROW(rmaccNetworkError, "fi_cq_read: %s", fi_strerror((int)-n));
  size_t k = 0;
  for (ssize_t i = 0; i < n; ++i) {
    const fi_cq_data_entry& e = entries[i];
    if (e.flags & FI_REMOTE_CQ_DATA) {
      out[k++] = Completion{Completion::kRemoteData, nullptr, e.data & 0xffffffffull};
    } else if ((e.flags & (FI_RMA | FI_WRITE)) && e.op_context) {
      out[k++] = Completion{Completion::kWriteDone, e.op_context, 0};
    } else {
      // Not one of our writes: other flags, or no context (a provider's internal operation).
      TRACE(kSubsysNet, "ignoring a completion with flags 0x%llx, context %p",
            (unsigned long long)e.flags, e.op_context);
    }
  }
  return k;
}

}  // namespace rmacc
