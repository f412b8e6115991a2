// rmaccAlltoAllvPadded on the host backend (coll/padded_calls.h): whole slots and their count
// words land in the receivers' slots byte for byte, at every occupancy (zero, random, full),
// for several capacities and datatypes, interleaved with rmaccAlltoAllv and rmaccAlltoAll on
// the same stream, on each path a fixed-count call takes (enqueued; recorded whole, as in a
// graph, with RMACC_GRAPH_CALLS=always; triggered by the stream, as captured across nodes).
// A count above the capacity moves only the capacity and fails every rank's communicator.
// tests/cuda_padded_test.cc captures real CUDA graphs. Real processes, libfabric tcp loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

enum class Path { kEnqueued, kInGraph, kTriggered };

const char* pathName(Path p) {
  return p == Path::kEnqueued ? "enqueued" : p == Path::kInGraph ? "in_graph" : "triggered";
}

RunOptions optionsFor(int nodes, int local, Path path) {
  RunOptions o = tcpRanks(scatteredNodes(nodes, local),
                          {{"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"}});
  if (path == Path::kInGraph) o.env.push_back({"RMACC_GRAPH_CALLS", "always"});
  if (path == Path::kTriggered) o.env.push_back({"RMACC_STREAM_TRIGGER", "always"});
  return o;
}

// Memory for one buffer: rmaccMemAlloc (what node mates map: the in-graph path needs it), or
// plain host memory (the other paths stage it).
struct Buffer {
  rmaccComm_t comm;
  bool shared;
  std::vector<uint8_t> own;
  uint8_t* p = nullptr;
  size_t bytes;
  Buffer(rmaccComm_t c, size_t n, bool useShared) : comm(c), shared(useShared), bytes(n) {
    if (shared) {
      void* q = nullptr;
      EXPECT_EQ(rmaccMemAlloc(comm, &q, n ? n : 1), rmaccSuccess);
      p = static_cast<uint8_t*>(q);
    } else {
      own.resize(n ? n : 1);
      p = own.data();
    }
  }
  ~Buffer() {
    if (shared) rmaccMemFree(comm, p);
  }
  size_t* words() { return reinterpret_cast<size_t*>(p); }
};

struct Type {
  rmaccDataType_t type;
  size_t esize;
};

// counts[i * n + j]: what rank i says it sends to rank j, the same matrix on every rank.
enum class Fill { kZero, kRandom, kFull };
std::vector<size_t> countsOf(Fill f, int n, size_t capacity, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> c(n * n);
  for (size_t& x : c) x = f == Fill::kZero ? 0 : f == Fill::kFull ? capacity : rng() % (capacity + 1);
  return c;
}

// One rank's buffers for padded calls of up to `maxSlot` bytes a slot, kept for the whole
// test: with RMACC_GRAPH_CALLS=always an identical call reuses its site and the mappings it
// made (as a graph's replays do), so buffers must not be freed and made again in between.
struct Slots {
  Buffer send, recv, sc, rc;
  static constexpr size_t kGuard = 64;  // past the slots: must stay untouched
  Slots(rmaccComm_t c, int n, size_t maxSlot, bool shared)
      : send(c, n * maxSlot, shared), recv(c, n * maxSlot + kGuard, shared),
        sc(c, n * sizeof(size_t), shared), rc(c, n * sizeof(size_t), shared) {}
};

