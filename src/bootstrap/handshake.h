// The control plane's wire formats, and the accept loop shared by the root and by every rank's
// listener. All structs travel as raw bytes in host byte order: every rank of a job runs the
// same build on the same architecture (the magic numbers catch anything else).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "bootstrap/socket.h"

namespace rmacc::boot {

// A rank's first message to the root: who it is and where its own listener is.
struct RootHello {
  static constexpr uint64_t kMagic = 0x726d616363524831ull;  // "rmaccRH1"
  uint64_t magic;
  uint8_t secret[32];
  uint32_t rank;
  uint32_t nRanks;
  WireAddr listen;
  // kAbort: the rank failed its init before it could join (a bad argument, a local error);
  // rank and nRanks are what it was given, possibly invalid. The root fails every rank now.
  uint32_t flags;
  static constexpr uint32_t kAbort = 1;
};
static_assert(sizeof(RootHello) == 72, "RootHello is a wire format");

// The root's answer; with kOk it is followed by nRanks WireAddr (the listeners, by rank).
struct RootReply {
  // kAborted: a rank reported that its own init failed (RootHello::kAbort).
  enum Status : uint32_t { kOk = 0, kTimedOut = 1, kRejected = 2, kAborted = 3 };
  uint32_t status;
  uint32_t nRanks;   // as the root knows it (from the first rank that arrived)
  uint32_t arrived;  // ranks that had arrived when the root answered
  uint32_t pad;
};
static_assert(sizeof(RootReply) == 16, "RootReply is a wire format");

// The first message each way on a connection between two ranks: both sides prove they hold
// the secret and say which ends they are.
struct PeerHello {
  static constexpr uint64_t kMagic = 0x726d616363504831ull;  // "rmaccPH1"
  uint64_t magic;
  uint8_t secret[32];
  uint32_t from;
  uint32_t to;
  uint32_t nRanks;
  uint32_t pad;
};
static_assert(sizeof(PeerHello) == 56, "PeerHello is a wire format");

// Every later message between ranks: this header, then `bytes` of payload.
struct FrameHeader {
  uint32_t tag;
  uint32_t flags;  // 0; anything else is a protocol error
  uint64_t bytes;
};
static_assert(sizeof(FrameHeader) == 16, "FrameHeader is a wire format");

// Accepts connections on `listener` and reads exactly `helloBytes` from each, handing every
// complete hello to onHello (which keeps the socket, or lets it close to drop the stranger).
// Connections that close early or stay silent never hold up the others: one that has not
// completed its hello within 1 s is closed, and at most 256 such are held (the oldest goes
// first), so a flood of strangers can neither exhaust fds nor keep a rank out. Returns true once
// done() holds, false when `deadline` passes first; `deadline` is re-read on every turn so
// onHello may extend it. Exceptions from onHello propagate. `waiting`, when given, runs on
// every turn and at least once a second while nothing arrives (for progress reports).
bool acceptHellos(const Socket& listener, size_t helloBytes, const Deadline& deadline,
                  const std::function<void(Socket, const char* hello)>& onHello,
                  const std::function<bool()>& done,
                  const std::function<void()>& waiting = nullptr);

}  // namespace rmacc::boot
