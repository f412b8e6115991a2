// The driver API calls the CUDA backend makes, resolved at run time through the runtime's
// cudaGetDriverEntryPointByVersion: the library never links libcuda, so it loads (and falls
// back to the host backend) on machines without a GPU driver, such as CI.
#pragma once

#include <cuda.h>

namespace rmacc::cuda {

#define RMACC_DRIVER_FUNCTIONS(X)                                                          \
  X(cuGetErrorString) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuDeviceGet)                  \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)          \
  X(cuMemAddressFree) X(cuMemAddressReserve) X(cuMemCreate) X(cuMemExportToShareableHandle) \
  X(cuMemGetAllocationGranularity) X(cuMemImportFromShareableHandle) X(cuMemMap)            \
  X(cuMemRelease) X(cuMemSetAccess) X(cuMemUnmap) X(cuMemsetD8Async) X(cuStreamBatchMemOp)  \
  X(cuStreamSynchronize) X(cuStreamWriteValue64) X(cuPointerGetAttributes)              \
  X(cuModuleGetLoadingMode)

// One pointer per function, named like the function (cuda.h's versioning macros apply to
// both the member name and its type, so calls read driver().cuMemCreate(...)).
struct Driver {
#define RMACC_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  RMACC_DRIVER_FUNCTIONS(RMACC_DRIVER_MEMBER)
#undef RMACC_DRIVER_MEMBER
};

// Resolves every function on first use; throws rmaccUnhandledCudaError when the driver lacks
// one (too old, or no driver at all).
const Driver& driver();

}  // namespace rmacc::cuda
