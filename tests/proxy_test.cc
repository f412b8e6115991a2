// The proxy thread: puts with signals through real proxies and the host backend over tcp on
// loopback (split puts, chunked parts, unordered completions, gathered puts, two queues, paced
// writes, several threads, signals written as values).
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/proxy_routing.h"
#include "support/net_ranks.h"

namespace rmacc {
namespace {

using namespace test;  // the network tests' helpers (support/net_ranks.h)

// Every rank puts to every other rank each round (random sizes and offsets in its slot of the
// peer's window); the receiver checks the bytes the moment its signal reaches the expected
// count, then acknowledges with a zero-byte put on another context; the sender reuses its
// slot only after the ack. Data and acks go through two queues.
void allPairsRounds(const RankContext& c, size_t maxBytes, int rounds) {
  const size_t slot = maxBytes + 4096;
  ProxyRank pr(c, slot * c.nRanks, 1ull << 30, 60);
  ProxyQueue* dataQ = pr.proxy->createQueue();
  ProxyQueue* ackQ = pr.proxy->createQueue();
  std::vector<std::vector<uint8_t>> src(c.nRanks);
  std::vector<uint64_t> lastData(c.nRanks, 0);
  uint64_t lastAck = 0;
  for (int k = 0; k < rounds; ++k) {
    for (int d = 0; d < c.nRanks; ++d) {
      if (d == c.rank) continue;
      if (k > 0) {
        pr.waitAtLeast(pr.sig(kCtxAck, 0, d), k);           // d consumed round k-1
        pr.waitAtLeast(dataQ->done(), lastData[d]);          // our source is free again
      }
      PutShape sh = shapeOf(c.rank, d, k, maxBytes, slot);
      src[d].resize(sh.bytes);
      fill(src[d].data(), sh.bytes, c.rank, d, k);
      lastData[d] = dataQ->post(pr.put(d, src[d].data(), sh.bytes, c.rank * slot + sh.offset,
                                       kCtxData, 0));
      pr.release(dataQ, lastData[d]);
    }
    for (int s = 0; s < c.nRanks; ++s) {
      if (s == c.rank) continue;
      pr.waitAtLeast(pr.sig(kCtxData, 0, s), k + 1);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, s)), (uint64_t)k + 1) << "signal overshoot from " << s;
      PutShape sh = shapeOf(s, c.rank, k, maxBytes, slot);
      uint8_t* at = pr.win() + s * slot + sh.offset;
      EXPECT_EQ(firstMismatch(at, sh.bytes, s, c.rank, k), -1)
          << "round " << k << " from rank " << s << ": " << sh.bytes << " bytes at " << sh.offset;
      lastAck = ackQ->post(pr.put(s, nullptr, 0, 0, kCtxAck, 0));
      pr.release(ackQ, lastAck);
    }
  }
  pr.waitAtLeast(ackQ->done(), lastAck);
  pr.finish();
}

TEST(ProxyTest, PutsWithSignalsTwoRanksUpTo64MiB) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) { allPairsRounds(c, 64 << 20, 4); });
}

TEST(ProxyTest, PutsWithSignalsFourRanks) {
  SKIP_WITHOUT_TCP();
  test::runRanks(4, netOptions(), [](const RankContext& c) { allPairsRounds(c, 8 << 20, 4); });
}

// maxPutBytes 4096: a ~1 MiB put travels as 255 pieces (the most the 8-bit piece count of
// the completion data allows; the last piece is short) and raises its signal exactly once,
// after every byte landed. Parameter: the tcp provider as it is (ordered writes, no local
// registration), or forced through the paths of EFA-like providers (unordered writes:
// FI_DELIVERY_COMPLETE and the final piece held back; FI_MR_LOCAL: the proxy registers sources).
class SplitPutTest : public ::testing::TestWithParam<bool> {};

