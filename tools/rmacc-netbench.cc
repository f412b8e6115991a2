// rmacc-netbench: raw numbers of the network layer on one machine (fabtests' fi_rma_bw idea).
// Forks two ranks that talk over libfabric (loopback) and prints, per size:
//   raw:   fi_writedata ping-pong latency and streaming bandwidth (both sides poll hot),
//   proxy: put-with-signal through the proxy thread and the host backend, the way the
//          executor drives it (ping-pong of signals, and a stream of puts).
// Usage: rmacc-netbench [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window]
// Sizes take k/M/G suffixes. FI_TCP_IFACE=lo is set unless the caller set it.
#include <getopt.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/config.h"
#include "core/error.h"
#include "net/fabric.h"
#include "net/proxy.h"

namespace rmacc {
namespace {

struct Options {
  std::string provider = "tcp";
  size_t minBytes = 8, maxBytes = 64 << 20;
  int factor = 4, iters = 50, window = 16;
};

// Shared between the two forked ranks: addresses, regions and a barrier.
struct Shared {
  std::atomic<int> count, gen;
  char addr[2][256];
  uint32_t addrLen[2];
  RemoteRegion region[2];
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `idle` runs while waiting (raw mode: CQ progress, so the peer's writes complete).
void barrier(Shared* s, const std::function<void()>& idle = {}) {
  int gen = s->gen.load();
  if (s->count.fetch_add(1) + 1 == 2) {
    s->count.store(0);
    s->gen.fetch_add(1);
    return;
  }
  while (s->gen.load() == gen) {
    if (idle) idle();
    else usleep(50);
  }
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> v;
  for (size_t b = o.minBytes; b <= o.maxBytes; b *= o.factor) v.push_back(b);
  return v;
}

// ---------------------------------------------------------------- raw fi_writedata

struct Raw {
  Fabric& f;
  int peer;
  RemoteRegion dst;
  void* desc;
  uint64_t remoteData = 0, writesDone = 0;
  // Op contexts: the provider may own each one until its completion (FI_CONTEXT mode).
  struct Ctx {
    alignas(16) char bytes[kOpContextBytes];
  };
  std::vector<Ctx> ctxs;
  std::vector<Ctx*> freeCtxs;

  Raw(Fabric& fab, int p, RemoteRegion d, void* ds, int window)
      : f(fab), peer(p), dst(d), desc(ds), ctxs(window + 1) {
    for (auto& c : ctxs) freeCtxs.push_back(&c);
  }
  void progress() {
    Completion c[32];
    size_t n = f.poll(0, c, 32);
    for (size_t i = 0; i < n; ++i) {
      if (c[i].kind == Completion::kRemoteData) {
        ++remoteData;
      } else {
        ++writesDone;
        freeCtxs.push_back((Ctx*)c[i].context);
      }
    }
  }
  void write(const void* src, size_t bytes) {
    while (freeCtxs.empty()) progress();
    Ctx* c = freeCtxs.back();
    while (!f.write(0, peer, src, bytes, desc, dst.addrOf(0), dst.key, 0, c)) progress();
    freeCtxs.pop_back();
  }
  void settle(uint64_t written) {  // every own write completed; counters start over
    while (writesDone < written) progress();
    remoteData = writesDone = 0;
  }
};

void rawBench(int rank, const Options& o, Fabric& f, Shared* sh, std::vector<char>& buf,
              MemoryRegion& mr) {
  Raw r(f, 1 - rank, sh->region[1 - rank], mr.desc(), o.window);
  auto idle = [&] { r.progress(); };
  if (rank == 0) printf("# raw fi_writedata (%s)\n# %12s %12s %12s\n", f.providerName().c_str(),
                        "bytes", "pingpong_us", "bw_GB/s");
  for (size_t bytes : sizes(o)) {
    int iters = bytes >= (8 << 20) ? 10 : o.iters;
    barrier(sh, idle);
    // Ping-pong: rank 0 writes, rank 1 answers once the remote completion appeared.
    double t0 = now();
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) r.write(buf.data(), bytes);
      while (r.remoteData < (uint64_t)i + 1) r.progress();
      if (rank == 1) r.write(buf.data(), bytes);
    }
    double lat = (now() - t0) / iters / 2;
    r.settle(iters);
    barrier(sh, idle);
    // Streaming: rank 0 keeps `window` writes in flight; rank 1 counts arrivals, then sends
    // one zero-byte note back.
    t0 = now();
    if (rank == 0) {
      for (int i = 0; i < iters; ++i) r.write(buf.data(), bytes);
      while (r.remoteData < 1) r.progress();
    } else {
      while (r.remoteData < (uint64_t)iters) r.progress();
      r.write(buf.data(), 0);
    }
    double bw = (double)bytes * iters / (now() - t0) / 1e9;
    r.settle(rank == 0 ? iters : 1);
    if (rank == 0) printf("  %12zu %12.1f %12.2f\n", bytes, lat * 1e6, bw);
  }
  barrier(sh, idle);
}

// ---------------------------------------------------------------- through the proxy

void proxyBench(int rank, const Options& o, Fabric& f, Shared* sh, std::vector<char>& buf) {
  auto backend = createHostBackend(60);
  SignalLayout layout{2};
  auto sigMem = backend->allocateHostVisible(layout.bytes());
  auto* sig = (volatile uint64_t*)sigMem->ptr();
  memset((void*)sig, 0, layout.bytes());
  ProxyOptions po;
  po.timeoutS = 60;
  auto proxy = startProxy(f, *backend, rank, 2, sig, po);
  auto stream = backend->createStream();
  ProxyQueue* q = proxy->createQueue();
  volatile uint64_t* mine = &sig[layout.index(0, 0, 1 - rank)];
  uint64_t expected = 0, lastSeq = 0;
  auto put = [&](size_t bytes) {
    ProxyPut p;
    p.peer = 1 - rank, p.src = buf.data(), p.bytes = bytes, p.dst = sh->region[1 - rank];
    lastSeq = q->post(p);
    stream->writeValue(q->ready(), lastSeq);
  };
  auto wait = [&](volatile uint64_t* a, uint64_t v) {
    WaitDesc w{a, v};
    stream->waitValues(&w, 1);
    stream->synchronize();
  };
  // The same ping-pong with the host thread in the stream's place: ready stored directly,
  // the signal polled. The difference to the stream column is the backend's hand-offs.
  auto putDirect = [&](size_t bytes) {
    ProxyPut p;
    p.peer = 1 - rank, p.src = buf.data(), p.bytes = bytes, p.dst = sh->region[1 - rank];
    lastSeq = q->post(p);
    __atomic_store_n(const_cast<uint64_t*>(q->ready()), lastSeq, __ATOMIC_RELEASE);
  };
  auto spin = [&](volatile uint64_t* a, uint64_t v) {
    while (__atomic_load_n(const_cast<uint64_t*>(a), __ATOMIC_ACQUIRE) < v) {
    }
  };
  if (rank == 0)
    printf("# proxy put+signal (host backend streams; direct = host thread, no stream)\n"
           "# %12s %12s %12s %12s\n", "bytes", "pingpong_us", "direct_us", "bw_GB/s");
  for (size_t bytes : sizes(o)) {
    int iters = bytes >= (8 << 20) ? 10 : o.iters;
    barrier(sh);
    double t0 = now();
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) put(bytes);
      wait(mine, ++expected);
      if (rank == 1) put(bytes);
    }
    double lat = (now() - t0) / iters / 2;
    wait(q->done(), lastSeq);
    barrier(sh);
    t0 = now();
    for (int i = 0; i < iters; ++i) {
      if (rank == 0) putDirect(bytes);
      spin(mine, ++expected);
      if (rank == 1) putDirect(bytes);
    }
    double direct = (now() - t0) / iters / 2;
    spin(q->done(), lastSeq);
    barrier(sh);
    t0 = now();
    if (rank == 0) {
      for (int i = 0; i < iters; ++i) put(bytes);
      wait(mine, ++expected);  // rank 1's note that everything landed
    } else {
      expected += iters;
      wait(mine, expected);
      put(0);
    }
    double bw = (double)bytes * iters / (now() - t0) / 1e9;
    wait(q->done(), lastSeq);  // our sources are free again
    if (rank == 0) printf("  %12zu %12.1f %12.1f %12.2f\n", bytes, lat * 1e6, direct * 1e6, bw);
  }
  stream->synchronize();
  barrier(sh);  // the peer may still be writing until here
}

