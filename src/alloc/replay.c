/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay.c — the allocation log of a capture and its replay at a recapture (the rule is in
 * replay.h): the logs, the state a route keeps for them (its hit and miss counters
 * included), and the placement decision the allocation path asks for when a route has logs.
 *
 * The decision is made here and carried out by replay_take.c (take_range), which owns the block
 * surgery; this file only reads the pool's free set, and calls neither the malloc/free path nor
 * pool.c (pool.c attaches the state to a route: recap__pool_route_set_logs). The placement runs
 * under the allocator's lock, on the allocation path of a capture: a hit of an identical sequence
 * costs one look at the cursor's entry and a scan of the free set of its size class.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/fit.h"
#include "alloc/replay.h"
#include "core/host.h"

typedef struct recap__alloc_log_entry entry_t;

/* What a route keeps while logs are attached; one host block with the arrays after it. */
struct recap__route_logs {
  recap__alloc_log_t *record;
  const recap__alloc_log_t *replay;
  size_t cursor;              /* the first replay entry not used yet */
  bool *used;                 /* per replay entry: matched by an allocation (hit or not) */
  const entry_t **by_address; /* the replay entries sorted by address, for the claimed ranges */
  size_t max_size;            /* the largest replay entry: where a sweep by address must start */
  uint64_t hits, misses;
};

void recap__alloc_log_free(recap__alloc_log_t *log) {
  if (!log) return;
  recap__host_free(log->v);
  *log = (recap__alloc_log_t){0};
}

/* Host OOM must not fail the allocation being logged: the log says it is incomplete instead. */
static void log_append(recap__alloc_log_t *log, void *ptr, size_t size) {
  if (log->count == log->capacity) {
    size_t capacity = log->capacity ? log->capacity * 2 : 64;
    entry_t *v = recap__host_realloc(log->v, capacity * sizeof *v);
    if (!v) {
      log->incomplete = true;
      return;
    }
    log->v = v;
    log->capacity = capacity;
  }
  log->v[log->count++] = (entry_t){ptr, size};
}

void recap__route_logs_delete(recap__route_logs_t *logs) { recap__host_free(logs); }

void recap__route_logs_counts(const recap__route_logs_t *logs, uint64_t *hits, uint64_t *misses) {
  *hits = logs ? logs->hits : 0;
  *misses = logs ? logs->misses : 0;
}

static int compare_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)(*(const entry_t *const *)a)->ptr;
  uintptr_t y = (uintptr_t)(*(const entry_t *const *)b)->ptr;
  return (x > y) - (x < y);
}

/* Counters at zero, every replay entry unused. */
recap__route_logs_t *recap__route_logs_new(recap__alloc_log_t *record,
                                           const recap__alloc_log_t *replay) {
  size_t n = replay ? replay->count : 0;
  if (n > (SIZE_MAX - sizeof(recap__route_logs_t)) / (sizeof(entry_t *) + sizeof(bool)))
    return NULL;
  recap__route_logs_t *logs =
      recap__host_calloc(1, sizeof *logs + n * (sizeof(entry_t *) + sizeof(bool)));
  if (!logs) return NULL;
  logs->record = record;
  logs->replay = replay;
  logs->by_address = (const entry_t **)(logs + 1); /* the struct's size keeps pointers aligned */
  logs->used = (bool *)(logs->by_address + n);
  for (size_t i = 0; i < n; i++) {
    logs->by_address[i] = &replay->v[i];
    if (replay->v[i].size > logs->max_size) logs->max_size = replay->v[i].size;
  }
  if (n) qsort(logs->by_address, n, sizeof *logs->by_address, compare_address);
  return logs;
}

/* ------------------------------------------------------------------------------------------
 * Placement (lock held)
 * ---------------------------------------------------------------------------------------- */

/* Whether a request of `size` bytes on stream may be given [at, at + size) out of the free block f:
 * it lies inside f, and the max_split_size rules of the usual path hold (see recap__find_free_block
 * in request.h), but for one case: a request below the limit may have the start of a block that is
 * as large as the limit only by the rounding of a segment made for a request its size (less than
 * round_large larger), which is what a new segment would give it, so that replaying such a segment
 * does not grow the pool. A VMM segment's blocks have no max_split_size rules (recap__should_split
 * says why). */
static bool fits(const recap__block_t *f, uintptr_t at, size_t size, recap_stream_t stream,
                 const recap__options_t *o) {
  uintptr_t start = (uintptr_t)f->ptr;
  if (f->stream != stream || at < start || at - start > f->size || f->size - (at - start) < size)
    return false;
  if (o->max_split_size && !f->segment->vmm) {
    if (size >= o->max_split_size) return at == start && f->size < size + o->large_segment;
    if (f->size >= o->max_split_size) return at == start && f->size - size < o->round_large;
  }
  return true;
}

/* The free block of set that may give [at, at + size) to the request, or NULL; with vmm_only,
 * only a block of a VMM segment (the large set serving a small request). A linear scan: the free
 * blocks of a private pool during a capture are few, and the set is ordered by size, not
 * address. */
