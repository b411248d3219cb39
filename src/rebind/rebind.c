/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind.c — pointing a captured graph at new buffers: recap_graph_rebind, over the sites that
 * sites.c indexed by address at capture end.
 *
 * A rebind validates the whole batch before it changes anything, then hands the device one
 * sorted list of patches (patch_plan_apply: one set per node, all or nothing), and last
 * re-sorts the index: the moved sites of one range stay in order among themselves, so the
 * index is rebuilt by a merge of the untouched pairs with the moved runs, into scratch space
 * allocated at capture end (a rebind allocates host memory only for its batch). Layers that
 * follow addresses (input liveness) prepare through the graph's `exec_patching` event before
 * the device patches and commit at `exec_patched` after it, so a failed rebind changes nothing anywhere.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "rebind/params_device.h"
#include "rebind/rebind_internal.h"
#include "update/update_internal.h"

/* ------------------------------------------------------------------------------------------
 * Rebind
 * ---------------------------------------------------------------------------------------- */

static int compare_patches(const void *x, const void *y) {
  const recap__patch_t *a = x, *b = y;
  return (a->site > b->site) - (a->site < b->site);
}

/* One move of a batch, once validated: its ranges and its sites (index entries [lo, hi)). */
typedef struct move {
  size_t arg; /* its index in the caller's array */
  span_t old, new_;
  span_t guard; /* the new range and the rest of the recap allocations it lies in */
  size_t lo, hi;
} move_t;

static int compare_moves_old(const void *x, const void *y) {
  const move_t *a = x, *b = y;
  return (a->old.base > b->old.base) - (a->old.base < b->old.base);
}

static int compare_moves_new(const void *x, const void *y) {
  const move_t *a = x, *b = y;
  return (a->new_.base > b->new_.base) - (a->new_.base < b->new_.base);
}

/* The move (of moves, sorted by old base) whose old range holds p, or NULL. */
static const move_t *moved_by(const move_t *moves, size_t count, uintptr_t p) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (moves[mid].old.end <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < count && moves[lo].old.base <= p ? &moves[lo] : NULL;
}

static bool moved(const move_t *moves, size_t count, uintptr_t p) {
  return moved_by(moves, count, p) != NULL;
}

/* Whether range meets memory the graph's capture allocated from its pool (its intermediates
 * and outputs); an incomplete record counts as meeting it. */
static bool captured_here(recap_graph_t graph, span_t range) {
  const recap__alloc_log_t *log = &graph->alloc_log;
  if (log->incomplete) return true;
  for (size_t k = 0; k < log->count; k++) {
    uintptr_t base = (uintptr_t)log->v[k].ptr, end = base + log->v[k].size;
    if (end > range.base && base < range.end) return true;
  }
  return false;
}

/* A new range inside an allocated block of the graph's own pool (the block holds it: checked
 * before). The pool may be shared (graphed callables created together share one), and a block
 * another graph's capture allocated and still holds, such as a static output, is memory this
 * graph never touches: accepted. Refused when the range meets a block this graph's capture
 * allocated (its intermediates and outputs, which its replays write, whether or not freed and
 * handed out again since); the sites pointing into the block are check_batch's. */
static recap_status_t check_own_pool(rebind_t *r, recap_graph_t graph, const char *fn,
                                     const recap_rebind_t *in, size_t i, const move_t *m) {
  const recap__alloc_log_t *log = &graph->alloc_log;
  char nodes[1600];
  if (log->incomplete) {
    recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: the new buffer %p (for [%p, +%zu bytes), used by %s) "
                        "is memory of the graph's own pool, and the record of what the graph's "
                        "capture allocated there is incomplete (host memory ran out); give a "
                        "buffer from outside the pool",
                        fn, i, in->new_ptr, in->old_ptr, (size_t)(m->old.end - m->old.base), nodes);
  }
  for (size_t k = 0; k < log->count; k++) {
    uintptr_t base = (uintptr_t)log->v[k].ptr, end = base + log->v[k].size;
    if (end <= m->new_.base || base >= m->new_.end) continue;
    recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: the new buffer [%p, +%zu bytes) (for [%p, ...), used "
                        "by %s) overlaps [%p, +%zu bytes), memory of the graph's own pool that "
                        "its capture allocated and its replays write; give a buffer the graph "
                        "does not write",
                        fn, i, in->new_ptr, (size_t)(m->new_.end - m->new_.base), in->old_ptr,
                        nodes, (void *)base, log->v[k].size);
  }
  return RECAP_SUCCESS;
}

