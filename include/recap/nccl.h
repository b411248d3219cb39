/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/nccl.h — NCCL collectives inside recap graphs, with the checks that keep ranks from
 * hanging or failing with a bare driver error.
 *
 * recap never links NCCL: it loads libnccl.so.2 at the first call that needs it (or the library
 * named by the environment variable RECAP_NCCL_LIBRARY). Without NCCL every function here fails
 * with RECAP_ERROR_NOT_FOUND (the library is absent) or RECAP_ERROR_NOT_SUPPORTED (recap was
 * built without NCCL's headers), and the rest of recap works as before. docs/nccl.md has the
 * whole contract.
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

/* ------------------------------------------------------------------------------------------
 * Communicators and NCCL's numbering
 * ---------------------------------------------------------------------------------------- */

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
 * does (comm's rank calls it with the matching collective of every other rank). Buffers are
 * device memory; the in-place forms NCCL documents (send == recv, or send inside recv) are
 * accepted. While stream captures into a recap graph the collective becomes part of the graph
 * and of its fingerprint (recap_graph_collectives); its buffers must then outlive the graph's
 * replays (the graph's pool, or memory registered with the communicator). Inside the body of a
 * region (recap/region.h) a collective is RECAP_ERROR_INVALID_USAGE and nothing is enqueued:
 * CUDA refuses to instantiate a conditional body holding NCCL's work with a bare
 * cudaErrorInvalidValue (pytorch #180960), and a rank whose loop ran a different number of
 * times than its peers would hang them. NULL buffers and comm are RECAP_ERROR_INVALID_ARGUMENT,
 * and so are a dtype or op outside the enums; NCCL's failure is its status mapped to recap's,
 * with NCCL's message.
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

/* ------------------------------------------------------------------------------------------
 * Fingerprints
 * ---------------------------------------------------------------------------------------- */

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

/* The collectives the capture graph holds (or the one under way) recorded, in order: the first
 * min(capacity, total) into out[0..], the total into *count, and the fingerprint's 64-bit hash
 * into *hash when hash is not NULL (0 for none). Every out[i] written must have its size set
 * (RECAP_COLLECTIVE_INIT), between the first version's and this library's
 * (RECAP_ERROR_INVALID_ARGUMENT otherwise). out may be NULL only with capacity 0. A graph that
 * recorded none gives *count 0. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_collectives(recap_graph_t graph,
                                                                 recap_collective_t *out,
                                                                 size_t capacity, size_t *count,
                                                                 uint64_t *hash);

/* Compare graph's collectives on comm with every other rank's, before the first replay: every
 * rank of comm calls it (collectively, like an NCCL call) for its graph of the same step. It
 * all-gathers each rank's count and hash of the entries on comm (on an internal stream, and
 * waits for it), and on a difference all-gathers the first 64 entries to name the first
 * differing collective: RECAP_ERROR_INVALID_USAGE, "rank 0's collective 3 is all_reduce of 1024
 * float32 sum on comm 0 (2 ranks); rank 1's is all_gather of ..." (or "has none"). A graph with
 * no collective on comm passes when the others have none either. A graph that holds no capture
 * (fresh, capturing, eager) is RECAP_ERROR_INVALID_USAGE, before any communication: every rank
 * must then fail the same way, or the others wait in the exchange. The exchange is ordered
 * after comm's latest replay like a replay on another stream (recap_nccl_comm_policy: it waits
 * for it, or is RECAP_ERROR_BUSY under REFUSE_OVERLAP). Not during a capture (it synchronises). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_check_collectives(recap_graph_t graph,
                                                                       recap_nccl_comm_t comm);

/* ------------------------------------------------------------------------------------------
 * Replays of graphs that share a communicator
 * ---------------------------------------------------------------------------------------- */

typedef enum recap_nccl_policy {
  /* A replay of a graph using the communicator on another stream than the latest such replay
   * is ordered after that replay on the device: its stream waits for the latest replay's
   * event, and the host does not block. The host waits instead when the stream wait cannot be
   * enqueued, on a capturing stream, or when the latest replay's event could not be recorded
   * (then for that replay's whole stream). The default. */
  RECAP_NCCL_SERIALIZE = 0,
  /* Such a replay while the latest is unfinished, or while another thread launches a replay
   * using the communicator, is RECAP_ERROR_BUSY, naming the streams and the communicator, and
   * launches nothing. */
  RECAP_NCCL_REFUSE_OVERLAP = 1
} recap_nccl_policy_t;

/* Choose how replays of graphs recorded with collectives on comm order themselves (above).
 * Replays on one stream are ordered by the stream and pass either way. A policy outside the
 * enum is RECAP_ERROR_INVALID_ARGUMENT. Thread safe. */
RECAP_NODISCARD RECAP_API recap_status_t recap_nccl_comm_policy(recap_nccl_comm_t comm,
                                                                recap_nccl_policy_t policy);

/* ------------------------------------------------------------------------------------------
 * Pools of NCCL memory
 * ---------------------------------------------------------------------------------------- */

/* Make the segments of pool (a private pool: recap_pool_handle, or a graph's) NCCL memory
 * registered with comm, so that NCCL's zero-copy paths can use collectives' buffers allocated
 * from it: every segment the pool gets from now on is allocated with ncclMemAlloc and registered
 * with ncclCommRegister; a segment given back (recap_empty_cache, the pool's release) is
 * deregistered and freed with ncclMemFree. Call it before the pool's first allocation: a pool
 * that holds segments is RECAP_ERROR_INVALID_USAGE, and so is the expandable_segments option on
 * (its segments are virtual memory); the default pool is RECAP_ERROR_INVALID_ARGUMENT. The
 * setting stays with the pool id for the process's life; comm must outlive the pool's segments.
 * An allocation that NCCL refuses fails recap_malloc with NCCL's status and message. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_nccl(recap_pool_id_t pool,
                                                         recap_nccl_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_NCCL_H */
