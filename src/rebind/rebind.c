/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind.c — pointing a captured graph at new buffers (recap/rebind.h): declared buffers, the
 * sites of a graph, and the rebind itself.
 *
 * A capture with options.rebind set attaches this file's hooks (capture.c calls
 * recap__rebind_attach) and asks the graph to keep its template (the executable's node handles
 * are the template's). At capture end (the `captured` hook) the device seam builds the patch
 * plan: every site of the template (graph_reads' list) and, per node, what setting its
 * parameters needs. Here the sites are indexed by the address they hold: an array of
 * (value, site) pairs sorted by value, so that the sites of a range are one binary search and a
 * walk over exactly those sites.
 *
 * A rebind validates the whole batch before it changes anything, then hands the device one
 * sorted list of patches (patch_plan_apply: one set per node, all or nothing), and last
 * re-sorts the index: the moved sites of one range stay in order among themselves, so the
 * index is rebuilt by a merge of the untouched pairs with the moved runs, into scratch space
 * allocated at capture end (a rebind allocates host memory only for its batch). Layers that
 * follow addresses (input liveness) prepare through the `rebound` hook before the device
 * patches and commit after it, so a failed rebind changes nothing anywhere.
 *
 * The template learns of rebinds lazily: graph.c and inspect.c call the `sync_template` hook
 * before they instantiate from it or read it, and the seam writes the nodes patched since the
 * last sync.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"
#include "recap/rebind.h"

/* [base, end): a declared buffer, or a move's range. */
typedef struct span {
  uintptr_t base, end;
} span_t;

typedef struct spans {
  span_t *v; /* sorted by base, disjoint */
  size_t count, capacity;
} spans_t;

/* One entry of the value index. */
typedef struct entry {
  uintptr_t value;
  size_t site;
} entry_t;

typedef struct rebind {
  recap_rebind_mode_t mode;
  spans_t declared; /* the buffers declared during the capture that built the plan */
  /* What the capture under way declares, and its mode: they become the graph's at `captured`,
   * so that a recapture that fails leaves the previous ones. */
  pthread_mutex_t lock; /* declarations may come from the threads working on the capture */
  spans_t pending;
  recap_rebind_mode_t pending_mode;

  recap__patch_plan_t plan;
  const recap__graph_read_t *sites; /* owned by the plan; ptr fields kept current by it */
  size_t site_count;
  entry_t *index;              /* site_count pairs, sorted by (value, site) */
  entry_t *scratch;            /* site_count pairs: the re-sort after a rebind */
  recap__patch_t *patches;     /* site_count patches: the most one batch can make */
  recap__graph_read_t *staged; /* site_count reads: the sites as a rebind would leave them, for
                                  the layers' `rebound` hooks (allocated on first need) */
  recap_graph_info_t *names;   /* the template's nodes, read for messages only, lazily */
} rebind_t;

/* ------------------------------------------------------------------------------------------
 * Spans and the value index
 * ---------------------------------------------------------------------------------------- */

/* The first span whose end is above p (the one holding p, if any). */
static size_t spans_find(const spans_t *s, uintptr_t p) {
  size_t lo = 0, hi = s->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->v[mid].end <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The declared buffer holding p, or NULL. */
static const span_t *declared_at(const spans_t *s, uintptr_t p) {
  size_t i = spans_find(s, p);
  return i < s->count && s->v[i].base <= p ? &s->v[i] : NULL;
}

static void spans_free(spans_t *s) {
  recap__host_free(s->v);
  memset(s, 0, sizeof *s);
}

/* The first index entry whose value is at least p. */
static size_t lower_bound(const rebind_t *r, uintptr_t p) {
  size_t lo = 0, hi = r->site_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->index[mid].value < p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int compare_entries(const void *x, const void *y) {
  const entry_t *a = x, *b = y;
  if (a->value != b->value) return (a->value > b->value) - (a->value < b->value);
  return (a->site > b->site) - (a->site < b->site);
}

static int compare_patches(const void *x, const void *y) {
  const recap__patch_t *a = x, *b = y;
  return (a->site > b->site) - (a->site < b->site);
}

static recap_node_type_t type_of_site(const recap__graph_read_t *site) {
  switch (site->kind) {
    case RECAP__READ_KERNEL_ARG: return RECAP_NODE_KERNEL;
    case RECAP__READ_COPY_SRC:
    case RECAP__READ_COPY_DST: return RECAP_NODE_MEMCPY;
    case RECAP__READ_MEMSET_DST: return RECAP_NODE_MEMSET;
  }
  return RECAP_NODE_OTHER;
}

/* ------------------------------------------------------------------------------------------
 * Messages: the nodes of a set of sites
 * ---------------------------------------------------------------------------------------- */

/* The template's nodes, for kernel names; NULL when the driver cannot say (the messages then
 * give node types only). Read once per plan, only when a message needs it. */
static const recap_graph_info_t *node_names(rebind_t *r, recap_graph_t graph) {
  if (r->names || !graph->template_graph) return r->names;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_graph_info_t *info = recap__host_calloc(1, sizeof *info);
  if (info && recap__device()->graph_inspect(graph->template_graph, info) == RECAP_SUCCESS) {
    r->names = info;
  } else if (info) {
    recap__graph_info_clear(info);
    recap__host_free(info);
  }
  recap__error_restore(&saved);
  return r->names;
}

/* "node 3 (kernel axpy)" or "node 4 (memcpy)". */
static void describe_node(char *out, size_t size, rebind_t *r, recap_graph_t graph,
                          const recap__graph_read_t *site) {
  const recap_graph_info_t *info = node_names(r, graph);
  const char *kernel =
      info && site->node < info->node_count ? info->nodes[site->node].kernel_name : NULL;
  const char *type = recap_node_type_name(type_of_site(site));
  if (kernel && site->kind == RECAP__READ_KERNEL_ARG)
    snprintf(out, size, "node %zu (kernel %.200s, parameter %" PRIu32 ", byte %zu)", site->node,
             kernel, site->param, site->offset);
  else if (site->kind == RECAP__READ_KERNEL_ARG)
    snprintf(out, size, "node %zu (%s, parameter %" PRIu32 ", byte %zu)", site->node, type,
             site->param, site->offset);
  else
    snprintf(out, size, "node %zu (%s %s)", site->node, type,
             site->kind == RECAP__READ_COPY_SRC ? "source" : "destination");
}

/* The sites of index entries [lo, hi), for a message: the first few, and how many more. */
static void describe_sites(char *out, size_t size, rebind_t *r, recap_graph_t graph, size_t lo,
                           size_t hi) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = lo; i < hi && i < lo + 4; i++) {
    char one[320];
    describe_node(one, sizeof one, r, graph, &r->sites[r->index[i].site]);
    int n = snprintf(out + used, size - used, "%s%s", i == lo ? "" : ", ", one);
    if (n < 0 || (size_t)n >= size - used) return;
    used += (size_t)n;
  }
  if (hi - lo > 4) snprintf(out + used, size - used, " and %zu more sites", hi - lo - 4);
}

/* ------------------------------------------------------------------------------------------
 * Hooks
 * ---------------------------------------------------------------------------------------- */

static void plan_free(rebind_t *r) {
  recap__device()->patch_plan_destroy(r->plan);
  r->plan = NULL;
  r->sites = NULL;
  r->site_count = 0;
  recap__host_free(r->index);
  recap__host_free(r->scratch);
  recap__host_free(r->patches);
  recap__host_free(r->staged);
  r->index = r->scratch = NULL;
  r->patches = NULL;
  r->staged = NULL;
  if (r->names) {
    recap__graph_info_clear(r->names);
    recap__host_free(r->names);
    r->names = NULL;
  }
}

/* Capture end: the plan, the index and the scratch space of the new template. The previous
 * ones (a recapture's) are replaced only once all of it is built. The plan patches the
 * executable through the nodes of the graph it was instantiated from: the template itself,
 * unless a recapture is about to update an executable instantiated from an earlier one
 * (graph->capture_origin). */
static recap_status_t hook_captured(void *ctx, recap_graph_t graph,
                                    recap_cuda_graph_t template_graph) {
  rebind_t *r = ctx, next;
  memset(&next, 0, sizeof next);
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_status_t s = dev->patch_plan_create(template_graph, graph->capture_origin, &next.plan,
                                            &next.sites, &next.site_count);
  if (s == RECAP_ERROR_INVALID_ARGUMENT && graph->capture_origin) {
    /* The origin's nodes do not pair with the new template's (another node count, or another
     * type at an index): the new capture changed the topology, so the executable cannot be
     * updated from it and will be instantiated afresh from the template, whose own nodes the
     * plan names then. */
    RECAP__DEBUG(
        "rebind: the recapture's nodes do not pair with the executable's (%s); planning "
        "against the new template",
        recap_last_error());
    recap__error_restore(&saved);
    graph->capture_origin_unfit = true;
    s = dev->patch_plan_create(template_graph, NULL, &next.plan, &next.sites, &next.site_count);
  }
  RECAP__CHECK(s);
  size_t n = next.site_count ? next.site_count : 1;
  next.index = recap__host_malloc(n * sizeof *next.index);
  next.scratch = recap__host_malloc(n * sizeof *next.scratch);
  next.patches = recap__host_malloc(n * sizeof *next.patches);
  if (!next.index || !next.scratch || !next.patches) {
    plan_free(&next);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap_graph_capture_end: out of host memory for the rebind sites");
  }
  for (size_t i = 0; i < next.site_count; i++)
    next.index[i] = (entry_t){(uintptr_t)next.sites[i].ptr, i};
  qsort(next.index, next.site_count, sizeof *next.index, compare_entries);

  plan_free(r);
  r->plan = next.plan;
  r->sites = next.sites;
  r->site_count = next.site_count;
  r->index = next.index;
  r->scratch = next.scratch;
  r->patches = next.patches;
  pthread_mutex_lock(&r->lock);
  spans_free(&r->declared);
  r->declared = r->pending;
  memset(&r->pending, 0, sizeof r->pending);
  r->mode = r->pending_mode;
  pthread_mutex_unlock(&r->lock);
  return RECAP_SUCCESS;
}

/* The executable was instantiated afresh from template_graph (a recapture whose update the
 * driver refused, or recap_graph_instantiate after updates): the same sites, in the same order
 * and with the same addresses, now patched through template_graph's own nodes. */
static recap_status_t hook_instantiated_afresh(void *ctx, recap_graph_t graph,
                                               recap_cuda_graph_t template_graph) {
  (void)graph;
  rebind_t *r = ctx;
  const recap__device_ops_t *dev = recap__device();
  recap__patch_plan_t plan = NULL;
  const recap__graph_read_t *sites = NULL;
  size_t count = 0;
  RECAP__CHECK(dev->patch_plan_create(template_graph, NULL, &plan, &sites, &count));
  if (count != r->site_count) {
    dev->patch_plan_destroy(plan);
    return recap__error(RECAP_ERROR_INTERNAL,
                        "rebind: the new executable's template has %zu sites where the plan had "
                        "%zu",
                        count, r->site_count);
  }
  dev->patch_plan_destroy(r->plan);
  r->plan = plan;
  r->sites = sites;
  return RECAP_SUCCESS;
}

static void hook_capture_ended(void *ctx, recap_graph_t graph, bool succeeded) {
  (void)graph;
  rebind_t *r = ctx;
  if (succeeded) return;
  pthread_mutex_lock(&r->lock);
  spans_free(&r->pending);
  pthread_mutex_unlock(&r->lock);
}

static recap_status_t hook_sync_template(void *ctx, recap_graph_t graph) {
  (void)graph;
  rebind_t *r = ctx;
  return r->plan ? recap__device()->patch_plan_sync(r->plan) : RECAP_SUCCESS;
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  rebind_t *r = ctx;
  plan_free(r);
  spans_free(&r->declared);
  spans_free(&r->pending);
  pthread_mutex_destroy(&r->lock);
  recap__host_free(r);
}

static const recap__graph_hooks_t rebind_hooks = {
    .capture_ended = hook_capture_ended,
    .release = hook_release,
    .captured = hook_captured,
    .sync_template = hook_sync_template,
    .instantiated_afresh = hook_instantiated_afresh,
};

recap_status_t recap__rebind_attach(recap_graph_t graph, recap_rebind_mode_t mode) {
  rebind_t *r = recap__graph_hook_ctx(graph, &rebind_hooks);
  if (r) { /* a recapture: the previous capture's plan stays until this one is captured */
    pthread_mutex_lock(&r->lock);
    spans_free(&r->pending);
    r->pending_mode = mode;
    pthread_mutex_unlock(&r->lock);
    graph->keep_template = true;
    return RECAP_SUCCESS;
  }
  r = recap__host_calloc(1, sizeof *r);
  if (!r) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "rebind: out of host memory");
  pthread_mutex_init(&r->lock, NULL);
  r->mode = r->pending_mode = mode;
  recap_status_t s = recap__graph_add_hook(graph, &rebind_hooks, r);
  if (s != RECAP_SUCCESS) {
    pthread_mutex_destroy(&r->lock);
    recap__host_free(r);
    return s;
  }
  graph->keep_template = true;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Declarations
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_declare_buffer(recap_graph_t graph, const void *ptr, size_t size) {
  static const char fn[] = "recap_graph_declare_buffer";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(ptr != NULL, "%s: ptr is NULL", fn);
  RECAP__ARG(size > 0, "%s: size is 0 (declare the buffer's exact extent in bytes)", fn);
  uintptr_t base = (uintptr_t)ptr;
  RECAP__ARG(base + size > base, "%s: [%p, +%zu bytes) wraps around the address space", fn, ptr,
             size);
  rebind_t *r = recap__graph_hook_ctx(graph, &rebind_hooks);
  if (graph->state != RECAP__GRAPH_CAPTURING || !r)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: buffers are declared during the graph's capture, begun with "
                        "options.rebind = RECAP_REBIND_AUTO or RECAP_REBIND_DECLARED; the graph "
                        "%s",
                        fn,
                        graph->state != RECAP__GRAPH_CAPTURING ? "is not capturing"
                                                               : "captures with rebind OFF");
  span_t add = {base, base + size};
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&r->lock);
  spans_t *d = &r->pending;
  size_t at = spans_find(d, add.base);
  if (at < d->count && d->v[at].base < add.end) {
    s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                     "%s: [%p, +%zu bytes) overlaps the buffer [%p, +%zu bytes) declared "
                     "before; declare each buffer once, with disjoint extents",
                     fn, ptr, size, (void *)d->v[at].base, (size_t)(d->v[at].end - d->v[at].base));
  } else if (d->count == d->capacity) {
    size_t capacity = d->capacity ? d->capacity * 2 : 8;
    span_t *grown = recap__host_realloc(d->v, capacity * sizeof *grown);
    if (!grown)
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    else {
      d->v = grown;
      d->capacity = capacity;
    }
  }
  if (s == RECAP_SUCCESS) {
    memmove(&d->v[at + 1], &d->v[at], (d->count - at) * sizeof *d->v);
    d->v[at] = add;
    d->count++;
  }
  pthread_mutex_unlock(&r->lock);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Ranges
 * ---------------------------------------------------------------------------------------- */

