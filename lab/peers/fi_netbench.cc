// fi-netbench: what libfabric alone gives on this machine, the floor under rmacc's network path
// (fabtests' fi_rma_bw idea). Two forked ranks on one RDM endpoint each, the endpoint set up as
// rmacc's is (FI_RMA with remote CQ data, FI_CONTEXT, manual progress), write to each other
// with fi_writedata and print, per size, the ping-pong latency (half a round trip: a rank
// answers once the remote completion of the other's write appeared) and the streaming
// bandwidth (`-w` writes in flight). Both ranks poll their completion queue hot. Only
// libfabric is used, not rmacc: netbench_rmacc.cc is the same measurement through the library.
// Usage: fi-netbench [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window]
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "netbench_common.h"

namespace {

using netbench::Options;

// What one rank publishes for the other: its endpoint's address and its buffer's registration.
struct Peer {
  char addr[256];
  size_t addrLen;
  uint64_t base, key;
};

struct Shared {
  netbench::Barrier barrier;
  Peer peer[2];
};

void check(int rc, const char* call) {
  if (rc) throw std::runtime_error(std::string(call) + ": " + fi_strerror(-rc));
}

// One rank's endpoint: the fabric, its domain, one RDM endpoint with its CQ and AV, one
// registered buffer. Writes take a context from a pool of window + 1 (FI_CONTEXT: the provider
// owns it until its completion).
class Endpoint {
 public:
  Endpoint(const Options& o, size_t bufBytes) : buf_(bufBytes, 0), ctxs_(o.window + 1) {
    open(o.provider);
    for (auto& c : ctxs_) free_.push_back(&c);
  }
  ~Endpoint() {
    for (fid* f : {mr_ ? &mr_->fid : nullptr, ep_ ? &ep_->fid : nullptr,
                   av_ ? &av_->fid : nullptr, cq_ ? &cq_->fid : nullptr,
                   domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr})
      if (f) fi_close(f);
    if (info_) fi_freeinfo(info_);
  }
  const char* provider() const { return info_->fabric_attr->prov_name; }

  Peer self() {
    Peer p{};
    p.addrLen = sizeof(p.addr);
    check(fi_getname(&ep_->fid, p.addr, &p.addrLen), "fi_getname");
    const bool virtualAddresses = info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    p.base = virtualAddresses ? (uint64_t)(uintptr_t)buf_.data() : 0;  // else offsets
    p.key = fi_mr_key(mr_);
    return p;
  }
  void connect(const Peer& p) {
    if (fi_av_insert(av_, p.addr, 1, &peerAddr_, 0, nullptr) != 1)
      throw std::runtime_error("fi_av_insert failed");
    peer_ = p;
  }

  // Posts one write with remote CQ data into the peer's buffer, driving the CQ until the
  // provider takes it (-FI_EAGAIN: queues full, or tcp's rxm still connecting).
  void write(size_t bytes) {
    while (free_.empty()) progress();
    fi_context2* c = free_.back();
    for (;;) {
      ssize_t rc = fi_writedata(ep_, buf_.data(), bytes, fi_mr_desc(mr_), 0, peerAddr_,
                                peer_.base, peer_.key, c);
      if (rc == 0) break;
      if (rc != -FI_EAGAIN) check((int)rc, "fi_writedata");
      progress();
    }
    free_.pop_back();
  }
  void progress() {
    fi_cq_data_entry e[32];
    ssize_t n = fi_cq_read(cq_, e, 32);
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      throw std::runtime_error(std::string("completion error: ") + fi_strerror(err.err));
    }
    if (n < 0) check((int)n, "fi_cq_read");
    for (ssize_t i = 0; i < n; ++i) {
      if (e[i].flags & FI_REMOTE_CQ_DATA) {
        ++arrived;
      } else {
        ++completed;
        free_.push_back((fi_context2*)e[i].op_context);
      }
    }
  }
  // Waits until `written` own writes completed, then counts from zero again.
  void settle(uint64_t written) {
    while (completed < written) progress();
    arrived = completed = 0;
  }

  uint64_t arrived = 0;    // the peer's writes that landed here
  uint64_t completed = 0;  // own writes done

