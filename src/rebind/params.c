/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params.c — graph parameters (recap/params.h): values captured kernels take by value, found by
 * their placeholders at capture end and patched into the executable per replay; one argument of
 * one kernel node set on its own; kernel nodes' launch shapes.
 *
 * A parameter's identity and value live with the graph for its whole life (the `params` table,
 * attached to the graph at the first declaration), so that a handle stays valid across
 * recaptures and resets. Where its value lies belongs to one capture: the rebind state of that
 * capture (rebind_internal.h) holds the patch plan, and here its parameter fields: the sites of
 * every parameter it declared, as ready-made writes. Values set on one argument of one node and
 * launch shapes are recorded in the table, so a recapture (and a fresh instantiation, through
 * the template the plan syncs) keeps them.
 *
 * Everything writes through the one patch plan of the capture, which keeps one copy of each
 * kernel node's arguments: a rebind, a parameter and an argument set on the same node each
 * change their own bytes of it, and none undoes another.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "core/strbuf.h"
#include "core/text.h"
#include "graph/registry.h"
#include "rebind/params_device.h"
#include "rebind/params_source.h"
#include "rebind/rebind_internal.h"
#include "recap/params.h"
#include "update/update_internal.h"

/* ------------------------------------------------------------------------------------------
 * The table
 * ---------------------------------------------------------------------------------------- */

enum { PARAM_MAGIC = 0x70617261 /* "para" */ };

struct recap_param {
  uint32_t magic; /* PARAM_MAGIC while its graph lives */
  recap_graph_t graph;
  char *name;
  recap_param_type_t type;
  uint32_t bytes; /* 4 or 8 */
  size_t use;     /* its index in the uses of the capture held, when that capture declared it */
};

/* A value set on one argument of one node, or a launch shape: kept for recaptures. */
typedef struct arg_record {
  size_t node;
  uint32_t arg, bytes;
  uint64_t bits;
} arg_record_t;

typedef struct shape_record {
  size_t node;
  recap__kernel_shape_t shape;
} shape_record_t;

typedef struct params {
  pthread_mutex_t lock; /* declarations come from the threads working on a capture */
  recap_param_t *v;
  size_t count, cap;
  arg_record_t *args;
  size_t arg_count, arg_cap;
  shape_record_t *shapes;
  size_t shape_count, shape_cap;
  uint64_t declarations; /* every declaration so far: what placeholders are made from */
} params_t;

static void table_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  params_t *t = ctx;
  for (size_t i = 0; i < t->count; i++) {
    t->v[i]->magic = 0;
    recap__host_free(t->v[i]->name);
    recap__host_free(t->v[i]);
  }
  recap__host_free(t->v);
  recap__host_free(t->args);
  recap__host_free(t->shapes);
  pthread_mutex_destroy(&t->lock);
  recap__host_free(t);
}

/* A reset drops the capture whose nodes the records name. */
static void table_reset(void *ctx, recap_graph_t graph) {
  (void)graph;
  params_t *t = ctx;
  t->arg_count = t->shape_count = 0;
}

static const recap__graph_hooks_t table_hooks = {
    .release = table_release,
    .graph_reset = table_reset,
};

static params_t *table_of(recap_graph_t graph) {
  return recap__graph_attached_ctx(graph, &table_hooks);
}

static recap_status_t table_get(recap_graph_t graph, const char *fn, params_t **out) {
  params_t *t = table_of(graph);
  if (!t) {
    t = recap__host_calloc(1, sizeof *t);
    if (!t) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    pthread_mutex_init(&t->lock, NULL);
    recap_status_t s = recap__graph_attach(graph, &table_hooks, t);
    if (s != RECAP_SUCCESS) {
      pthread_mutex_destroy(&t->lock);
      recap__host_free(t);
      return s;
    }
  }
  *out = t;
  return RECAP_SUCCESS;
}

static recap_status_t param_check(recap_param_t param, const char *fn) {
  return RECAP__HANDLE_CHECK(param, PARAM_MAGIC, fn, "param", "graph parameter",
                             "recap_graph_param_declare");
}

const char *recap__param_type_name(recap_param_type_t type) {
  switch (type) {
    case RECAP_PARAM_INT32: return "int32";
    case RECAP_PARAM_INT64: return "int64";
    case RECAP_PARAM_FLOAT: return "float";
    case RECAP_PARAM_DOUBLE: return "double";
  }
  return "unknown";
}

uint32_t recap__param_type_bytes(recap_param_type_t type) {
  return type == RECAP_PARAM_INT32 || type == RECAP_PARAM_FLOAT ? 4 : 8;
}

/* ------------------------------------------------------------------------------------------
 * Placeholders
 * ---------------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser: a bijection */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A placeholder no ordinary argument is likely to hold: a quiet NaN with a payload for the
 * floating types, a value with its high bits set for the integers (as an address, not a
 * canonical one). */
static uint64_t placeholder_of(recap_param_type_t type, uint64_t h) {
  switch (type) {
    case RECAP_PARAM_INT32: return 0x80000000u | (h & 0x7ffffff0u) | 0x5u;
    case RECAP_PARAM_INT64: return 0xa5c3000000000000ull | (h & 0x0000ffffffffff00ull) | 0x5dull;
    case RECAP_PARAM_FLOAT: return 0x7fc00000u | (h & 0x003ffff0u) | 0x9u;
    case RECAP_PARAM_DOUBLE: return 0x7ff8000000000000ull | (h & 0x0007ffffffffff00ull) | 0xa7ull;
  }
  return h;
}

