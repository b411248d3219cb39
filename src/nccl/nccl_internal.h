/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl_internal.h — the NCCL layer's shared state: what a graph's capture recorded of its
 * collectives (collectives.c records, fingerprint.c reads and compares), and the
 * per-communicator replay policy (policy.c) the graph's replay hooks apply.
 */
#ifndef RECAP_NCCL_INTERNAL_H
#define RECAP_NCCL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/nccl_seam.h"
#include "recap/core.h"
#include "recap/graph.h"
#include "recap/nccl.h"

/* One recorded collective (the public recap_collective_t's fields, and the communicator). */
typedef struct recap__nccl_entry {
  recap__coll_kind_t kind;
  unsigned comm_index;
  int nranks;
  size_t count;
  int dtype, op, peer, root;
  unsigned group;
} recap__nccl_entry_t;

/* The communicators' states a replay (or the check's exchange) was admitted under, sorted by
 * address, their replay locks held: filled by recap__nccl_policy_before, used and emptied by
 * recap__nccl_policy_after, so that the replay looks its communicators up once. Up to
 * RECAP__NCCL_STACK_STATES of them live in the struct; more in memory of their own. */
enum { RECAP__NCCL_STACK_STATES = 8 };
struct recap__nccl_comm_state;
typedef struct recap__nccl_admission {
  struct recap__nccl_comm_state **states; /* stack, or allocated */
  struct recap__nccl_comm_state *stack[RECAP__NCCL_STACK_STATES];
  size_t count;
} recap__nccl_admission_t;

/* What one capture of a graph recorded; attached as the ctx of the layer's graph hooks. */
typedef struct recap__nccl_graph {
  recap__nccl_entry_t *entries;
  size_t count, capacity;
  recap__nccl_comm_t *comms; /* in the order the capture first used them */
  size_t comm_count, comm_capacity;
  recap_stream_t replay_stream;      /* of the replay under way (between the replay hooks) */
  recap__nccl_admission_t admission; /* of the replay under way */
  /* While the graph is being embedded in another capture (collectives.c, hook_embed_begin to
   * hook_embed_end): the outer record's counts before the embedding, and whether the record
   * was attached for it, so that a failed embedding can take its entries back. */
  size_t embed_count, embed_comm_count;
  bool embed_attached;
} recap__nccl_graph_t;

/* The record of graph's capture, or NULL when it recorded no collective. */
recap__nccl_graph_t *recap__nccl_graph_find(recap_graph_t graph);

/* The fingerprint's hash of entries (FNV-1a over their fields); only the entries on comm_index
 * when comm_index >= 0. Send and receive are skipped when skip_p2p (the cross-rank check). */
uint64_t recap__nccl_hash(const recap__nccl_entry_t *entries, size_t count, long comm_index,
                          bool skip_p2p);

/* "all_reduce of 1024 float32 sum on comm 0 (2 ranks)" into out. */
void recap__nccl_describe(const recap__nccl_entry_t *e, char *out, size_t cap);

/* The replay policy (policy.c): before a replay of a graph that recorded comms, on stream, or
 * before the check's exchange on its own stream; function names the caller in messages
 * ("recap_graph_replay", "recap_graph_check_collectives"). Success fills *admission and holds
 * each communicator's replay lock until recap__nccl_policy_after; a failure leaves it empty. */
recap_status_t recap__nccl_policy_before(recap__nccl_comm_t *comms, size_t count,
                                         recap_stream_t stream, const char *function,
                                         recap__nccl_admission_t *admission);
/* The replay launched (launched) or failed: record where the admitted comms' latest replay is,
 * release their locks and empty *admission. Never fails. */
void recap__nccl_policy_after(recap__nccl_admission_t *admission, recap_stream_t stream,
                              bool launched);
/* The stream of comm's checks (recap_graph_check_collectives), made on the current device at
 * the first check there and kept with the communicator's state: a check pays for no stream of
 * its own, and NCCL sets up its work on a stream once. */
recap_status_t recap__nccl_check_stream(recap__nccl_comm_t comm, recap_stream_t *stream);
/* The device buffer of at least bytes for the check's exchange on the one communicator that
 * admission holds (admitted on its check stream): kept between checks and grown when needed,
 * so that a check makes no cudaMalloc and no cudaFree (which waits for the whole device). */
recap_status_t recap__nccl_check_buffer(const recap__nccl_admission_t *admission, size_t bytes,
                                        void **buffer);
/* Forget every communicator's state (tests, after the fake device was reset: its events,
 * streams and buffers are gone, so they are dropped, not destroyed). */
void recap__nccl_policy_forget(void);
/* Warn again at the next captured collective of an old NCCL (tests). */
void recap__nccl_warning_reset(void);

#endif /* RECAP_NCCL_INTERNAL_H */