// One padded call, checked: every byte of every slot (rows past the count move too), the
// counts, and that nothing was written past the slots. "" when all is right.
std::string paddedCall(TestComm& comm, Slots& b, int n, int me, size_t capacity, Type t,
                       const std::vector<size_t>& counts, uint64_t salt, rmaccStream_t stream) {
  const size_t slot = capacity * t.esize;
  for (int j = 0; j < n; ++j) {
    for (size_t k = 0; k < slot; ++k) b.send.p[j * slot + k] = patternByte(me, j, k, salt);
    b.sc.words()[j] = counts[me * n + j];
    b.rc.words()[j] = 0xdeadbeef;
  }
  memset(b.recv.p, kPoison, b.recv.bytes);
  rmaccResult_t r = rmaccAlltoAllvPadded(b.send.p, b.sc.words(), capacity, b.recv.p, b.rc.words(),
                                         t.type, comm.get(), stream);
  if (r != rmaccSuccess) return std::string("call: ") + comm.lastError();
  if (stream && (r = comm.sync()) != rmaccSuccess) return std::string("sync: ") + comm.lastError();
  for (int i = 0; i < n; ++i) {
    if (b.rc.words()[i] != counts[i * n + me])
      return "recvcounts[" + std::to_string(i) + "] = " + std::to_string(b.rc.words()[i]) +
             ", expected " + std::to_string(counts[i * n + me]);
    for (size_t k = 0; k < slot; ++k)
      if (b.recv.p[i * slot + k] != patternByte(i, me, k, salt))
        return "byte " + std::to_string(k) + " of slot " + std::to_string(i);
  }
  for (size_t k = n * slot; k < b.recv.bytes; ++k)
    if (b.recv.p[k] != kPoison) return "written past the slots at byte " + std::to_string(k - n * slot);
  return "";
}

// An rmaccAlltoAllv between padded calls on the same stream, checked.
std::string packedCall(TestComm& comm, int n, int me, uint64_t seed) {
  auto counts = makeCounts(Pattern::kRandom, n, 33, seed);
  Layout l = makeLayout(counts, n, me, seed);
  std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4);
  fillSend(send.data(), l, 4, me, seed);
  memset(recv.data(), kPoison, recv.size());
  if (rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(), l.recvcounts.data(),
                     l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream()) != rmaccSuccess ||
      comm.sync() != rmaccSuccess)
    return std::string("AlltoAllv: ") + comm.lastError();
  std::string first;
  if (checkRecv(recv.data(), l, 4, me, seed, &first) != 0) return "AlltoAllv: " + first;
  return "";
}

using Shape = std::tuple<int, int, Path>;
class Padded : public testing::TestWithParam<Shape> {};

TEST_P(Padded, SlotsAndCountsLandByteExact) {
  auto [nodes, local, path] = GetParam();
  const int n = nodes * local;
  const bool shared = path == Path::kInGraph;
  runRanks(n, optionsFor(nodes, local, path), [&, path = path](const RankContext& ctx) {
    TestComm comm(ctx);
    const Type types[] = {{rmaccInt8, 1}, {rmaccBfloat16, 2}, {rmaccFloat32, 4}, {rmaccInt64, 8}};
    const size_t capacities[] = {1, 7, 300};
    Slots b(comm.get(), n, 300 * 8, shared);
    uint64_t salt = 1;
    for (size_t capacity : capacities)
      for (const Type& t : types)
        for (Fill f : {Fill::kRandom, Fill::kZero, Fill::kFull}) {
          auto counts = countsOf(f, n, capacity, salt * 31 + capacity);
          std::string why = paddedCall(comm, b, n, ctx.rank, capacity, t, counts, salt, comm.stream());
          ASSERT_EQ(why, "") << "capacity " << capacity << ", " << t.esize << "-byte elements, fill "
                             << (int)f << ", call " << salt;
          if (salt % 4 == 0) {
            std::string p = packedCall(comm, n, ctx.rank, salt);
            ASSERT_EQ(p, "") << "after padded call " << salt;
          }
          ++salt;
        }
    // The same buffers again and again (a graph's replays; RMACC_GRAPH_CALLS=always reuses the
    // site), then the host backend's NULL stream (returns when done).
    auto counts = countsOf(Fill::kRandom, n, 16, 99);
    for (int k = 0; k < 5; ++k)
      ASSERT_EQ(paddedCall(comm, b, n, ctx.rank, 16, types[2], counts, 500 + k, comm.stream()), "");
    if (path != Path::kTriggered)
      ASSERT_EQ(paddedCall(comm, b, n, ctx.rank, 16, types[2], counts, 600, nullptr), "");
    rmaccResult_t async = rmaccInternalError;
    EXPECT_EQ(rmaccCommGetAsyncError(comm.get(), &async), rmaccSuccess);
    EXPECT_EQ(async, rmaccSuccess);
  });
}

