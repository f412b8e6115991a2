// What the GPU tests share: the device count asked without initialising CUDA in the parent
// (the ranks fork from it), assertion macros for CUDA and rmacc calls, and the shape of a run.
// Include only where RMACC_HAVE_CUDA is defined.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rmacc.h"

namespace rmacc::test {

// Asked in a child: the ranks fork from this process, which must not initialise CUDA.
inline int gpuCount() {
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define RMACC_OK(call, comm) ASSERT_EQ((call), rmaccSuccess) << #call << ": " << rmaccGetLastError(comm)

// Emulated nodes x ranks per node.
struct Shape {
  int nodes, local;
};

}  // namespace rmacc::test