/* ------------------------------------------------------------------------------------------
 * Declaring
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_param_declare(recap_graph_t graph, const char *name,
                                         recap_param_type_t type, const void *initial,
                                         void *placeholder, recap_param_t *param) {
  static const char fn[] = "recap_graph_param_declare";
  if (param) *param = NULL;
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(name && name[0], "%s: name is NULL or empty", fn);
  RECAP__ARG(type >= RECAP_PARAM_INT32 && type <= RECAP_PARAM_DOUBLE,
             "%s: type %d is not a recap_param_type_t", fn, (int)type);
  RECAP__ARG(initial && placeholder, "%s: initial or placeholder is NULL", fn);
  if (graph->state != RECAP__GRAPH_CAPTURING)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: parameters are declared during the graph's capture (\"%s\")", fn,
                        name);
  params_t *t;
  RECAP__CHECK(table_get(graph, fn, &t));
  RECAP__CHECK(recap__rebind_attach_patchable(graph));
  rebind_t *r = recap__rebind_of(graph);
  uint32_t bytes = recap__param_type_bytes(type);

  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&t->lock);
  pthread_mutex_lock(&r->lock);
  recap_param_t p = NULL;
  for (size_t i = 0; i < t->count && !p; i++)
    if (strcmp(t->v[i]->name, name) == 0) p = t->v[i];
  for (size_t i = 0; p && i < r->param_count; i++)
    if (r->params[i].param == p) {
      s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                       "%s: \"%s\" is declared twice in this capture; declare each parameter "
                       "once and pass its placeholder to every kernel that takes it",
                       fn, name);
      goto out;
    }
  if (p && p->type != type) {
    s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                     "%s: \"%s\" was declared as %s by an earlier capture of the graph and is "
                     "now %s; a name keeps its type",
                     fn, name, recap__param_type_name(p->type), recap__param_type_name(type));
    goto out;
  }
  /* Room first, so that nothing below can fail half-way. */
  if (r->param_count == r->param_cap) {
    size_t cap = r->param_cap ? 2 * r->param_cap : 8;
    param_decl_t *grown = recap__host_realloc(r->params, cap * sizeof *grown);
    if (!grown) goto oom;
    r->params = grown;
    r->param_cap = cap;
  }
  if (!p) {
    if (t->count == t->cap) {
      size_t cap = t->cap ? 2 * t->cap : 8;
      recap_param_t *grown = recap__host_realloc(t->v, cap * sizeof *grown);
      if (!grown) goto oom;
      t->v = grown;
      t->cap = cap;
    }
    p = recap__host_calloc(1, sizeof *p);
    size_t n = strlen(name) + 1;
    char *copy = p ? recap__host_malloc(n) : NULL;
    if (!copy) {
      recap__host_free(p);
      goto oom;
    }
    memcpy(copy, name, n);
    p->magic = PARAM_MAGIC;
    p->graph = graph;
    p->name = copy;
    p->type = type;
    p->bytes = bytes;
    t->v[t->count++] = p;
  }
  /* A placeholder unlike those of the capture's other parameters. */
  uint64_t ph;
  bool clash;
  do {
    ph = placeholder_of(type, mix(++t->declarations ^ (uint64_t)(uintptr_t)graph));
    clash = false;
    for (size_t i = 0; i < r->param_count && !clash; i++)
      clash = r->params[i].param->bytes == bytes && r->params[i].placeholder == ph;
  } while (clash);
  param_decl_t d = {p, 0, ph};
  memcpy(&d.bits, initial, bytes);
  r->params[r->param_count++] = d;
  memcpy(placeholder, &ph, bytes);
  if (param) *param = p;
  goto out;
oom:
  s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
out:
  pthread_mutex_unlock(&r->lock);
  pthread_mutex_unlock(&t->lock);
  return s;
}

recap_status_t recap_graph_param_device(recap_graph_t graph, const char *name,
                                        recap_param_type_t type, const void *device_value,
                                        unsigned per_block, recap_stream_t stream,
                                        void *placeholder, recap_param_t *param) {
  static const char fn[] = "recap_graph_param_device";
  if (param) *param = NULL;
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(device_value != NULL, "%s: device_value is NULL", fn);
  RECAP__ARG(per_block == 0 || type == RECAP_PARAM_INT32 || type == RECAP_PARAM_INT64,
             "%s: per_block %u with a %s parameter; a grid comes from an integer", fn, per_block,
             recap__param_type_name(type));
  uint64_t zero = 0;
  recap_param_t p;
  RECAP__CHECK(recap_graph_param_declare(graph, name, type, &zero, placeholder, &p));
  RECAP__CHECK(
      recap__params_device_source(graph, stream, p, device_value, p->bytes, per_block, fn));
  if (param) *param = p;
  return RECAP_SUCCESS;
}

/* The values of the module that called the step now running on this thread (graph sets). */
static _Thread_local recap__param_source_t source;

void recap__params_source_swap(const recap__param_source_t *next, recap__param_source_t *previous) {
  *previous = source;
  source = *next;
}

