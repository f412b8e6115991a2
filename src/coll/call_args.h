// One AlltoAllV's arguments as the collective layer carries them from the C API to the paths
// that run it (coll/collective.h: enqueued, triggered at replay, in the graph): byte counts and
// offsets by peer, and, for rmaccAlltoAllvDynamic, where the counts are on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rmacc {

// Counts on the device (rmaccAlltoAllvDynamic, coll/dynamic_counts.h).
struct DynamicArgs {
  const size_t* sendcounts = nullptr;  // [n] elements, device memory (host on the host backend)
  const size_t* sdispls = nullptr;     // [n]
  size_t* recvcounts = nullptr;        // [n] written by the call
  size_t* rdispls = nullptr;           // [n] written by the call
  size_t capacity = 0;                 // elements recvbuff holds
  size_t esize = 0;
};

struct AlltoallvArgs {
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::vector<uint64_t> sendBytes, sendOffset;  // by peer, in bytes
  std::vector<uint64_t> recvBytes, recvOffset;
  std::string rejected;  // non-empty: this rank's arguments were invalid (the reason)
  // Counts on the device (rmaccAlltoAllvDynamic): the byte counts and offsets above are filled
  // by the progress thread once the stream has reached the call.
  std::optional<DynamicArgs> dynamic;
  uint64_t callSeq = 0;  // the communicator's collective call number (Comm::beginCall)
  uint64_t elementBytes = 1;  // the datatype's size (errors speak in elements)
};

}  // namespace rmacc