/* The checks of one move that need only itself and the graph. */
static recap_status_t check_move(rebind_t *r, recap_graph_t graph, const char *fn,
                                 const recap_rebind_t *in, size_t i, move_t *m) {
  char what[48];
  snprintf(what, sizeof what, "rebinds[%zu].size", i);
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(in, recap_rebind_t, bytes, fn, what, "RECAP_REBIND_INIT"));
  snprintf(what, sizeof what, "rebinds[%zu].old_ptr", i);
  size_t size = in->bytes;
  RECAP__CHECK(recap__rebind_resolve_range(r, fn, what, in->old_ptr, &size, &m->old));
  RECAP__ARG(in->new_ptr != NULL, "%s: rebinds[%zu].new_ptr is NULL", fn, i);
  uintptr_t nb = (uintptr_t)in->new_ptr;
  RECAP__ARG(nb + size > nb, "%s: rebinds[%zu].new_ptr [%p, +%zu bytes) wraps around", fn, i,
             in->new_ptr, size);
  m->arg = i;
  m->new_ = (span_t){nb, nb + size};
  m->lo = recap__rebind_lower_bound(r, m->old.base);
  m->hi = recap__rebind_lower_bound(r, m->old.end);
  char nodes[1600];
  const span_t *d = recap__rebind_declared_at(&r->declared, m->old.base);
  bool declared = d && m->old.end <= d->end;
  if (m->lo == m->hi)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: the graph does not use [%p, +%zu bytes): no node "
                        "holds an address in it (recap_graph_rebind_sites lists what it holds)",
                        fn, i, in->old_ptr, size);
  if (r->mode == RECAP_REBIND_DECLARED && !declared) {
    recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: [%p, +%zu bytes) is not inside a buffer declared "
                        "during the capture, and the graph was captured with "
                        "RECAP_REBIND_DECLARED (declare it with recap_graph_declare_buffer); it "
                        "is used by %s",
                        fn, i, in->old_ptr, size, nodes);
  }
  recap__block_ref_t ref;
  if (!declared && recap__alloc_find(in->old_ptr, &ref) &&
      recap__pool_id_equal(ref.pool, graph->pool) && captured_here(graph, m->old)) {
    recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: [%p, +%zu bytes) is memory the graph's capture "
                        "allocated from its own pool (its intermediates and outputs), used by "
                        "%s; rebind buffers from outside the pool, or declare the range during "
                        "the capture",
                        fn, i, in->old_ptr, size, nodes);
  }
  for (size_t k = m->lo; k < m->hi; k++) {
    const recap__graph_read_t *site = &r->sites[r->index[k].site];
    if (!site->nested) continue;
    recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, k, k + 1);
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: rebinds[%zu]: [%p, +%zu bytes) is used inside a child graph of %s, "
                        "which cannot be patched; capture without nesting the graph",
                        fn, i, in->old_ptr, size, nodes);
  }
  /* The new buffer: when it is recap's, it must be allocated, hold the range, and lie outside
   * the graph's pool (whose blocks the graph's own nodes write on every replay). The guard is
   * the new range widened to the allocations it starts and ends in (check_batch). */
  m->guard = m->new_;
  if (recap__alloc_find(in->new_ptr, &ref)) {
    const char *refusal = NULL;
    uintptr_t room = (uintptr_t)ref.base + ref.size - nb;
    bool own_pool = recap__pool_id_equal(ref.pool, graph->pool);
    if (own_pool && !ref.allocated)
      refusal =
          "lies in a free block of the graph's own pool, memory the graph's intermediates may "
          "use on every replay; give an allocated buffer";
    else if (!ref.allocated)
      refusal = "is not allocated: it lies in a free block of recap's allocator";
    if (refusal) {
      recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new buffer %p (for [%p, +%zu bytes), used by "
                          "%s) %s",
                          fn, i, in->new_ptr, in->old_ptr, size, nodes, refusal);
    }
    if (room < size) {
      recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new buffer %p holds %zu bytes from there (its "
                          "allocation is %p, %zu bytes), fewer than the %zu of [%p, +%zu bytes) "
                          "used by %s",
                          fn, i, in->new_ptr, (size_t)room, ref.base, ref.size, size, in->old_ptr,
                          size, nodes);
    }
    if (own_pool) RECAP__CHECK(check_own_pool(r, graph, fn, in, i, m));
    m->guard = (span_t){(uintptr_t)ref.base, (uintptr_t)ref.base + ref.size};
  } else if (size > 1 && recap__alloc_find((const void *)(nb + size - 1), &ref)) {
    /* Foreign memory that runs into recap's. */
    if (recap__pool_id_equal(ref.pool, graph->pool))
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new range [%p, +%zu bytes) reaches into the "
                          "graph's own pool, which the graph writes on every replay",
                          fn, i, in->new_ptr, size);
    if ((uintptr_t)ref.base + ref.size > m->guard.end)
      m->guard.end = (uintptr_t)ref.base + ref.size;
  }
  return RECAP_SUCCESS;
}

