#include "exec/loop_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rmacc {

namespace {

// A large copy is cut into at least this many chunks (when each is still >= minChunk): with
// one chunk its two hops would run one after the other.
constexpr size_t kMinChunks = 4;

LoopOp copyOp(int lane, void* dst, const void* src, size_t bytes) {
  return {LoopOp::Kind::kCopy, lane, 0, {dst, src, bytes}};
}
LoopOp recordOp(int lane, int event) { return {LoopOp::Kind::kRecord, lane, event, {}}; }
LoopOp waitOp(int lane, int event) { return {LoopOp::Kind::kWait, lane, event, {}}; }

}  // namespace

LoopSchedule::LoopSchedule(std::vector<LoopRoute> routes, LoopRoute small, size_t minChunk)
    : routes_(std::move(routes)), small_(std::move(small)), minChunk_(std::max<size_t>(1, minChunk)) {
  RMACC_ENFORCE(!routes_.empty(), "a loop schedule needs a route");
  RMACC_ENFORCE(small_.slots.size() == 1 && small_.slots[0] && small_.slotBytes > 0,
                "the small copies' route needs one slot");
  for (size_t r = 0; r < routes_.size(); ++r) {
    const LoopRoute& route = routes_[r];
    RMACC_ENFORCE(route.slots.size() >= 2 && route.slotBytes > 0, "loop route %zu needs >= 2 slots", r);
    for (char* s : route.slots) RMACC_ENFORCE(s != nullptr, "loop route %zu has a null slot", r);
    slotBase_.push_back(totalSlots_);
    totalSlots_ += (int)route.slots.size();
    used_.emplace_back(route.slots.size(), 0);
    next_.push_back(0);
  }
}

size_t LoopSchedule::chunkFor(size_t part, size_t slotBytes, size_t minChunk) {
  if (part == 0) return 0;
  size_t chunks = (part + slotBytes - 1) / slotBytes;
  size_t byMin = (part + minChunk - 1) / std::max<size_t>(1, minChunk);
  chunks = std::max(chunks, std::min(kMinChunks, byMin));
  return (part + chunks - 1) / chunks;
}

std::vector<size_t> LoopSchedule::split(size_t bytes) const {
  std::vector<size_t> parts(routes_.size(), 0);
  double shareLeft = 0;
  for (const LoopRoute& r : routes_) shareLeft += r.share;
  size_t left = bytes;
  for (size_t i = 0; i < routes_.size(); ++i) {
    size_t n = i + 1 == routes_.size() || shareLeft <= 0
                   ? left
                   : std::min(left, (size_t)std::llround((double)left * routes_[i].share / shareLeft));
    shareLeft -= routes_[i].share;
    parts[i] = n;
    left -= n;
  }
  // A part below one chunk costs a route's fixed latency for little bandwidth: it goes to the
  // route with the largest part instead.
  size_t biggest = std::max_element(parts.begin(), parts.end()) - parts.begin();
  for (size_t i = 0; i < parts.size(); ++i)
    if (i != biggest && parts[i] < minChunk_) parts[biggest] += parts[i], parts[i] = 0;
  return parts;
}

void LoopSchedule::copy(char* dst, const char* src, size_t bytes, bool sameCaller,
                        std::vector<LoopOp>& out) {
  if (bytes == 0) return;
  if (bytes <= small_.slotBytes) return smallCopy(dst, src, bytes, sameCaller, out);
  largeCopy(dst, src, bytes, out);
}

// Small copies: latency, not bandwidth, sets their cost, so both hops go on the caller's lane
// (two copies, one record) instead of forking to the route lanes (a dozen more host calls).
// Their slot is their own: large copies running on the route lanes never touch it.
void LoopSchedule::smallCopy(char* dst, const char* src, size_t bytes, bool sameCaller,
                             std::vector<LoopOp>& out) {
  // Another caller stream may still be reading the slot for the previous small copy.
  if (smallUsed_ && !sameCaller) out.push_back(waitOp(kCallerLane, kSmallFree));
  out.push_back(copyOp(kCallerLane, small_.slots[0], src, bytes));
  out.push_back(copyOp(kCallerLane, dst, small_.slots[0], bytes));
  out.push_back(recordOp(kCallerLane, kSmallFree));
  smallUsed_ = true;
}

void LoopSchedule::largeCopy(char* dst, const char* src, size_t bytes, std::vector<LoopOp>& out) {
  const std::vector<size_t> parts = split(bytes);
  struct Cursor {
    size_t begin, part, chunk, done = 0;
    int lastSlot = -1;
  };
  std::vector<Cursor> cur;
  out.push_back(recordOp(kCallerLane, kFork));
  size_t begin = 0;
  for (size_t r = 0; r < routes_.size(); ++r) {
    cur.push_back({begin, parts[r], chunkFor(parts[r], routes_[r].slotBytes, minChunk_)});
    if (parts[r]) out.push_back(waitOp(inLane((int)r), kFork));
    begin += parts[r];
  }
  // Chunks of all routes interleaved by how far each route has got, so that every route's
  // lanes have work early on (the host enqueues a large copy for longer than its first chunk
  // takes to run).
  for (;;) {
    int pick = -1;
    double least = 2;
    for (size_t r = 0; r < cur.size(); ++r) {
      if (cur[r].done >= cur[r].part) continue;
      double progress = (double)cur[r].done / (double)cur[r].part;
      if (progress < least) least = progress, pick = (int)r;
    }
    if (pick < 0) break;
    Cursor& c = cur[pick];
    size_t len = std::min(c.chunk, c.part - c.done);
    size_t off = c.begin + c.done;
    c.lastSlot = chunk(pick, dst + off, src + off, len, out);
    c.done += len;
  }
  for (size_t r = 0; r < cur.size(); ++r)
    if (cur[r].lastSlot >= 0) out.push_back(waitOp(kCallerLane, outDone((int)r, cur[r].lastSlot)));
}

int LoopSchedule::chunk(int r, char* dst, const char* src, size_t len, std::vector<LoopOp>& out) {
  const int slot = next_[r];
  next_[r] = (slot + 1) % (int)routes_[r].slots.size();
  char* s = routes_[r].slots[slot];
  // In: the slot's previous chunk must have gone out (write after read).
  if (used_[r][slot]) out.push_back(waitOp(inLane(r), outDone(r, slot)));
  out.push_back(copyOp(inLane(r), s, src, len));
  out.push_back(recordOp(inLane(r), inDone(r, slot)));
  // Out: the chunk must be in (read after write).
  out.push_back(waitOp(outLane(r), inDone(r, slot)));
  out.push_back(copyOp(outLane(r), dst, s, len));
  out.push_back(recordOp(outLane(r), outDone(r, slot)));
  used_[r][slot] = 1;
  return slot;
}

double hostShare(int localRanks, double hostGBs, double nvlinkGBs) {
  double x = (localRanks + 1) * hostGBs / (nvlinkGBs + 2 * hostGBs);
  return std::clamp(x, 0.0, 1.0);
}

}  // namespace rmacc
