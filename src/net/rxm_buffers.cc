// Why rmacc shrinks ofi_rxm's bounce buffers (issue 50, item 7).
//
// rxm gives every endpoint pools of bounce buffers of FI_OFI_RXM_BUFFER_SIZE bytes (16 KiB by
// default; the eager limit is the same) for messages and injected writes, and posts receive
// buffers of that size on every connection. rmacc sends no messages: its data goes by RMA
// writes, which rxm hands straight to the tcp (or verbs) endpoint, and the only payload it
// copies is an injected 8-byte signal value. At 16 KiB the pools come to tens of MiB a
// communicator, and in libfabric 1.17 not all of it goes back when the endpoint closes: a
// process that creates and destroys communicators keeps pools' worth of memory, even after
// malloc_trim (tests/comm_cycles_test bounds it). At 256 bytes a pool is a sixty-fourth of
// that. As for FI_UNIVERSE_SIZE (fabric_universe.cc), the provider reads the variables into
// globals when it is loaded, so the environment is the only handle; a user's own setting wins.
#include "net/rxm_buffers.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/log.h"

namespace rmacc {

void boundRxmBuffers() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string bytes = std::to_string(kRxmBufferBytes);
    for (const char* name : {"FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT"}) {
      if (const char* user = getenv(name)) {
        INFO(kSubsysNet, "%s=%s from the environment", name, user);
        continue;
      }
      // setenv is not safe against a concurrent getenv in another thread; this runs inside
      // communicator init, before rmacc starts threads of its own that read the environment.
      setenv(name, bytes.c_str(), 0);
      INFO(kSubsysNet, "%s set to %s (rmacc sends no messages; rxm's 16 KiB default costs "
           "tens of MiB of bounce buffers a communicator)", name, bytes.c_str());
    }
  });
}

}  // namespace rmacc
