// Sizes libfabric's per-process "universe" (FI_UNIVERSE_SIZE) from the communicator, so that
// the provider's internal rings are sized for this job rather than for 256 processes.
#pragma once

namespace rmacc {

// Sets FI_UNIVERSE_SIZE to `nRanks` (at least kMinFabricUniverse) for this process, unless the
// user set it. Only the first call in a process acts: libfabric reads the variable once, when
// it loads its providers, so it must run before the process's first fi_getinfo (Fabric's
// constructor calls it first). Logs the value in effect at INFO.
void sizeFabricUniverse(int nRanks);

// Small jobs still get rings of a few entries per connection.
constexpr int kMinFabricUniverse = 2;

}  // namespace rmacc
