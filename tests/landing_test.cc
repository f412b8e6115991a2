// The landing zone (net/landing.h): the target side alone (damaged headers, out-of-window
// chunks, chunks in any order), and landing puts through two proxies (two queues sharing
// 4 slots, on the tcp and emulated EFA paths).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/signal_contexts.h"
#include "net/landing.h"
#include "support/net_ranks.h"

namespace rmacc {
namespace {

using namespace test;  // the network tests' helpers (support/net_ranks.h)

// A landing zone on the host backend, its memory registered as a stand-in region (no network:
// the tests write headers and chunks into its rows by hand).
struct HostLandingZone {
  HostLandingZone(std::vector<int> sourceRow, uint32_t slots, uint64_t slotBytes)
      : backend(createHostBackend(60)) {
    auto memory = backend->allocateNicVisible(slots * (kLandingHeaderBytes + slotBytes));
    row = static_cast<char*>(memory->ptr());
    region = RemoteRegion{0, 0, memory->size()};
    auto mr = std::make_unique<MemoryRegion>(nullptr, memory->ptr(), memory->size(), region);
    zone = std::make_unique<LandingZone>(*backend, std::move(memory), std::move(mr),
                                         std::move(sourceRow), slots, slotBytes);
  }
  std::unique_ptr<Backend> backend;
  char* row = nullptr;
  RemoteRegion region{};
  std::unique_ptr<LandingZone> zone;  // declared last: gone before the backend
};

// The target side alone, on the host backend: headers are checked, chunks copied into place,
// slots returned in copy order, and a put's signal raised once, after its last chunk was
// copied, whatever order its chunks arrived in.
TEST(LandingZoneTest, CopiesChecksCreditsAndSignals) {
  const uint32_t kSlots = 4;
  const uint64_t kSlotBytes = 4096;
  HostLandingZone host({-1, 0}, kSlots, kSlotBytes);
  LandingZone& zone = *host.zone;
  char* row = host.row;
  const RemoteRegion fake = host.region;
  std::vector<uint8_t> window(3 * kSlotBytes, 0xEE);
  zone.allow(window.data(), window.size());
  LandingTarget t;  // the source's view, for the offsets
  t.region = fake, t.slots = kSlots, t.slotBytes = kSlotBytes;
  auto stage = [&](int slot, uint64_t dstOff, uint64_t bytes, uint64_t putId, uint32_t putChunks,
                   uint8_t value) {
    memset(row + t.chunkOffset(slot), value, bytes);
    auto& h = *reinterpret_cast<LandingHeader*>(row + t.headerOffset(slot));
    h = LandingHeader{};
    h.dstAddr = (uint64_t)(uintptr_t)(window.data() + dstOff);
    h.bytes = bytes, h.putId = putId, h.putChunks = putChunks, h.ctx = 2, h.sigIdx = 5;
    h.check = h.checksum();
    return &h;
  };
  std::vector<std::pair<int, int>> credits;
  int signals = 0;
  auto drain = [&] {
    for (int i = 0; i < 10000 && !zone.idle(); ++i) {
      zone.progress([&](int src, int slot) { credits.emplace_back(src, slot); },
                    [&](int src, int ctx, int sig) {
                      EXPECT_EQ(src, 1);
                      EXPECT_EQ(ctx, 2);
                      EXPECT_EQ(sig, 5);
                      ++signals;
                    });
      usleep(100);
    }
    EXPECT_TRUE(zone.idle());
  };
  // Put 7 in three chunks; the last one (it announces 3 chunks) arrives first.
  stage(2, 2 * kSlotBytes, 100, 7, 3, 0xC3);
  zone.arrived(1, 2);
  drain();
  EXPECT_EQ(signals, 0) << "signalled before every chunk was copied";
  stage(0, 0, kSlotBytes, 7, 0, 0xA1);
  stage(1, kSlotBytes, kSlotBytes, 7, 0, 0xB2);
  zone.arrived(1, 1);
  zone.arrived(1, 0);
  drain();
  EXPECT_EQ(signals, 1);
  EXPECT_EQ(credits, (std::vector<std::pair<int, int>>{{1, 2}, {1, 1}, {1, 0}}));
  EXPECT_EQ(window[0], 0xA1);
  EXPECT_EQ(window[kSlotBytes], 0xB2);
  EXPECT_EQ(window[2 * kSlotBytes + 99], 0xC3);
  EXPECT_EQ(window[2 * kSlotBytes + 100], 0xEE) << "copied past the chunk";

  auto expectRefused = [&](int src, int slot, const char* what) {
    expectError(rmaccRemoteError, what, [&] { zone.arrived(src, slot); });
  };
  LandingHeader* h = stage(3, 0, 16, 8, 1, 0x11);
  h->bytes = 17;  // changed after the checksum: a torn header
  expectRefused(1, 3, "a header failing its checksum");
  stage(3, 3 * kSlotBytes - 8, 16, 8, 1, 0x11);
  expectRefused(1, 3, "a chunk running past the window");
  stage(3, 0, kSlotBytes + 1, 8, 1, 0x11);
  expectRefused(1, 3, "a chunk larger than its slot");
  stage(3, 0, 16, 8, 1, 0x11);
  expectRefused(0, 3, "a chunk from a rank of this node");
  expectRefused(1, 4, "a slot past the last");
  // Windows nest and repeat: one forbid undoes one allow.
  zone.allow(window.data() + kSlotBytes, 16);
  zone.allow(window.data(), window.size());
  stage(3, 2 * kSlotBytes, 16, 9, 1, 0x22);
  zone.forbid(window.data());
  zone.arrived(1, 3);  // still allowed: the window was registered twice
  drain();
  EXPECT_EQ(window[2 * kSlotBytes], 0x22);
  zone.forbid(window.data());
  stage(3, 0, 16, 10, 1, 0x11);
  expectRefused(1, 3, "a chunk into a deregistered window");
  stage(3, kSlotBytes, 16, 10, 1, 0x33);
  zone.arrived(1, 3);  // inside the small window still registered
  drain();
  EXPECT_EQ(window[kSlotBytes], 0x33);
  EXPECT_TRUE(zone.idle());
}

// Every field a header names, with a valid checksum, at its last valid value (taken: the copy
// lands and the signal names that context and index) and one past it (refused): a header from a
// buggy or hostile peer names a signal the proxy raises by index into the signal array, so a
// context or index one past the end would be a write past it, not an error.
TEST(LandingZoneTest, HeaderFieldsAtTheirBoundaries) {
  const uint32_t kSlots = 4;
  const uint64_t kSlotBytes = 4096;
  // Ranks 0 and 2 are this node's (no row); rank 1 puts here.
  HostLandingZone host({-1, 0, -1}, kSlots, kSlotBytes);
  LandingZone& zone = *host.zone;
  char* row = host.row;
  const RemoteRegion fake = host.region;
  std::vector<uint8_t> window(2 * kSlotBytes, 0xEE);
  zone.allow(window.data(), window.size());
  LandingTarget t;
  t.region = fake, t.slots = kSlots, t.slotBytes = kSlotBytes;
  struct Fields {
    int slot = 0;
    uint64_t dstOff = 0, bytes = 16;
    int32_t ctx = 0, sigIdx = 0;
  };
  uint64_t putId = 100;
  auto stage = [&](const Fields& f) {
    memset(row + t.chunkOffset(f.slot), 0x5A, std::min<uint64_t>(f.bytes, kSlotBytes));
    auto& h = *reinterpret_cast<LandingHeader*>(row + t.headerOffset(f.slot));
    h = LandingHeader{};
    h.dstAddr = (uint64_t)(uintptr_t)(window.data() + f.dstOff);
    h.bytes = f.bytes, h.putId = ++putId, h.putChunks = 1, h.ctx = f.ctx, h.sigIdx = f.sigIdx;
    h.check = h.checksum();
  };
  std::vector<std::tuple<int, int, int>> signals;
  auto drain = [&] {
    for (int i = 0; i < 10000 && !zone.idle(); ++i) {
      zone.progress([](int, int) {},
                    [&](int src, int ctx, int sig) { signals.emplace_back(src, ctx, sig); });
      usleep(100);
    }
    ASSERT_TRUE(zone.idle());
  };
  auto taken = [&](const Fields& f, const char* what) {
    stage(f);
    signals.clear();
    try {
      zone.arrived(1, f.slot);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " was refused: " << e.what();
      return;
    }
    drain();
    EXPECT_EQ(signals, (std::vector<std::tuple<int, int, int>>{{1, f.ctx, f.sigIdx}})) << what;
    EXPECT_EQ(window[f.dstOff + f.bytes - 1], 0x5A) << what << ": not copied";
    memset(window.data(), 0xEE, window.size());
  };
  auto refused = [&](const Fields& f, int src, const char* what) {
    stage(f);
    expectError(rmaccRemoteError, what, [&] { zone.arrived(src, f.slot); });
  };
  const int32_t lastCtx = kNumContexts - 1, lastSig = RMACC_MAX_SIGNALS - 1;
  Fields f;
  f.ctx = lastCtx;
  taken(f, "the last context");
  f.ctx = lastCtx + 1;
  refused(f, 1, "a context one past the last");
  f.ctx = -1;
  refused(f, 1, "context -1");
  f = Fields{};
  f.sigIdx = lastSig;
  taken(f, "the last signal index");
  f.sigIdx = lastSig + 1;
  refused(f, 1, "a signal index one past the last");
  f.sigIdx = -1;
  refused(f, 1, "signal index -1");
  f = Fields{};
  f.ctx = lastCtx, f.sigIdx = lastSig, f.slot = (int)kSlots - 1;
  taken(f, "the last slot, context and signal together");
  f = Fields{};
  f.bytes = kSlotBytes;
  taken(f, "a chunk filling its slot");
  f.bytes = kSlotBytes + 1;
  refused(f, 1, "a chunk one byte larger than its slot");
  f.bytes = 1;
  taken(f, "a one-byte chunk");
  f.bytes = 0;
  refused(f, 1, "an empty chunk");
  f = Fields{};
  f.dstOff = window.size() - f.bytes;
  taken(f, "a chunk ending at the window's last byte");
  f.dstOff += 1;
  refused(f, 1, "a chunk one byte past the window");
  f = Fields{};
  refused(f, 2, "a chunk from a rank of this node after the one with a row");
  refused(f, 3, "a chunk from a rank past the last");
  refused(f, -1, "a chunk from rank -1");
  expectError(rmaccRemoteError, "a slot one past the last", [&] { zone.arrived(1, (int)kSlots); });
  expectError(rmaccRemoteError, "slot -1", [&] { zone.arrived(1, -1); });
  EXPECT_TRUE(zone.idle());
}

TEST(LandingZoneTest, SlotSizes) {
  EXPECT_EQ(landingSlotBytes(64 << 20, 1, 4, 4 << 20), 4u << 20);        // 2 nodes x 1
  EXPECT_EQ(landingSlotBytes(64 << 20, 8, 4, 4 << 20), 2u << 20);        // 2 nodes x 8
  EXPECT_EQ(landingSlotBytes(64 << 20, 1016, 4, 4 << 20), 64u << 10);    // 128 nodes x 8: floor
  EXPECT_EQ(landingSlotBytes(1 << 20, 1, 4, 4 << 20), 256u << 10);
  EXPECT_EQ(landingSlotBytes(64 << 20, 1, 4, 1 << 20), 1u << 20);        // capped by the piece
}

// Landing puts through two proxies: rank 1's window is "device memory" (the zone copies into
// it), rank 0 puts into it from two queues at once, in puts of 0.5-16 chunks and in parts
// (final / not final), so both queues compete for 4 slots and wait on credits. Every put's
// signal fires once, after all its bytes are in place. Parameter as in SplitPutTest.
class LandingPutTest : public ::testing::TestWithParam<bool> {};

TEST_P(LandingPutTest, ChunksThroughFewSlotsLandByteExact) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const uint32_t kSlots = 4;
    const uint64_t kSlotBytes = 64 << 10;
    const int kPuts = 12;
    const size_t kMax = 16 * kSlotBytes, kRegion = kMax + 4096;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    std::unique_ptr<LandingZone> zone;
    ProxyRank pr(c, 2 * kPuts * kRegion, 1 << 20, 60, fo);
    if (c.rank == 1) {
      auto memory = pr.backend->allocateNicVisible(kSlots * (kLandingHeaderBytes + kSlotBytes));
      auto mr = pr.fabric->registerMemory(memory->ptr(), memory->size());
      zone = std::make_unique<LandingZone>(*pr.backend, std::move(memory), std::move(mr),
                                           std::vector<int>{0, -1}, kSlots, kSlotBytes);
      zone->allow(pr.win(), pr.window->size());
      pr.proxy->attachLanding(zone.get(), pr.peers.regions);
    }
    barrier(boardOf(c), c.nRanks);  // every rank has read the first exchange
    PeerInfo zones = exchange(c, *pr.fabric, zone ? zone->remote() : RemoteRegion{});
    barrier(boardOf(c), c.nRanks);
    PeerInfo windows = exchange(c, *pr.fabric, RemoteRegion{(uint64_t)(uintptr_t)pr.win(), 0, 0});
    auto shape = [&](int k) { return shapeOf(0, 1, k, kMax, kRegion); };
    if (c.rank == 0) {
      LandingTarget t;
      t.region = zones.regions[1];
      t.slots = kSlots, t.sourceRow = 0, t.slotBytes = kSlotBytes;
      t.windowBase = windows.regions[1].base, t.windowBytes = 2 * kPuts * kRegion;
      ProxyQueue* q[2] = {pr.proxy->createQueue(), pr.proxy->createQueue()};
      std::vector<uint8_t> src(2 * kPuts * kRegion);
      uint64_t last[2] = {0, 0};
      for (int k = 0; k < 2 * kPuts; ++k) {
        PutShape sh = shape(k);
        if (sh.bytes == 0) sh.bytes = 1;
        uint8_t* from = src.data() + k * kRegion;
        fill(from, sh.bytes, 0, 1, k);
        // Every third put goes out in three parts, as the staged path sends it.
        size_t parts = k % 3 == 0 ? 3 : 1, step = (sh.bytes + parts - 1) / parts;
        for (size_t off = 0; off < sh.bytes; off += step) {
          ProxyPut p = pr.put(1, from + off, std::min(step, sh.bytes - off),
                              k * kRegion + sh.offset + off, kCtxData, k % 2);
          p.dst = t.region;
          p.landing = t;
          p.final = off + step >= sh.bytes;
          last[k % 2] = q[k % 2]->post(p);
        }
      }
      pr.release(q[1], last[1]);  // the second queue first: it must not need the first
      pr.release(q[0], last[0]);
      pr.waitAtLeast(q[0]->done(), last[0]);
      pr.waitAtLeast(q[1]->done(), last[1]);
      ProxyPut empty = pr.put(1, src.data(), 0, 0, kCtxData, 0);
      empty.landing = t;
      empty.dst = t.region;
      expectError(rmaccInvalidArgument, "a zero-byte landing put", [&] { q[0]->post(empty); });
    } else {
      pr.waitAtLeast(pr.sig(kCtxData, 0, 0), kPuts);
      pr.waitAtLeast(pr.sig(kCtxData, 1, 0), kPuts);
      for (int k = 0; k < 2 * kPuts; ++k) {
        PutShape sh = shape(k);
        if (sh.bytes == 0) sh.bytes = 1;
        EXPECT_EQ(firstMismatch(pr.win() + k * kRegion + sh.offset, sh.bytes, 0, 1, k), -1)
            << "put " << k << " of " << sh.bytes << " bytes";
      }
      usleep(200 * 1000);  // one signal per put, none per chunk or part
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, 0)), (uint64_t)kPuts);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 1, 0)), (uint64_t)kPuts);
    }
    pr.finish();
    pr.proxy.reset();  // stops using the zone; the zone's registration goes before the fabric
    zone.reset();
  });
}
INSTANTIATE_TEST_SUITE_P(Net, LandingPutTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "EmulatedEfaPaths" : "Tcp"; });

}  // namespace
}  // namespace rmacc
