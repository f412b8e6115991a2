// The control plane: how ranks find each other and exchange setup data (MSCCL++'s Bootstrap).
// Everything that crosses processes here is bytes. Used for setup and for per-call metadata;
// never for bulk data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rmacc.h"

namespace rmacc {

// What rmaccGetUniqueId puts in rmaccUniqueId::internal: the root's address and a random
// secret every connection must present.
struct UniqueIdData {
  static constexpr uint64_t kMagic = 0x726d616363494431ull;  // "rmaccID1"
  uint64_t magic;
  uint8_t secret[32];
  uint16_t family;       // AF_INET or AF_INET6
  uint16_t port;         // network byte order
  uint8_t addr[16];      // IPv4 in the first 4 bytes, or IPv6
};
static_assert(sizeof(UniqueIdData) <= RMACC_UNIQUE_ID_BYTES, "unique id too large");

// Tags with this bit set belong to the bootstrap's own collectives (allGather, barrier);
// send and recv reject them with rmaccInvalidArgument.
constexpr uint32_t kBootstrapReservedTagBit = 0x80000000u;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int nRanks() const = 0;
  // Every rank contributes `bytes` at data + rank*bytes; on return all slots are filled.
  virtual void allGather(void* data, size_t bytes) = 0;
  virtual void barrier() = 0;
  // Point-to-point messages; `tag` separates independent exchanges. recv blocks until a
  // message with that tag arrives from `peer` and returns it whole. Messages with the same
  // (peer, tag) arrive in the order they were sent. Both are safe to call from several threads.
  virtual void send(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  virtual std::vector<char> recv(int peer, uint32_t tag) = 0;
  // recv that gives up at `deadline` (monotonicSeconds; infinity: never): false, with nothing
  // consumed, when no such message came by then. Throws as recv does. Default: recv.
  virtual bool recvBy(int peer, uint32_t tag, double deadline, std::vector<char>& out) {
    (void)deadline;
    out = recv(peer, tag);
    return true;
  }
  // Makes every blocked and later call throw rmaccRemoteError ("aborted"), and tells every
  // peer why (`reason`, best effort) before the connections go down.
  virtual void abort() = 0;
  virtual void abort(const std::string& reason) {
    (void)reason;
    abort();
  }

  // Fault notification (DESIGN.md §4: a dead peer becomes an error on every survivor within a
  // second). `fn` runs on the control plane's own thread, once per peer, when a peer is lost:
  // its connection closed without a goodbye, it aborted (with its reason), or its process
  // (watched with watchProcess) exited. Pass nullptr to stop notifications; the call waits for
  // a notification in progress.
  using PeerLostFn = std::function<void(int peer, const std::string& why)>;
  virtual void setPeerLostHandler(PeerLostFn fn) { (void)fn; }
  // Watches a peer's process through a pidfd (ranks of the same node); takes the fd.
  virtual void watchProcess(int peer, int pidfd) { (void)peer, (void)pidfd; }
  // Tells every peer that this rank leaves on purpose: its connections closing later is not a
  // fault (rmaccCommDestroy).
  virtual void leave() {}
  // What this rank is doing, answered by the control plane's thread to peers' statusOfPeers
  // (for error messages: "rank 2 is in call #7 (rmaccBarrier)").
  virtual void setStatusProvider(std::function<std::string()> fn) { (void)fn; }
  // Asks every peer for its status; waits at most waitS. Entry r: rank r's answer, or why
  // none came.
  virtual std::vector<std::string> statusOfPeers(double waitS) {
    (void)waitS;
    return {};
  }
};

// Fills a fresh id: starts the root listener thread of this process that ranks rendezvous with
// (it serves one communicator, then exits). Throws rmaccSystemError when no address works.
void createUniqueId(rmaccUniqueId* id);

// Connects rank `rank` of `nRanks` through the root named in `id`. Every wait is bounded by
// timeoutS: a rank that never arrives makes the others throw rmaccTimeout; a connection that
// does not present the id's secret is dropped; a peer that dies makes the others throw
// rmaccRemoteError.
std::unique_ptr<Bootstrap> createTcpBootstrap(const rmaccUniqueId& id, int rank, int nRanks,
                                              double timeoutS);

// Best effort, bounded by about a second, never throws: tells the root named in `id` (when the
// id is well formed) that this rank's init failed, so the root fails every rank's rendezvous
// now instead of letting them wait for this one until their timeout. `rank` and `nRanks` are
// what the caller passed (they may be the invalid argument); they are only logged.
void abortRendezvous(const rmaccUniqueId& id, int rank, int nRanks);

}  // namespace rmacc
