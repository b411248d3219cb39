/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fingerprint.c — what a graph's capture recorded of its collectives (recap_graph_collectives)
 * and the comparison across ranks before the first replay (recap_graph_check_collectives).
 *
 * The comparison costs one all-gather of two words per rank when the ranks agree, the common
 * case; only a difference pays for a second all-gather of the first entries, to name it. Both go
 * through the NCCL seam on a stream of their own, eagerly, and wait for it: the check runs once
 * per graph, before its first replay, where a host wait costs nothing that matters.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "graph/graph_internal.h"
#include "nccl/nccl_internal.h"

/* Entries the second exchange carries per rank, and the words of one entry. */
enum { RECAP__NCCL_NAMED = 64, RECAP__NCCL_WORDS = 8 };

/* The fields ranks must agree on, as words: the communicator's index is the graph's own
 * numbering, so it is left out (the check looks at one communicator). */
static void encode(const recap__nccl_entry_t *e, uint64_t w[RECAP__NCCL_WORDS]) {
  w[0] = (uint64_t)e->kind;
  w[1] = (uint64_t)e->count;
  w[2] = (uint64_t)(int64_t)e->dtype;
  w[3] = (uint64_t)(int64_t)e->op;
  w[4] = (uint64_t)(int64_t)e->peer;
  w[5] = (uint64_t)(int64_t)e->root;
  w[6] = (uint64_t)e->group;
  w[7] = (uint64_t)(int64_t)e->nranks;
}

static void decode(const uint64_t w[RECAP__NCCL_WORDS], recap__nccl_entry_t *e) {
  *e = (recap__nccl_entry_t){.kind = (recap__coll_kind_t)w[0],
                             .count = (size_t)w[1],
                             .dtype = (int)(int64_t)w[2],
                             .op = (int)(int64_t)w[3],
                             .peer = (int)(int64_t)w[4],
                             .root = (int)(int64_t)w[5],
                             .group = (unsigned)w[6],
                             .nranks = (int)(int64_t)w[7]};
}

static uint64_t fnv(uint64_t h, uint64_t word) {
  for (int i = 0; i < 8; i++) {
    h ^= (word >> (8 * i)) & 0xff;
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

static bool p2p(recap__coll_kind_t kind) {
  return kind == RECAP__COLL_SEND || kind == RECAP__COLL_RECV;
}

uint64_t recap__nccl_hash(const recap__nccl_entry_t *entries, size_t count, long comm_index,
                          bool skip_p2p) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < count; i++) {
    const recap__nccl_entry_t *e = &entries[i];
    if (comm_index >= 0 && e->comm_index != (unsigned long)comm_index) continue;
    if (skip_p2p && p2p(e->kind)) continue;
    uint64_t w[RECAP__NCCL_WORDS];
    encode(e, w);
    for (int k = 0; k < RECAP__NCCL_WORDS; k++) h = fnv(h, w[k]);
    if (comm_index < 0) h = fnv(h, e->comm_index);
  }
  return h;
}

void recap__nccl_describe(const recap__nccl_entry_t *e, char *out, size_t cap) {
  const char *kind = recap_collective_kind_name((recap_collective_kind_t)e->kind);
  const char *dtype = recap_nccl_dtype_name((recap_nccl_dtype_t)e->dtype);
  const char *op = recap_nccl_op_name((recap_nccl_op_t)e->op);
  switch (e->kind) {
    case RECAP__COLL_ALL_REDUCE:
    case RECAP__COLL_REDUCE_SCATTER:
      snprintf(out, cap, "%s of %zu %s %s", kind, e->count, dtype, op);
      break;
    case RECAP__COLL_ALL_GATHER: snprintf(out, cap, "%s of %zu %s", kind, e->count, dtype); break;
    case RECAP__COLL_BROADCAST:
      snprintf(out, cap, "%s of %zu %s from root %d", kind, e->count, dtype, e->root);
      break;
    case RECAP__COLL_REDUCE:
      snprintf(out, cap, "%s of %zu %s %s to root %d", kind, e->count, dtype, op, e->root);
      break;
    case RECAP__COLL_SEND:
      snprintf(out, cap, "%s of %zu %s to rank %d", kind, e->count, dtype, e->peer);
      break;
    case RECAP__COLL_RECV:
      snprintf(out, cap, "%s of %zu %s from rank %d", kind, e->count, dtype, e->peer);
      break;
    default: snprintf(out, cap, "unknown collective %d", (int)e->kind); break;
  }
  size_t used = strlen(out);
  if (e->group > 0 && used < cap) snprintf(out + used, cap - used, " in a group %u deep", e->group);
  used = strlen(out);
  if (used < cap) snprintf(out + used, cap - used, " (%d ranks)", e->nranks);
}

/* ------------------------------------------------------------------------------------------
 * recap_graph_collectives
 * ---------------------------------------------------------------------------------------- */

/* The size of recap_collective_t's first version: it ends at `group`. */
#define RECAP__COLLECTIVE_V1_SIZE (offsetof(recap_collective_t, group) + sizeof(unsigned))

