/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.c — the seam selector and the public device functions.
 */
#include "device/device.h"

#include <stdatomic.h>

#include "core/error.h"

/* The installed table. Read on the allocator's hot path: one atomic load, no lock. */
static _Atomic(const recap__device_ops_t *) installed = &recap__cuda_ops;

const recap__device_ops_t *recap__device(void) {
  return atomic_load_explicit(&installed, memory_order_acquire);
}

void recap__device_install(const recap__device_ops_t *ops) {
  atomic_store_explicit(&installed, ops ? ops : &recap__cuda_ops, memory_order_release);
}

recap_status_t recap_device_count(int *count) {
  RECAP__ARG(count != NULL, "recap_device_count: count is NULL");
  *count = 0;
  return recap__device()->device_count(count);
}

const char *recap_device_backend(void) { return recap__device()->name; }