recap_status_t recap_param_on_stream(const char *name, recap_param_type_t type, const void *value,
                                     recap_stream_t stream, void *placeholder) {
  static const char fn[] = "recap_param_on_stream";
  RECAP__ARG(name && name[0], "%s: name is NULL or empty", fn);
  RECAP__ARG(type >= RECAP_PARAM_INT32 && type <= RECAP_PARAM_DOUBLE,
             "%s: type %d is not a recap_param_type_t", fn, (int)type);
  RECAP__ARG(value && placeholder, "%s: value or placeholder is NULL", fn);
  uint64_t bits = 0;
  memcpy(&bits, value, recap__param_type_bytes(type));
  if (source.fn) source.fn(source.ctx, name, type, &bits);
  recap_graph_t graph = NULL;
  RECAP__CHECK(recap__registry_find_stream(stream, &graph));
  if (!graph) { /* eager: the value itself */
    int capturing = 0;
    RECAP__CHECK(recap_stream_is_capturing(stream, &capturing));
    if (capturing)
      return recap__error(RECAP_ERROR_INVALID_USAGE,
                          "%s: stream %p captures into no recap graph (a raw CUDA capture, or "
                          "one invalidated); \"%s\" has no graph to belong to",
                          fn, (void *)stream, name);
    memcpy(placeholder, &bits, recap__param_type_bytes(type));
    return RECAP_SUCCESS;
  }
  return recap_graph_param_declare(graph, name, type, &bits, placeholder, NULL);
}

/* ------------------------------------------------------------------------------------------
 * Capture end
 * ---------------------------------------------------------------------------------------- */

void recap__params_plan_free(rebind_t *r) {
  recap__host_free(r->uses);
  recap__host_free(r->writes);
  recap__host_free(r->batch);
  recap__host_free(r->merged);
  recap__host_free(r->pinned);
  r->uses = NULL;
  r->writes = r->batch = r->merged = NULL;
  r->pinned = NULL;
  r->use_count = r->write_count = 0;
}

/* The most runs recap_params_set merges; a larger batch is sorted. */
enum { MERGE_RUNS = 8 };

static int compare_writes(const void *x, const void *y) {
  const recap__arg_write_t *a = x, *b = y;
  if (a->node != b->node) return (a->node > b->node) - (a->node < b->node);
  return (a->offset > b->offset) - (a->offset < b->offset);
}

/* Put batch[0..total) in node order: it holds `runs` runs, each already in node order (a
 * parameter's sites), starting at start[i]. Merged into out, which then holds the batch: a
 * merge of a few runs costs far less than sorting them again. */
static void merge_runs(const recap__arg_write_t *batch, size_t total, const size_t *start,
                       size_t runs, recap__arg_write_t *out) {
  size_t at[MERGE_RUNS];
  for (size_t i = 0; i < runs; i++) at[i] = start[i];
  for (size_t n = 0; n < total; n++) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < runs; i++) {
      size_t end = i + 1 < runs ? start[i + 1] : total;
      if (at[i] < end && (best == SIZE_MAX || compare_writes(&batch[at[i]], &batch[at[best]]) < 0))
        best = i;
    }
    out[n] = batch[at[best]++];
  }
}

/* Pin the rebind sites of next whose word overlaps w's bytes; whether one was not pinned
 * before. */
static bool pin_sites(rebind_t *next, const recap__arg_write_t *w) {
  bool newly = false;
  for (size_t k = 0; k < next->site_count; k++) {
    const recap__graph_read_t *site = &next->sites[k];
    if (site->node == w->node && site->kind == RECAP__READ_KERNEL_ARG &&
        site->offset < w->offset + w->size && w->offset < site->offset + 8 && !next->pinned[k])
      next->pinned[k] = newly = true;
  }
  return newly;
}

/* For the message of a parameter found nowhere, when the capture holds regions: why a kernel in
 * a region's body cannot take it, and what to do instead ("" without regions). */
static void regions_note(char *out, size_t size, recap_graph_t graph, rebind_t *next) {
  size_t own_nodes = 0;
  int64_t own_bytes = 0;
  size_t conditional = recap__rebind_region_count(next, graph);
  *out = '\0';
  if (recap__graph_hooks_own_graphs(graph, &own_nodes, &own_bytes))
    snprintf(out, size,
             ". This capture's regions run on the host path, as graphs of their own that recap "
             "does not plan patches for: a kernel between or inside them cannot take a "
             "parameter; pass such a value through device memory its kernel reads");
  else if (conditional)
    snprintf(out, size,
             ". This capture holds %zu conditional node%s (regions): a kernel in a region's "
             "body lies in a body graph that the conditional node owns, and recap patches only "
             "the graph's own kernel nodes (cudaGraphExecKernelNodeSetParams is documented for "
             "the nodes of the graph an executable was instantiated from); pass such a value "
             "through device memory the body's kernel reads",
             conditional, conditional == 1 ? "" : "s");
}

/* The parameters' sites in the new plan, or the error naming the first that has none or an
 * ambiguous one. */