TEST_P(SplitPutTest, SignalsOnceWhenAllPiecesLanded) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const size_t kPiece = 4096, kBytes = 255 * kPiece - 77;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 2 * kBytes, kPiece, 60, fo);
    EXPECT_EQ(pr.fabric->orderedWrites(), !emulate);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 0) {
      std::vector<uint8_t> src(kBytes);
      for (int k = 0; k < 2; ++k) {
        fill(src.data(), kBytes, 0, 1, k);
        uint64_t seq = q->post(pr.put(1, src.data(), kBytes, k * kBytes, kCtxData, 3));
        pr.release(q, seq);
        pr.waitAtLeast(q->done(), seq);
      }
      // One piece more than the completion data can count: refused at post, proxy unharmed.
      expectError(rmaccInvalidArgument, "a 256-piece put",
                  [&] { q->post(pr.put(1, src.data(), 255 * kPiece + 1, 0, kCtxData, 3)); });
    } else {
      for (int k = 0; k < 2; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 3, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win() + k * kBytes, kBytes, 0, 1, k), -1) << "put " << k;
      }
      usleep(200 * 1000);  // no late extra increments
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 3, 0)), 2u);
    }
    pr.finish();
  });
}
INSTANTIATE_TEST_SUITE_P(Net, SplitPutTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "EmulatedEfaPaths" : "Tcp"; });

// One logical put posted as consecutive parts of a queue (the staged, chunked path): only the
// final part signals, once every part landed; on the unordered (EFA-like) paths the final part
// waits for the earlier parts' delivery.
TEST_P(SplitPutTest, ChunkedPartsSignalOnceAfterAllLanded) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const size_t kChunk = 64 << 10, kParts = 40, kBytes = kParts * kChunk - 123;
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 2 * kBytes, 1 << 20, 60, fo);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 0) {
      std::vector<uint8_t> src(kBytes);
      for (int k = 0; k < 2; ++k) {
        fill(src.data(), kBytes, 0, 1, k);
        uint64_t last = 0;
        for (size_t i = 0, off = 0; off < kBytes; ++i, off += kChunk) {
          ProxyPut part = pr.put(1, src.data() + off, std::min(kChunk, kBytes - off),
                                 k * kBytes + off, kCtxData, 5);
          part.final = off + kChunk >= kBytes;
          part.priorPieces = part.final ? (uint32_t)i : 0;
          last = q->post(part);
          pr.release(q, last);  // each part as soon as it is posted, as the stream does
        }
        pr.waitAtLeast(q->done(), last);
      }
      // A non-final part that claims prior pieces is malformed.
      ProxyPut bad = pr.put(1, src.data(), 8, 0, kCtxData, 5);
      bad.final = false;
      bad.priorPieces = 3;
      expectError(rmaccInvalidArgument, "a non-final part with prior pieces", [&] { q->post(bad); });
    } else {
      for (int k = 0; k < 2; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 5, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win() + k * kBytes, kBytes, 0, 1, k), -1) << "put " << k;
      }
      usleep(200 * 1000);  // one signal per logical put, none per part
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 5, 0)), 2u);
    }
    pr.finish();
  });
}

// An unordered endpoint whose completions come late and out of order (the hold-back double
// around tcp): the signalling piece of a split put, and the final part of a chunked put, must
// be issued only after every earlier piece was reported complete. Over plain tcp the writes
// land in order anyway, so only this double sees a proxy that sends the signal early. The
// parameter is how the double hands completions back: all at once, or one a proxy round
// (newest first, or at random), which alone shows the proxy a put with all but one of its
// pieces, or all of its own but not an earlier part's, reported.
class UnorderedSignalTest : public ::testing::TestWithParam<HoldBackFabric::Release> {};

