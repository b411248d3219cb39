/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host.c — the host-memory seam (host.h): the installed table of host allocation functions,
 * the C library's unless a test installed its own.
 */
#include "core/host.h"

#include "recap/core.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Wrappers rather than the C library's functions themselves: malloc and friends may be macros
 * or builtins, whose address is not portable to take. */
static void *libc_malloc(size_t size) { return malloc(size); }
static void *libc_calloc(size_t count, size_t size) { return calloc(count, size); }
static void *libc_realloc(void *ptr, size_t size) { return realloc(ptr, size); }
static void libc_free(void *ptr) { free(ptr); }

static const recap__host_ops_t libc_ops = {
    .malloc_fn = libc_malloc,
    .calloc_fn = libc_calloc,
    .realloc_fn = libc_realloc,
    .free_fn = libc_free,
};

/* Read on every host allocation: one atomic load, no lock. */
static _Atomic(const recap__host_ops_t *) installed = &libc_ops;

void recap__host_install(const recap__host_ops_t *ops) {
  atomic_store_explicit(&installed, ops ? ops : &libc_ops, memory_order_release);
}

static const recap__host_ops_t *host(void) {
  return atomic_load_explicit(&installed, memory_order_acquire);
}

void *recap__host_malloc(size_t size) { return host()->malloc_fn(size); }
void *recap__host_calloc(size_t count, size_t size) { return host()->calloc_fn(count, size); }
void *recap__host_realloc(void *ptr, size_t size) { return host()->realloc_fn(ptr, size); }
void recap__host_free(void *ptr) { host()->free_fn(ptr); }

/* Strings recap hands over (JSON, the memory page) come from the host allocator. */
void recap_string_free(char *s) { recap__host_free(s); }
