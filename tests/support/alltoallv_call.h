// One AlltoAllV call of a multi-process test, filled, run and checked byte by byte, on ranks
// spread over emulated nodes (rank r on node r % nodes) that talk over tcp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {

struct Topo {
  int nodes, local;
};

// tcpRanks on `t`'s nodes, scattered (not contiguous blocks: rank r sits on node r % nodes).
RunOptions optionsFor(Topo t, std::vector<std::pair<std::string, std::string>> extra = {});

// Buffers of one call: malloc'd, or from rmaccMemAlloc (the zero-copy path); the receive
// buffer poisoned.
struct Buffers {
  rmaccComm_t comm;
  bool registered;
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  Buffers(rmaccComm_t c, bool reg, size_t sendBytes, size_t recvBytes);
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
};

// One call of the global count matrix `counts` (support/alltoallv_case.h): fill, run on
// `stream` (synchronised unless NULL), check. Returns the wrong bytes.
size_t oneCall(TestComm& comm, const std::vector<size_t>& counts, rmaccDataType_t type,
               bool registered, uint64_t seed, rmaccStream_t stream);

}  // namespace rmacc::test