static recap__block_t *free_block_holding(const recap__free_set_t *set, bool vmm_only,
                                          recap_stream_t stream, uintptr_t at, size_t size,
                                          const recap__options_t *o) {
  for (size_t i = 0; i < set->count; i++) {
    recap__block_t *f = set->items[i];
    if ((!vmm_only || f->segment->vmm) && fits(f, at, size, stream, o)) return f;
  }
  return NULL;
}

/* The first unused replay entry at or after the cursor with this size, or replay->count. */
static size_t next_entry(const recap__route_logs_t *logs, size_t size) {
  const recap__alloc_log_t *replay = logs->replay;
  for (size_t j = logs->cursor; j < replay->count; j++)
    if (!logs->used[j] && replay->v[j].size == size) return j;
  return replay->count;
}

static void use_entry(recap__route_logs_t *logs, size_t j) {
  logs->used[j] = true;
  while (logs->cursor < logs->replay->count && logs->used[logs->cursor]) logs->cursor++;
}

/* The lowest address of f where `size` bytes overlap no unused replay entry, or UINTPTR_MAX.
 * A sweep of the entries by address from the first that may reach f. */
static uintptr_t lowest_unclaimed(const recap__route_logs_t *logs, const recap__block_t *f,
                                  size_t size) {
  const entry_t *const *by = logs->by_address;
  size_t n = logs->replay->count;
  uintptr_t start = (uintptr_t)f->ptr, end = start + f->size, p = start;
  uintptr_t from = start > logs->max_size ? start - logs->max_size : 0;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)by[mid]->ptr < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t k = lo; k < n; k++) {
    uintptr_t e = (uintptr_t)by[k]->ptr;
    if (e >= p + size) break; /* it, and every later entry, starts past the candidate range */
    if (logs->used[by[k] - logs->replay->v]) continue;
    if (e + by[k]->size > p) p = e + by[k]->size;
    if (p > end || end - p < size) return UINTPTR_MAX;
  }
  return end - p >= size ? p : UINTPTR_MAX;
}

/* A miss goes to the best fitting free block that has room outside the unused entries' ranges
 * (with vmm_only, of a VMM segment); false if none has. */
static bool place_unclaimed(const recap__route_logs_t *logs, const recap__free_set_t *set,
                            bool vmm_only, recap_stream_t stream, size_t size,
                            const recap__options_t *o, recap__block_t **block, char **at) {
  for (size_t i = recap__free_set_lower_bound(set, stream, size);
       i < set->count && set->items[i]->stream == stream; i++) {
    recap__block_t *f = set->items[i];
    if (vmm_only && !f->segment->vmm) continue;
    uintptr_t p = lowest_unclaimed(logs, f, size);
    if (p != UINTPTR_MAX && fits(f, p, size, stream, o)) {
      *block = f;
      *at = f->ptr + (p - (uintptr_t)f->ptr);
      return true;
    }
  }
  return false;
}

bool recap__replay_place_unclaimed(const recap__route_logs_t *logs, const recap__free_set_t *set,
                                   recap_stream_t stream, size_t rounded, const recap__options_t *o,
                                   recap__block_t **block, char **at) {
  return logs->replay && place_unclaimed(logs, set, false, stream, rounded, o, block, at);
}

recap__replay_place_t recap__replay_place(recap__route_logs_t *logs, const recap__free_set_t *set,
                                          const recap__free_set_t *also, recap_stream_t stream,
                                          size_t rounded, const recap__options_t *o,
                                          recap__block_t **block, char **at, bool *hit) {
  *hit = false;
  if (!logs->replay) return RECAP__REPLAY_USUAL;
  size_t j = next_entry(logs, rounded);
  if (j < logs->replay->count) {
    /* Used up even when its range is taken (an output the caller kept): the next allocation of
     * this size then matches its own entry, not this one. */
    use_entry(logs, j);
    uintptr_t want = (uintptr_t)logs->replay->v[j].ptr;
    recap__block_t *f = free_block_holding(set, false, stream, want, rounded, o);
    if (!f && also) f = free_block_holding(also, true, stream, want, rounded, o);
    if (f) {
      *block = f;
      *at = f->ptr + (want - (uintptr_t)f->ptr);
      *hit = true;
      return RECAP__REPLAY_AT;
    }
  }
  if (place_unclaimed(logs, set, false, stream, rounded, o, block, at)) return RECAP__REPLAY_AT;
  if (also && place_unclaimed(logs, also, true, stream, rounded, o, block, at))
    return RECAP__REPLAY_AT;
  return RECAP__REPLAY_NEW_SEGMENT;
}

bool recap__route_logs_replay(const recap__route_logs_t *logs) { return logs->replay != NULL; }

void recap__replay_note(recap__route_logs_t *logs, void *ptr, size_t rounded, bool hit) {
  if (hit)
    logs->hits++;
  else
    logs->misses++;
  if (logs->record) log_append(logs->record, ptr, rounded);
}
