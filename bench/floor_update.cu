/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * floor_update — the driver's own answer on executables changed many times, without recap: a
 * chain of 1,000 one-thread kernels (atomicAdd of *in into a counter) is instantiated twice
 * from one graph; one executable then gets 100 cudaGraphExecUpdate calls from new captures
 * whose input alternates between two buffers, or 100 rounds of
 * cudaGraphExecKernelNodeSetParams on every node, and both are replayed. GPU µs per replay
 * (events around 5 launches, median of 9), changed against untouched, for each set of
 * instantiation flags recap could use. The reason behind the update policy's default check
 * (docs/update.md).
 *
 *     floor_update            exit 0; 2 without a CUDA device or on a CUDA failure
 */
#include <algorithm>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

namespace {

__global__ void add_from(int *counter, const int *in) { atomicAdd(counter, *in); }

constexpr int kNodes = 1000, kChanges = 100;

bool ok(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "floor_update: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

cudaGraph_t capture(cudaStream_t s, int *counter, const int *in) {
  cudaGraph_t g = nullptr;
  if (!ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture"))
    return nullptr;
  for (int i = 0; i < kNodes; i++) add_from<<<1, 1, 0, s>>>(counter, in);
  if (!ok(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture")) return nullptr;
  return g;
}

double gpu_us(cudaStream_t s, cudaGraphExec_t x) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> v;
  cudaGraphLaunch(x, s);
  cudaGraphLaunch(x, s);
  cudaStreamSynchronize(s);
  for (int r = 0; r < 9; r++) {
    cudaEventRecord(a, s);
    for (int i = 0; i < 5; i++) cudaGraphLaunch(x, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1e3 / 5);
  }
  std::sort(v.begin(), v.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return v[v.size() / 2];
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("floor_update: needs a CUDA device (none found)\n");
    return 2;
  }
  cudaStream_t s;
  int *counter, *a, *b;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !ok(cudaMalloc(&counter, 4), "cudaMalloc") || !ok(cudaMalloc(&a, 4), "cudaMalloc") ||
      !ok(cudaMalloc(&b, 4), "cudaMalloc"))
    return 2;
  const unsigned long long flagsets[] = {0, cudaGraphInstantiateFlagAutoFreeOnLaunch,
                                         cudaGraphInstantiateFlagUseNodePriority,
                                         cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                             cudaGraphInstantiateFlagUseNodePriority};
  const char *const flagnames[] = {"0", "AutoFreeOnLaunch", "UseNodePriority", "both"};
  std::printf(
      "a chain of %d one-thread kernels, changed %d times, against an untouched "
      "executable of the same graph: GPU us per replay\n",
      kNodes, kChanges);
  std::printf("%-18s %-10s %10s %10s %8s\n", "flags", "changes", "changed", "untouched", "ratio");
  for (int f = 0; f < 4; f++)
    for (int way = 0; way < 2; way++) {
      cudaGraph_t g0 = capture(s, counter, a);
      if (!g0) return 2;
      cudaGraphExec_t x, fresh;
      if (!ok(cudaGraphInstantiateWithFlags(&x, g0, flagsets[f]), "cudaGraphInstantiate") ||
          !ok(cudaGraphInstantiateWithFlags(&fresh, g0, flagsets[f]), "cudaGraphInstantiate"))
        return 2;
      std::vector<cudaGraphNode_t> nodes(kNodes);
      size_t n = kNodes;
      if (!ok(cudaGraphGetNodes(g0, nodes.data(), &n), "cudaGraphGetNodes")) return 2;
      for (int k = 0; k < kChanges; k++) {
        const int *in = k % 2 ? a : b; /* ends on a, as the untouched one reads */
        if (way == 0) {
          cudaGraph_t g = capture(s, counter, in);
          cudaGraphExecUpdateResultInfo info;
          if (!g || !ok(cudaGraphExecUpdate(x, g, &info), "cudaGraphExecUpdate")) return 2;
          cudaGraphDestroy(g);
        } else {
          for (size_t i = 0; i < n; i++) {
            cudaKernelNodeParams p;
            if (!ok(cudaGraphKernelNodeGetParams(nodes[i], &p), "cudaGraphKernelNodeGetParams"))
              return 2;
            void *args[2] = {&counter, &in};
            p.kernelParams = args;
            p.extra = nullptr;
            if (!ok(cudaGraphExecKernelNodeSetParams(x, nodes[i], &p),
                    "cudaGraphExecKernelNodeSetParams"))
              return 2;
          }
        }
      }
      double changed = gpu_us(s, x), untouched = gpu_us(s, fresh);
      std::printf("%-18s %-10s %10.1f %10.1f %8.3f\n", flagnames[f], way ? "setparams" : "update",
                  changed, untouched, changed / untouched);
      cudaGraphExecDestroy(x);
      cudaGraphExecDestroy(fresh);
      cudaGraphDestroy(g0);
    }
  return ok(cudaStreamSynchronize(s), "cudaStreamSynchronize") ? 0 : 2;
}