/* The graph's rebind state, once its capture has ended. */
static recap_status_t captured_state(recap_graph_t graph, const char *fn, rebind_t **r) {
  *r = recap__graph_hook_ctx(graph, &rebind_hooks);
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph holds no capture (%s); capture it with options.rebind "
                        "set, end the capture, then rebind",
                        fn,
                        graph->state == RECAP__GRAPH_CAPTURING ? "its capture is under way"
                        : graph->state == RECAP__GRAPH_EAGER
                            ? "its capture scope ran eagerly: graphs are disabled"
                            : "it is fresh");
  if (!*r || !(*r)->plan)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph was captured with rebind OFF; capture it with "
                        "options.rebind = RECAP_REBIND_AUTO or RECAP_REBIND_DECLARED",
                        fn);
  return RECAP_SUCCESS;
}

/* The range [old, old + *size) of a move or a query; size 0 takes the declared buffer or recap's
 * allocation holding old, from old to its end. what names it in messages. */
static recap_status_t resolve_range(const rebind_t *r, const char *fn, const char *what,
                                    const void *old, size_t *size, span_t *range) {
  RECAP__ARG(old != NULL, "%s: %s is NULL", fn, what);
  uintptr_t base = (uintptr_t)old;
  if (*size == 0) {
    const span_t *d = declared_at(&r->declared, base);
    recap__block_ref_t ref;
    if (d) {
      *size = (size_t)(d->end - base);
    } else if (recap__alloc_find(old, &ref) && ref.allocated) {
      *size = (size_t)((uintptr_t)ref.base + ref.size - base);
    } else {
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: %s %p has size 0, but no declared buffer and no allocation of "
                          "recap's holds it; give the size in bytes",
                          fn, what, old);
    }
  }
  RECAP__ARG(base + *size > base, "%s: %s [%p, +%zu bytes) wraps around the address space", fn,
             what, old, *size);
  *range = (span_t){base, base + *size};
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Rebind
 * ---------------------------------------------------------------------------------------- */

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
    describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
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
    describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
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
                                 recap_rebind_t *in, size_t i, move_t *m) {
  char what[48];
  snprintf(what, sizeof what, "rebinds[%zu].old_ptr", i);
  size_t size = in->size;
  RECAP__CHECK(resolve_range(r, fn, what, in->old_ptr, &size, &m->old));
  RECAP__ARG(in->new_ptr != NULL, "%s: rebinds[%zu].new_ptr is NULL", fn, i);
  uintptr_t nb = (uintptr_t)in->new_ptr;
  RECAP__ARG(nb + size > nb, "%s: rebinds[%zu].new_ptr [%p, +%zu bytes) wraps around", fn, i,
             in->new_ptr, size);
  m->arg = i;
  m->new_ = (span_t){nb, nb + size};
  m->lo = lower_bound(r, m->old.base);
  m->hi = lower_bound(r, m->old.end);
  char nodes[1600];
  const span_t *d = declared_at(&r->declared, m->old.base);
  bool declared = d && m->old.end <= d->end;
  if (m->lo == m->hi)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: rebinds[%zu]: the graph does not use [%p, +%zu bytes): no node "
                        "holds an address in it (recap_graph_rebind_sites lists what it holds)",
                        fn, i, in->old_ptr, size);
  if (r->mode == RECAP_REBIND_DECLARED && !declared) {
    describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
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
    describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
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
    describe_sites(nodes, sizeof nodes, r, graph, k, k + 1);
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
      describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: rebinds[%zu]: the new buffer %p (for [%p, +%zu bytes), used by "
                          "%s) %s",
                          fn, i, in->new_ptr, in->old_ptr, size, nodes, refusal);
    }
    if (room < size) {
      describe_sites(nodes, sizeof nodes, r, graph, m->lo, m->hi);
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
    for (size_t k = lower_bound(r, m->guard.base); k < r->site_count && r->index[k].value < hi;
         k++) {
      uintptr_t v = r->index[k].value;
      if (moved(moves, count, v)) continue;
      const span_t *dv = declared_at(&r->declared, v);
      if (dv && (dv->end <= m->new_.base || dv->base >= m->new_.end)) continue;
      describe_sites(nodes, sizeof nodes, r, graph, k, k + 1);
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
    for (size_t k = spans_find(d, m->new_.base); k < d->count && d->v[k].base < m->new_.end; k++) {
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
    size_t dest = lower_bound(r, moves[i].new_.base);
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

/* The layers' `rebound` hooks, with every site as it will be; on failure, those that prepared
 * are told it was not applied. *prepared counts the hooks that prepared. */
static recap_status_t layers_prepare(rebind_t *r, recap_graph_t graph, size_t total,
                                     const move_t *moves, size_t count, size_t *prepared) {
  *prepared = 0;
  bool any = false;
  for (size_t i = 0; i < graph->hook_count; i++) any |= graph->hooks[i].hooks->rebound != NULL;
  if (!any) return RECAP_SUCCESS;
  if (!r->staged) {
    r->staged = recap__host_malloc((r->site_count ? r->site_count : 1) * sizeof *r->staged);
    if (!r->staged)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_rebind: out of host memory");
  }
  recap__rebound_range_t *to = recap__host_malloc(count * sizeof *to);
  if (!to) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_rebind: out of host memory");
  for (size_t i = 0; i < count; i++)
    to[i] = (recap__rebound_range_t){(const void *)moves[i].new_.base,
                                     (size_t)(moves[i].new_.end - moves[i].new_.base)};
  memcpy(r->staged, r->sites, r->site_count * sizeof *r->staged);
  for (size_t k = 0; k < total; k++) r->staged[r->patches[k].site].ptr = r->patches[k].value;
  recap_status_t s = RECAP_SUCCESS;
  for (; *prepared < graph->hook_count; ++*prepared) {
    const recap__graph_hook_entry_t *h = &graph->hooks[*prepared];
    if (!h->hooks->rebound) continue;
    s = h->hooks->rebound(h->ctx, graph, r->staged, r->site_count, to, count);
    if (s != RECAP_SUCCESS) break;
  }
  recap__host_free(to);
  return s;
}

static void layers_done(recap_graph_t graph, size_t prepared, bool applied) {
  for (size_t i = 0; i < prepared; i++) {
    const recap__graph_hook_entry_t *h = &graph->hooks[i];
    if (h->hooks->rebound && h->hooks->rebound_done) h->hooks->rebound_done(h->ctx, graph, applied);
  }
}

recap_status_t recap_graph_rebind(recap_graph_t graph, recap_rebind_t *rebinds, size_t count) {
  static const char fn[] = "recap_graph_rebind";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(rebinds != NULL, "%s: rebinds is NULL", fn);
  RECAP__ARG(count > 0, "%s: count is 0 (nothing to rebind)", fn);
  rebind_t *r;
  RECAP__CHECK(captured_state(graph, fn, &r));
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
  s = layers_prepare(r, graph, total, moves, count, &prepared);
  if (s == RECAP_SUCCESS)
    s = recap__device()->patch_plan_apply(r->plan, graph->exec, r->patches, total);
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    layers_done(graph, prepared, false);
    if (instantiated_here) {
      recap__device()->graph_exec_destroy(graph->exec);
      graph->exec = NULL;
    }
    if (moves != small) recap__host_free(moves);
    return recap__error_restore(&cause);
  }
  reindex(r, moves, by_new, count);
  move_declarations(r, moves, count);
  for (size_t i = 0; i < count; i++) rebinds[moves[i].arg].patched = moves[i].hi - moves[i].lo;
  graph->rebinds++;
  graph->sites_patched += total;
  layers_done(graph, prepared, true);
  if (moves != small) recap__host_free(moves);
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Sites
 * ---------------------------------------------------------------------------------------- */

static int compare_size(const void *x, const void *y) {
  size_t a = *(const size_t *)x, b = *(const size_t *)y;
  return (a > b) - (a < b);
}

recap_status_t recap_graph_rebind_sites(recap_graph_t graph, const void *ptr, size_t size,
                                        recap_rebind_site_t *sites, size_t capacity,
                                        size_t *count) {
  static const char fn[] = "recap_graph_rebind_sites";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(count != NULL, "%s: count is NULL", fn);
  *count = 0;
  RECAP__ARG(sites != NULL || capacity == 0, "%s: sites is NULL and capacity is %zu", fn, capacity);
  RECAP__ARG(ptr != NULL, "%s: ptr is NULL", fn);
  rebind_t *r;
  RECAP__CHECK(captured_state(graph, fn, &r));
  span_t range;
  RECAP__CHECK(resolve_range(r, fn, "ptr", ptr, &size, &range));
  size_t lo = lower_bound(r, range.base), hi = lower_bound(r, range.end);
  *count = hi - lo;
  if (capacity == 0 || hi == lo) return RECAP_SUCCESS;
  /* Node order: the sites' own order (graph_reads'), which is their index in the plan. */
  size_t *order = recap__host_malloc((hi - lo) * sizeof *order);
  if (!order) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (size_t k = lo; k < hi; k++) order[k - lo] = r->index[k].site;
  qsort(order, hi - lo, sizeof *order, compare_size);
  for (size_t k = 0; k < hi - lo && k < capacity; k++) {
    const recap__graph_read_t *site = &r->sites[order[k]];
    sites[k] = (recap_rebind_site_t){
        .node = site->node,
        .type = type_of_site(site),
        .param = site->kind == RECAP__READ_KERNEL_ARG ? site->param : 0,
        .offset = site->kind == RECAP__READ_KERNEL_ARG ? site->offset : 0,
        .value = site->ptr,
        .declared = declared_at(&r->declared, (uintptr_t)site->ptr) != NULL,
    };
  }
  recap__host_free(order);
  return RECAP_SUCCESS;
}