static recap_status_t find_sites(recap_graph_t graph, rebind_t *next, recap__arg_site_t **found,
                                 size_t *found_count) {
  static const char fn[] = "recap_graph_capture_end";
  size_t n = next->param_count;
  recap__arg_pattern_t small[16];
  recap__arg_pattern_t *patterns = n <= 16 ? small : recap__host_malloc(n * sizeof *patterns);
  if (!patterns) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  for (size_t i = 0; i < n; i++)
    patterns[i] = (recap__arg_pattern_t){next->params[i].placeholder, next->params[i].param->bytes};
  recap_status_t s = recap__device()->patch_plan_find(next->plan, patterns, n, found, found_count);
  if (patterns != small) recap__host_free(patterns);
  RECAP__CHECK(s);
  for (size_t i = 0; i < n; i++) {
    const recap_param_t p = next->params[i].param;
    size_t hits = 0;
    for (size_t k = 0; k < *found_count; k++) {
      const recap__arg_site_t *site = &(*found)[k];
      if (site->pattern != i) continue;
      hits++;
      if (site->param_size > 8 || site->param_size == p->bytes) continue;
      s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                       "%s: parameter \"%s\" (%s) was found inside the %zu-byte argument %" PRIu32
                       " of node %zu (kernel %s), so it cannot be told from another value; "
                       "declare it with the type the kernel takes (a %zu-byte one)",
                       fn, p->name, recap__param_type_name(p->type), site->param_size, site->param,
                       site->node, recap__rebind_kernel_name(next, graph, site->node),
                       site->param_size);
      break;
    }
    if (s == RECAP_SUCCESS && hits == 0) {
      char regions[512];
      regions_note(regions, sizeof regions, graph, next);
      s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                       "%s: parameter \"%s\" (%s) was found in no kernel argument of the capture: "
                       "pass the placeholder recap_graph_param_declare gave, unchanged, to the "
                       "kernels that take it (a value computed from it on the host is a "
                       "parameter of its own). Kernels inside regions' bodies and child graphs "
                       "are not searched, nor are values a library keeps in its own structures "
                       "(cuBLAS's alpha and beta, for one)%s",
                       fn, p->name, recap__param_type_name(p->type), regions);
    }
    if (s != RECAP_SUCCESS) {
      recap__host_free(*found);
      *found = NULL;
      return s;
    }
  }
  return RECAP_SUCCESS;
}

/* The graph's recorded argument sets and shapes, written into next's plan (not an executable);
 * a record this capture has no place for is skipped, with a warning. */
static recap_status_t apply_records(recap_graph_t graph, rebind_t *next, const params_t *t) {
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; t && i < t->arg_count; i++) {
    const arg_record_t *a = &t->args[i];
    recap__arg_site_t site;
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (dev->patch_plan_arg(next->plan, a->node, a->arg, &site) != RECAP_SUCCESS ||
        site.size != a->bytes) {
      RECAP__WARN("recap_graph_capture_end: the value set on argument %" PRIu32
                  " of node %zu is not kept: the new capture has no %" PRIu32
                  "-byte argument there",
                  a->arg, a->node, a->bytes);
      recap__error_restore(&saved);
      continue;
    }
    recap__arg_write_t w = {a->node, site.offset, a->bytes, a->bits};
    RECAP__CHECK(dev->patch_plan_write(next->plan, NULL, &w, 1));
    pin_sites(next, &w);
  }
  for (size_t i = 0; t && i < t->shape_count; i++) {
    const shape_record_t *sh = &t->shapes[i];
    recap__kernel_shape_t now;
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (dev->patch_plan_shape(next->plan, sh->node, &now, NULL) != RECAP_SUCCESS) {
      RECAP__WARN(
          "recap_graph_capture_end: the launch shape set on node %zu is not kept: the "
          "new capture has no kernel node there",
          sh->node);
      recap__error_restore(&saved);
      continue;
    }
    RECAP__CHECK(dev->patch_plan_set_shape(next->plan, NULL, sh->node, &sh->shape));
  }
  (void)graph;
  return RECAP_SUCCESS;
}

recap_status_t recap__params_captured(recap_graph_t graph, rebind_t *next) {
  static const char fn[] = "recap_graph_capture_end";
  params_t *t = table_of(graph);
  size_t n = next->param_count;
  if (next->site_count) {
    next->pinned = recap__host_calloc(next->site_count, sizeof *next->pinned);
    if (!next->pinned) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  recap__arg_site_t *found = NULL;
  size_t found_count = 0;
  recap_status_t s = RECAP_SUCCESS;
  if (n) {
    s = find_sites(graph, next, &found, &found_count);
    if (s == RECAP_SUCCESS) {
      size_t w = found_count ? found_count : 1;
      next->uses = recap__host_calloc(n, sizeof *next->uses);
      next->writes = recap__host_malloc(w * sizeof *next->writes);
      next->batch = recap__host_malloc(w * sizeof *next->batch);
      next->merged = recap__host_malloc(w * sizeof *next->merged);
      if (!next->uses || !next->writes || !next->batch || !next->merged)
        s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
  }
  if (s == RECAP_SUCCESS && n) {
    /* Grouped by parameter, each group in node order (found is in node order). */
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
      const param_decl_t *d = &next->params[i];
      next->uses[i] = (param_use_t){d->param, at, 0, d->placeholder};
      for (size_t k = 0; k < found_count; k++)
        if (found[k].pattern == i)
          next->writes[at++] =
              (recap__arg_write_t){found[k].node, found[k].offset, d->param->bytes, d->bits};
      next->uses[i].count = at - next->uses[i].first;
    }
    next->use_count = n;
    next->write_count = at;
    /* Every value in, in node order: the batch space is free for it now. */
    memcpy(next->batch, next->writes, at * sizeof *next->batch);
    qsort(next->batch, at, sizeof *next->batch, compare_writes);
    s = recap__device()->patch_plan_write(next->plan, NULL, next->batch, at);
    for (size_t k = 0; s == RECAP_SUCCESS && k < at; k++) pin_sites(next, &next->writes[k]);
  }
  recap__host_free(found);
  if (s == RECAP_SUCCESS) s = apply_records(graph, next, t);
  if (s != RECAP_SUCCESS) recap__params_plan_free(next);
  return s;
}

/* The last error again as status, its message behind "fn: " (and the parameter's name): a
 * copy first, since the message is formatted into the buffer it is read from. */
static recap_status_t prefixed(recap_status_t status, const char *fn, const char *name) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  if (name) return recap__error(status, "%s: \"%s\": %s", fn, name, cause.message);
  return recap__error(status, "%s: %s", fn, cause.message);
}

