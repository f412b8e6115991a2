// alltoallv: per-destination counts from counts.h (uniform, random or MoE-like zipf); the size
// is a rank's total send bytes. Blocks sit at gapped, aligned displacements on both sides, so
// the check sees any write outside a block.
//
// --counts says where the counts live (options.h): the host call, the framework's way with
// device counts (synchronise, copy the splits down, call), or rmaccAlltoAllvDynamic reading
// them on the stream. The dynamic call packs received blocks in source order, so its layout's
// receive side has no gaps between blocks (the tail past them is still checked as a gap), and
// the counts and displacements it writes back are checked too.
//
// --counts padded: rmaccAlltoAllvPadded, with one slot per peer as large as the largest block
// of the size's matrix (the capacity, the same on every rank). Its layout is the slots, and the
// check covers every byte of them (the whole slot moves); the pattern's counts go to the device
// and the recvcounts the call delivers are checked against them. The table's size is then the
// slots' bytes (what moves); the line before each row gives the capacity and the occupancy, and
// rows follow the sweep's sizes, so the n-th row's time compares with the packed calls' n-th.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "collective.h"
#include "tests.h"

namespace rmacc::perf {
namespace {

// The four count arrays in backend memory (device memory on CUDA).
class DeviceCounts {
 public:
  DeviceCounts(Context& ctx, int n) : ctx_(ctx), bytes_(sizeof(size_t) * n) {
    for (void*& p : arrays_) p = ctx.device->alloc(bytes_);
  }
  ~DeviceCounts() {
    for (void* p : arrays_) ctx_.device->release(p);
  }
  DeviceCounts(const DeviceCounts&) = delete;
  DeviceCounts& operator=(const DeviceCounts&) = delete;

  size_t* sendCounts() const { return static_cast<size_t*>(arrays_[0]); }
  size_t* sdispls() const { return static_cast<size_t*>(arrays_[1]); }
  size_t* recvCounts() const { return static_cast<size_t*>(arrays_[2]); }
  size_t* rdispls() const { return static_cast<size_t*>(arrays_[3]); }

  void upload(const Layout& l) {
    ctx_.device->copyToDevice(sendCounts(), l.sendCounts.data(), bytes_);
    ctx_.device->copyToDevice(sdispls(), l.sdispls.data(), bytes_);
  }
  std::vector<size_t> download(const size_t* array) {
    std::vector<size_t> v(bytes_ / sizeof(size_t));
    ctx_.device->copyToHost(v.data(), array, bytes_);
    return v;
  }