 private:
  void open(const std::string& provider) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
    hints->mode = FI_CONTEXT;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->cq_data_size = 4;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
    if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
    fi_info* list = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &list);
    fi_freeinfo(hints);
    check(rc, "fi_getinfo");
    info_ = fi_dupinfo(onInterface(list));
    fi_freeinfo(list);
    check(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    fi_cq_attr cqAttr{};
    cqAttr.format = FI_CQ_FORMAT_DATA;
    check(fi_cq_open(domain_, &cqAttr, &cq_, nullptr), "fi_cq_open");
    fi_av_attr avAttr{};
    avAttr.type = FI_AV_TABLE;
    check(fi_av_open(domain_, &avAttr, &av_, nullptr), "fi_av_open");
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_enable(ep_), "fi_enable");
    check(fi_mr_reg(domain_, buf_.data(), buf_.size(), FI_REMOTE_WRITE | FI_WRITE, 0, 0, 0, &mr_,
                    nullptr), "fi_mr_reg");
    if (info_->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      check(fi_mr_bind(mr_, &ep_->fid, 0), "fi_mr_bind");
      check(fi_mr_enable(mr_), "fi_mr_enable");
    }
  }
  // The candidate on FI_TCP_IFACE (runPair sets lo) when there is one, else the first.
  static fi_info* onInterface(fi_info* list) {
    const char* iface = getenv("FI_TCP_IFACE");
    for (fi_info* i = list; i && iface; i = i->next)
      if (i->domain_attr->name && strcmp(i->domain_attr->name, iface) == 0) return i;
    return list;
  }

  std::vector<char> buf_;
  std::vector<fi_context2> ctxs_;
  std::vector<fi_context2*> free_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  fi_addr_t peerAddr_ = FI_ADDR_NOTAVAIL;
  Peer peer_{};
};

void bench(int rank, const Options& o, Endpoint& ep, Shared* sh) {
  auto idle = [&] { ep.progress(); };
  if (rank == 0)
    printf("# raw fi_writedata (%s)\n# %12s %12s %12s\n", ep.provider(), "bytes", "pingpong_us",
           "bw_GB/s");
  // One exchange off the clock: tcp's rxm connects on a peer's first write, which would
  // otherwise be the first row's.
  if (rank == 0) ep.write(8);
  while (ep.arrived < 1) ep.progress();
  if (rank == 1) ep.write(8);
  ep.settle(1);
  for (size_t bytes : netbench::sizes(o)) {
    int iters = netbench::itersAt(o, bytes);
    sh->barrier.wait(idle);
    double t0 = netbench::now();
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) ep.write(bytes);
      while (ep.arrived < (uint64_t)i + 1) ep.progress();
      if (rank == 1) ep.write(bytes);
    }
    double lat = (netbench::now() - t0) / iters / 2;
    ep.settle(iters);
    sh->barrier.wait(idle);
    // Streaming: rank 0 keeps `window` writes in flight; rank 1 counts arrivals, then sends one
    // zero-byte note back, so rank 0's clock stops when every byte landed.
    t0 = netbench::now();
    if (rank == 0) {
      for (int i = 0; i < iters; ++i) ep.write(bytes);
      while (ep.arrived < 1) ep.progress();
    } else {
      while (ep.arrived < (uint64_t)iters) ep.progress();
      ep.write(0);
    }
    double bw = (double)bytes * iters / (netbench::now() - t0) / 1e9;
    ep.settle(rank == 0 ? iters : 1);
    if (rank == 0) printf("  %12zu %12.1f %12.2f\n", bytes, lat * 1e6, bw);
  }
  sh->barrier.wait(idle);  // the peer may still be writing into our buffer until here
}

void runRank(int rank, const Options& o, Shared* sh) {
  Endpoint ep(o, std::max<size_t>(o.maxBytes, 8));  // 8: the warm-up write
  sh->peer[rank] = ep.self();
  sh->barrier.wait();
  ep.connect(sh->peer[1 - rank]);
  bench(rank, o, ep, sh);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = netbench::parse(argc, argv);
  return netbench::runPair<Shared>([&](int rank, Shared* sh) { runRank(rank, o, sh); });
}
