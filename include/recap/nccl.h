/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/nccl.h — NCCL collectives inside recap graphs, recorded in each graph's fingerprint,
 * which ranks compare before the first replay so that none hangs. NCCL (libnccl.so.2, or
 * RECAP_NCCL_LIBRARY) is loaded by the first call that needs it. See docs/nccl.md.
 */
#ifndef RECAP_NCCL_H
#define RECAP_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "alloc.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Communicators and NCCL's numbering ------------------------------------------------------ */

/* NCCL's ncclComm_t, so callers pass theirs. recap never creates nor destroys one. */
typedef struct ncclComm *recap_nccl_comm_t;

/* Element types, equal to NCCL's ncclDataType_t (RECAP_NCCL_FLOAT32 == ncclFloat32). */
typedef enum recap_nccl_dtype {
  RECAP_NCCL_INT8 = 0,
  RECAP_NCCL_UINT8 = 1,
  RECAP_NCCL_INT32 = 2,
  RECAP_NCCL_UINT32 = 3,
  RECAP_NCCL_INT64 = 4,
  RECAP_NCCL_UINT64 = 5,
  RECAP_NCCL_FLOAT16 = 6,
  RECAP_NCCL_FLOAT32 = 7,
  RECAP_NCCL_FLOAT64 = 8,
  RECAP_NCCL_BFLOAT16 = 9,
  RECAP_NCCL_FLOAT8E4M3 = 10,
  RECAP_NCCL_FLOAT8E5M2 = 11
} recap_nccl_dtype_t;

/* Reductions, equal to NCCL's ncclRedOp_t (RECAP_NCCL_SUM == ncclSum). */
typedef enum recap_nccl_op {
  RECAP_NCCL_SUM = 0,
  RECAP_NCCL_PROD = 1,
  RECAP_NCCL_MAX = 2,
  RECAP_NCCL_MIN = 3,
  RECAP_NCCL_AVG = 4
} recap_nccl_op_t;

/* Load NCCL if needed and give its NCCL_VERSION_CODE (23203 for 2.32.3). NOT_FOUND: the library
 * cannot be loaded (as for every function here); NOT_SUPPORTED: recap built without NCCL. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_version(int *version);

/* "int8", "float32", ...; "unknown" for a value outside the enum. */
RECAP_API const char *recap_nccl_dtype_name(recap_nccl_dtype_t dtype);
/* "sum", "prod", "max", "min", "avg"; "unknown" for a value outside the enum. */
RECAP_API const char *recap_nccl_op_name(recap_nccl_op_t op);

/* ------------------------------------------------------------------------------------------
 * Collectives, with NCCL's arguments in NCCL's order, enqueued on stream. Captured into a recap
 * graph, they join its fingerprint, and their buffers must outlive its replays. Inside a region's
 * body: INVALID_USAGE, nothing enqueued. NULLs, dtype or op out of range: INVALID_ARGUMENT.
 * ---------------------------------------------------------------------------------------- */

/* Every rank's count elements reduced with op into every rank's recv. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_nccl_all_reduce(const void *send, void *recv, size_t count, recap_nccl_dtype_t dtype,
                      recap_nccl_op_t op, recap_nccl_comm_t comm, recap_stream_t stream);
/* Every rank's sendcount elements, in rank order, into every rank's recv (nranks * sendcount). */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_all_gather(const void *send, void *recv,
                                                               size_t sendcount,
                                                               recap_nccl_dtype_t dtype,
                                                               recap_nccl_comm_t comm,
                                                               recap_stream_t stream);
/* send (nranks * recvcount elements) reduced with op across ranks; rank r receives block r. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_nccl_reduce_scatter(const void *send, void *recv, size_t recvcount, recap_nccl_dtype_t dtype,
                          recap_nccl_op_t op, recap_nccl_comm_t comm, recap_stream_t stream);
/* root's send (count elements) into every rank's recv. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_broadcast(const void *send, void *recv,
                                                              size_t count,
                                                              recap_nccl_dtype_t dtype, int root,
                                                              recap_nccl_comm_t comm,
                                                              recap_stream_t stream);
/* Every rank's count elements reduced with op into root's recv (other ranks' recv unused). */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_reduce(const void *send, void *recv,
                                                           size_t count, recap_nccl_dtype_t dtype,
                                                           recap_nccl_op_t op, int root,
                                                           recap_nccl_comm_t comm,
                                                           recap_stream_t stream);
