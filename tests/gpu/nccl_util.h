/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl_util.h — what the NCCL GPU tests need of NCCL beyond recap: its library, opened as the
 * seam opens it (RECAP_NCCL_LIBRARY, else libnccl.so.2), for the calls recap does not make
 * (communicators, and direct collectives). Nothing links NCCL. Include after cmocka.h.
 */
#ifndef RECAP_TEST_NCCL_UTIL_H
#define RECAP_TEST_NCCL_UTIL_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif /* RECAP_TEST_NCCL_UTIL_H */