TEST_P(UnorderedSignalTest, CompletionsHoldTheSignalBack) {
  SKIP_WITHOUT_TCP();
  const HoldBackFabric::Release release = GetParam();
  test::runRanks(2, netOptions(), [release](const RankContext& c) {
    const size_t kPiece = 4096, kSplit = 37 * kPiece + 5, kChunk = 3 * kPiece, kParts = 6;
    const size_t kChunked = kParts * kChunk - 11;
    FabricOptions fo;
    fo.assumeUnorderedWrites = true;
    ProxyRank pr(c, kSplit + kChunked, kPiece, 60, fo, /*holdBackCompletions=*/c.rank == 0);
    if (pr.holdBack) pr.holdBack->setRelease(release);
    ProxyQueue* q = pr.proxy->createQueue();
    const int kRounds = 4;
    if (c.rank == 0) {
      std::vector<uint8_t> src(kSplit + kChunked);
      for (int k = 0; k < kRounds; ++k) {
        fill(src.data(), kSplit, 0, 1, 2 * k);
        fill(src.data() + kSplit, kChunked, 0, 1, 2 * k + 1);
        uint64_t last = q->post(pr.put(1, src.data(), kSplit, 0, kCtxData, 2));
        pr.release(q, last);
        for (size_t i = 0, off = 0; off < kChunked; ++i, off += kChunk) {
          ProxyPut part = pr.put(1, src.data() + kSplit + off, std::min(kChunk, kChunked - off),
                                 kSplit + off, kCtxData, 4);
          part.final = off + kChunk >= kChunked;
          part.priorPieces = part.final ? (uint32_t)(i * (kChunk / kPiece)) : 0;
          last = q->post(part);
          pr.release(q, last);
        }
        pr.waitAtLeast(q->done(), last);
        pr.waitAtLeast(pr.sig(kCtxAck, 0, 1), k + 1);  // rank 1 checked this round
      }
      EXPECT_EQ(pr.holdBack->violations(), 0u) << "signalling writes issued before their siblings "
                                                  "were reported complete";
      EXPECT_EQ(pr.holdBack->splitFinals(), 2u * kRounds);
      EXPECT_GT(pr.holdBack->reordered(), 0u) << "the double never reordered anything";
      if (release != HoldBackFabric::Release::kAllNewestFirst)
        EXPECT_GT(pr.holdBack->singles(), 0u) << "no completion came back alone";
    } else {
      uint64_t lastAck = 0;
      for (int k = 0; k < kRounds; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 2, 0), k + 1);
        pr.waitAtLeast(pr.sig(kCtxData, 4, 0), k + 1);
        EXPECT_EQ(firstMismatch(pr.win(), kSplit, 0, 1, 2 * k), -1) << "split put, round " << k;
        EXPECT_EQ(firstMismatch(pr.win() + kSplit, kChunked, 0, 1, 2 * k + 1), -1)
            << "chunked put, round " << k;
        lastAck = q->post(pr.put(0, nullptr, 0, 0, kCtxAck, 0));
        pr.release(q, lastAck);
      }
      pr.waitAtLeast(q->done(), lastAck);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 2, 0)), (uint64_t)kRounds);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 4, 0)), (uint64_t)kRounds);
    }
    pr.finish();
  });
}

INSTANTIATE_TEST_SUITE_P(Net, UnorderedSignalTest,
                         ::testing::Values(HoldBackFabric::Release::kAllNewestFirst,
                                           HoldBackFabric::Release::kOneNewestFirst,
                                           HoldBackFabric::Release::kOneRandom),
                         [](const ::testing::TestParamInfo<HoldBackFabric::Release>& i) {
                           return std::string(i.param == HoldBackFabric::Release::kAllNewestFirst ? "AllAtOnce"
                                              : i.param == HoldBackFabric::Release::kOneNewestFirst
                                                  ? "OneARoundNewestFirst"
                                                  : "OneARoundRandom");
                         });

