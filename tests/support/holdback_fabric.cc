#include "support/holdback_fabric.h"

#include <algorithm>

#include "net/signals.h"

namespace rmacc::test {

namespace {
// Completions are held until this many wait or the oldest waited this long.
constexpr size_t kHoldCount = 16;
constexpr auto kHoldTime = std::chrono::milliseconds(2);
}  // namespace

bool HoldBackFabric::write(int ep, int peer, const void* src, size_t bytes, void* localDesc,
                           uint64_t remoteAddr, uint64_t key, uint32_t data, void* context) {
  return track(peer, data, context, [&] {
    return Fabric::write(ep, peer, src, bytes, localDesc, remoteAddr, key, data, context);
  });
}

bool HoldBackFabric::writev(int ep, int peer, const FabricIov* iov, size_t count,
                            uint64_t remoteAddr, uint64_t key, uint32_t data, void* context) {
  if (!track(peer, data, context, [&] {
        return Fabric::writev(ep, peer, iov, count, remoteAddr, key, data, context);
      }))
    return false;
  if (count > 1) ++gathers_;
  return true;
}

bool HoldBackFabric::track(int peer, uint32_t data, void* context,
                           const std::function<bool()>& issue) {
  ImmData d = ImmData::decode(data);
  const bool signalKind = d.kind == ImmKind::kSignal;
  const Key k{peer, d.ctx, d.sigIdx};
  if (signalKind && d.chunks > 0) {
    auto it = pieces_.find(k);
    if (it != pieces_.end() && it->second.issued != it->second.reported) ++violations_;
  }
  if (!issue()) return false;
  if (!signalKind) return true;
  if (d.chunks == 0) {
    ++pieces_[k].issued;
    pieceOf_[context] = k;
  } else if (d.chunks > 1) {
    ++splitFinals_;
  }
  return true;
}

size_t HoldBackFabric::poll(int ep, Completion* out, size_t max) {
  size_t n = 0;
  Completion got[32];
  size_t m = Fabric::poll(ep, got, std::min<size_t>(max, 32));
  for (size_t i = 0; i < m; ++i) {
    if (got[i].kind == Completion::kRemoteData) {
      out[n++] = got[i];
      continue;
    }
    if (held_.empty()) oldest_ = std::chrono::steady_clock::now();
    held_.push_back(got[i]);
  }
  const Release how = release_.load();
  if (how != Release::kAllNewestFirst && handedOne_) {
    handedOne_ = false;  // a round without: the caller's loop ends and its issue step runs
    return n;
  }
  if (held_.empty() || n == max ||
      (held_.size() < kHoldCount && std::chrono::steady_clock::now() - oldest_ < kHoldTime))
    return n;
  if (how == Release::kAllNewestFirst) release(out, max, &n);
  else releaseOne(out, &n, how == Release::kOneNewestFirst);
  return n;
}

void HoldBackFabric::reported(const Completion& c) {
  auto it = pieceOf_.find(c.context);
  if (it == pieceOf_.end()) return;
  ++pieces_[it->second].reported;
  pieceOf_.erase(it);
}

// Hands back one held completion (the newest, or one at random); the rest are due at once, one
// a round.
void HoldBackFabric::releaseOne(Completion* out, size_t* n, bool newest) {
  const size_t at = newest ? held_.size() - 1 : std::uniform_int_distribution<size_t>(0, held_.size() - 1)(rng_);
  if (held_.size() > 1) ++reordered_, ++singles_;
  Completion c = held_[at];
  held_.erase(held_.begin() + (std::ptrdiff_t)at);
  reported(c);
  out[(*n)++] = c;
  handedOne_ = true;
  if (!held_.empty()) oldest_ = std::chrono::steady_clock::now() - kHoldTime;
}

// Hands back held completions newest first, as far as `out` has room.
void HoldBackFabric::release(Completion* out, size_t room, size_t* n) {
  if (held_.size() > 1 && *n < room) ++reordered_;
  while (!held_.empty() && *n < room) {
    Completion c = held_.back();
    held_.pop_back();
    reported(c);
    out[(*n)++] = c;
  }
  if (!held_.empty()) oldest_ = std::chrono::steady_clock::now() - kHoldTime;  // rest: next poll
}

}  // namespace rmacc::test