/* ------------------------------------------------------------------------------------------
 * Setting
 * ---------------------------------------------------------------------------------------- */

/* param's use in r, or NULL. param->use remembers where it was last found: a set in a step's
 * loop costs no search. */
static param_use_t *use_in(rebind_t *r, recap_param_t param) {
  if (param->use < r->use_count && r->uses[param->use].param == param) return &r->uses[param->use];
  for (size_t i = 0; i < r->use_count; i++)
    if (r->uses[i].param == param) {
      param->use = i;
      return &r->uses[i];
    }
  return NULL;
}

/* The kernel nodes n writes in node order touch: what the update stats count per set. */
static uint64_t nodes_of(const recap__arg_write_t *w, size_t n) {
  uint64_t nodes = 0;
  for (size_t k = 0; k < n; k++) nodes += k == 0 || w[k].node != w[k - 1].node;
  return nodes;
}

/* The checks every set makes: param's graph holds a patchable capture that declared param
 * (its use in *use). */
static recap_status_t param_use(const char *fn, recap_param_t param, rebind_t **r,
                                param_use_t **use) {
  RECAP__CHECK(recap__rebind_patchable_state(param->graph, fn, r));
  if ((*use = use_in(*r, param)) != NULL) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: parameter \"%s\" was not declared by the capture its graph holds; "
                      "declare it in every capture whose kernels take it",
                      fn, param->name);
}

/* A parameter the GPU decides is not set from the host. */
static recap_status_t not_sourced(const char *fn, const rebind_t *r, recap_param_t param) {
  if (!recap__params_device_sourced(r->device, param)) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: parameter \"%s\" takes its value from device memory at every replay "
                      "(recap_graph_param_device); write that memory instead",
                      fn, param->name);
}

recap_status_t recap_param_set(recap_param_t param, const void *value) {
  static const char fn[] = "recap_param_set";
  RECAP__CHECK(param_check(param, fn));
  RECAP__ARG(value != NULL, "%s: value is NULL", fn);
  rebind_t *r;
  param_use_t *use;
  RECAP__CHECK(param_use(fn, param, &r, &use));
  RECAP__CHECK(not_sourced(fn, r, param));
  uint64_t bits = 0;
  memcpy(&bits, value, param->bytes);
  recap__arg_write_t *w = r->writes + use->first;
  if (recap__params_device_applies(r->device)) { /* applied on the GPU by the next replay */
    recap__params_device_stage(r->device, (size_t)(use - r->uses), bits);
    for (size_t k = 0; k < use->count; k++) w[k].bits = bits;
    return RECAP_SUCCESS;
  }
  uint64_t before = w[0].bits; /* every site of a use holds the same value */
  for (size_t k = 0; k < use->count; k++) w[k].bits = bits;
  recap_status_t s = recap__device()->patch_plan_write(r->plan, param->graph->exec, w, use->count);
  if (s != RECAP_SUCCESS) {
    for (size_t k = 0; k < use->count; k++) w[k].bits = before;
    return prefixed(s, fn, param->name);
  }
  recap__update_count_patch_of(param->graph, RECAP__PATCH_PARAMS, nodes_of(w, use->count));
  return RECAP_SUCCESS;
}

