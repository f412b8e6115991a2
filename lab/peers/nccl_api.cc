#include "nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace rmacc::nccl {

Config defaultConfig() {
  Config c{};
  c.size = sizeof(Config);
  c.magic = 0xcafebeef;  // NCCL rejects a config without it (not made by the initializer)
  // The layout's own version: NCCL ignores the fields a config of an older version lacks.
  c.version = versionCode(2, 28, 0);
  c.blocking = c.cgaClusterSize = c.minCTAs = c.maxCTAs = kConfigUndefInt;
  c.netName = nullptr;
  c.splitShare = c.trafficClass = kConfigUndefInt;
  c.commName = nullptr;
  c.collnetEnable = c.CTAPolicy = c.shrinkShare = c.nvlsCTAs = kConfigUndefInt;
  c.nChannelsPerNetPeer = c.nvlinkCentricSched = kConfigUndefInt;
  return c;
}

std::string Api::versionString() const {
  // 2.28.9 is 22809: major * 10000 + minor * 100 + patch (from 2.9 on).
  int major = version / 10000, minor = version / 100 % 100, patch = version % 100;
  if (version < 10000) major = version / 1000, minor = version / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

namespace {

template <typename F>
bool bind(void* lib, const char* name, F* fn, std::string* why) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn) return true;
  *why = std::string("symbol ") + name + " not found in the NCCL library";
  return false;
}

}  // namespace

bool load(const std::string& path, Api* api, std::string* why) {
  std::string p = path;
  if (p.empty()) {
    const char* env = getenv("RMACC_NCCL_LIB");
    p = env && *env ? env : "libnccl.so.2";
  }
  // RTLD_LOCAL: NCCL's symbols stay out of the global namespace (rmacc defines none of them,
  // but a second NCCL loaded by a plugin must not bind to this one).
  void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    *why = "cannot load " + p + ": " + (e ? e : "unknown error") +
           " (set RMACC_NCCL_LIB to PyTorch's libnccl.so.2)";
    return false;
  }
  bool ok = bind(lib, "ncclGetVersion", &api->GetVersion, why) &&
            bind(lib, "ncclGetErrorString", &api->GetErrorString, why) &&
            bind(lib, "ncclGetLastError", &api->GetLastError, why) &&
            bind(lib, "ncclGetUniqueId", &api->GetUniqueId, why) &&
            bind(lib, "ncclCommInitRankConfig", &api->CommInitRankConfig, why) &&
            bind(lib, "ncclCommDestroy", &api->CommDestroy, why) &&
            bind(lib, "ncclMemAlloc", &api->MemAlloc, why) && bind(lib, "ncclMemFree", &api->MemFree, why) &&
            bind(lib, "ncclAlltoAll", &api->AlltoAll, why) && bind(lib, "ncclGroupStart", &api->GroupStart, why) &&
            bind(lib, "ncclGroupEnd", &api->GroupEnd, why);
  if (!ok) return false;
  // Windows came in 2.27: an older library still serves the kernel path.
  api->CommWindowRegister =
      reinterpret_cast<decltype(api->CommWindowRegister)>(dlsym(lib, "ncclCommWindowRegister"));
  api->CommWindowDeregister =
      reinterpret_cast<decltype(api->CommWindowDeregister)>(dlsym(lib, "ncclCommWindowDeregister"));
  if (api->GetVersion(&api->version) != kSuccess) {
    *why = "ncclGetVersion failed";
    return false;
  }
  // The path the dynamic linker resolved, for the log: which NCCL was measured matters.
  Dl_info info{};
  api->path = dladdr(reinterpret_cast<void*>(api->GetVersion), &info) && info.dli_fname ? info.dli_fname : p;
  return true;
}

}  // namespace rmacc::nccl
