#include "support/alltoallv_call.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "support/alltoallv_case.h"

namespace rmacc::test {

RunOptions optionsFor(Topo t, std::vector<std::pair<std::string, std::string>> extra) {
  return tcpRanks(scatteredNodes(t.nodes, t.local), std::move(extra));
}

Buffers::Buffers(rmaccComm_t c, bool reg, size_t sendBytes, size_t recvBytes)
    : comm(c), registered(reg) {
  sendBytes = std::max<size_t>(sendBytes, 1);
  recvBytes = std::max<size_t>(recvBytes, 1);
  if (reg) {
    void *s, *r;
    EXPECT_EQ(rmaccMemAlloc(c, &s, sendBytes), rmaccSuccess);
    EXPECT_EQ(rmaccMemAlloc(c, &r, recvBytes), rmaccSuccess);
    send = (uint8_t*)s, recv = (uint8_t*)r;
  } else {
    send = (uint8_t*)malloc(sendBytes);
    recv = (uint8_t*)malloc(recvBytes);
  }
  memset(recv, kPoison, recvBytes);
}

Buffers::~Buffers() {
  if (registered) rmaccMemFree(comm, send), rmaccMemFree(comm, recv);
  else free(send), free(recv);
}

// One call: fill, run, check. Returns the wrong bytes.
size_t oneCall(TestComm& comm, const std::vector<size_t>& counts, rmaccDataType_t type,
               bool registered, uint64_t seed, rmaccStream_t stream) {
  const int n = [&] { int x; rmaccCommCount(comm.get(), &x); return x; }();
  const int me = [&] { int x; rmaccCommUserRank(comm.get(), &x); return x; }();
  size_t esize = rmaccTypeSize(type);
  Layout l = makeLayout(counts, n, me, seed);
  Buffers b(comm.get(), registered, l.sendElems * esize, l.recvElems * esize);
  fillSend(b.send, l, esize, me, seed);
  rmaccResult_t r = rmaccAlltoAllv(b.send, l.sendcounts.data(), l.sdispls.data(), b.recv,
                                   l.recvcounts.data(), l.rdispls.data(), type, comm.get(), stream);
  EXPECT_EQ(r, rmaccSuccess) << comm.lastError();
  if (stream) EXPECT_EQ(rmaccStreamSynchronize(comm.get(), stream), rmaccSuccess) << comm.lastError();
  std::string first;
  size_t wrong = checkRecv(b.recv, l, esize, me, seed, &first);
  EXPECT_EQ(wrong, 0u) << "rank " << me << ": " << first;
  return wrong;
}

}  // namespace rmacc::test
