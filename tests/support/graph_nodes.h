// What a captured rmacc call put in a graph, for the GPU tests: no node runs on the SMs
// (rmacc records memory operations, copies and host functions only), and a call that needs no
// CPU at replay holds no host node either.
#pragma once

#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <vector>

namespace rmacc::test {

// Asked through the driver: the runtime's cudaGraphNodeGetType fails with cudaErrorUnknown on a
// batch memory-op node, which it has no type for (CUDA 13.0).
inline void expectNoKernelNodes(cudaGraph_t graph, bool noHostNodes = false) {
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuGraphNodeGetType", &fn, cudaEnableDefault, &found), cudaSuccess);
  ASSERT_TRUE(fn != nullptr && found == cudaDriverEntryPointSuccess);
  auto nodeType = reinterpret_cast<CUresult (*)(CUgraphNode, CUgraphNodeType*)>(fn);
  for (cudaGraphNode_t node : nodes) {
    CUgraphNodeType type;
    ASSERT_EQ(nodeType(node, &type), CUDA_SUCCESS);
    EXPECT_NE(type, CU_GRAPH_NODE_TYPE_KERNEL) << "a captured rmacc call holds a kernel node";
    if (noHostNodes)
      EXPECT_NE(type, CU_GRAPH_NODE_TYPE_HOST) << "a one-node call needs the CPU at replay";
  }
  EXPECT_GT(count, 0u);
}

}  // namespace rmacc::test