/* count elements of buf to rank peer, which calls recap_nccl_recv. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_send(const void *buf, size_t count,
                                                         recap_nccl_dtype_t dtype, int peer,
                                                         recap_nccl_comm_t comm,
                                                         recap_stream_t stream);
/* count elements from rank peer into buf. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_recv(void *buf, size_t count,
                                                         recap_nccl_dtype_t dtype, int peer,
                                                         recap_nccl_comm_t comm,
                                                         recap_stream_t stream);
/* ncclGroupStart / ncclGroupEnd; the collectives between them are recorded with the thread's
 * group depth. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_group_start(void);
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_group_end(void);

/* ---- Fingerprints ---------------------------------------------------------------------------- */

typedef enum recap_collective_kind {
  RECAP_COLLECTIVE_ALL_REDUCE = 0,
  RECAP_COLLECTIVE_ALL_GATHER,
  RECAP_COLLECTIVE_REDUCE_SCATTER,
  RECAP_COLLECTIVE_BROADCAST,
  RECAP_COLLECTIVE_REDUCE,
  RECAP_COLLECTIVE_SEND,
  RECAP_COLLECTIVE_RECV
} recap_collective_kind_t;

/* "all_reduce", "all_gather", ...; "unknown" for a value outside the enum. */
RECAP_API const char *recap_collective_kind_name(recap_collective_kind_t kind);

/* One recorded collective. Start each element from RECAP_COLLECTIVE_INIT. */
typedef struct recap_collective {
  size_t size; /* sizeof(recap_collective_t), set by RECAP_COLLECTIVE_INIT */
  recap_collective_kind_t kind;
  /* The communicator's index, in the order of first use in the capture, and its ranks. */
  unsigned comm_index;
  int nranks;
  size_t count; /* as the wrapper took it: all_gather's sendcount, reduce_scatter's recvcount */
  recap_nccl_dtype_t dtype;
  int op;         /* a recap_nccl_op_t; -1 for kinds without a reduction */
  int peer;       /* send/recv's peer rank; -1 otherwise */
  int root;       /* broadcast/reduce's root; -1 otherwise */
  unsigned group; /* recap_nccl_group_start depth when it was enqueued (0: outside groups) */
} recap_collective_t;

#define RECAP_COLLECTIVE_INIT                                                                      \
  {                                                                                                \
    sizeof(recap_collective_t), RECAP_COLLECTIVE_ALL_REDUCE, 0, 0, 0, RECAP_NCCL_INT8, -1, -1, -1, \
        0                                                                                          \
  }

/* The collectives graph's capture recorded, in order: *count gets how many, out the first
 * min(capacity, *count) (NULL and 0: count only), *hash (may be NULL) the fingerprint's hash. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_collectives(recap_graph_t graph,
                                                                 recap_collective_t *out,
                                                                 size_t capacity, size_t *count,
                                                                 uint64_t *hash);

/* Every rank of comm, before the first replay: compare graph's collectives on comm across ranks.
 * A difference is INVALID_USAGE naming the first one on each side; so is a graph holding no
 * capture. Ordered after comm's latest replay per its policy. Synchronises: not in a capture. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_check_collectives(recap_graph_t graph,
                                                                       recap_nccl_comm_t comm);

/* ---- Replays of graphs that share a communicator --------------------------------------------- */

/* A replay after the communicator's latest replay on another stream: its stream waits for that
 * one (SERIALIZE, the default), or it is RECAP_ERROR_BUSY while that one runs (REFUSE_OVERLAP). */
typedef enum recap_nccl_policy {
  RECAP_NCCL_SERIALIZE = 0,
  RECAP_NCCL_REFUSE_OVERLAP = 1
} recap_nccl_policy_t;

/* Set comm's policy (above); replays on one stream pass either way. Thread safe. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_comm_policy(recap_nccl_comm_t comm,
                                                                recap_nccl_policy_t policy);

/* ---- Pools of NCCL memory -------------------------------------------------------------------- */

/* Make pool's segments NCCL memory registered with comm, before its first allocation: a pool
 * holding segments, or expandable_segments on, is INVALID_USAGE; the default pool
 * INVALID_ARGUMENT. comm must outlive the pool's segments. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_nccl(recap_pool_id_t pool,
                                                         recap_nccl_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_NCCL_H */
