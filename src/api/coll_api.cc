// The collectives: AlltoAllv, and AlltoAll as its uniform case.
#include <algorithm>

#include "api/api_guard.h"
#include "comm/window.h"
#include "coll/collective.h"

using namespace rmacc;
using namespace rmacc::api;

namespace {

// Converts the caller's element counts to bytes and checks what one rank can check alone.
// Returns the reason when the arguments are bad (the call then still joins the count exchange
// so that the other ranks skip it too instead of waiting for this rank).
std::string convert(const WindowRegistry& mem, const void* sendbuff, const size_t* sendcounts,
                    const size_t* sdispls, void* recvbuff, const size_t* recvcounts,
                    const size_t* rdispls, size_t esize, int n, AlltoallvArgs& a) {
  if (esize == 0) return "unknown datatype";
  if (!sendcounts || !sdispls || !recvcounts || !rdispls)
    return "counts and displacement arrays must not be NULL";
  a.elementBytes = esize;
  a.sendBytes.resize(n);
  a.sendOffset.resize(n);
  a.recvBytes.resize(n);
  a.recvOffset.resize(n);
  const size_t limit = SIZE_MAX / esize / 2;
  std::vector<std::pair<uint64_t, uint64_t>> recvBlocks;
  for (int p = 0; p < n; ++p) {
    const size_t* arrays[4] = {sendcounts, sdispls, recvcounts, rdispls};
    const char* names[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
    for (int k = 0; k < 4; ++k)
      if (arrays[k][p] > limit)
        return strprintf("%s[%d] = %zu elements of %zu bytes is too large (at most %zu: larger "
                         "sizes overflow the address space)", names[k], p, arrays[k][p], esize, limit);
    a.sendBytes[p] = sendcounts[p] * esize;
    a.sendOffset[p] = sdispls[p] * esize;
    a.recvBytes[p] = recvcounts[p] * esize;
    a.recvOffset[p] = rdispls[p] * esize;
    if (a.sendBytes[p] && !sendbuff) return strprintf("sendbuff is NULL with sendcounts[%d] > 0", p);
    if (a.recvBytes[p] && !recvbuff) return strprintf("recvbuff is NULL with recvcounts[%d] > 0", p);
    if (a.recvBytes[p]) recvBlocks.push_back({a.recvOffset[p], a.recvBytes[p]});
    // A block running past an rmaccMemAlloc buffer would read or write the next mapping.
    // Measured from the buffer's start (offsets are below SIZE_MAX / 2): a block that starts at
    // or after the allocation's end lies in no allocation, and a lookup of the block alone
    // would let it through.
    if (uint64_t past = a.sendBytes[p] ? mem.overrun(sendbuff, a.sendOffset[p] + a.sendBytes[p]) : 0)
      return strprintf("send block to rank %d (%zu elements at displacement %zu) runs %llu bytes past "
                       "the end of sendbuff's rmaccMemAlloc buffer", p, sendcounts[p], sdispls[p],
                       (unsigned long long)past);
    if (uint64_t past = a.recvBytes[p] ? mem.overrun(recvbuff, a.recvOffset[p] + a.recvBytes[p]) : 0)
      return strprintf("receive block from rank %d (%zu elements at displacement %zu) runs %llu bytes "
                       "past the end of recvbuff's rmaccMemAlloc buffer", p, recvcounts[p], rdispls[p],
                       (unsigned long long)past);
  }
  // Overlapping receive blocks would make the result depend on arrival order.
  std::sort(recvBlocks.begin(), recvBlocks.end());
  for (size_t i = 1; i < recvBlocks.size(); ++i)
    if (recvBlocks[i - 1].first + recvBlocks[i - 1].second > recvBlocks[i].first)
      return "receive blocks overlap";
  return "";
}

// Hands the call to the progress thread (a rejected call still joins the count exchange, so
// that the other ranks skip it too), then reports the rejection, or, on the host backend's NULL
// stream, waits for the call and reports how it ended.
// A rejected call on a stream being captured is recorded all the same: at every replay it joins
// the count exchange as rejected, so that the other ranks' replays fail instead of waiting.
void enqueue(Comm& c, AlltoallvArgs a, rmaccStream_t stream) {
  Stream* s = nullptr;
  try {
    s = &c.streamOf(stream, /*captureOk=*/true);
  } catch (const Error& e) {
    if (a.rejected.empty()) a.rejected = e.what();
    a.dynamic.reset();
  }
  std::string reason = a.rejected;
  uint64_t seq = c.coll().alltoallv(s, std::move(a));
  if (!reason.empty()) RMACC_THROW(rmaccInvalidArgument, "%s", reason.c_str());
  // Until its stream is synchronised, the call's outcome is the destroy's to report.
  if (!c.synchronousStream(stream) && seq != 0) c.noteCallOnStream(seq, stream);
  if (c.synchronousStream(stream)) {
    s->synchronize();
    c.checkHealthy();
    std::string text;
    rmaccResult_t e = c.coll().takeCallError(seq, &text);
    if (e != rmaccSuccess) throw Error(e, text);
  }
}

// `rejected`: the caller already found the arguments bad (the reason); the call still joins.
void alltoallv(Comm& c, const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
               void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
               int datatype, rmaccStream_t stream, uint64_t callSeq,
               std::string rejected = "") {
  AlltoallvArgs a;
  a.sendbuff = sendbuff;
  a.recvbuff = recvbuff;
  a.callSeq = callSeq;
  a.rejected = !rejected.empty() ? rejected
                                 : convert(c.windows(), sendbuff, sendcounts, sdispls, recvbuff,
                                           recvcounts, rdispls, typeSize(datatype), c.nRanks(), a);
  enqueue(c, std::move(a), stream);
}

}  // namespace

RMACC_API rmaccResult_t rmaccAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                                       const size_t sdispls[], void* recvbuff,
                                       const size_t recvcounts[], const size_t rdispls[],
                                       rmaccDataType_t datatype, rmaccComm_t comm,
                                       rmaccStream_t stream) {
  return guarded(comm, "rmaccAlltoAllv", [&] {
    Comm& c = healthyComm(comm);
    collective(c, "rmaccAlltoAllv", [&](uint64_t seq) {
      alltoallv(c, sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, rawValue(datatype),
                stream, seq);
    });
  });
}

