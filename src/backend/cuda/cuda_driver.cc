#include "backend/cuda/cuda_driver.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "core/error.h"

namespace rmacc::cuda {

namespace {

void resolve(const char* name, void** fn) {
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  // CUDA_VERSION: the ABI of the declarations this file was compiled against.
  cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, fn, CUDA_VERSION, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || !*fn) {
    (void)cudaGetLastError();
    RMACC_THROW(rmaccUnhandledCudaError, "the CUDA driver has no %s (%s)", name,
                err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found");
  }
}

}  // namespace

const Driver& driver() {
  static std::once_flag once;
  static Driver d;
  static std::string failure;
  std::call_once(once, [] {
    try {
#define RMACC_DRIVER_RESOLVE(name) resolve(#name, reinterpret_cast<void**>(&d.name));
      RMACC_DRIVER_FUNCTIONS(RMACC_DRIVER_RESOLVE)
#undef RMACC_DRIVER_RESOLVE
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) RMACC_THROW(rmaccUnhandledCudaError, "%s", failure.c_str());
  return d;
}

}  // namespace rmacc::cuda