recap_status_t recap_params_set(const recap_param_value_t *values, size_t count) {
  static const char fn[] = "recap_params_set";
  RECAP__ARG(values != NULL || count == 0, "%s: values is NULL", fn);
  if (count == 0) return RECAP_SUCCESS;
  rebind_t *r = NULL;
  size_t total = 0, start[MERGE_RUNS];
  for (size_t i = 0; i < count; i++) {
    param_use_t *use;
    recap_param_t p = values[i].param;
    if (i < MERGE_RUNS) start[i] = total;
    RECAP__CHECK(param_check(p, fn));
    RECAP__ARG(values[i].value != NULL, "%s: values[%zu].value is NULL", fn, i);
    RECAP__ARG(p->graph == values[0].param->graph,
               "%s: values[%zu] sets \"%s\" of graph %p, values[0] a parameter of graph %p; a "
               "batch sets parameters of one graph",
               fn, i, p->name, (void *)p->graph, (void *)values[0].param->graph);
    for (size_t j = 0; j < i; j++)
      RECAP__ARG(values[j].param != p, "%s: values[%zu] and values[%zu] both set \"%s\"", fn, j, i,
                 p->name);
    RECAP__CHECK(param_use(fn, p, &r, &use));
    RECAP__CHECK(not_sourced(fn, r, p));
    uint64_t bits = 0;
    memcpy(&bits, values[i].value, p->bytes);
    for (size_t k = 0; k < use->count; k++) {
      r->batch[total] = r->writes[use->first + k];
      r->batch[total++].bits = bits;
    }
  }
  /* One set per node: the batch in node order (on the GPU, the next replay applies them). */
  recap_graph_t graph = values[0].param->graph;
  bool on_gpu = recap__params_device_applies(r->device);
  const recap__arg_write_t *ordered = r->batch;
  if (!on_gpu && count == 1) {
    /* One parameter's sites: in node order already. */
  } else if (!on_gpu && count <= MERGE_RUNS) {
    merge_runs(r->batch, total, start, count, r->merged);
    ordered = r->merged;
  } else if (!on_gpu) {
    qsort(r->batch, total, sizeof *r->batch, compare_writes);
  }
  if (!on_gpu)
    RECAP__CHECK(recap__device()->patch_plan_write(r->plan, graph->exec, ordered, total));
  for (size_t i = 0; i < count; i++) {
    recap_param_t p = values[i].param;
    const param_use_t *use = &r->uses[p->use]; /* where param_use found it above */
    uint64_t bits = 0;
    memcpy(&bits, values[i].value, p->bytes);
    for (size_t k = 0; k < use->count; k++) r->writes[use->first + k].bits = bits;
    if (on_gpu) recap__params_device_stage(r->device, p->use, bits);
  }
  /* The nodes set from the host (none when the graph applies the values itself). */
  recap__update_count_patch_of(graph, RECAP__PATCH_PARAMS, on_gpu ? 0 : nodes_of(ordered, total));
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_graph_param_find(recap_graph_t graph, const char *name, recap_param_t *param) {
  static const char fn[] = "recap_graph_param_find";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(name && param, "%s: name or param is NULL", fn);
  *param = NULL;
  const params_t *t = table_of(graph);
  for (size_t i = 0; t && i < t->count; i++)
    if (strcmp(t->v[i]->name, name) == 0) {
      *param = t->v[i];
      return RECAP_SUCCESS;
    }
  return recap__error(RECAP_ERROR_NOT_FOUND, "%s: graph %p has no parameter \"%s\"", fn,
                      (void *)graph, name);
}

/* The use of param in the capture graph holds, or NULL. */
static const param_use_t *held_use(recap_param_t param, rebind_t **out) {
  recap_graph_t graph = param->graph;
  rebind_t *r = graph->state == RECAP__GRAPH_CAPTURED ? recap__rebind_of(graph) : NULL;
  if (out) *out = r;
  return r ? use_in(r, param) : NULL;
}

recap_status_t recap_param_info(recap_param_t param, recap_param_info_t *info) {
  static const char fn[] = "recap_param_info";
  RECAP__CHECK(param_check(param, fn));
  RECAP__ARG(info != NULL, "%s: info is NULL", fn);
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_param_info_t, sites, fn, "info->size",
                                        "RECAP_PARAM_INFO_INIT"));
  rebind_t *r;
  const param_use_t *use = held_use(param, &r);
  recap_param_info_t out = {.size = info->size,
                            .name = param->name,
                            .type = param->type,
                            .bits = use ? r->writes[use->first].bits : 0,
                            .placeholder = use ? use->placeholder : 0,
                            .sites = use ? use->count : 0};
  memcpy(info, &out, info->size);
  return RECAP_SUCCESS;
}

recap_status_t recap_param_sites(recap_param_t param, recap_param_site_t *sites, size_t capacity,
                                 size_t *count) {
  static const char fn[] = "recap_param_sites";
  RECAP__CHECK(param_check(param, fn));
  RECAP__ARG(count != NULL, "%s: count is NULL", fn);
  *count = 0;
  RECAP__ARG(sites != NULL || capacity == 0, "%s: sites is NULL and capacity is %zu", fn, capacity);
  rebind_t *r;
  const param_use_t *use = held_use(param, &r);
  if (!use) return RECAP_SUCCESS;
  for (size_t k = 0; k < use->count && k < capacity; k++)
    RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(&sites[k], recap_param_site_t, bytes, fn, "sites[i].size",
                                          "RECAP_PARAM_SITE_INIT"));
  *count = use->count;
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved; /* the walk over the arguments ends on a refusal: not an error */
  recap__error_save(&saved);
  for (size_t k = 0; k < use->count && k < capacity; k++) {
    const recap__arg_write_t *w = &r->writes[use->first + k];
    /* The argument's index: the parameter whose bytes hold the value. */
    uint32_t arg = 0;
    for (recap__arg_site_t a; dev->patch_plan_arg(r->plan, w->node, arg, &a) == RECAP_SUCCESS;
         arg++)
      if (w->offset >= a.param_offset && w->offset < a.param_offset + a.param_size) break;
    recap_param_site_t one = {
        .size = sites[k].size, .node = w->node, .arg = arg, .offset = w->offset, .bytes = w->size};
    memcpy(&sites[k], &one, sites[k].size);
  }
  recap__error_restore(&saved);
  return RECAP_SUCCESS;
}

/* A value as inspection shows it: integers in decimal, floating values in the fewest digits
 * that read back as the same value ("0.1", not "0.100000001"). */
