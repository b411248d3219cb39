/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl_seam.h — everything recap asks of NCCL, behind one table of functions.
 *
 * recap never links NCCL: nccl.c loads libnccl.so.2 at first use (or the library named by
 * RECAP_NCCL_LIBRARY) and fetches each function with dlsym; the CPU fake
 * (tests/fake/fake_nccl.c, tests only) models communicators of several ranks as threads.
 * recap__nccl() returns the table in use.
 *
 * Every function returns a recap status; on failure it has already set the thread's last error
 * with the failing call, NCCL's error string and what to do.
 */
#ifndef RECAP_NCCL_SEAM_H
#define RECAP_NCCL_SEAM_H

#include <stddef.h>
#include <stdint.h>

#include "recap/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator: ncclComm_t for NCCL, a fake rank of a fake clique for the fake. */
typedef struct ncclComm *recap__nccl_comm_t;

/* The collectives recap records, in the order NCCL's API lists them. */
typedef enum recap__coll_kind {
  RECAP__COLL_ALL_REDUCE = 0,
  RECAP__COLL_ALL_GATHER,
  RECAP__COLL_REDUCE_SCATTER,
  RECAP__COLL_BROADCAST,
  RECAP__COLL_REDUCE,
  RECAP__COLL_SEND,
  RECAP__COLL_RECV
} recap__coll_kind_t;

/* One collective call. dtype and op are in NCCL's numbering (ncclDataType_t, ncclRedOp_t).
 * count: ALL_REDUCE, BROADCAST, REDUCE, SEND, RECV: elements of the buffer; ALL_GATHER: elements
 * each rank sends; REDUCE_SCATTER: elements each rank receives. peer: SEND/RECV's peer rank;
 * root: BROADCAST/REDUCE's root; both -1 otherwise. */
typedef struct recap__coll {
  recap__coll_kind_t kind;
  const void *send;
  void *recv;
  size_t count;
  int dtype;
  int op;
  int peer;
  int root;
  recap__nccl_comm_t comm;
} recap__coll_t;

typedef struct recap__nccl_ops {
  const char *name; /* "nccl" or "fake" */
  /* Find and load NCCL once (later calls answer from the first): *version is its
   * NCCL_VERSION_CODE (23203 for 2.32.3). RECAP_ERROR_NOT_FOUND when the library is absent,
   * RECAP_ERROR_NOT_SUPPORTED when recap was built without NCCL's headers; the message says what
   * was tried. */
  recap_status_t (*load)(int *version);
  recap_status_t (*comm_info)(recap__nccl_comm_t comm, int *rank, int *nranks, int *device);
  /* Enqueue c on stream (captured when the stream captures). */
  recap_status_t (*collective)(const recap__coll_t *c, recap_stream_t stream);
  recap_status_t (*group_start)(void);
  recap_status_t (*group_end)(void);
  /* ncclMemAlloc / ncclMemFree: device memory NCCL's zero-copy paths can use. */
  recap_status_t (*mem_alloc)(void **ptr, size_t bytes);
  recap_status_t (*mem_free)(void *ptr);
  /* ncclCommRegister / ncclCommDeregister of [buffer, buffer + bytes) with comm. */
  recap_status_t (*comm_register)(recap__nccl_comm_t comm, void *buffer, size_t bytes,
                                  void **handle);
  recap_status_t (*comm_deregister)(recap__nccl_comm_t comm, void *handle);
} recap__nccl_ops_t;

/* The table in use: the real one (nccl.c) unless a test installed the fake's. */
const recap__nccl_ops_t *recap__nccl(void);
/* Install ops (NULL: the real table again). Not thread safe: tests call it at reset. */
void recap__nccl_install(const recap__nccl_ops_t *ops);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_NCCL_SEAM_H */
