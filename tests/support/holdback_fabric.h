// A test double around a real libfabric endpoint that behaves like an unordered network's
// completion queue: local write completions are held back and handed to the caller later, out
// of order (incoming completion data passes at once). The bytes still travel over the real
// provider; only what the proxy learns, and when, changes. How held completions come back
// (Release): all at once, newest first; or one per proxy round (the poll after one that handed
// a completion back hands none, so the proxy's issue step runs between any two), newest first
// or in a random order. Only the one-a-round orders let the proxy see a put with all but one
// of its pieces reported: a proxy that issues the signalling piece one completion early, or
// before an earlier part of a chunked put is reported, is caught only by them.
//
// It also checks the rule the proxy must keep on an unordered endpoint (issue 17 §8): a write
// that signals (completion data with a piece count) may be issued only once every earlier
// non-signalling write to the same (peer, context, signal) was reported complete to the
// caller. Every write that breaks it is counted in violations().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>

#include "net/fabric.h"

namespace rmacc::test {

class HoldBackFabric final : public Fabric {
 public:
  enum class Release { kAllNewestFirst, kOneNewestFirst, kOneRandom };
  HoldBackFabric(const std::string& provider, const FabricOptions& options)
      : Fabric(provider, options) {}
  // May be changed while the proxy polls (it takes effect at the next poll).
  void setRelease(Release r) { release_.store(r); }

  // One endpoint (the proxy thread's): its state below is not per endpoint.
  bool write(int ep, int peer, const void* src, size_t bytes, void* localDesc,
             uint64_t remoteAddr, uint64_t key, uint32_t data, void* context) override;
  bool writev(int ep, int peer, const FabricIov* iov, size_t count, uint64_t remoteAddr,
              uint64_t key, uint32_t data, void* context) override;
  size_t poll(int ep, Completion* out, size_t max) override;
  bool readyToBlock(int ep) override { return held_.empty() && Fabric::readyToBlock(ep); }

  // Read by the test thread once the proxy is quiet.
  uint64_t violations() const { return violations_.load(); }
  uint64_t splitFinals() const { return splitFinals_.load(); }   // finals with earlier pieces
  uint64_t reordered() const { return reordered_.load(); }       // completions delivered late
                                                                 // and out of arrival order
  uint64_t gathers() const { return gathers_.load(); }           // writes of several sources
  uint64_t singles() const { return singles_.load(); }  // completions handed back one a round
                                                        // while others stayed held

 private:
  using Key = std::tuple<int, int, int>;  // peer, ctx, sigIdx
  struct Count {
    uint64_t issued = 0, reported = 0;  // non-signalling pieces
  };
  // Checks the rule for one write and, when `issue` posted it, counts it.
  bool track(int peer, uint32_t data, void* context, const std::function<bool()>& issue);
  void release(Completion* out, size_t room, size_t* n);
  void releaseOne(Completion* out, size_t* n, bool newest);
  void reported(const Completion& c);

  // Proxy thread only (write and poll are its data path).
  std::map<Key, Count> pieces_;
  std::unordered_map<void*, Key> pieceOf_;  // context of a non-signalling piece in flight
  std::deque<Completion> held_;
  std::chrono::steady_clock::time_point oldest_;
  bool handedOne_ = false;  // the last poll handed a completion back (one-a-round orders)
  std::mt19937 rng_{12345};
  std::atomic<Release> release_{Release::kAllNewestFirst};
  std::atomic<uint64_t> violations_{0}, splitFinals_{0}, reordered_{0}, gathers_{0}, singles_{0};
};

}  // namespace rmacc::test