/* The checks across the batch: moves sorted by old base on entry. */
static recap_status_t check_batch(rebind_t *r, recap_graph_t graph, const char *fn, move_t *moves,
                                  size_t count, move_t *by_new) {
  for (size_t i = 1; i < count; i++)
    if (moves[i].old.base < moves[i - 1].old.end)
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu] and rebinds[%zu] move overlapping ranges (%p, %zu "
                          "bytes, and %p, %zu bytes); each address moves once",
                          fn, moves[i - 1].arg, moves[i].arg, (void *)moves[i - 1].old.base,
                          (size_t)(moves[i - 1].old.end - moves[i - 1].old.base),
                          (void *)moves[i].old.base,
                          (size_t)(moves[i].old.end - moves[i].old.base));
  memcpy(by_new, moves, count * sizeof *moves);
  qsort(by_new, count, sizeof *by_new, compare_moves_new);
  for (size_t i = 1; i < count; i++)
    if (by_new[i].new_.base < by_new[i - 1].new_.end)
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu] and rebinds[%zu] have overlapping new buffers (%p "
                          "and %p); each needs a buffer of its own",
                          fn, by_new[i - 1].arg, by_new[i].arg, (void *)by_new[i - 1].new_.base,
                          (void *)by_new[i].new_.base);
  char nodes[1600];
  for (size_t i = 0; i < count; i++) {
    const move_t *m = &moves[i];
    /* A buffer the graph uses, that this batch does not move, meeting the new range: replays
     * would then have two nodes' buffers share memory. A site's buffer is the declared buffer
     * holding its address or, without one, the recap allocation holding it: so the addresses
     * looked at are those of the new range and of the allocations it starts and ends in. */
    uintptr_t hi = m->guard.end;
    for (size_t k = recap__rebind_lower_bound(r, m->guard.base);
         k < r->site_count && r->index[k].value < hi; k++) {
      uintptr_t v = r->index[k].value;
      if (moved(moves, count, v)) continue;
      const span_t *dv = recap__rebind_declared_at(&r->declared, v);
      if (dv && (dv->end <= m->new_.base || dv->base >= m->new_.end)) continue;
      recap__rebind_describe_sites(nodes, sizeof nodes, r, graph, k, k + 1);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new buffer [%p, +%zu bytes) overlaps memory "
                          "the graph uses: %p, held by %s, lies %s; choose a buffer the graph "
                          "does not use (or move that one in the same batch)",
                          fn, m->arg, (void *)m->new_.base, (size_t)(m->new_.end - m->new_.base),
                          (void *)v, nodes,
                          v >= m->new_.base && v < m->new_.end
                              ? "in it"
                              : "in the same allocation (declare buffers for exact extents)");
    }
    /* A declared buffer in the new range that this batch does not move entirely. */
    const spans_t *d = &r->declared;
    for (size_t k = recap__rebind_spans_find(d, m->new_.base);
         k < d->count && d->v[k].base < m->new_.end; k++) {
      const move_t *whole = moved_by(moves, count, d->v[k].base);
      if (whole && d->v[k].end <= whole->old.end) continue;
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new buffer [%p, +%zu bytes) overlaps the "
                          "declared buffer [%p, +%zu bytes) of the graph",
                          fn, m->arg, (void *)m->new_.base, (size_t)(m->new_.end - m->new_.base),
                          (void *)d->v[k].base, (size_t)(d->v[k].end - d->v[k].base));
    }
  }
  return RECAP_SUCCESS;
}

