// rmaccAlltoAllvPadded: the padded all-to-all with counts on the device (coll/padded_calls.h).
#include "api/api_guard.h"
#include "coll/collective.h"
#include "coll/padded_calls.h"
#include "comm/window.h"

using namespace rmacc;
using namespace rmacc::api;

namespace {

// What one rank can check alone; the reason when the arguments are bad (the call then still
// joins its peers, so that they skip it too instead of waiting for this rank).
std::string check(const WindowRegistry& mem, const PaddedArgs& a, int n) {
  if (a.esize == 0) return "unknown datatype";
  if (!a.sendcounts || !a.recvcounts) return "sendcounts and recvcounts must not be NULL";
  if (a.capacity > SIZE_MAX / 2 / a.esize / (size_t)n)
    return strprintf("capacity %zu x %d ranks x %zu-byte elements overflows the address space "
                     "(sendbuff and recvbuff hold nranks slots of capacity elements)",
                     a.capacity, n, a.esize);
  const size_t bytes = a.capacity * a.esize * n, countBytes = sizeof(uint64_t) * n;
  if (bytes && !a.sendbuff) return "sendbuff is NULL with capacity > 0";
  if (bytes && !a.recvbuff) return "recvbuff is NULL with capacity > 0";
  // A slot past an rmaccMemAlloc buffer would read or write the next mapping.
  const std::pair<const void*, const char*> spans[4] = {
      {a.sendbuff, "sendbuff"}, {a.recvbuff, "recvbuff"}, {a.sendcounts, "sendcounts"}, {a.recvcounts, "recvcounts"}};
  for (int k = 0; k < 4; ++k) {
    const size_t len = k < 2 ? bytes : countBytes;
    if (uint64_t past = len ? mem.overrun(spans[k].first, len) : 0)
      return strprintf("%s (%zu bytes: nranks %s) runs %llu bytes past the end of its rmaccMemAlloc "
                       "buffer", spans[k].second, len, k < 2 ? "slots of capacity elements" : "counts",
                       (unsigned long long)past);
  }
  // The counts land beside the rows: overlapping, one would overwrite the other.
  const auto* r = static_cast<const char*>(a.recvbuff);
  const auto* c = reinterpret_cast<const char*>(a.recvcounts);
  if (bytes && c < r + bytes && r < c + countBytes) return "recvcounts overlaps recvbuff";
  return "";
}

}  // namespace

RMACC_API rmaccResult_t rmaccAlltoAllvPadded(const void* sendbuff, const size_t* sendcounts,
                                             size_t capacity, void* recvbuff, size_t* recvcounts,
                                             rmaccDataType_t datatype, rmaccComm_t comm,
                                             rmaccStream_t stream) {
  static_assert(sizeof(size_t) == sizeof(uint64_t), "counts travel as 64-bit words");
  return guarded(comm, "rmaccAlltoAllvPadded", [&] {
    Comm& c = healthyComm(comm);
    collective(c, "rmaccAlltoAllvPadded", [&](uint64_t callSeq) {
      PaddedArgs a;
      a.sendbuff = sendbuff;
      a.sendcounts = sendcounts;
      a.capacity = capacity;
      a.recvbuff = recvbuff;
      a.recvcounts = recvcounts;
      a.esize = typeSize(rawValue(datatype));
      a.callSeq = callSeq;
      a.rejected = check(c.windows(), a, c.nRanks());
      Stream* s = nullptr;
      try {
        s = &c.streamOf(stream, /*captureOk=*/true);
      } catch (const Error& e) {
        if (a.rejected.empty()) a.rejected = e.what();
      }
      const std::string reason = a.rejected;
      const std::vector<uint64_t> seqs = c.padded().enqueue(s, a);
      if (!reason.empty()) RMACC_THROW(rmaccInvalidArgument, "%s", reason.c_str());
      const bool sync = c.synchronousStream(stream);
      // Until its stream is synchronised, the call's outcome is the destroy's to report.
      for (uint64_t seq : seqs)
        if (!sync && seq != 0) c.noteCallOnStream(seq, stream);
      if (!sync) return;
      s->synchronize();
      c.padded().check();
      c.checkHealthy();
      // Both parts' errors are taken (a peer's rejection fails both); the first is told.
      rmaccResult_t first = rmaccSuccess;
      std::string text;
      for (uint64_t seq : seqs) {
        std::string t;
        rmaccResult_t e = c.coll().takeCallError(seq, &t);
        if (e != rmaccSuccess && first == rmaccSuccess) first = e, text = t;
      }
      if (first != rmaccSuccess) throw Error(first, text);
    });
  });
}
