// The few NCCL declarations the benchmarks need, written from NCCL's documented C API (nccl.h of
// 2.28), and a loader that takes them from a libnccl.so.2 with dlopen: the benchmarks measure
// the NCCL that PyTorch ships, without NCCL's headers or a link-time dependency.
//
// Only types whose layout NCCL documents are declared here. ncclConfig_t is the 2.28 layout
// (ncclConfig_v22800): NCCL reads a config by the size and version stored in its first fields,
// so a newer library accepts it as well.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <string>

namespace rmacc::nccl {

using Comm = struct ncclComm*;
using Window = struct ncclWindow_vidmem*;
using Result = int;  // ncclResult_t: 0 success, 7 in progress, others errors
constexpr Result kSuccess = 0;

struct UniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};

// ncclDataType_t values used here.
constexpr int kUint8 = 1;
constexpr int kFloat32 = 7;

constexpr int kWinCollSymmetric = 0x01;  // NCCL_WIN_COLL_SYMMETRIC
constexpr int kCtaPolicyDefault = 0x00;  // NCCL_CTA_POLICY_DEFAULT
constexpr int kCtaPolicyZero = 0x02;     // NCCL_CTA_POLICY_ZERO
constexpr int kConfigUndefInt = INT_MIN;  // NCCL_CONFIG_UNDEF_INT

// ncclConfig_t as of NCCL 2.28 (field order and types from nccl.h).
struct Config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
};

// What NCCL_CONFIG_INITIALIZER gives with a 2.28 header: every attribute undefined.
Config defaultConfig();

// NCCL_VERSION_CODE of a release (2.28.9 -> 22809).
constexpr int versionCode(int major, int minor, int patch) {
  return major <= 2 && minor <= 8 ? major * 1000 + minor * 100 + patch : major * 10000 + minor * 100 + patch;
}

// The functions, looked up by name. Every pointer is set once load() returned true.
struct Api {
  std::string path;  // the library actually loaded
  int version = 0;   // ncclGetVersion
  Result (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(Result) = nullptr;
  const char* (*GetLastError)(Comm) = nullptr;
  Result (*GetUniqueId)(UniqueId*) = nullptr;
  Result (*CommInitRankConfig)(Comm*, int, UniqueId, int, Config*) = nullptr;
  Result (*CommDestroy)(Comm) = nullptr;
  Result (*MemAlloc)(void**, size_t) = nullptr;
  Result (*MemFree)(void*) = nullptr;
  Result (*CommWindowRegister)(Comm, void*, size_t, Window*, int) = nullptr;
  Result (*CommWindowDeregister)(Comm, Window) = nullptr;
  Result (*AlltoAll)(const void*, void*, size_t, int, Comm, cudaStream_t) = nullptr;
  Result (*GroupStart)() = nullptr;
  Result (*GroupEnd)() = nullptr;

  // Copy-engine collectives (symmetric windows + CTA policy zero) exist from 2.28 on.
  bool hasCopyEngineAlltoAll() const {
    return version >= versionCode(2, 28, 0) && CommWindowRegister && CommWindowDeregister;
  }
  std::string versionString() const;
};

// Loads NCCL from `path`, or when empty from $RMACC_NCCL_LIB, else "libnccl.so.2" through the
// dynamic linker's search path. Returns false with the reason in *why.
bool load(const std::string& path, Api* api, std::string* why);

}  // namespace rmacc::nccl
