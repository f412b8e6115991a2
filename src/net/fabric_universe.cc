// Why rmacc sets FI_UNIVERSE_SIZE (issue 17, item 5; docs/decisions.md#fi-universe-size).
//
// ofi_rxm, the RDM layer libfabric puts over tcp (and verbs), opens one completion queue for
// the connections under each endpoint with (msg tx size + msg rx size) x FI_UNIVERSE_SIZE
// entries; the universe defaults to 256. On tcp that is a 12 MiB calloc'd ring whose pages
// become resident one at a time as completions walk through it: every rank's RSS grew by
// ~0.37 KiB an AlltoAllV call on 2 x 2 for ~35,000 calls, until the ring wrapped. No fi_getinfo
// hint reaches that size (in libfabric 1.17 the provider reads the variable into a global when
// it is loaded, at the process's first fi_getinfo, and multiplies by it when the endpoint is
// enabled; fi_cq_attr.size applies only to rmacc's own CQ), so the environment is the only
// handle. The job's rank count is the number of processes the endpoint can ever connect to,
// which is what the variable means. A user's own setting wins.
#include "net/fabric_universe.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/log.h"

namespace rmacc {

void sizeFabricUniverse(int nRanks) {
  static std::mutex mu;
  static bool decided = false;
  std::lock_guard<std::mutex> lock(mu);
  // Once per process: providers are loaded once, so a later communicator cannot change it
  // (a larger one only gets a ring that wraps sooner; the provider queues past a full ring).
  if (decided) return;
  decided = true;
  if (const char* user = getenv("FI_UNIVERSE_SIZE")) {
    INFO(kSubsysNet, "FI_UNIVERSE_SIZE=%s from the environment: libfabric's internal "
         "completion rings are sized for that many processes", user);
    return;
  }
  int universe = std::max(nRanks, kMinFabricUniverse);
  // setenv is not safe against a concurrent getenv in another thread; this runs inside
  // communicator init, before rmacc starts threads of its own that read the environment.
  setenv("FI_UNIVERSE_SIZE", std::to_string(universe).c_str(), 0);
  INFO(kSubsysNet, "FI_UNIVERSE_SIZE set to %d (the communicator's rank count; libfabric's "
       "default of 256 makes ofi_rxm's completion ring 12 MiB, resident page by page)", universe);
}

}  // namespace rmacc