// A gathering put (ProxyPut::gather: a relay chunk of several send blocks) of 11 scattered
// sources, cut into writes of at most 4096 bytes and the provider's iov limit: its bytes land
// back to back and it signals once, after all of its writes landed. On the unordered paths the
// hold-back double delivers the writes' completions late and reversed: the signalling write
// must still go last.
TEST_P(SplitPutTest, GatheredPutSignalsOnceAfterAllWritesLanded) {
  SKIP_WITHOUT_TCP();
  bool emulate = GetParam();
  test::runRanks(2, netOptions(), [emulate](const RankContext& c) {
    const size_t kPiece = 4096, kSources = 11, kStride = 3 * kPiece;
    auto lenOf = [&](size_t k) { return 1 + (k * 2777) % (2 * kPiece); };
    size_t total = 0;
    for (size_t k = 0; k < kSources; ++k) total += lenOf(k);
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 2 * total, kPiece, 60, fo, /*holdBackCompletions=*/emulate && c.rank == 0);
    ProxyQueue* q = pr.proxy->createQueue();
    const int kRounds = 3;
    if (c.rank == 0) {
      std::vector<uint8_t> src(kSources * kStride);
      for (int k = 0; k < kRounds; ++k) {
        fill(src.data(), src.size(), 0, 1, k);
        ProxyPut put = pr.put(1, nullptr, total, (k % 2) * total, kCtxData, 6);
        for (size_t i = 0; i < kSources; ++i)
          put.gather.push_back({src.data() + i * kStride, lenOf(i), nullptr});
        uint64_t seq = q->post(put);
        pr.release(q, seq);
        pr.waitAtLeast(q->done(), seq);
        pr.waitAtLeast(pr.sig(kCtxAck, 0, 1), k + 1);  // rank 1 checked it
      }
      if (emulate) {
        EXPECT_EQ(pr.holdBack->violations(), 0u) << "the signalling write went before the others";
        EXPECT_GT(pr.holdBack->gathers(), 0u) << "no write took several sources";
        EXPECT_GT(pr.holdBack->reordered(), 0u) << "the double never reordered anything";
      }
      ProxyPut bad = pr.put(1, nullptr, total + 1, 0, kCtxData, 6);
      bad.gather.push_back({src.data(), total, nullptr});
      expectError(rmaccInvalidArgument, "a gather short of its bytes", [&] { q->post(bad); });
    } else {
      std::vector<uint8_t> want(kSources * kStride), got;
      uint64_t lastAck = 0;
      for (int k = 0; k < kRounds; ++k) {
        pr.waitAtLeast(pr.sig(kCtxData, 6, 0), k + 1);
        fill(want.data(), want.size(), 0, 1, k);
        got.clear();
        for (size_t i = 0; i < kSources; ++i)
          got.insert(got.end(), want.begin() + i * kStride, want.begin() + i * kStride + lenOf(i));
        EXPECT_EQ(memcmp(pr.win() + (k % 2) * total, got.data(), total), 0) << "round " << k;
        EXPECT_EQ(pr.load(pr.sig(kCtxData, 6, 0)), (uint64_t)k + 1) << "one signal per put";
        lastAck = q->post(pr.put(0, nullptr, 0, 0, kCtxAck, 0));
        pr.release(q, lastAck);
      }
      pr.waitAtLeast(q->done(), lastAck);
      usleep(200 * 1000);  // no late extra increments
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 6, 0)), (uint64_t)kRounds);
    }
    pr.finish();
  });
}