RMACC_API rmaccResult_t rmaccAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      rmaccDataType_t datatype, rmaccComm_t comm,
                                      rmaccStream_t stream) {
  return guarded(comm, "rmaccAlltoAll", [&] {
    Comm& c = healthyComm(comm);
    const int n = c.nRanks();
    const size_t esize = typeSize(rawValue(datatype));
    std::string rejected;
    // The buffers hold n blocks of count elements: say so when that many bytes cannot exist.
    if (esize && count > SIZE_MAX / esize / (size_t)n)
      rejected = strprintf("count %zu x %d ranks x %zu-byte elements overflows the address space "
                           "(sendbuff and recvbuff must hold count x nranks elements)", count, n, esize);
    std::vector<size_t> counts(n, count), displs(n);
    for (int p = 0; p < n && rejected.empty(); ++p) displs[p] = (size_t)p * count;
    collective(c, "rmaccAlltoAll", [&](uint64_t seq) {
      alltoallv(c, sendbuff, counts.data(), displs.data(), recvbuff, counts.data(), displs.data(),
                rawValue(datatype), stream, seq, rejected);
    });
  });
}

RMACC_API rmaccResult_t rmaccAlltoAllvDynamic(const void* sendbuff, const size_t* sendcounts,
                                              const size_t* sdispls, void* recvbuff,
                                              size_t recvcapacity, size_t* recvcounts,
                                              size_t* rdispls, rmaccDataType_t datatype,
                                              rmaccComm_t comm, rmaccStream_t stream) {
  return guarded(comm, "rmaccAlltoAllvDynamic", [&] {
    Comm& c = healthyComm(comm);
    collective(c, "rmaccAlltoAllvDynamic", [&](uint64_t seq) {
      AlltoallvArgs a;
      a.sendbuff = sendbuff;
      a.recvbuff = recvbuff;
      a.callSeq = seq;
      DynamicArgs d;
      d.sendcounts = sendcounts;
      d.sdispls = sdispls;
      d.recvcounts = recvcounts;
      d.rdispls = rdispls;
      d.capacity = recvcapacity;
      d.esize = typeSize(rawValue(datatype));
      a.elementBytes = d.esize ? d.esize : 1;
      // What can be checked before the counts are known; the rest once the stream reads them.
      if (d.esize == 0) a.rejected = "unknown datatype";
      else if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        a.rejected = "counts and displacement arrays must not be NULL";
      else if (recvcapacity > SIZE_MAX / d.esize / 2)
        a.rejected = strprintf("recvcapacity = %zu elements of %zu bytes overflows the address space",
                               recvcapacity, d.esize);
      else if (recvcapacity && !recvbuff)
        a.rejected = "recvbuff is NULL with recvcapacity > 0";
      else if (uint64_t past = recvcapacity ? c.windows().overrun(recvbuff, recvcapacity * d.esize) : 0)
        a.rejected = strprintf("recvcapacity = %zu elements runs %llu bytes past the end of recvbuff's "
                               "rmaccMemAlloc buffer", recvcapacity, (unsigned long long)past);
      if (a.rejected.empty()) a.dynamic = d;
      enqueue(c, std::move(a), stream);
    });
  });
}