 private:
  Context& ctx_;
  size_t bytes_;
  void* arrays_[4] = {};
};

// What the dynamic call produces: blocks back to back in source-rank order.
void packReceiveSide(Layout* l) {
  size_t at = 0;
  for (size_t p = 0; p < l->recvCounts.size(); ++p) {
    l->rdispls[p] = at;
    at += l->recvCounts[p];
  }
}

uint64_t countDifferences(const std::vector<size_t>& got, const std::vector<size_t>& want) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

// The slots of a padded call: `capacity` elements per peer on both sides, no gaps; the real
// counts of `packed` are what the device counts say.
Layout paddedLayout(const Layout& packed, size_t capacity) {
  const size_t n = packed.sendCounts.size();
  Layout l;
  l.sendCounts.assign(n, capacity);
  l.recvCounts.assign(n, capacity);
  for (size_t p = 0; p < n; ++p) {
    l.sdispls.push_back(p * capacity);
    l.rdispls.push_back(p * capacity);
  }
  l.sendElems = l.recvElems = n * capacity;
  return l;
}

}  // namespace

int runAlltoallv(Context& ctx, const Options& opts) {
  const CountsSource source = opts.counts;
  DeviceCounts dev(ctx, ctx.nranks);
  std::vector<size_t> hostCounts(ctx.nranks);
  CollectiveTest t;
  // Padded: the pattern's layouts, in the order the sweep asks for them and then prepares them.
  std::vector<Layout> real;
  size_t prepared = 0;
  t.layout = [&](size_t bytes) {
    Layout l = alltoallvLayout(opts, ctx.nranks, ctx.rank, bytes);
    if (source == CountsSource::kDevice) packReceiveSide(&l);
    if (source != CountsSource::kPadded) return l;
    const CountMatrix m = makeCounts(opts, ctx.nranks, bytes / dataTypeSize(opts.dtype));
    const size_t capacity = std::max<size_t>(1, *std::max_element(m.counts.begin(), m.counts.end()));
    real.push_back(l);
    return paddedLayout(l, capacity);
  };
  t.prepare = [&](const Layout& l) {
    if (source != CountsSource::kPadded) return dev.upload(l);
    const Layout& r = real[prepared++];
    dev.upload(r);
    if (ctx.rank == 0) {
      size_t payload = 0;
      for (size_t c : r.sendCounts) payload += c;
      printf("# padded: capacity %zu elements per peer, rank 0's occupancy %.2f\n", l.sendCounts[0],
             (double)payload / (double)l.sendElems);
    }
  };
  t.launch = [&](const void* send, void* recv, const Layout& l) {
    switch (source) {
      case CountsSource::kHost:
        RMACC_PERF_CHECK(ctx, rmaccAlltoAllv(send, l.sendCounts.data(), l.sdispls.data(), recv, l.recvCounts.data(),
                                             l.rdispls.data(), opts.dtype, ctx.comm, ctx.stream));
        break;
      case CountsSource::kSync:
        // The splits were produced on the stream: wait for it, bring them to the host, call.
        RMACC_PERF_CHECK(ctx, rmaccStreamSynchronize(ctx.comm, ctx.stream));
        ctx.device->copyToHost(hostCounts.data(), dev.sendCounts(), sizeof(size_t) * ctx.nranks);
        RMACC_PERF_CHECK(ctx, rmaccAlltoAllv(send, hostCounts.data(), l.sdispls.data(), recv, l.recvCounts.data(),
                                             l.rdispls.data(), opts.dtype, ctx.comm, ctx.stream));
        break;
      case CountsSource::kPadded:
        RMACC_PERF_CHECK(ctx, rmaccAlltoAllvPadded(send, dev.sendCounts(), l.sendCounts[0], recv, dev.recvCounts(),
                                                   opts.dtype, ctx.comm, ctx.stream));
        break;
      case CountsSource::kDevice:
        RMACC_PERF_CHECK(ctx, rmaccAlltoAllvDynamic(send, dev.sendCounts(), dev.sdispls(), recv, l.recvElems,
                                                    dev.recvCounts(), dev.rdispls(), opts.dtype, ctx.comm,
                                                    ctx.stream));
        break;
    }
  };
  if (source == CountsSource::kDevice)
    t.checkOutputs = [&](const Layout& l) {
      return countDifferences(dev.download(dev.recvCounts()), l.recvCounts) +
             countDifferences(dev.download(dev.rdispls()), l.rdispls);
    };
  if (source == CountsSource::kPadded)
    t.checkOutputs = [&](const Layout&) {  // after the size's calls: its layout was prepared last
      return countDifferences(dev.download(dev.recvCounts()), real[prepared - 1].recvCounts);
    };
  t.description = describePattern(opts) + ", counts " + countsSourceName(source);
  return runCollective(ctx, opts, t);
}

int printCountsOnly(const Options& opts, int nranks) {
  for (size_t bytes : sweepSizes(opts)) {
    printf("# size %zu B per rank, %s pattern, seed %llu, %d ranks\n", bytes, patternName(opts.pattern),
           static_cast<unsigned long long>(opts.seed), nranks);
    printCounts(stdout, makeCounts(opts, nranks, bytes / dataTypeSize(opts.dtype)));
  }
  return 0;
}

}  // namespace rmacc::perf