// Two queues of one rank to the same peer: B is released entirely while A is held, so B must
// finish on its own (queues never block each other); then A. done is per queue, in order.
TEST(ProxyTest, TwoQueuesInterleave) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    const int kPuts = 16;
    const size_t kBytes = 256 << 10;
    ProxyRank pr(c, 2 * kPuts * kBytes, 1ull << 30, 60);
    if (c.rank == 0) {
      ProxyQueue* qa = pr.proxy->createQueue();
      ProxyQueue* qb = pr.proxy->createQueue();
      std::vector<uint8_t> src(2 * kPuts * kBytes);
      uint64_t lastA = 0, lastB = 0;
      for (int i = 0; i < 2 * kPuts; ++i) {  // A0 B0 A1 B1 ...: regions i*kBytes
        fill(src.data() + i * kBytes, kBytes, 0, 1, i);
        ProxyQueue* q = (i % 2) ? qb : qa;
        uint64_t seq = q->post(pr.put(1, src.data() + i * kBytes, kBytes, i * kBytes, kCtxData,
                                      (i % 2) ? 2 : 1));
        ((i % 2) ? lastB : lastA) = seq;
      }
      EXPECT_EQ(lastA, (uint64_t)kPuts);
      EXPECT_EQ(lastB, (uint64_t)kPuts);
      for (uint64_t s = 1; s <= lastB; ++s) pr.release(qb, s);
      pr.waitAtLeast(qb->done(), lastB);
      EXPECT_EQ(pr.load(qa->done()), 0u) << "queue A moved without its ready";
      pr.release(qa, lastA);
      pr.waitAtLeast(qa->done(), lastA);
    } else {
      pr.waitAtLeast(pr.sig(kCtxData, 2, 0), kPuts);
      pr.waitAtLeast(pr.sig(kCtxData, 1, 0), kPuts);
      for (int i = 0; i < 2 * kPuts; ++i)
        EXPECT_EQ(firstMismatch(pr.win() + i * kBytes, kBytes, 0, 1, i), -1) << "put " << i;
    }
    pr.finish();
  });
}

// Rank 0 paced at 2 MB/s (nic_pacer.h) puts 2 MiB to rank 1 twice (A, B), then zero-byte
// signals to rank 2 (S2) and to rank 1 (S1), one queue, released at once. B waits for A's
// estimated wire time (1.05 s); S2, with no write to rank 2 before it, goes at once, so rank
// 2's answer comes back while B is still held; S1 keeps its place behind B (writes to one peer
// keep their order). The bytes land intact, and nothing finishes before A's wire time. (At
// 0.42 s, 4 MiB at 10 MB/s, the answer's round trip, two lazy connections, outlasted B's hold
// whenever two other tests ran beside it on the 2-core CI machine.)
TEST(ProxyTest, PacedWritesGoInOrderAndSignalsToOtherPeersPassThem) {
  SKIP_WITHOUT_TCP();
  test::runRanks(3, netOptions(), [](const RankContext& c) {
    const size_t kBytes = 2 << 20;
    const double kRate = 2e6;
    ProxyRank pr(c, 2 * kBytes, 1ull << 30, 60, {}, false, c.rank == 0 ? kRate : 0);
    ProxyQueue* q = pr.proxy->createQueue();
    if (c.rank == 0) {
      std::vector<uint8_t> src(2 * kBytes);
      fill(src.data(), kBytes, 0, 1, 0);
      fill(src.data() + kBytes, kBytes, 0, 1, 1);
      q->post(pr.put(1, src.data(), kBytes, 0, kCtxData, 0));
      const uint64_t b = q->post(pr.put(1, src.data() + kBytes, kBytes, kBytes, kCtxData, 0));
      q->post(pr.put(2, nullptr, 0, 0, kCtxData, 1));
      const uint64_t last = q->post(pr.put(1, nullptr, 0, 0, kCtxData, 2));
      const double t0 = monotonicSeconds();
      pr.release(q, last);
      pr.waitAtLeast(pr.sig(kCtxAck, 0, 2), 1);
      EXPECT_LT(pr.load(q->done()), b) << "B finished before rank 2 answered S2";
      pr.waitAtLeast(q->done(), last);
      EXPECT_GE(monotonicSeconds() - t0, 0.99 * kBytes / kRate) << "not paced";
    } else if (c.rank == 1) {
      pr.waitAtLeast(pr.sig(kCtxData, 2, 0), 1);
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, 0)), 2u) << "S1 overtook B to the same peer";
      EXPECT_EQ(firstMismatch(pr.win(), kBytes, 0, 1, 0), -1) << "A";
      EXPECT_EQ(firstMismatch(pr.win() + kBytes, kBytes, 0, 1, 1), -1) << "B";
    } else {
      pr.waitAtLeast(pr.sig(kCtxData, 1, 0), 1);
      const uint64_t answer = q->post(pr.put(0, nullptr, 0, 0, kCtxAck, 0));
      pr.release(q, answer);
      pr.waitAtLeast(q->done(), answer);
    }
    pr.finish();
  });
}

