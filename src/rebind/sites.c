/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sites.c — what rebinding knows of a captured graph (recap/rebind.h): its declared buffers and
 * its sites, indexed by the address they hold, and recap_graph_rebind_sites.
 *
 * A capture with options.rebind set attaches this file's hooks (capture.c calls
 * recap__rebind_attach) and asks the graph to keep its template (the executable's node handles
 * are the template's). At capture end (the `captured` hook) the device seam builds the patch
 * plan: every site of the template (graph_reads' list) and, per node, what setting its
 * parameters needs. Here the sites are indexed by the address they hold: an array of
 * (value, site) pairs sorted by value, so that the sites of a range are one binary search and a
 * walk over exactly those sites. rebind.c moves them.
 *
 * The template learns of rebinds lazily: graph.c and inspect.c raise the `template_read` event
 * before they instantiate from it or read it, and the seam writes the nodes patched since the
 * last sync.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "rebind/rebind_internal.h"

/* ------------------------------------------------------------------------------------------
 * Spans and the value index
 * ---------------------------------------------------------------------------------------- */

/* The first span whose end is above p (the one holding p, if any). */
size_t recap__rebind_spans_find(const spans_t *s, uintptr_t p) {
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
const span_t *recap__rebind_declared_at(const spans_t *s, uintptr_t p) {
  size_t i = recap__rebind_spans_find(s, p);
  return i < s->count && s->v[i].base <= p ? &s->v[i] : NULL;
}

static void spans_free(spans_t *s) {
  recap__host_free(s->v);
  memset(s, 0, sizeof *s);
}

/* The first index entry whose value is at least p. */
size_t recap__rebind_lower_bound(const rebind_t *r, uintptr_t p) {
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
  const char *type = recap__node_type_name(type_of_site(site));
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
void recap__rebind_describe_sites(char *out, size_t size, rebind_t *r, recap_graph_t graph,
                                  size_t lo, size_t hi) {
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
  recap__params_plan_free(r);
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
 * (captured->origin). */
static recap_status_t hook_captured(void *ctx, recap_graph_t graph, recap__captured_t *captured) {
  (void)graph;
  recap_cuda_graph_t template_graph = captured->template_graph;
  rebind_t *r = ctx, next;
  memset(&next, 0, sizeof next);
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_status_t s = dev->patch_plan_create(template_graph, captured->origin, &next.plan,
                                            &next.sites, &next.site_count);
  if (s == RECAP_ERROR_INVALID_ARGUMENT && captured->origin) {
    /* The origin's nodes do not pair with the new template's (another node count, or another
     * type at an index): the new capture changed the topology, so the executable cannot be
     * updated from it and will be instantiated afresh from the template, whose own nodes the
     * plan names then. */
    RECAP__DEBUG(
        "rebind: the recapture's nodes do not pair with the executable's (%s); planning "
        "against the new template",
        recap_last_error());
    recap__error_restore(&saved);
    captured->origin_unfit = true;
    s = dev->patch_plan_create(template_graph, NULL, &next.plan, &next.sites, &next.site_count);
  }
  RECAP__CHECK(s);
  /* The parameters this capture declared (taken under the lock: declarations may come from
   * the capture's other threads, which have all finished by now). */
  pthread_mutex_lock(&r->lock);
  next.params = r->params;
  next.param_count = r->param_count;
  pthread_mutex_unlock(&r->lock);
  s = recap__params_captured(graph, &next);
  if (s != RECAP_SUCCESS) {
    next.params = NULL;
    plan_free(&next);
    return s;
  }
  next.params = NULL;
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
    next.index[i] =
        (entry_t){next.pinned && next.pinned[i] ? UINTPTR_MAX : (uintptr_t)next.sites[i].ptr, i};
  qsort(next.index, next.site_count, sizeof *next.index, compare_entries);
  /* The template holds the parameters' values before anything instantiates from it. */
  s = dev->patch_plan_sync(next.plan);
  if (s != RECAP_SUCCESS) {
    plan_free(&next);
    return s;
  }

  plan_free(r);
  r->plan = next.plan;
  r->sites = next.sites;
  r->site_count = next.site_count;
  r->index = next.index;
  r->scratch = next.scratch;
  r->patches = next.patches;
  r->uses = next.uses;
  r->use_count = next.use_count;
  r->writes = next.writes;
  r->batch = next.batch;
  r->merged = next.merged;
  r->write_count = next.write_count;
  r->pinned = next.pinned;
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

static recap_status_t hook_template_read(void *ctx, recap_graph_t graph) {
  (void)graph;
  rebind_t *r = ctx;
  return r->plan ? recap__device()->patch_plan_sync(r->plan) : RECAP_SUCCESS;
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  rebind_t *r = ctx;
  plan_free(r);
  recap__host_free(r->params);
  spans_free(&r->declared);
  spans_free(&r->pending);
  pthread_mutex_destroy(&r->lock);
  recap__host_free(r);
}

static recap_status_t hook_inspect(void *ctx, recap_graph_t graph, recap_graph_info_t *info) {
  return recap__params_inspect(graph, ctx, info);
}

static const recap__graph_hooks_t rebind_hooks = {
    .capture_ended = hook_capture_ended,
    .release = hook_release,
    .captured = hook_captured,
    .template_read = hook_template_read,
    .instantiated_afresh = hook_instantiated_afresh,
    .inspect = hook_inspect,
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

recap_status_t recap__rebind_attach_patchable(recap_graph_t graph) {
  if (recap__graph_hook_ctx(graph, &rebind_hooks)) return RECAP_SUCCESS;
  return recap__rebind_attach(graph, RECAP_REBIND_OFF);
}

rebind_t *recap__rebind_of(recap_graph_t graph) {
  return recap__graph_hook_ctx(graph, &rebind_hooks);
}

void recap__rebind_resort(rebind_t *r) {
  for (size_t i = 0; i < r->site_count; i++)
    if (r->pinned && r->pinned[r->index[i].site]) r->index[i].value = UINTPTR_MAX;
  qsort(r->index, r->site_count, sizeof *r->index, compare_entries);
}

size_t recap__rebind_region_count(rebind_t *r, recap_graph_t graph) {
  const recap_graph_info_t *info = node_names(r, graph);
  size_t count = 0;
  for (size_t i = 0; info && i < info->node_count; i++)
    count += info->nodes[i].type == RECAP_NODE_CONDITIONAL;
  return count;
}

const char *recap__rebind_kernel_name(rebind_t *r, recap_graph_t graph, size_t node) {
  const recap_graph_info_t *info = node_names(r, graph);
  const char *name = info && node < info->node_count ? info->nodes[node].kernel_name : NULL;
  return name ? name : "";
}

recap_status_t recap__rebind_patchable_state(recap_graph_t graph, const char *fn, rebind_t **r) {
  *r = recap__graph_hook_ctx(graph, &rebind_hooks);
  if (graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE, "%s: the graph holds no capture (%s)", fn,
                        graph->state == RECAP__GRAPH_CAPTURING ? "its capture is under way"
                        : graph->state == RECAP__GRAPH_EAGER
                            ? "its capture scope ran eagerly: graphs are disabled"
                            : "it is fresh");
  if (!*r || !(*r)->plan)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph's capture kept nothing to patch; capture it with "
                        "options.patchable = 1 (or rebinding on, or a parameter declared)",
                        fn);
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
  if (graph->state != RECAP__GRAPH_CAPTURING || !r || r->pending_mode == RECAP_REBIND_OFF)
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
  size_t at = recap__rebind_spans_find(d, add.base);
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
recap_status_t recap__rebind_captured_state(recap_graph_t graph, const char *fn, rebind_t **r) {
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
  if (!*r || !(*r)->plan || (*r)->mode == RECAP_REBIND_OFF)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph was captured with rebind OFF; capture it with "
                        "options.rebind = RECAP_REBIND_AUTO or RECAP_REBIND_DECLARED",
                        fn);
  return RECAP_SUCCESS;
}

/* The range [old, old + *size) of a move or a query; size 0 takes the declared buffer or recap's
 * allocation holding old, from old to its end. what names it in messages. */
recap_status_t recap__rebind_resolve_range(const rebind_t *r, const char *fn, const char *what,
                                           const void *old, size_t *size, span_t *range) {
  RECAP__ARG(old != NULL, "%s: %s is NULL", fn, what);
  uintptr_t base = (uintptr_t)old;
  if (*size == 0) {
    const span_t *d = recap__rebind_declared_at(&r->declared, base);
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
  RECAP__CHECK(recap__rebind_captured_state(graph, fn, &r));
  span_t range;
  RECAP__CHECK(recap__rebind_resolve_range(r, fn, "ptr", ptr, &size, &range));
  size_t lo = recap__rebind_lower_bound(r, range.base),
         hi = recap__rebind_lower_bound(r, range.end);
  for (size_t k = 0; k < hi - lo && k < capacity; k++)
    RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(&sites[k], recap_rebind_site_t, declared, fn,
                                          "sites[i].size", "RECAP_REBIND_SITE_INIT"));
  *count = hi - lo;
  if (capacity == 0 || hi == lo) return RECAP_SUCCESS;
  /* Node order: the sites' own order (graph_reads'), which is their index in the plan. */
  size_t *order = recap__host_malloc((hi - lo) * sizeof *order);
  if (!order) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (size_t k = lo; k < hi; k++) order[k - lo] = r->index[k].site;
  qsort(order, hi - lo, sizeof *order, compare_size);
  for (size_t k = 0; k < hi - lo && k < capacity; k++) {
    const recap__graph_read_t *site = &r->sites[order[k]];
    size_t element = sites[k].size;
    recap_rebind_site_t out = {
        .size = element,
        .node = site->node,
        .type = type_of_site(site),
        .param = site->kind == RECAP__READ_KERNEL_ARG ? site->param : 0,
        .offset = site->kind == RECAP__READ_KERNEL_ARG ? site->offset : 0,
        .value = site->ptr,
        .declared = recap__rebind_declared_at(&r->declared, (uintptr_t)site->ptr) != NULL,
    };
    memcpy(&sites[k], &out, element);
  }
  recap__host_free(order);
  return RECAP_SUCCESS;
}
