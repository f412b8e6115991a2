// The target side of the landing protocol (net/landing.h), on the proxy thread: chunks whose
// copy into place finished give their slots back to the source (credits, zero-byte writes),
// and completed puts raise their signals.
#include "net/proxy_impl.h"

#include <memory>
#include <utility>

#include "core/error.h"

namespace rmacc::proxy_internal {

void ProxyImpl::attachLanding(LandingZone* zone, std::vector<RemoteRegion> peerSignals) {
  RMACC_ENFORCE(!landing_.load() && zone && peerSignals.size() == (size_t)nRanks_,
                "landing zone attached twice or without every rank's signal region");
  peerSignals_ = std::move(peerSignals);
  landing_.store(zone, std::memory_order_release);
}

// Target side: copies that finished free their slots (credits) and complete puts (signals).
bool ProxyImpl::serviceLanding() {
  LandingZone* zone = landing_.load(std::memory_order_acquire);
  if (!zone) return false;
  bool busy = zone->progress(
      [this](int src, int slot) { creditsDue_.emplace_back(src, slot); },
      [this](int src, int ctx, int sigIdx) {
        raiseSignal(layout_.index(ctx, sigIdx, src), 1, src);
      });
  return sendCredits() || busy;
}

bool ProxyImpl::sendCredits() {
  bool any = false;
  while (!creditsDue_.empty() && outstanding_ < kMaxOutstanding) {
    auto [src, slot] = creditsDue_.front();
    auto piece = std::make_unique<Piece>();
    const RemoteRegion& r = peerSignals_[src];
    if (!fabric_.write(ep_, src, nullptr, 0, nullptr, r.addrOf(0), r.key,
                       ImmData::encodeSlot(rank_, slot, 1, ImmKind::kCredit), piece.get()))
      break;  // -FI_EAGAIN: the next round retries
    (void)piece.release();  // the completion deletes it
    ++outstanding_;
    creditsDue_.pop_front();
    any = true;
  }
  return any;
}

}  // namespace rmacc::proxy_internal