/* The index after the moves (sorted by old base): the untouched entries keep their order, each
 * move's run keeps its own order at its new values, and the runs are merged in by new base.
 * Only the region from the first run or destination to the last changes: before it, every
 * value is below every new range (and so below every moved value); after it, every value is
 * above them (check_batch refused untouched values inside a new range). So the merge costs the
 * entries between where the runs were and where they go, not the whole index. */
static void reindex(rebind_t *r, const move_t *moves, const move_t *by_new, size_t count) {
  size_t from = SIZE_MAX, to = 0;
  for (size_t i = 0; i < count; i++) {
    size_t dest = recap__rebind_lower_bound(r, moves[i].new_.base);
    size_t lo = moves[i].lo < dest ? moves[i].lo : dest;
    size_t hi = moves[i].hi > dest ? moves[i].hi : dest;
    if (lo < from) from = lo;
    if (hi > to) to = hi;
  }
  size_t out = 0, next_move = 0, i = from, run = 0;
  while (i < to || run < count) {
    if (next_move < count && i == moves[next_move].lo) { /* skip a moved run */
      i = moves[next_move].hi;
      next_move++;
      continue;
    }
    bool take_run = run < count && (i >= to || by_new[run].new_.base <= r->index[i].value);
    if (take_run) {
      const move_t *m = &by_new[run++];
      for (size_t k = m->lo; k < m->hi; k++)
        r->scratch[out++] =
            (entry_t){m->new_.base + (r->index[k].value - m->old.base), r->index[k].site};
    } else {
      r->scratch[out++] = r->index[i++];
    }
  }
  memcpy(r->index + from, r->scratch, out * sizeof *r->index);
}

static int compare_spans(const void *x, const void *y) {
  const span_t *a = x, *b = y;
  return (a->base > b->base) - (a->base < b->base);
}

/* Declared buffers that a move took whole follow it: the declaration names the buffer, wherever
 * the graph points it. check_batch refused new ranges meeting a declared buffer the batch does
 * not move whole, so the declarations stay disjoint. */
static void move_declarations(rebind_t *r, const move_t *moves, size_t count) {
  spans_t *d = &r->declared;
  bool changed = false;
  for (size_t k = 0; k < d->count; k++) {
    span_t *v = &d->v[k];
    for (size_t i = 0; i < count; i++) {
      const move_t *m = &moves[i];
      if (v->base < m->old.base || v->end > m->old.end) continue;
      uintptr_t size = v->end - v->base;
      v->base = m->new_.base + (v->base - m->old.base);
      v->end = v->base + size;
      changed = true;
      break;
    }
  }
  if (changed) qsort(d->v, d->count, sizeof *d->v, compare_spans);
}

/* The modules' exec_patching hooks, with every site as it will be; on failure, those that
 * prepared are told it was not applied. *prepared: what to pass to
 * recap__graph_hooks_exec_patched. */
