#include "backend/host/host_memory.h"

#include <cstring>

#include "core/error.h"

namespace rmacc::host {

ExportHandle HostAllocation::exportHandle() const {
  const WireHandle h = segment_.handle();
  ExportHandle bytes(sizeof(h));
  memcpy(bytes.data(), &h, sizeof(h));
  return bytes;
}

std::unique_ptr<Mapping> importAllocation(const ExportHandle& handle) {
  WireHandle h;
  RMACC_ARG_CHECK(handle.size() == sizeof(h), "import: handle has %zu bytes, expected %zu",
                  handle.size(), sizeof(h));
  memcpy(&h, handle.data(), sizeof(h));
  return std::make_unique<HostMapping>(h);
}

}  // namespace rmacc::host