// Several proxy threads (FabricOptions::endpoints, RMACC_PROXY_THREADS): each rank puts to every
// other rank in every round, alternating the thread, so each pair's writes travel through both
// endpoints at both ends and one signal counter is raised by both receiving threads (the lock
// they share). Every signal ends at exactly the number of puts; every byte is in place.
TEST(ProxyTest, SeveralThreadsCarryEveryPair) {
  SKIP_WITHOUT_TCP();
  test::runRanks(4, netOptions(), [](const RankContext& c) {
    const size_t kMax = 256 << 10;
    const int kRounds = 6;
    const size_t slot = kMax + 4096;
    FabricOptions fo;
    fo.endpoints = 2;
    ProxyRank pr(c, slot * c.nRanks * kRounds, 1ull << 30, 60, fo);
    ASSERT_EQ(pr.fabric->endpoints(), 2) << "tcp;ofi_rxm offers FI_THREAD_SAFE";
    ASSERT_EQ(pr.proxy->threads(), 2);
    expectError(rmaccInvalidArgument, "queue of thread 2", [&] { pr.proxy->createQueue(2); });
    ProxyQueue* q[2] = {pr.proxy->createQueue(0), pr.proxy->createQueue(1)};
    std::vector<std::vector<uint8_t>> src((size_t)c.nRanks * kRounds);
    uint64_t last[2] = {0, 0};
    for (int k = 0; k < kRounds; ++k)
      for (int d = 0; d < c.nRanks; ++d) {
        if (d == c.rank) continue;
        const int t = (proxyThreadOf(c.rank, d, 2, c.nRanks) + k) % 2;
        PutShape sh = shapeOf(c.rank, d, k, kMax, slot);
        std::vector<uint8_t>& buf = src[(size_t)d * kRounds + k];
        buf.resize(sh.bytes);
        fill(buf.data(), sh.bytes, c.rank, d, k);
        const uint64_t at = ((uint64_t)c.rank * kRounds + k) * slot + sh.offset;
        last[t] = q[t]->post(pr.put(d, buf.data(), sh.bytes, at, kCtxData, 0));
        pr.release(q[t], last[t]);
      }
    for (int s = 0; s < c.nRanks; ++s) {
      if (s == c.rank) continue;
      pr.waitAtLeast(pr.sig(kCtxData, 0, s), kRounds);  // a lost increment: this times out
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, s)), (uint64_t)kRounds) << "signal from " << s;
      for (int k = 0; k < kRounds; ++k) {
        PutShape sh = shapeOf(s, c.rank, k, kMax, slot);
        const uint8_t* at = pr.win() + ((size_t)s * kRounds + k) * slot + sh.offset;
        EXPECT_EQ(firstMismatch(at, sh.bytes, s, c.rank, k), -1) << "round " << k << " from " << s;
      }
    }
    for (int t = 0; t < 2; ++t) pr.waitAtLeast(q[t]->done(), last[t]);
    pr.finish();
  });
}

// Pure signals written as values (ProxyPut::writesValue): the NIC stores each counter's next
// value in the peer's signal array and the peer's proxy does nothing. Here that array is
// registered apart from the one the proxy raises (pr.signals), so a signal the proxy applied
// would show there, not in it. Every rank sends each other 150 signals from two queues whose
// releases interleave, beside data puts whose signals the proxy applies: each counter ends at
// exactly its count (the proxy numbers them as it issues them, so two queues cannot put a
// lower value after a higher one). Parameter: tcp as it is, or the unordered (EFA-like) path
// with completions held back and reordered, where one value write per counter is in flight.
class ValueWriteTest : public ::testing::TestWithParam<bool> {};

