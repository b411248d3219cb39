/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c — pools whose segments are NCCL memory registered with a communicator
 * (recap_pool_nccl): NCCL's zero-copy paths need buffers from ncclMemAlloc, registered with
 * ncclCommRegister. The allocator takes such a pool's segments from the source installed here
 * (src/alloc/segment_source.c) and gives them back through it: deregistered, then ncclMemFree.
 */
#include <inttypes.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "nccl/nccl_internal.h"

static recap_status_t nccl_segment_alloc(void *ctx, void **ptr, size_t bytes, void **handle) {
  const recap__nccl_ops_t *nccl = recap__nccl();
  recap__nccl_comm_t comm = ctx;
  void *p = NULL;
  RECAP__CHECK(nccl->mem_alloc(&p, bytes));
  recap_status_t s = nccl->comm_register(comm, p, bytes, handle);
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    (void)nccl->mem_free(p);
    return recap__error_restore(&saved);
  }
  *ptr = p;
  return RECAP_SUCCESS;
}

static recap_status_t nccl_segment_free(void *ctx, void *ptr, void *handle) {
  const recap__nccl_ops_t *nccl = recap__nccl();
  recap_status_t s = nccl->comm_deregister((recap__nccl_comm_t)ctx, handle);
  /* The memory goes back even when the deregistration failed: NCCL forgets it with the
   * communicator at the latest. */
  recap_status_t f = nccl->mem_free(ptr);
  return s != RECAP_SUCCESS ? s : f;
}

recap_status_t recap_pool_nccl(recap_pool_id_t pool, recap_nccl_comm_t comm) {
  static const char fn[] = "recap_pool_nccl";
  RECAP__ARG(comm != NULL, "recap_pool_nccl: comm is NULL");
  RECAP__ARG(!recap_pool_is_default(pool),
             "recap_pool_nccl: the default pool {0,0} serves every caller; give NCCL a private "
             "pool (recap_pool_handle)");
  int version = 0;
  RECAP__CHECK(recap__nccl()->load(&version));
  const recap__segment_source_t source = {.alloc = nccl_segment_alloc,
                                          .free = nccl_segment_free,
                                          .ctx = comm};
  return recap__pool_set_source(pool, &source, fn);
}
