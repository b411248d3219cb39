/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/nccl.h — NCCL collectives inside recap graphs, with the checks that keep ranks from
 * hanging or failing with a bare driver error.
 *
 * recap loads libnccl.so.2 (or RECAP_NCCL_LIBRARY) at the first call that needs it; without it
 * every function here fails with RECAP_ERROR_NOT_FOUND (RECAP_ERROR_NOT_SUPPORTED in a recap built
 * without NCCL's headers). docs/nccl.md has the whole contract.
 *
 * Enqueue collectives through the recap_nccl_* wrappers: eagerly they call NCCL; while the
 * stream captures into a recap graph they also record the collective in the graph's
 * fingerprint, which ranks compare before the first replay:
 *
 *     recap_graph_capture_begin(graph, NULL, stream);
 *     ... forward, backward ...
 *     recap_nccl_all_reduce(grads, grads, n, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, comm, stream);
 *     recap_graph_capture_end(graph);
 *     recap_graph_check_collectives(graph, comm);   // every rank, before the first replay
 *     recap_graph_replay(graph, stream);
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

/* NCCL's communicator: the same type as nccl.h's ncclComm_t, so callers pass theirs. recap
 * never creates nor destroys one. */
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

/* Load NCCL if no call did yet and give its NCCL_VERSION_CODE in *version (23203 for 2.32.3).
 * RECAP_ERROR_NOT_FOUND when libnccl.so.2 cannot be loaded (the message names what was tried),
 * RECAP_ERROR_NOT_SUPPORTED when recap was built without NCCL's headers. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_version(int *version);

/* "int8", "float32", ...; "unknown" for a value outside the enum. */
RECAP_API const char *recap_nccl_dtype_name(recap_nccl_dtype_t dtype);
/* "sum", "prod", "max", "min", "avg"; "unknown" for a value outside the enum. */
RECAP_API const char *recap_nccl_op_name(recap_nccl_op_t op);

/* ------------------------------------------------------------------------------------------
 * Collectives through recap
 *
 * Each takes NCCL's arguments in NCCL's order and enqueues the collective on stream, as NCCL
 * does; in-place forms are accepted. While stream captures into a recap graph the collective
 * joins the graph and its fingerprint, and its buffers must outlive the graph's replays. Inside
 * a region's body a collective is RECAP_ERROR_INVALID_USAGE, nothing enqueued (CUDA cannot
 * instantiate it there, and ranks looping different counts would hang). NULL buffers or comm,
 * or a dtype or op outside the enums, are RECAP_ERROR_INVALID_ARGUMENT; NCCL's failure is its
 * status mapped to recap's, with NCCL's message. docs/nccl.md.
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
/* ncclGroupStart / ncclGroupEnd: the collectives between them are fused as NCCL fuses them,
 * and recorded with their group depth. Groups nest; the calling thread's depth is tracked. */
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

/* One recorded collective. The struct may grow at its end: start each element from
 * RECAP_COLLECTIVE_INIT, which sets `size`; recap fills the fields up to `size`. */
typedef struct recap_collective {
  size_t size; /* sizeof(recap_collective_t), set by RECAP_COLLECTIVE_INIT */
  recap_collective_kind_t kind;
  /* The communicator's index among the graph's communicators, in the order the capture first
   * used them (0: the first), and its number of ranks. */
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

/* The collectives graph's capture recorded, in order: *count gets how many, the first
 * min(capacity, *count) go to out (each element started from RECAP_COLLECTIVE_INIT; out NULL
 * with capacity 0 only counts), and *hash (may be NULL) the fingerprint's hash (0: none). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_collectives(recap_graph_t graph,
                                                                 recap_collective_t *out,
                                                                 size_t capacity, size_t *count,
                                                                 uint64_t *hash);

/* Compare graph's collectives on comm with every other rank's, before the first replay; every
 * rank of comm calls it, collectively. A difference is RECAP_ERROR_INVALID_USAGE naming the
 * first differing collective on each side; so is a graph that holds no capture, before any
 * communication. Ordered after comm's latest replay as recap_nccl_comm_policy says (it waits,
 * or RECAP_ERROR_BUSY under REFUSE_OVERLAP). Not during a capture: it synchronises. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_check_collectives(recap_graph_t graph,
                                                                       recap_nccl_comm_t comm);

/* ---- Replays of graphs that share a communicator --------------------------------------------- */

/* How a replay of a graph using a communicator orders itself after the latest such replay on
 * another stream: SERIALIZE (the default) makes its stream wait for that replay's event, or the
 * host wait where the stream cannot; REFUSE_OVERLAP refuses it with RECAP_ERROR_BUSY while that
 * replay is unfinished, launching nothing. docs/nccl.md. */
typedef enum recap_nccl_policy {
  RECAP_NCCL_SERIALIZE = 0,
  RECAP_NCCL_REFUSE_OVERLAP = 1
} recap_nccl_policy_t;

/* Choose how replays of graphs recorded with collectives on comm order themselves (above).
 * Replays on one stream are ordered by the stream and pass either way. A policy outside the
 * enum is RECAP_ERROR_INVALID_ARGUMENT. Thread safe. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_comm_policy(recap_nccl_comm_t comm,
                                                                recap_nccl_policy_t policy);

/* ---- Pools of NCCL memory -------------------------------------------------------------------- */

/* Make pool's segments NCCL memory registered with comm (ncclMemAlloc, ncclCommRegister), for
 * NCCL's zero-copy paths; segments given back are deregistered and freed. Before the pool's
 * first allocation: a pool holding segments, or expandable_segments on, is INVALID_USAGE; the
 * default pool INVALID_ARGUMENT. comm must outlive the pool's segments. docs/nccl.md. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_nccl(recap_pool_id_t pool,
                                                         recap_nccl_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_NCCL_H */