int runRank(int rank, const Options& o, Shared* sh) {
  try {
    Fabric f(o.provider);
    std::vector<char> buf(o.maxBytes + 64, (char)rank);
    auto mr = f.registerMemory(buf.data(), buf.size());
    std::vector<char> a = f.address();
    memcpy(sh->addr[rank], a.data(), a.size());
    sh->addrLen[rank] = (uint32_t)a.size();
    sh->region[rank] = mr->remote();
    barrier(sh);
    f.insertPeers({std::vector<char>(sh->addr[0], sh->addr[0] + sh->addrLen[0]),
                   std::vector<char>(sh->addr[1], sh->addr[1] + sh->addrLen[1])});
    rawBench(rank, o, f, sh, buf, *mr);
    proxyBench(rank, o, f, sh, buf);
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}

Options parse(int argc, char** argv) {
  Options o;
  int c;
  auto bytes = [](const char* t) {
    auto v = parseBytes(t);
    if (!v) fprintf(stderr, "bad size '%s'\n", t), exit(2);
    return *v;
  };
  while ((c = getopt(argc, argv, "p:b:e:f:n:w:h")) != -1) {
    switch (c) {
      case 'p': o.provider = optarg; break;
      case 'b': o.minBytes = bytes(optarg); break;
      case 'e': o.maxBytes = bytes(optarg); break;
      case 'f': o.factor = atoi(optarg); break;
      case 'n': o.iters = atoi(optarg); break;
      case 'w': o.window = atoi(optarg); break;
      default:
        printf("usage: %s [-p provider] [-b min] [-e max] [-f factor] [-n iters] [-w window]\n",
               argv[0]);
        exit(c == 'h' ? 0 : 2);
    }
  }
  if (o.minBytes == 0 || o.factor < 2 || o.iters < 1 || o.window < 1)
    fprintf(stderr, "need -b > 0, -f >= 2, -n >= 1, -w >= 1\n"), exit(2);
  return o;
}

}  // namespace
}  // namespace rmacc

int main(int argc, char** argv) {
  using namespace rmacc;
  Options o = parse(argc, argv);
  setenv("FI_TCP_IFACE", "lo", 0);
  auto* sh = (Shared*)mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return perror("mmap"), 1;
  new (sh) Shared();
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(runRank(1, o, sh));
  int rc = runRank(0, o, sh);
  int st = 0;
  waitpid(child, &st, 0);
  return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}