static void value_text(char *out, size_t size, recap_param_type_t type, uint64_t bits) {
  if (type == RECAP_PARAM_INT32) {
    snprintf(out, size, "%" PRId32, (int32_t)(uint32_t)bits);
    return;
  }
  if (type == RECAP_PARAM_INT64) {
    snprintf(out, size, "%" PRId64, (int64_t)bits);
    return;
  }
  double v;
  if (type == RECAP_PARAM_FLOAT) {
    float f;
    uint32_t narrow = (uint32_t)bits;
    memcpy(&f, &narrow, sizeof f);
    v = f;
  } else {
    memcpy(&v, &bits, sizeof v);
  }
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(out, size, "%.*g", digits, v);
    double back = strtod(out, NULL);
    if (type == RECAP_PARAM_FLOAT ? (float)back == (float)v : back == v) return;
  }
}

/* Append a copy of text to node's graph parameters. */
static bool node_param_add(recap_graph_node_t *node, const char *text) {
  const char **grown = recap__host_realloc((void *)node->graph_params,
                                           (node->graph_param_count + 1) * sizeof *grown);
  if (!grown) return false;
  node->graph_params = grown;
  char *copy = recap__copy_string(text);
  if (!copy) return false;
  grown[node->graph_param_count++] = copy;
  return true;
}

