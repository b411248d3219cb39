/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture_replay_cpp — capture_replay's pipeline in C++, through recap/recap.hpp: a graph owned
 * by recap::graph, captured by a lambda in a capture scope (PyTorch's `with torch.cuda.graph(g):`),
 * replayed with new inputs and checked against the host; failures arrive as recap::error.
 *
 * The pipeline, per step: acc = 0; acc += a * x; acc += b * x * x; y = acc (the kernels are
 * capture_replay's, examples/capture_replay/kernels.cu).
 *
 *     capture_replay_cpp
 *
 * Exit status: 0 on success, 1 on a failure, 2 when there is no CUDA device.
 */
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "recap/recap.hpp"

namespace {

constexpr std::size_t kN = 1 << 20;
constexpr int kReplays = 5;
constexpr float kA = 2.0f, kB = 0.5f;

void cuda_check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

/* recap_malloc'd device memory, freed by the destructor: from the graph's pool when allocated
 * during its capture. */
class device_buffer {
 public:
  device_buffer(std::size_t n, recap_stream_t stream) {
    recap::check(recap_malloc(reinterpret_cast<void **>(&data_), n * sizeof(float), stream));
  }
  device_buffer(const device_buffer &) = delete;
  device_buffer &operator=(const device_buffer &) = delete;
  ~device_buffer() { recap_free(data_); }
  float *get() const { return data_; }

 private:
  float *data_ = nullptr;
};

void enqueue_pipeline(cudaStream_t stream, const float *x, float *acc, float *y) {
  cuda_check(cudaMemsetAsync(acc, 0, kN * sizeof(float), stream), "cudaMemsetAsync");
  cuda_check(launch_axpy(acc, x, kA, kN, stream), "launch_axpy");
  cuda_check(launch_add_square(acc, x, kB, kN, stream), "launch_add_square");
  cuda_check(cudaMemcpyAsync(y, acc, kN * sizeof(float), cudaMemcpyDeviceToDevice, stream),
             "cudaMemcpyAsync");
}

/* New host input for `step`, copied into x on stream. */
void upload(cudaStream_t stream, float *x, std::vector<float> &host_x, int step) {
  for (std::size_t i = 0; i < kN; i++)
    host_x[i] = static_cast<float>((i + static_cast<std::size_t>(step) * 7) % 1000) / 1000.0f;
  cuda_check(cudaMemcpyAsync(x, host_x.data(), kN * sizeof(float), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync");
}

void check_output(const std::vector<float> &host_x, const std::vector<float> &host_y, int step) {
  for (std::size_t i = 0; i < kN; i++) {
    float expect = kA * host_x[i] + kB * host_x[i] * host_x[i];
    if (std::fabs(host_y[i] - expect) > 1e-5f * (1.0f + std::fabs(expect)))
      throw std::runtime_error("replay " + std::to_string(step) + ": y[" + std::to_string(i) +
                               "] = " + std::to_string(host_y[i]) + ", expected " +
                               std::to_string(expect));
  }
}

int run() {
  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    std::printf("capture_replay_cpp: this example needs a CUDA device (%s)\n",
                recap_last_error()[0] ? recap_last_error() : "none found");
    return 2;
  }

  cudaStream_t stream;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<float> host_x(kN), host_y(kN);
  {
    device_buffer x(kN, stream), warm_acc(kN, stream), warm_y(kN, stream);
    /* One eager run loads the kernels before the capture. */
    upload(stream, x.get(), host_x, 0);
    enqueue_pipeline(stream, x.get(), warm_acc.get(), warm_y.get());
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

    /* The capture scope captures on recap's side stream; y, allocated in it, comes from the
     * graph's pool and outlives the lambda, so it is held outside (declared first, it is freed
     * after the graph is destroyed). */
    std::unique_ptr<device_buffer> y;
    recap::graph graph;
    graph.capture_scope([&](recap_stream_t capturing) {
      device_buffer acc(kN, capturing); /* an intermediate, freed in the capture */
      y = std::make_unique<device_buffer>(kN, capturing);
      enqueue_pipeline(capturing, x.get(), acc.get(), y->get());
    });
    std::printf("captured %zu nodes in a capture scope\n", graph.node_count());

    for (int step = 1; step <= kReplays; step++) {
      upload(stream, x.get(), host_x, step);
      graph.replay(stream);
      cuda_check(cudaMemcpyAsync(host_y.data(), y->get(), kN * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync");
      cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      check_output(host_x, host_y, step);
    }
    std::printf("%d replays checked against the host: all correct\n", kReplays);

    /* A misuse is an exception carrying recap's status and message. */
    recap::graph empty;
    try {
      empty.replay(stream);
    } catch (const recap::error &e) {
      std::printf("replaying an empty graph: %s\n", e.status_name());
    }
  } /* the graphs are destroyed, then the buffers freed */
  recap::check(recap_empty_cache());
  cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}

} // namespace

int main() {
  try {
    return run();
  } catch (const recap::error &e) {
    std::fprintf(stderr, "capture_replay_cpp: %s: %s\n", e.status_name(), e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "capture_replay_cpp: %s\n", e.what());
  }
  return 1;
}
