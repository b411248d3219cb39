/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * floor_offload — what a first OFFLOAD sleep of 1 GiB can cost at best, without recap: it must
 * obtain host memory nobody touched yet. Copies of 1 GiB from the device and back, and the
 * ways to get host memory for them: pinned (cudaHostAlloc, timed), pageable fresh and touched,
 * mmap with MAP_POPULATE then cudaHostRegister, and staging through two pinned chunks of
 * 64 MiB into fresh or touched memory. GB/s of each, and the pinned copy's bandwidth as the
 * reference (docs/sleep.md, the first cycle).
 *
 *     floor_offload           exit 0; 2 without a CUDA device or on a CUDA failure
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include <cuda_runtime.h>

namespace {

constexpr size_t kBytes = size_t{1} << 30, kChunk = size_t{64} << 20;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool ok(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "floor_offload: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

double gbs(double seconds) { return (double)kBytes / seconds / 1e9; }

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("floor_offload: needs a CUDA device (none found)\n");
    return 2;
  }
  void *d = nullptr, *pin = nullptr;
  cudaStream_t s;
  if (!ok(cudaMalloc(&d, kBytes), "cudaMalloc") || !ok(cudaMemset(d, 1, kBytes), "cudaMemset") ||
      !ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"))
    return 2;
  double t = now();
  if (!ok(cudaHostAlloc(&pin, kBytes, 0), "cudaHostAlloc")) return 2;
  double host_alloc = now() - t;
  cudaMemcpy(pin, d, kBytes, cudaMemcpyDeviceToHost);
  t = now();
  cudaMemcpy(pin, d, kBytes, cudaMemcpyDeviceToHost);
  double pinned = gbs(now() - t);
  t = now();
  cudaMemcpy(d, pin, kBytes, cudaMemcpyHostToDevice);
  double pinned_up = gbs(now() - t);
  t = now();
  cudaFreeHost(pin);
  double free_host = now() - t;
  std::printf("1 GiB, GB/s (and / the pinned copy from the device)\n");
  std::printf("%-46s %8.2f\n", "pinned, device to host", pinned);
  std::printf("%-46s %8.2f\n", "pinned, host to device", pinned_up);
  std::printf("%-46s %8.2f  (%.3f s; cudaFreeHost %.3f s)\n", "cudaHostAlloc itself",
              gbs(host_alloc), host_alloc, free_host);
  void *p = std::malloc(kBytes);
  if (!p) return 2;
  t = now();
  cudaMemcpy(p, d, kBytes, cudaMemcpyDeviceToHost);
  double fresh = gbs(now() - t);
  t = now();
  cudaMemcpy(p, d, kBytes, cudaMemcpyDeviceToHost);
  double touched = gbs(now() - t);
  std::free(p);
  std::printf("%-46s %8.2f  %.3f\n", "pageable, fresh malloc, device to host", fresh,
              fresh / pinned);
  std::printf("%-46s %8.2f  %.3f\n", "pageable, touched, device to host", touched,
              touched / pinned);
  t = now();
  p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
           0);
  if (p == MAP_FAILED) return 2;
  double populate = now() - t;
  t = now();
  if (!ok(cudaHostRegister(p, kBytes, 0), "cudaHostRegister")) return 2;
  double reg = now() - t;
  t = now();
  cudaMemcpy(p, d, kBytes, cudaMemcpyDeviceToHost);
  double copy = now() - t;
  cudaHostUnregister(p);
  munmap(p, kBytes);
  std::printf("%-46s %8.2f  (%.3f s)\n", "mmap MAP_POPULATE itself", gbs(populate), populate);
  std::printf("%-46s %8.2f  (%.3f s)\n", "cudaHostRegister of populated memory", gbs(reg), reg);
  std::printf("%-46s %8.2f  %.3f\n", "populate + register + copy, first cycle",
              gbs(populate + reg + copy), gbs(populate + reg + copy) / pinned);
  void *stage[2] = {nullptr, nullptr};
  cudaEvent_t ev[2];
  if (!ok(cudaHostAlloc(&stage[0], kChunk, 0), "cudaHostAlloc") ||
      !ok(cudaHostAlloc(&stage[1], kChunk, 0), "cudaHostAlloc"))
    return 2;
  cudaEventCreate(&ev[0]);
  cudaEventCreate(&ev[1]);
  for (int fresh_memory = 1; fresh_memory >= 0; fresh_memory--) {
    p = std::malloc(kBytes);
    if (!p) return 2;
    if (!fresh_memory) std::memset(p, 0, kBytes);
    t = now();
    size_t chunks = kBytes / kChunk;
    cudaMemcpyAsync(stage[0], d, kChunk, cudaMemcpyDeviceToHost, s);
    cudaEventRecord(ev[0], s);
    for (size_t c = 0; c < chunks; c++) {
      if (c + 1 < chunks) {
        cudaMemcpyAsync(stage[(c + 1) % 2], (char *)d + (c + 1) * kChunk, kChunk,
                        cudaMemcpyDeviceToHost, s);
        cudaEventRecord(ev[(c + 1) % 2], s);
      }
      cudaEventSynchronize(ev[c % 2]);
      std::memcpy((char *)p + c * kChunk, stage[c % 2], kChunk);
    }
    double staged = gbs(now() - t);
    std::free(p);
    std::printf("%-46s %8.2f  %.3f\n",
                fresh_memory ? "staged 2 x 64 MiB pinned, into fresh malloc"
                             : "staged 2 x 64 MiB pinned, into touched memory",
                staged, staged / pinned);
  }
  cudaFreeHost(stage[0]);
  cudaFreeHost(stage[1]);
  return ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ? 0 : 2;
}
