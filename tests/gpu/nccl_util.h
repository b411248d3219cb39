/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl_util.h — what the NCCL GPU tests need of NCCL beyond recap: its library, opened as the
 * seam opens it (RECAP_NCCL_LIBRARY, else libnccl.so.2), for the calls recap does not make
 * (communicators, and direct collectives), and the check of what the tests' collectives leave.
 * Nothing links NCCL. Include after cmocka.h.
 */
#ifndef RECAP_TEST_NCCL_UTIL_H
#define RECAP_TEST_NCCL_UTIL_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"
#include "recap.h"

/* The library, or a failed test naming it and dlerror(). */
static inline void *gpu_nccl_open(void) {
  const char *path = getenv("RECAP_NCCL_LIBRARY");
  if (!path || !*path) path = "libnccl.so.2";
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) fail_msg("dlopen(%s): %s", path, dlerror());
  return library;
}

/* NCCL's function `name` into the function pointer at fn (size bytes: sizeof the pointer),
 * without the object-to-function cast C forbids; a failed test when it is missing. */
static inline void gpu_nccl_take(void *library, const char *name, void *fn, size_t size) {
  void *symbol = dlsym(library, name);
  if (!symbol) fail_msg("the NCCL library has no %s", name);
  memcpy(fn, &symbol, size);
}

/* The version of NCCL the seam found; without one, the program prints why and exits
 * "skipped" (RECAP_TEST_SKIP). */
static inline int gpu_nccl_version_or_skip(void) {
  int version = 0;
  if (recap_nccl_version(&version) != RECAP_SUCCESS) {
    printf("SKIP: %s\n", recap_last_error());
    fflush(stdout);
    exit(RECAP_TEST_SKIP);
  }
  return version;
}

/* A communicator of one rank on the current device, from library's ncclCommInitAll. */
static inline recap_nccl_comm_t gpu_nccl_one_rank_comm(void *library) {
  int (*init_all)(recap_nccl_comm_t * comms, int ndev, const int *devlist);
  gpu_nccl_take(library, "ncclCommInitAll", &init_all, sizeof init_all);
  recap_nccl_comm_t comm = NULL;
  assert_int_equal(init_all(&comm, 1, NULL), 0);
  return comm;
}

/* Destroys comm with library's ncclCommDestroy, then closes library. */
static inline void gpu_nccl_release(void *library, recap_nccl_comm_t comm) {
  int (*destroy)(recap_nccl_comm_t comm);
  gpu_nccl_take(library, "ncclCommDestroy", &destroy, sizeof destroy);
  assert_int_equal(destroy(comm), 0);
  dlclose(library);
}

/* Fails the test, naming `what`, unless the n floats at src on the device are base + i % 1000
 * (the pattern the tests fill their inputs with, which one rank's collectives keep). */
static inline void expect_ramp(const float *src, size_t n, float base, const char *what) {
  float *host = malloc(n * sizeof *host);
  assert_non_null(host);
  CUDA_OK(cudaMemcpy(host, src, n * sizeof *host, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++)
    if (host[i] != base + (float)(i % 1000))
      fail_msg("%s[%zu] = %g, expected %g", what, i, (double)host[i],
               (double)(base + (float)(i % 1000)));
  free(host);
}

#endif /* RECAP_TEST_NCCL_UTIL_H */