static recap_status_t modules_prepare(rebind_t *r, recap_graph_t graph, size_t total,
                                      const move_t *moves, size_t count, size_t *prepared) {
  *prepared = 0;
  if (!(graph->hooks.events & RECAP__GRAPH_EVENTS_EXEC_PATCHING)) return RECAP_SUCCESS;
  if (!r->staged) {
    r->staged = recap__host_malloc((r->site_count ? r->site_count : 1) * sizeof *r->staged);
    if (!r->staged)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_rebind: out of host memory");
  }
  recap__patch_range_t *to = recap__host_malloc(count * sizeof *to);
  if (!to) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_rebind: out of host memory");
  for (size_t i = 0; i < count; i++)
    to[i] = (recap__patch_range_t){(const void *)moves[i].new_.base,
                                   (size_t)(moves[i].new_.end - moves[i].new_.base)};
  memcpy(r->staged, r->sites, r->site_count * sizeof *r->staged);
  for (size_t k = 0; k < total; k++) r->staged[r->patches[k].site].ptr = r->patches[k].value;
  recap_status_t s =
      recap__graph_hooks_exec_patching(graph, r->staged, r->site_count, to, count, prepared);
  recap__host_free(to);
  return s;
}

recap_status_t recap_graph_rebind(recap_graph_t graph, const recap_rebind_t *rebinds, size_t count,
                                  size_t *patched) {
  static const char fn[] = "recap_graph_rebind";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(rebinds != NULL, "%s: rebinds is NULL", fn);
  RECAP__ARG(count > 0, "%s: count is 0 (nothing to rebind)", fn);
  rebind_t *r;
  RECAP__CHECK(recap__rebind_captured_state(graph, fn, &r));
  RECAP__ARG(count <= SIZE_MAX / (2 * sizeof(move_t)), "%s: count %zu is too large", fn, count);
  /* Small batches (the common case) need no host allocation. */
  move_t small[2 * 8];
  move_t *moves = count <= 8 ? small : recap__host_malloc(2 * count * sizeof *moves);
  if (!moves) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  move_t *by_new = moves + count;
  recap_status_t s = RECAP_SUCCESS;
  for (size_t i = 0; i < count && s == RECAP_SUCCESS; i++)
    s = check_move(r, graph, fn, &rebinds[i], i, &moves[i]);
  if (s == RECAP_SUCCESS) {
    qsort(moves, count, sizeof *moves, compare_moves_old);
    s = check_batch(r, graph, fn, moves, count, by_new);
  }
  /* A KEEP graph not instantiated yet: the patches go to an executable, so make it now (and
   * drop it again should the rebind fail: a failed rebind changes nothing). */
  bool instantiated_here = s == RECAP_SUCCESS && !graph->exec;
  if (instantiated_here) s = recap_graph_instantiate(graph);
  if (s != RECAP_SUCCESS) {
    if (moves != small) recap__host_free(moves);
    return s;
  }

  /* One patch per site of the batch, in site order (the runs are disjoint: each site once). */
  size_t total = 0;
  for (size_t i = 0; i < count; i++)
    for (size_t k = moves[i].lo; k < moves[i].hi; k++)
      r->patches[total++] =
          (recap__patch_t){r->index[k].site,
                           (const void *)(moves[i].new_.base +
                                          (r->index[k].value - moves[i].old.base))};
  qsort(r->patches, total, sizeof *r->patches, compare_patches);

  size_t prepared;
  s = modules_prepare(r, graph, total, moves, count, &prepared);
  if (s == RECAP_SUCCESS)
    s = recap__device()->patch_plan_apply(r->plan, graph->exec, r->patches, total);
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    recap__graph_hooks_exec_patched(graph, prepared, false);
    if (instantiated_here) {
      recap__device()->graph_exec_destroy(graph->exec);
      graph->exec = NULL;
    }
    if (moves != small) recap__host_free(moves);
    return recap__error_restore(&cause);
  }
  reindex(r, moves, by_new, count);
  move_declarations(r, moves, count);
  if (patched)
    for (size_t i = 0; i < count; i++) patched[moves[i].arg] = moves[i].hi - moves[i].lo;
  recap__update_count_rebind_of(graph, total);
  recap__params_device_touched(r->device); /* device-updatable nodes: upload before a replay */
  recap__graph_hooks_exec_patched(graph, prepared, true);
  if (moves != small) recap__host_free(moves);
  return RECAP_SUCCESS;
}