recap_status_t recap__params_inspect(recap_graph_t graph, rebind_t *r, recap_graph_info_t *info) {
  static const char fn[] = "recap_graph_inspect";
  /* Only the graph's own nodes lie in the plan, and they come first in info. */
  for (size_t i = 0; i < r->use_count; i++) {
    const param_use_t *use = &r->uses[i];
    for (size_t k = 0; k < use->count; k++) {
      const recap__arg_write_t *w = &r->writes[use->first + k];
      /* A parameter a node takes in two arguments is listed once (the sites are in node
       * order). */
      if (w->node >= info->node_count || (k > 0 && w[-1].node == w->node)) continue;
      char value[64], text[sizeof value + 272]; /* "%.255s = " and the value */
      if (recap__params_device_sourced(r->device, use->param))
        snprintf(value, sizeof value, "(from device memory)"); /* each replay reads it */
      else
        value_text(value, sizeof value, use->param->type, w->bits);
      snprintf(text, sizeof text, "%.255s = %s", use->param->name, value);
      if (!node_param_add(&info->nodes[w->node], text))
        return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
  }
  const params_t *t = table_of(graph);
  if (!t) return RECAP_SUCCESS;
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved; /* a record the capture held has no place for: not shown */
  recap__error_save(&saved);
  recap_status_t s = RECAP_SUCCESS;
  for (size_t node = 0; node < info->node_count && s == RECAP_SUCCESS; node++) {
    recap__strbuf_t b = {0};
    for (size_t i = 0; i < t->arg_count; i++) {
      const arg_record_t *a = &t->args[i];
      recap__arg_site_t site;
      if (a->node != node || dev->patch_plan_arg(r->plan, node, a->arg, &site) != RECAP_SUCCESS ||
          site.size != a->bytes)
        continue;
      recap__strbuf_printf(&b, "%sargument %" PRIu32 " = 0x%" PRIx64, b.len ? ", " : "", a->arg,
                           a->bits);
    }
    recap__kernel_shape_t now;
    for (size_t i = 0; i < t->shape_count; i++)
      if (t->shapes[i].node == node &&
          dev->patch_plan_shape(r->plan, node, &now, NULL) == RECAP_SUCCESS)
        recap__strbuf_printf(&b, "%sshape", b.len ? ", " : "");
    if (!b.buf && !b.failed) continue; /* nothing set on this node alone */
    char *text = NULL;
    if (!recap__strbuf_take(&b, &text))
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    info->nodes[node].set_alone = text;
  }
  if (s == RECAP_SUCCESS) recap__error_restore(&saved);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * One argument, one node; launch shapes
 * ---------------------------------------------------------------------------------------- */

/* Whether w's bytes meet a site of one of r's parameters (the message names it). */
static recap_status_t not_a_param_site(const rebind_t *r, const char *fn,
                                       const recap__arg_write_t *w, uint32_t arg) {
  for (size_t i = 0; i < r->use_count; i++)
    for (size_t k = 0; k < r->uses[i].count; k++) {
      const recap__arg_write_t *p = &r->writes[r->uses[i].first + k];
      if (p->node == w->node && p->offset < w->offset + w->size && w->offset < p->offset + p->size)
        return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                            "%s: argument %" PRIu32
                            " of node %zu holds parameter \"%s\"; set "
                            "the parameter (recap_param_set)",
                            fn, arg, w->node, r->uses[i].param->name);
    }
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_kernel_arg_set(recap_graph_t graph, size_t node, uint32_t arg,
                                          const void *value, size_t size) {
  static const char fn[] = "recap_graph_kernel_arg_set";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(value != NULL, "%s: value is NULL", fn);
  rebind_t *r;
  RECAP__CHECK(recap__rebind_patchable_state(graph, fn, &r));
  const recap__device_ops_t *dev = recap__device();
  recap__arg_site_t site;
  if (dev->patch_plan_arg(r->plan, node, arg, &site) != RECAP_SUCCESS)
    return prefixed(RECAP_ERROR_INVALID_ARGUMENT, fn, NULL);
  RECAP__ARG(size == site.size,
             "%s: argument %" PRIu32 " of node %zu (kernel %s) is %" PRIu32
             " bytes, and size is %zu",
             fn, arg, node, recap__rebind_kernel_name(r, graph, node), site.size, size);
  RECAP__ARG(size <= 8,
             "%s: argument %" PRIu32
             " of node %zu is a %zu-byte structure; only scalars and "
             "pointers (up to 8 bytes) are set one at a time",
             fn, arg, node, size);
  recap__arg_write_t w = {node, site.offset, (uint32_t)size, 0};
  memcpy(&w.bits, value, size);
  RECAP__CHECK(not_a_param_site(r, fn, &w, arg));
  params_t *t;
  RECAP__CHECK(table_get(graph, fn, &t));
  /* The record's room first: the set below must not be left unrecorded. */
  size_t at = 0;
  while (at < t->arg_count && !(t->args[at].node == node && t->args[at].arg == arg)) at++;
  if (at == t->arg_count && t->arg_count == t->arg_cap) {
    size_t cap = t->arg_cap ? 2 * t->arg_cap : 8;
    arg_record_t *grown = recap__host_realloc(t->args, cap * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    t->args = grown;
    t->arg_cap = cap;
  }
  RECAP__CHECK(dev->patch_plan_write(r->plan, graph->exec, &w, 1));
  recap__params_device_touched(r->device);
  /* Set before with this size: the capture's end pinned its sites (apply_records). */
  bool pinned = at < t->arg_count && t->args[at].bytes == size;
  t->args[at] = (arg_record_t){node, arg, (uint32_t)size, w.bits};
  if (at == t->arg_count) t->arg_count++;
  /* A rebind leaves this site alone from now on. */
  if (!pinned && pin_sites(r, &w)) recap__rebind_resort(r);
  recap__update_count_patch_of(graph, RECAP__PATCH_ARG, 1);
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_kernel_shape(recap_graph_t graph, size_t node, unsigned *grid,
                                        unsigned *block) {
  static const char fn[] = "recap_graph_kernel_shape";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(grid && block, "%s: grid or block is NULL", fn);
  rebind_t *r;
  RECAP__CHECK(recap__rebind_patchable_state(graph, fn, &r));
  recap__kernel_shape_t shape;
  if (recap__device()->patch_plan_shape(r->plan, node, &shape, NULL) != RECAP_SUCCESS)
    return prefixed(RECAP_ERROR_INVALID_ARGUMENT, fn, NULL);
  memcpy(grid, shape.grid, sizeof shape.grid);
  memcpy(block, shape.block, sizeof shape.block);
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_kernel_shape_set(recap_graph_t graph, size_t node, const unsigned *grid,
                                            const unsigned *block) {
  static const char fn[] = "recap_graph_kernel_shape_set";
  RECAP__CHECK(recap__graph_check(graph, fn));
  RECAP__ARG(grid != NULL, "%s: grid is NULL", fn);
  rebind_t *r;
  RECAP__CHECK(recap__rebind_patchable_state(graph, fn, &r));
  const recap__device_ops_t *dev = recap__device();
  recap__kernel_shape_t shape;
  int max_threads = 0;
  if (dev->patch_plan_shape(r->plan, node, &shape, &max_threads) != RECAP_SUCCESS)
    return prefixed(RECAP_ERROR_INVALID_ARGUMENT, fn, NULL);
  static const unsigned grid_max[3] = {2147483647u, 65535u, 65535u};
  static const unsigned block_max[3] = {1024u, 1024u, 64u};
  for (int d = 0; d < 3; d++) {
    RECAP__ARG(grid[d] >= 1 && grid[d] <= grid_max[d], "%s: grid[%d] is %u; CUDA allows 1 to %u",
               fn, d, grid[d], grid_max[d]);
    if (block)
      RECAP__ARG(block[d] >= 1 && block[d] <= block_max[d],
                 "%s: block[%d] is %u; CUDA allows 1 to %u", fn, d, block[d], block_max[d]);
    shape.grid[d] = grid[d];
    if (block) shape.block[d] = block[d];
  }
  uint64_t threads = (uint64_t)shape.block[0] * shape.block[1] * shape.block[2];
  RECAP__ARG(threads <= (uint64_t)max_threads,
             "%s: a block of %" PRIu64 " threads; node %zu's kernel %s takes at most %d", fn,
             threads, node, recap__rebind_kernel_name(r, graph, node), max_threads);
  params_t *t;
  RECAP__CHECK(table_get(graph, fn, &t));
  size_t at = 0;
  while (at < t->shape_count && t->shapes[at].node != node) at++;
  if (at == t->shape_count && t->shape_count == t->shape_cap) {
    size_t cap = t->shape_cap ? 2 * t->shape_cap : 8;
    shape_record_t *grown = recap__host_realloc(t->shapes, cap * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    t->shapes = grown;
    t->shape_cap = cap;
  }
  RECAP__CHECK(dev->patch_plan_set_shape(r->plan, graph->exec, node, &shape));
  recap__params_device_touched(r->device);
  t->shapes[at] = (shape_record_t){node, shape};
  if (at == t->shape_count) t->shape_count++;
  recap__update_count_patch_of(graph, RECAP__PATCH_SHAPE, 1);
  return RECAP_SUCCESS;
}
