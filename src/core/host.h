/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.h — the host-memory seam: every host allocation recap makes (block records, arrays,
 * hooks, annotations, liveness tables, copies of strings) goes through these four functions.
 *
 * By default they are the C library's malloc, calloc, realloc and free. Tests install a table of
 * their own with recap__host_install, as they install the fake device with
 * recap__device_install, to count host allocations and make the nth one fail, so that every
 * out-of-host-memory path of the library can be reached. The library holds no such test code.
 *
 * Memory from one table must go back to the same table: install a table only while recap holds
 * no host memory (after the tests' reset), or one whose free accepts the C library's memory.
 */
#ifndef RECAP_CORE_HOST_H
#define RECAP_CORE_HOST_H

#include <stddef.h>

typedef struct recap__host_ops {
  void *(*malloc_fn)(size_t size);
  void *(*calloc_fn)(size_t count, size_t size);
  void *(*realloc_fn)(void *ptr, size_t size);
  void (*free_fn)(void *ptr);
} recap__host_ops_t;

/* Install ops as the host allocator (NULL: the C library's). The table must outlive its use. */
void recap__host_install(const recap__host_ops_t *ops);

void *recap__host_malloc(size_t size);
void *recap__host_calloc(size_t count, size_t size);
void *recap__host_realloc(void *ptr, size_t size);
void recap__host_free(void *ptr);

#endif /* RECAP_CORE_HOST_H */
