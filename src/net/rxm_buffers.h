// Sizes the bounce buffers of ofi_rxm (the RDM layer libfabric puts over tcp and verbs), which
// rmacc does not use: it moves data with RMA writes only, never with messages.
#pragma once

#include <cstddef>

namespace rmacc {

// Sets FI_OFI_RXM_BUFFER_SIZE and FI_OFI_RXM_EAGER_LIMIT to kRxmBufferBytes for this process,
// each unless the user set it. Only the first call in a process acts: libfabric reads them
// once, when it loads its providers, so it must run before the process's first fi_getinfo
// (Fabric's constructor calls it first). Logs the values in effect at INFO.
void boundRxmBuffers();

// rxm's inject limit is this less its packet header: enough for the 8-byte signal values
// (Fabric::writeValue), which it copies into such a buffer.
constexpr size_t kRxmBufferBytes = 256;

}  // namespace rmacc
