// The libfabric endpoint alone, fabtests-style: small one-feature programs over the tcp
// provider on loopback (raw fi_writedata), each rank a real process; FI_HMEM asked for and
// falling back. Without the tcp provider the cases skip (in CI they fail: support/ci.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/net_ranks.h"

namespace rmacc {
namespace {

using namespace test;  // the network tests' helpers (support/net_ranks.h)

TEST(FabricTest, OpensAndRegisters) {
  SKIP_WITHOUT_TCP();
  test::runRanks(1, netOptions(), [](const RankContext&) {
    Fabric f("tcp");
    EXPECT_NE(f.providerName().find("tcp"), std::string::npos) << f.providerName();
    EXPECT_FALSE(f.address().empty());
    EXPECT_GE(f.maxMessageBytes(), 1u << 20);
    std::vector<char> buf(1 << 20);
    auto mr = f.registerMemory(buf.data(), buf.size());
    EXPECT_EQ(mr->remote().size, buf.size());
    auto mr2 = f.registerMemory(buf.data(), 4096);
    if (mr->remote().key == mr2->remote().key) ADD_FAILURE() << "two registrations share a key";
    printf("[ provider ] %s max message %zu, FI_MR_LOCAL %d, ordered writes %d, base %s\n",
           f.providerName().c_str(), f.maxMessageBytes(), (int)f.needsLocalRegistration(),
           (int)f.orderedWrites(), mr->remote().base ? "virtual address" : "offset");
  });
}

// Several endpoints where asked (tcp;ofi_rxm is FI_THREAD_SAFE), but one where they need a
// provider that reports its link speed, which tcp does not (the communicator's default).
TEST(FabricTest, SeveralEndpointsOnlyWhereTheLinkSpeedIsKnownIfAsked) {
  SKIP_WITHOUT_TCP();
  test::runRanks(1, netOptions(), [](const RankContext&) {
    FabricOptions fo;
    fo.endpoints = 4;
    Fabric several("tcp", fo);
    EXPECT_EQ(several.endpoints(), 4);
    EXPECT_EQ(several.linkBytesPerSecond(), 0) << "tcp reports no link speed";
    fo.endpointsNeedLinkSpeed = true;
    Fabric one("tcp", fo);
    EXPECT_EQ(one.endpoints(), 1);
    EXPECT_FALSE(one.address(0).empty());
  });
}

TEST(FabricTest, UnknownProviderThrowsNetworkError) {
  test::runRanks(1, netOptions(), [](const RankContext&) {
    try {
      Fabric f("no-such-provider");
      ADD_FAILURE() << "opened a provider that does not exist";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), rmaccNetworkError) << e.what();
    }
  });
}

// Two processes: rank 0 writes 0 B .. 64 MiB into rank 1's region with completion data; rank 1
// checks every byte (and the guard bytes around) the moment the remote completion appears.
TEST(FabricTest, WriteDataByteExactUpTo64MiB) {
  SKIP_WITHOUT_TCP();
  test::runRanks(2, netOptions(), [](const RankContext& c) {
    const std::vector<size_t> sizes = {0, 1, 2, 3, 7, 64, 4095, 4096, 4097, 65536 + 13,
                                       1 << 20, (4 << 20) + 1, 16 << 20, 64 << 20, 0};
    const size_t kBytes = (64 << 20) + 4096;
    Fabric f("tcp");
    Pump pump{f, {}};
    std::vector<uint8_t> buf(kBytes, 0xEE);
    auto mr = f.registerMemory(buf.data(), buf.size());
    PeerInfo peers = exchange(c, f, mr->remote(), [&] { pump.progress(); });
    f.insertPeers(peers.addrs);
    Board* b = boardOf(c);
    uint64_t eagain = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      size_t n = sizes[i], off = (i * 977) % 4000 + 1;
      if (c.rank == 0) {
        fill(buf.data(), n, 0, 1, i);
        alignas(16) char ctx[kOpContextBytes];
        double t0 = nowS();
        while (!f.write(0, 1, n ? buf.data() : nullptr, n, mr->desc(),
                        peers.regions[1].addrOf(off), peers.regions[1].key, (uint32_t)i, ctx)) {
          ++eagain;
          pump.progress();
        }
        Completion done;
        waitFor([&] { return pump.take(Completion::kWriteDone, &done); }, [&] { pump.progress(); },
                60, "the local completion");
        EXPECT_EQ(done.context, (void*)ctx);
        waitFor([&] { return b->ack[1].load() > i; }, [&] { pump.progress(); }, 60, "the ack");
        if (n >= (16u << 20))
          printf("[ write    ] %zu bytes in %.1f ms (incl. verification)\n", n,
                 (nowS() - t0) * 1e3);
      } else {
        Completion got;
        waitFor([&] { return pump.take(Completion::kRemoteData, &got); }, [&] { pump.progress(); },
                60, "remote completion data");
        EXPECT_EQ(got.data, i);
        EXPECT_EQ(firstMismatch(buf.data() + off, n, 0, 1, i), -1) << "write " << i << ", " << n
                                                                    << " bytes";
        EXPECT_EQ(buf[off - 1], 0xEE) << "byte before write " << i;
        EXPECT_EQ(buf[off + n], 0xEE) << "byte after write " << i;
        memset(buf.data() + off, 0xEE, n);
        b->ack[1].store(i + 1);
      }
    }
    if (c.rank == 0) printf("[ rxm      ] %llu -FI_EAGAIN before writes went through\n",
                            (unsigned long long)eagain);
    barrier(b, 2, [&] { pump.progress(); });
  });
}

// GPU-direct is asked for and falls back: tcp offers no FI_HMEM, so the endpoint opens without
// it and refuses to register device memory; shm offers FI_HMEM (system memory on this build),
// so it opens with it, host memory registers as before, and CUDA memory fails with a network
// error (libfabric without CUDA support) that the communicator's probe turns into staging.
TEST(FabricTest, HmemIsAskedForAndFallsBack) {
  SKIP_WITHOUT_TCP();
  auto st = test::runRanksStatus(1, netOptions(60), [](const RankContext&) {
    FabricOptions fo;
    fo.wantHmem = true;
    std::vector<char> host(1 << 16);
    {
      Fabric tcp("tcp", fo);
      EXPECT_FALSE(tcp.hmem());
      EXPECT_FALSE(tcp.deviceNeedsRegistration());
      EXPECT_NE(tcp.registerMemory(host.data(), host.size()), nullptr);
      expectError(rmaccInvalidArgument, "CUDA registration without FI_HMEM",
                  [&] { tcp.registerMemory(host.data(), host.size(), 0); });
    }
    std::unique_ptr<Fabric> shm;
    try {
      shm = std::make_unique<Fabric>("shm", fo);
    } catch (const Error&) {
      return;  // no shm provider with FI_RMA here: nothing more to check
    }
    EXPECT_TRUE(shm->hmem());
    EXPECT_NE(shm->registerMemory(host.data(), host.size()), nullptr);
    // Not CUDA memory, and no CUDA support.
    std::string text = expectError(rmaccNetworkError, "FI_HMEM_CUDA registration of host memory",
                                   [&] { shm->registerMemory(host.data(), host.size(), 0); });
    EXPECT_NE(text.find("FI_HMEM_CUDA"), std::string::npos) << text;
  });
  EXPECT_EQ(st[0], 0);
}

}  // namespace
}  // namespace rmacc