TEST_P(ValueWriteTest, SignalsLandWithoutTheReceiversProxy) {
  SKIP_WITHOUT_TCP();
  const bool emulate = GetParam();
  test::runRanks(3, netOptions(), [emulate](const RankContext& c) {
    FabricOptions fo;
    fo.assumeUnorderedWrites = fo.forceLocalRegistration = emulate;
    ProxyRank pr(c, 4096 * c.nRanks, 1ull << 30, 60, fo, /*holdBackCompletions=*/emulate);
    ASSERT_TRUE(pr.fabric->canWriteValues());
    auto values = pr.backend->allocateHostVisible(pr.layout.bytes());
    memset(values->ptr(), 0, values->size());
    auto valuesMr = pr.fabric->registerMemory(values->ptr(), values->size());
    const PeerInfo arrays = exchange(c, *pr.fabric, valuesMr->remote());
    volatile uint64_t* value = (volatile uint64_t*)values->ptr();
    ProxyQueue* queues[2] = {pr.proxy->createQueue(), pr.proxy->createQueue()};
    ProxyQueue* dataQ = pr.proxy->createQueue();
    constexpr int kSignals = 150;
    uint64_t last[2] = {0, 0}, lastData = 0;
    std::vector<uint8_t> src(4096);
    for (int k = 0; k < kSignals; ++k) {
      for (int d = 0; d < c.nRanks; ++d) {
        if (d == c.rank) continue;
        const int which = (k / 3 + d) % 2;
        ProxyPut p = pr.put(d, nullptr, 0, 0, kCtxAck, 1);
        p.dst = arrays.regions[d];
        p.writesValue = true;
        last[which] = queues[which]->post(p);
        if (k % 5 == 4) pr.release(queues[which], last[which]);
        if (k % 50 == 0) {
          fill(src.data(), src.size(), c.rank, d, k);
          lastData = dataQ->post(pr.put(d, src.data(), src.size(), 4096 * c.rank, kCtxData, 0));
          pr.release(dataQ, lastData);
          pr.waitAtLeast(dataQ->done(), lastData);
        }
      }
    }
    for (ProxyQueue* q : queues) pr.release(q, q == queues[0] ? last[0] : last[1]);
    for (int s = 0; s < c.nRanks; ++s) {
      if (s == c.rank) continue;
      volatile uint64_t* counter = &value[pr.layout.index(kCtxAck, 1, s)];
      pr.waitAtLeast(counter, kSignals);
      pr.waitAtLeast(pr.sig(kCtxData, 0, s), kSignals / 50);
      EXPECT_EQ(firstMismatch(pr.win() + 4096 * s, 4096, s, c.rank, 150 / 50 * 50 - 50), -1);
    }
    pr.waitAtLeast(queues[0]->done(), last[0]);
    pr.waitAtLeast(queues[1]->done(), last[1]);
    pr.finish();  // every rank's signals have landed
    for (int s = 0; s < c.nRanks; ++s) {
      if (s == c.rank) continue;
      EXPECT_EQ(pr.load(&value[pr.layout.index(kCtxAck, 1, s)]), (uint64_t)kSignals) << "from " << s;
      EXPECT_EQ(pr.load(pr.sig(kCtxAck, 1, s)), 0u) << "the proxy applied a value write from " << s;
      EXPECT_EQ(pr.load(pr.sig(kCtxData, 0, s)), (uint64_t)kSignals / 50) << "from " << s;
    }
    valuesMr.reset();
  });
}
INSTANTIATE_TEST_SUITE_P(Net, ValueWriteTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "EmulatedEfaPaths" : "Tcp"; });

}  // namespace
}  // namespace rmacc
