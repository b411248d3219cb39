/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_faults.c — the counting, failing host allocator of host_faults.h. Counters are atomic:
 * recap allocates from many threads.
 */
#include "host_faults.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/host.h"

static _Atomic uint64_t calls;   /* allocations since the last arming */
static _Atomic uint64_t fail_at; /* 0: disarmed */
static _Atomic bool failed;      /* the armed allocation failed */
static _Atomic int64_t live;     /* blocks out */

/* Count one allocation; true when it is the one that must fail. */
static bool must_fail(void) {
  uint64_t n = atomic_fetch_add(&calls, 1) + 1;
  uint64_t armed = atomic_load(&fail_at);
  if (armed == 0 || n != armed) return false;
  atomic_store(&failed, true);
  return true;
}

static void *counted_malloc(size_t size) {
  if (must_fail()) return NULL;
  void *p = malloc(size);
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

static void *counted_calloc(size_t count, size_t size) {
  if (must_fail()) return NULL;
  void *p = calloc(count, size);
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

static void *counted_realloc(void *ptr, size_t size) {
  if (must_fail()) return NULL;
  void *p = realloc(ptr, size);
  if (p && !ptr) atomic_fetch_add(&live, 1);
  return p;
}

static void counted_free(void *ptr) {
  if (ptr) atomic_fetch_sub(&live, 1);
  free(ptr);
}

static const recap__host_ops_t counting_ops = {
    .malloc_fn = counted_malloc,
    .calloc_fn = counted_calloc,
    .realloc_fn = counted_realloc,
    .free_fn = counted_free,
};

void recap_test_host_faults_install(void) { recap__host_install(&counting_ops); }

void recap_test_host_faults_remove(void) { recap__host_install(NULL); }

void recap_test_host_fail_nth(uint64_t nth) {
  atomic_store(&fail_at, 0);
  atomic_store(&calls, 0);
  atomic_store(&failed, false);
  atomic_store(&fail_at, nth);
}

uint64_t recap_test_host_calls(void) { return atomic_load(&calls); }

bool recap_test_host_failed(void) { return atomic_load(&failed); }

int64_t recap_test_host_live(void) { return atomic_load(&live); }