recap_status_t recap_graph_collectives(recap_graph_t graph, recap_collective_t *out,
                                       size_t capacity, size_t *count, uint64_t *hash) {
  static const char fn[] = "recap_graph_collectives";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(count != NULL, "recap_graph_collectives: count is NULL");
  RECAP__ARG(out != NULL || capacity == 0,
             "recap_graph_collectives: out is NULL and capacity is %zu (pass capacity 0 to ask "
             "only for the count)",
             capacity);
  const recap__nccl_graph_t *g = recap__nccl_graph_find(graph);
  size_t total = g ? g->count : 0;
  size_t n = total < capacity ? total : capacity;
  for (size_t i = 0; i < n; i++)
    RECAP__ARG(out[i].size >= RECAP__COLLECTIVE_V1_SIZE &&
                   out[i].size <= sizeof(recap_collective_t),
               "recap_graph_collectives: out[%zu].size is %zu; start each element from "
               "RECAP_COLLECTIVE_INIT",
               i, out[i].size);
  for (size_t i = 0; i < n; i++) {
    const recap__nccl_entry_t *e = &g->entries[i];
    recap_collective_t c = {.size = out[i].size,
                            .kind = (recap_collective_kind_t)e->kind,
                            .comm_index = e->comm_index,
                            .nranks = e->nranks,
                            .count = e->count,
                            .dtype = (recap_nccl_dtype_t)e->dtype,
                            .op = e->op,
                            .peer = e->peer,
                            .root = e->root,
                            .group = e->group};
    memcpy(&out[i], &c, out[i].size);
  }
  *count = total;
  if (hash) *hash = total ? recap__nccl_hash(g->entries, total, -1, false) : 0;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * recap_graph_check_collectives
 * ---------------------------------------------------------------------------------------- */

/* All-gather `words` 64-bit words of every rank of comm into all (nranks * words), through the
 * seam on the check's stream, in the device buffer the admitted communicator keeps for its
 * checks, and wait for it. */
static recap_status_t exchange(recap__nccl_comm_t comm, recap_stream_t stream,
                               const recap__nccl_admission_t *admission, const uint64_t *mine,
                               size_t words, int nranks, uint64_t *all) {
  const recap__device_ops_t *dev = recap__device();
  size_t bytes = words * sizeof(uint64_t);
  void *buffer;
  RECAP__CHECK(recap__nccl_check_buffer(admission, bytes * ((size_t)nranks + 1), &buffer));
  void *send = buffer, *recv = (char *)buffer + bytes;
  RECAP__CHECK(dev->memcpy_async(send, mine, bytes, stream));
  recap__coll_t c = {
      RECAP__COLL_ALL_GATHER, send, recv, words, RECAP_NCCL_UINT64, -1, -1, -1, comm};
  RECAP__CHECK(recap__nccl()->collective(&c, stream));
  RECAP__CHECK(dev->memcpy_async(all, recv, bytes * (size_t)nranks, stream));
  return dev->stream_synchronize(stream);
}

/* The second exchange: each rank's first entries, to name the first difference. */
static recap_status_t name_difference(recap__nccl_comm_t comm, recap_stream_t stream,
                                      const recap__nccl_admission_t *admission, int rank,
                                      int nranks, const recap__nccl_entry_t *const *mine,
                                      size_t count, const uint64_t *summary) {
  static const char fn[] = "recap_graph_check_collectives";
  size_t words = 1 + (size_t)RECAP__NCCL_NAMED * RECAP__NCCL_WORDS;
  uint64_t *send = recap__host_calloc(words, sizeof *send);
  uint64_t *all = recap__host_calloc(words * (size_t)nranks, sizeof *all);
  if (!send || !all) {
    recap__host_free(send);
    recap__host_free(all);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  size_t named = count < RECAP__NCCL_NAMED ? count : RECAP__NCCL_NAMED;
  send[0] = count;
  for (size_t i = 0; i < named; i++) encode(mine[i], &send[1 + i * RECAP__NCCL_WORDS]);
  recap_status_t s = exchange(comm, stream, admission, send, words, nranks, all);
  if (s != RECAP_SUCCESS) {
    recap__host_free(send);
    recap__host_free(all);
    return s;
  }
  /* The first index where some rank differs from this one, and the first such rank. */
  size_t first = SIZE_MAX;
  int other = -1;
  for (int r = 0; r < nranks; r++) {
    if (r == rank) continue;
    const uint64_t *theirs = &all[(size_t)r * words];
    size_t their_count = (size_t)theirs[0];
    size_t limit = count < their_count ? count : their_count;
    if (limit > RECAP__NCCL_NAMED) limit = RECAP__NCCL_NAMED;
    size_t i = 0;
    while (i < limit && memcmp(&send[1 + i * RECAP__NCCL_WORDS], &theirs[1 + i * RECAP__NCCL_WORDS],
                               RECAP__NCCL_WORDS * sizeof(uint64_t)) == 0)
      i++;
    bool differs = i < limit || (i == limit && count != their_count && limit < RECAP__NCCL_NAMED);
    if (differs && i < first) {
      first = i;
      other = r;
    }
  }
  char a[160], b[200];
  if (other < 0) {
    /* Every named entry agrees: the difference lies past them. */
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "%s: the graph's collectives on the communicator differ between ranks past "
                     "their first %d, which agree: rank %d recorded %zu (hash %016" PRIx64
                     "); every rank must capture the same collectives in the same order, or the "
                     "replays hang",
                     fn, RECAP__NCCL_NAMED, rank, count, summary[(size_t)rank * 2 + 1]);
  } else {
    const uint64_t *theirs = &all[(size_t)other * words];
    size_t their_count = (size_t)theirs[0];
    recap__nccl_entry_t e;
    if (first < count) recap__nccl_describe(mine[first], a, sizeof a);
    if (first < their_count) {
      decode(&theirs[1 + first * RECAP__NCCL_WORDS], &e);
      char d[160];
      recap__nccl_describe(&e, d, sizeof d);
      snprintf(b, sizeof b, "is %s", d);
    } else {
      snprintf(b, sizeof b, "does not exist (rank %d recorded %zu)", other, their_count);
    }
    if (first < count)
      s = recap__error(RECAP_ERROR_INVALID_USAGE,
                       "%s: the graph's collectives on the communicator differ between ranks: "
                       "rank %d's collective %zu is %s; rank %d's %s; every rank must capture "
                       "the same collectives in the same order, or the replays hang",
                       fn, rank, first, a, other, b);
    else
      s = recap__error(RECAP_ERROR_INVALID_USAGE,
                       "%s: the graph's collectives on the communicator differ between ranks: "
                       "rank %d's collective %zu does not exist (rank %d recorded %zu); rank "
                       "%d's %s; every rank must capture the same collectives in the same "
                       "order, or the replays hang",
                       fn, rank, first, rank, count, other, b);
  }
  recap__host_free(send);
  recap__host_free(all);
  return s;
}

recap_status_t recap_graph_check_collectives(recap_graph_t graph, recap_nccl_comm_t comm) {
  static const char fn[] = "recap_graph_check_collectives";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(comm != NULL, "recap_graph_check_collectives: comm is NULL");
  RECAP__CHECK(recap__graph_not_recapturing(graph, fn));
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph holds no capture (it is fresh, capturing or ran eagerly); "
                        "check it after recap_graph_capture_end, on every rank",
                        fn);
  const recap__nccl_ops_t *nccl = recap__nccl();
  int version = 0;
  RECAP__CHECK(nccl->load(&version));
  int rank = 0, nranks = 0, device = 0;
  RECAP__CHECK(nccl->comm_info(comm, &rank, &nranks, &device));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return recap__error(RECAP_ERROR_INTERNAL, "%s: NCCL reports rank %d of %d ranks", fn, rank,
                        nranks);

  /* This rank's entries on comm, in order; send and receive are left out: their peers, and
   * which of the two a rank calls, differ from rank to rank by design. */
  const recap__nccl_graph_t *g = recap__nccl_graph_find(graph);
  long index = -1;
  for (size_t i = 0; g && i < g->comm_count; i++)
    if (g->comms[i] == comm) index = (long)i;
  size_t count = 0;
  const recap__nccl_entry_t **mine = NULL;
  if (index >= 0) {
    mine = recap__host_calloc(g->count ? g->count : 1, sizeof *mine);
    if (!mine) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; i < g->count; i++)
      if (g->entries[i].comm_index == (unsigned long)index && !p2p(g->entries[i].kind))
        mine[count++] = &g->entries[i];
  }
  uint64_t h = index >= 0 ? recap__nccl_hash(g->entries, g->count, index, true)
                          : recap__nccl_hash(NULL, 0, 0, true);
  uint64_t summary_mine[2] = {count, h};
  uint64_t *summary = recap__host_calloc(2 * (size_t)nranks, sizeof *summary);
  recap_status_t s = RECAP_SUCCESS;
  if (!summary) s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* The exchange runs on the communicator's check stream (kept between checks), ordered after
   * the communicator's latest replay as a replay on another stream would be
   * (recap_nccl_comm_policy). */
  recap_stream_t stream = NULL;
  if (s == RECAP_SUCCESS) s = recap__nccl_check_stream(comm, &stream);
  recap__nccl_admission_t admission;
  if (s == RECAP_SUCCESS) s = recap__nccl_policy_before(&comm, 1, stream, fn, &admission);
  bool admitted = s == RECAP_SUCCESS;
  if (s == RECAP_SUCCESS) s = exchange(comm, stream, &admission, summary_mine, 2, nranks, summary);
  bool agree = true;
  for (int r = 0; s == RECAP_SUCCESS && r < nranks; r++)
    if (summary[2 * (size_t)r] != count || summary[2 * (size_t)r + 1] != h) agree = false;
  if (s == RECAP_SUCCESS && !agree)
    s = name_difference(comm, stream, &admission, rank, nranks, mine, count, summary);
  if (admitted) recap__nccl_policy_after(&admission, stream, false);
  recap__host_free(summary);
  recap__host_free(mine);
  return s;
}