// Rank 0 says it sends one element more than the capacity to the last rank: exactly the
// capacity moves (nothing lands past the slots), the count word arrives as sent, and every
// rank's communicator fails, the two concerned ranks at their synchronisation, with the reason.
TEST_P(Padded, CountAboveCapacityFailsEveryRankAndWritesOnlyTheSlots) {
  auto [nodes, local, path] = GetParam();
  const int n = nodes * local;
  const bool shared = path == Path::kInGraph;
  runRanks(n, optionsFor(nodes, local, path), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const size_t capacity = 5, slot = capacity * 4, guard = 64;
    const int me = ctx.rank, bad = n - 1;
    Buffer send(comm.get(), n * slot, shared), recv(comm.get(), n * slot + guard, shared);
    Buffer sc(comm.get(), n * sizeof(size_t), shared), rc(comm.get(), n * sizeof(size_t), shared);
    for (int j = 0; j < n; ++j) {
      for (size_t b = 0; b < slot; ++b) send.p[j * slot + b] = patternByte(me, j, b, 7);
      sc.words()[j] = me == 0 && j == bad ? capacity + 1 : capacity;
    }
    memset(recv.p, kPoison, recv.bytes);
    ASSERT_EQ(rmaccAlltoAllvPadded(send.p, sc.words(), capacity, recv.p, rc.words(), rmaccFloat32,
                                   comm.get(), comm.stream()),
              rmaccSuccess)
        << comm.lastError();
    const bool concerned = me == 0 || me == bad;
    rmaccResult_t r = comm.sync();
    std::string text = comm.lastError();
    if (concerned) {
      EXPECT_NE(r, rmaccSuccess);
    } else {
      // Told by the peers' abort, within a second or so.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      rmaccResult_t async = rmaccSuccess;
      while (async == rmaccSuccess && std::chrono::steady_clock::now() < until) {
        EXPECT_EQ(rmaccCommGetAsyncError(comm.get(), &async), rmaccSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_NE(async, rmaccSuccess);
      r = comm.sync();
      text = comm.lastError();
      EXPECT_NE(r, rmaccSuccess);
    }
    EXPECT_TRUE(r == rmaccInvalidUsage || r == rmaccRemoteError) << rmaccGetErrorString(r);
    EXPECT_NE(text.find("more than capacity 5"), std::string::npos) << text;
    // The receiver's own check (rmaccInvalidUsage) saw its stream complete the call; told by a
    // peer's abort first (rmaccRemoteError), its call may have been cut short.
    if (me == bad && r == rmaccInvalidUsage) {
      EXPECT_EQ(rc.words()[0], capacity + 1);  // the count as sent
      for (size_t b = 0; b < slot; ++b)
        ASSERT_EQ(recv.p[b], patternByte(0, me, b, 7)) << "byte " << b << " of rank 0's slot";
      for (size_t b = n * slot; b < recv.bytes; ++b) ASSERT_EQ(recv.p[b], kPoison) << "past recvbuff";
    }
    // The communicator has failed: the next call says so at once.
    EXPECT_NE(rmaccAlltoAllvPadded(send.p, sc.words(), capacity, recv.p, rc.words(), rmaccFloat32,
                                   comm.get(), comm.stream()),
              rmaccSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Padded,
                         testing::Values(Shape{1, 1, Path::kEnqueued}, Shape{1, 2, Path::kEnqueued},
                                         Shape{2, 1, Path::kEnqueued}, Shape{2, 2, Path::kEnqueued},
                                         Shape{1, 1, Path::kInGraph}, Shape{1, 2, Path::kInGraph},
                                         Shape{1, 4, Path::kInGraph}, Shape{1, 2, Path::kTriggered},
                                         Shape{2, 2, Path::kTriggered}),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return std::to_string(std::get<0>(i.param)) + "x" +
                                  std::to_string(std::get<1>(i.param)) + "_" +
                                  pathName(std::get<2>(i.param));
                         });

// Bad arguments: refused at the call on the rank that made them (rmaccInvalidArgument), the
// peers' call fails with rmaccInvalidUsage at their synchronisation (once, for both parts of
// the call), and the communicator goes on.
TEST(PaddedArgs, BadArgumentsAreRefusedAndTheNextCallWorks) {
  runRanks(2, optionsFor(1, 2, Path::kEnqueued), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    size_t sc[2] = {1, 1}, rc[2];
    int32_t send[8] = {}, recv[8];
    auto call = [&](const void* s, const size_t* c, size_t cap, void* r, size_t* counts, rmaccDataType_t t) {
      return rmaccAlltoAllvPadded(s, c, cap, r, counts, t, comm.get(), comm.stream());
    };
    auto expectAll = [&](rmaccResult_t got, const char* what) {
      EXPECT_EQ(got, rmaccInvalidArgument) << what;
      EXPECT_NE(std::string(comm.lastError()).find(what), std::string::npos) << comm.lastError();
      EXPECT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();  // every rank refused it
    };
    // Every rank makes the same mistake.
    expectAll(call(send, nullptr, 4, recv, rc, rmaccInt32), "must not be NULL");
    expectAll(call(send, sc, 4, recv, nullptr, rmaccInt32), "must not be NULL");
    expectAll(call(send, sc, 4, recv, rc, (rmaccDataType_t)1234), "unknown datatype");
    expectAll(call(send, sc, SIZE_MAX / 2, recv, rc, rmaccInt32), "overflows");
    expectAll(call(send, sc, 4, nullptr, rc, rmaccInt32), "recvbuff is NULL");
    expectAll(call(send, sc, 4, recv, reinterpret_cast<size_t*>(recv + 2), rmaccInt32), "overlaps");
    void* small = nullptr;
    ASSERT_EQ(rmaccMemAlloc(comm.get(), &small, 16), rmaccSuccess);
    // 2 slots of 4096 int32 (32 KiB) run past a 16-byte buffer (a page once rounded up).
    rmaccResult_t got = call(send, sc, 4096, small, rc, rmaccInt32);
    EXPECT_EQ(got, rmaccInvalidArgument);
    EXPECT_NE(std::string(comm.lastError()).find("past the end"), std::string::npos) << comm.lastError();
    EXPECT_EQ(comm.sync(), rmaccSuccess);
    rmaccMemFree(comm.get(), small);
    // One rank alone is wrong: the other is told at its synchronisation, once.
    got = call(send, ctx.rank == 0 ? nullptr : sc, 4, recv, rc, rmaccInt32);
    if (ctx.rank == 0) {
      EXPECT_EQ(got, rmaccInvalidArgument);
      EXPECT_EQ(comm.sync(), rmaccSuccess);
    } else {
      EXPECT_EQ(got, rmaccSuccess);
      EXPECT_EQ(comm.sync(), rmaccInvalidUsage) << comm.lastError();
      EXPECT_EQ(comm.sync(), rmaccSuccess) << "the slots' and the counts' parts were told apart";
    }
    // Still usable.
    Slots b(comm.get(), 2, 16, false);
    ASSERT_EQ(paddedCall(comm, b, 2, ctx.rank, 4, {rmaccInt32, 4}, countsOf(Fill::kRandom, 2, 4, 3), 5,
                         comm.stream()),
              "");
  });
}

}  // namespace
}  // namespace rmacc::test
