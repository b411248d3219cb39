/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params_device.c — graph parameters applied on the GPU (options.params_on_device): the graph's
 * first node is recap's applier kernel, which at every replay writes the values the host set
 * into the kernel nodes that take them. Those nodes are made device-updatable at capture end,
 * before the template is instantiated; the host's side of a set is a store into host memory,
 * and a replay copies the staged values into the ring slot its applier reads
 * (applier_launch.h), so the host cost of a replay does not grow with the number of sites.
 *
 * CUDA's terms, which recap keeps: a graph with device-updatable nodes is never updated in
 * place (a recapture instantiates afresh, counted as NOT_SUPPORTED), and its executable is
 * uploaded before its first launch and again after the host set one of those nodes (an
 * argument or a shape set, a rebind: params.c and rebind.c say so through
 * recap__params_device_touched). Where the driver lacks the feature, the capture says so
 * once and its parameters are patched from the host as without the option.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/host.h"
#include "device/applier_launch.h"
#include "rebind/params_device.h"
#include "rebind/rebind_internal.h"

/* A parameter whose value the GPU decides (recap_graph_param_device). */
typedef struct source {
  recap_param_t param;
  recap__source_table_t *table; /* device memory, its applier's argument */
  recap__source_entry_t *entries;
  const void *value;
  uint32_t bytes, per_block;
} source_t;

struct params_device {
  bool on;                         /* false: the driver has no device-updatable nodes */
  bool host_applier;               /* options.params_on_device: the first node applies */
  recap_stream_t stream;           /* the capture's, for the writes at its end */
  recap__applier_table_t *table;   /* device memory, the host applier's argument */
  recap__applier_entry_t *entries; /* device memory */
  recap__applier_ring_t *ring;     /* pinned host memory: slots and the error words */
  uint32_t slot_bytes, count;
  unsigned char *staged;            /* host: what the next replay applies */
  uint64_t published;               /* replays whose values were published */
  recap_cuda_graph_exec_t uploaded; /* the executable uploaded since its last host set */
  source_t *sources;
  size_t source_count, source_cap;
  /* Capture end: the nodes made device-updatable so far, and their handles. */
  size_t *nodes;
  uint64_t *handles;
  size_t made;
};

/* Seconds a replay waits for the GPU to apply the replay `slots` before it. */
enum { WAIT_SECONDS = 60 };

static void device_free(params_device_t *d) {
  if (!d) return;
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (d->table) dev->raw_free(d->table);
  if (d->entries) dev->raw_free(d->entries);
  if (d->ring) dev->host_free_pinned(d->ring);
  for (size_t i = 0; i < d->source_count; i++) {
    if (d->sources[i].table) dev->raw_free(d->sources[i].table);
    if (d->sources[i].entries) dev->raw_free(d->sources[i].entries);
  }
  recap__error_restore(&saved);
  recap__host_free(d->sources);
  recap__host_free(d->nodes);
  recap__host_free(d->handles);
  recap__host_free(d->staged);
  recap__host_free(d);
}

/* The state with the driver's answer, and the host applier's table when host_applier. */
static recap_status_t device_new(bool host_applier, const char *fn, params_device_t **out) {
  *out = NULL;
  params_device_t *d = recap__host_calloc(1, sizeof *d);
  if (!d) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  d->host_applier = host_applier;
  const recap__device_ops_t *dev = recap__device();
  recap_status_t s = dev->params_device_supported(&d->on);
  if (s == RECAP_SUCCESS && d->on && host_applier)
    s = dev->raw_malloc((void **)&d->table, sizeof *d->table);
  if (s != RECAP_SUCCESS) {
    device_free(d);
    return s;
  }
  *out = d;
  return RECAP_SUCCESS;
}

recap_status_t recap__params_device_prepare(params_device_t **out) {
  static const char fn[] = "recap_graph_capture_begin";
  RECAP__CHECK(device_new(true, fn, out));
  if (!(*out)->on) {
    static atomic_bool warned;
    if (!atomic_exchange(&warned, true))
      RECAP__WARN(
          "%s: options.params_on_device: the driver has no device-updatable kernel "
          "nodes (CUDA 12.4 or later), so the graphs' parameters are set from the host "
          "(said once per process)",
          fn);
  }
  return RECAP_SUCCESS;
}

void recap__params_device_discard(params_device_t *d) { device_free(d); }

/* ------------------------------------------------------------------------------------------
 * Capture end
 * ---------------------------------------------------------------------------------------- */

/* The device handle of node, which becomes device-updatable on first need. */
static recap_status_t node_handle(params_device_t *d, rebind_t *r, size_t node, uint64_t *handle) {
  for (size_t i = 0; i < d->made; i++)
    if (d->nodes[i] == node) {
      *handle = d->handles[i];
      return RECAP_SUCCESS;
    }
  RECAP__CHECK(recap__device()->patch_plan_device_node(r->plan, node, handle));
  d->nodes[d->made] = node;
  d->handles[d->made++] = *handle;
  return RECAP_SUCCESS;
}

/* The source of param, or NULL. */
static source_t *source_of(const params_device_t *d, recap_param_t param) {
  for (size_t i = 0; d && i < d->source_count; i++)
    if (d->sources[i].param == param) return &d->sources[i];
  return NULL;
}

/* Copy bytes to device memory at dst, in order on the capture's stream (waited for below). */
static recap_status_t to_device(params_device_t *d, void *dst, const void *src, size_t bytes) {
  return recap__device()->memcpy_async(dst, src, bytes, d->stream);
}

/* The host applier's table: an entry per site of the parameters the host sets (the value of
 * use i at byte 8i of a slot). */
static recap_status_t host_table(params_device_t *d, rebind_t *r) {
  static const char fn[] = "recap_graph_capture_end";
  const recap__device_ops_t *dev = recap__device();
  size_t n = r->write_count ? r->write_count : 1;
  recap__applier_entry_t *entries = recap__host_calloc(n, sizeof *entries);
  if (!entries) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  recap_status_t s = RECAP_SUCCESS;
  uint32_t count = 0;
  for (size_t i = 0; s == RECAP_SUCCESS && i < r->use_count; i++) {
    const param_use_t *use = &r->uses[i];
    if (source_of(d, use->param)) continue; /* its own applier writes it */
    for (size_t k = 0; s == RECAP_SUCCESS && k < use->count; k++) {
      const recap__arg_write_t *w = &r->writes[use->first + k];
      uint64_t handle = 0;
      s = node_handle(d, r, w->node, &handle);
      entries[count++] = (recap__applier_entry_t){.node = handle,
                                                  .offset = (uint32_t)w->offset,
                                                  .size = w->size,
                                                  .value = (uint32_t)(8 * i)};
    }
  }
  d->count = count;
  if (s == RECAP_SUCCESS) s = dev->raw_malloc((void **)&d->entries, n * sizeof *entries);
  if (s == RECAP_SUCCESS) s = to_device(d, d->entries, entries, n * sizeof *entries);
  recap__host_free(entries);
  RECAP__CHECK(s);
  for (size_t i = 0; i < r->use_count; i++)
    memcpy(d->staged + 8 * i, &r->writes[r->uses[i].first].bits, 8);
  recap__applier_table_t table = {.replays = 0,
                                  .ring = d->ring,
                                  .entries = d->entries,
                                  .count = d->count,
                                  .slot_bytes = d->slot_bytes};
  return to_device(d, d->table, &table, sizeof table);
}

static int compare_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Of targets[0..*count) (sorted node indices), keep those that no other target precedes in the
 * template: an edge to one that another precedes would order nothing more, and every edge
 * costs the launch of each replay. */
static recap_status_t first_targets(recap_cuda_graph_t graph, size_t *targets, size_t *count) {
  static const char fn[] = "recap_graph_capture_end";
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  RECAP__CHECK(recap__device()->graph_inspect(graph, &info));
  /* The queue takes each target once and each node reached once after it. */
  bool *reached = recap__host_calloc(info.node_count ? info.node_count : 1, sizeof *reached);
  size_t *queue = recap__host_malloc((*count + info.node_count + 1) * sizeof *queue);
  recap_status_t s = RECAP_SUCCESS;
  if (!reached || !queue) s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* Every node some target reaches through at least one edge. */
  size_t head = 0, tail = 0;
  for (size_t i = 0; s == RECAP_SUCCESS && i < *count; i++)
    if (targets[i] < info.node_count) queue[tail++] = targets[i];
  while (s == RECAP_SUCCESS && head < tail) {
    const recap_graph_node_t *u = &info.nodes[queue[head++]];
    for (size_t k = 0; k < u->dependent_count; k++)
      if (!reached[u->dependents[k]]) {
        reached[u->dependents[k]] = true;
        queue[tail++] = u->dependents[k];
      }
  }
  size_t kept = 0;
  for (size_t i = 0; s == RECAP_SUCCESS && i < *count; i++)
    if (targets[i] >= info.node_count || !reached[targets[i]]) targets[kept++] = targets[i];
  if (s == RECAP_SUCCESS) *count = kept;
  recap__host_free(reached);
  recap__host_free(queue);
  recap__graph_info_clear(&info);
  return s;
}

/* The host applier precedes only the nodes that take the parameters it applies, and of those
 * only the ones no other such node precedes: the work before them (a forward pass before an
 * optimizer step, the projections before an attention) runs beside it instead of after it,
 * which hides its round trip over the bus. The applier's node is the one whose argument is
 * the table. */
static recap_status_t applier_edges(params_device_t *d, rebind_t *r, recap_cuda_graph_t graph) {
  static const char fn[] = "recap_graph_capture_end";
  const recap__device_ops_t *dev = recap__device();
  recap__arg_pattern_t pattern = {.bits = (uint64_t)(uintptr_t)d->table, .size = 8};
  recap__arg_site_t *found = NULL;
  size_t n = 0;
  RECAP__CHECK(dev->patch_plan_find(r->plan, &pattern, 1, &found, &n));
  size_t applier = n == 1 ? found[0].node : SIZE_MAX;
  recap__host_free(found);
  if (applier == SIZE_MAX)
    return recap__error(RECAP_ERROR_INTERNAL,
                        "%s: the parameter applier's node is not in the captured graph (%zu "
                        "kernels take its table)",
                        fn, n);
  size_t *targets = recap__host_malloc((r->write_count ? r->write_count : 1) * sizeof *targets);
  if (!targets) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  size_t count = 0;
  for (size_t i = 0; i < r->use_count; i++) {
    const param_use_t *use = &r->uses[i];
    if (source_of(d, use->param)) continue;
    for (size_t k = 0; k < use->count; k++) targets[count++] = r->writes[use->first + k].node;
  }
  qsort(targets, count, sizeof *targets, compare_size);
  size_t unique = 0;
  for (size_t i = 0; i < count; i++)
    if (unique == 0 || targets[unique - 1] != targets[i]) targets[unique++] = targets[i];
  recap_status_t s = first_targets(graph, targets, &unique);
  if (s == RECAP_SUCCESS) s = dev->patch_plan_precede_only(r->plan, applier, targets, unique);
  recap__host_free(targets);
  return s;
}

/* A source applier's table: its parameter's sites and, with per_block, one grid entry per
 * node that takes it (keeping the grid's other dimensions as captured). */
static recap_status_t source_table(params_device_t *d, rebind_t *r, source_t *src) {
  static const char fn[] = "recap_graph_capture_end";
  const recap__device_ops_t *dev = recap__device();
  const param_use_t *use = NULL;
  for (size_t i = 0; i < r->use_count && !use; i++)
    if (r->uses[i].param == src->param) use = &r->uses[i];
  if (!use) return recap__error(RECAP_ERROR_INTERNAL, "%s: a device parameter has no use", fn);
  size_t n = 2 * use->count;
  recap__source_entry_t *entries = recap__host_calloc(n, sizeof *entries);
  if (!entries) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  recap_status_t s = RECAP_SUCCESS;
  uint32_t count = 0;
  for (size_t k = 0; s == RECAP_SUCCESS && k < use->count; k++) {
    const recap__arg_write_t *w = &r->writes[use->first + k];
    uint64_t handle = 0;
    s = node_handle(d, r, w->node, &handle);
    entries[count++] =
        (recap__source_entry_t){.node = handle, .offset = (uint32_t)w->offset, .size = w->size};
    bool first_of_node = k == 0 || r->writes[use->first + k - 1].node != w->node;
    if (s == RECAP_SUCCESS && src->per_block && first_of_node) {
      recap__kernel_shape_t shape;
      s = dev->patch_plan_shape(r->plan, w->node, &shape, NULL);
      entries[count++] = (recap__source_entry_t){.node = handle,
                                                 .offset = RECAP__SOURCE_GRID,
                                                 .grid_y = shape.grid[1],
                                                 .grid_z = shape.grid[2],
                                                 .enabled = 1};
    }
  }
  if (s == RECAP_SUCCESS) s = dev->raw_malloc((void **)&src->entries, n * sizeof *entries);
  if (s == RECAP_SUCCESS) s = to_device(d, src->entries, entries, n * sizeof *entries);
  recap__host_free(entries);
  RECAP__CHECK(s);
  recap__source_table_t table = {.value = src->value,
                                 .status = d->ring,
                                 .entries = src->entries,
                                 .count = count,
                                 .bytes = src->bytes,
                                 .per_block = src->per_block,
                                 .is_signed = 1};
  return to_device(d, src->table, &table, sizeof table);
}

/* Capture end, after the rebinding state took in the capture (its hook attached first): make
 * the parameters' nodes device-updatable and give the appliers their tables. */
static recap_status_t hook_captured(void *ctx, recap_graph_t graph, recap__captured_t *captured) {
  static const char fn[] = "recap_graph_capture_end";
  params_device_t *d = ctx;
  if (!d->on) return RECAP_SUCCESS;
  rebind_t *r = recap__rebind_of(graph);
  if (!r || !r->plan)
    return recap__error(RECAP_ERROR_INTERNAL, "%s: the parameters' patch plan is missing", fn);
  if (r->use_count > RECAP__APPLIER_MAX_VALUES)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: the capture declared %zu parameters, and at most %d are applied on "
                        "the GPU (options.params_on_device); capture without the option to set "
                        "them from the host",
                        fn, r->use_count, (int)RECAP__APPLIER_MAX_VALUES);
  const recap__device_ops_t *dev = recap__device();
  size_t n = r->write_count ? r->write_count : 1;
  d->slot_bytes = (uint32_t)(r->use_count ? 8 * r->use_count : 8);
  d->nodes = recap__host_malloc(n * sizeof *d->nodes);
  d->handles = recap__host_malloc(n * sizeof *d->handles);
  d->staged = recap__host_calloc(1, d->slot_bytes);
  if (!d->nodes || !d->handles || !d->staged)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  recap_status_t s =
      dev->host_alloc_pinned((void **)&d->ring, recap__applier_ring_bytes(d->slot_bytes));
  if (s == RECAP_SUCCESS) memset(d->ring, 0, recap__applier_ring_bytes(d->slot_bytes));
  for (size_t i = 0; s == RECAP_SUCCESS && i < d->source_count; i++)
    s = source_table(d, r, &d->sources[i]);
  if (s == RECAP_SUCCESS && d->host_applier) s = host_table(d, r);
  if (s == RECAP_SUCCESS && d->host_applier) s = applier_edges(d, r, captured->template_graph);
  if (s == RECAP_SUCCESS) s = dev->stream_synchronize(d->stream);
  RECAP__CHECK(s);
  r->device = d;
  captured->device_nodes = d->made > 0;
  return RECAP_SUCCESS;
}

/* Wait until the GPU applied the replay that used slot before (published - SLOTS). */
static recap_status_t wait_for_slot(const params_device_t *d, uint64_t slot) {
  uint64_t need = d->published + 1 - RECAP__APPLIER_SLOTS;
  const volatile uint64_t *applied = &d->ring->applied[slot];
  if (*applied >= need) return RECAP_SUCCESS;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned spins = 0; *applied < need; spins++) {
    if (spins < 1000) continue;
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > WAIT_SECONDS)
      return recap__error(RECAP_ERROR_BUSY,
                          "recap_graph_replay: the GPU has not applied the parameters of replay "
                          "%" PRIu64
                          " within %d s, and this replay's values would overwrite "
                          "them; is the stream of that replay stalled?",
                          need - 1, (int)WAIT_SECONDS);
  }
  return RECAP_SUCCESS;
}

static recap_status_t hook_before_replay(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  params_device_t *d = ctx;
  if (!d->on || !d->ring) return RECAP_SUCCESS;
  const volatile recap__applier_ring_t *ring = d->ring;
  if (ring->error != RECAP__APPLIER_OK) {
    uint32_t error = ring->error, detail = ring->detail;
    if (error == RECAP__APPLIER_OUT_OF_STEP)
      return recap__error(RECAP_ERROR_INVALID_USAGE,
                          "recap_graph_replay: the parameter applier on the GPU found no values "
                          "for replay %" PRIu32
                          " of graph %p: the executable ran without "
                          "recap_graph_replay (through recap_graph_raw_exec?)",
                          detail, (void *)graph);
    return recap__error(RECAP_ERROR_CUDA,
                        "recap_graph_replay: the parameter applier on the GPU failed: "
                        "cudaGraphKernelNodeUpdatesApply returned CUDA error %" PRIu32,
                        detail);
  }
  if (d->uploaded != graph->exec) {
    RECAP__CHECK(recap__device()->graph_upload(graph->exec, stream));
    d->uploaded = graph->exec;
  }
  if (!d->host_applier) return RECAP_SUCCESS;
  uint64_t slot = d->published % RECAP__APPLIER_SLOTS;
  if (d->published >= RECAP__APPLIER_SLOTS) RECAP__CHECK(wait_for_slot(d, slot));
  memcpy(recap__applier_slot(d->ring, d->slot_bytes, slot), d->staged, d->slot_bytes);
  atomic_thread_fence(memory_order_release);
  ((volatile uint64_t *)d->ring->published)[slot] = d->published + 1;
  d->published++;
  return RECAP_SUCCESS;
}

static void hook_replay_failed(void *ctx, recap_graph_t graph) {
  (void)graph;
  params_device_t *d = ctx;
  if (d->on && d->ring && d->host_applier) d->published--; /* published again by the next one */
}

/* Something may instantiate from the template: the next replay uploads whatever executable it
 * finds (a new one may have the old one's address). */
static recap_status_t hook_template_read(void *ctx, recap_graph_t graph) {
  (void)graph;
  params_device_t *d = ctx;
  d->uploaded = NULL;
  return RECAP_SUCCESS;
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  device_free(ctx);
}

static const recap__graph_hooks_t device_hooks = {
    .name = "graph parameters applied on the GPU (options->params_on_device)",
    .before_replay = hook_before_replay,
    .replay_failed = hook_replay_failed,
    .captured = hook_captured,
    .template_read = hook_template_read,
    .release = hook_release,
};

recap_status_t recap__params_device_attach(recap_graph_t graph, params_device_t *d,
                                           recap_stream_t stream) {
  d->stream = stream;
  recap_status_t s = recap__graph_add_hook(graph, &device_hooks, d);
  if (s != RECAP_SUCCESS) {
    device_free(d);
    return s;
  }
  /* The applier is the capture's first work: every later node depends on it. */
  return d->on && d->host_applier ? recap__device()->params_apply_launch(stream, d->table)
                                  : RECAP_SUCCESS;
}

recap_status_t recap__params_device_source(recap_graph_t graph, recap_stream_t stream,
                                           recap_param_t param, const void *value, uint32_t bytes,
                                           uint32_t per_block, const char *fn) {
  params_device_t *d = recap__graph_hook_ctx(graph, &device_hooks);
  if (!d) {
    RECAP__CHECK(device_new(false, fn, &d));
    RECAP__CHECK(recap__params_device_attach(graph, d, graph->capture_stream));
  }
  if (!d->on)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: the driver has no device-updatable kernel nodes (CUDA 12.4 or "
                        "later), which a parameter whose value the GPU decides needs",
                        fn);
  const recap__device_ops_t *dev = recap__device();
  if (d->source_count == d->source_cap) {
    size_t cap = d->source_cap ? 2 * d->source_cap : 4;
    source_t *grown = recap__host_realloc(d->sources, cap * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    d->sources = grown;
    d->source_cap = cap;
  }
  /* The table's memory now, while the capture runs: allowed in relaxed mode, as the
   * allocator's own growth is. Its contents come at capture end. */
  source_t *src = &d->sources[d->source_count];
  *src = (source_t){.param = param, .value = value, .bytes = bytes, .per_block = per_block};
  recap__capture_mode_t mode = RECAP__CAPTURE_MODE_RELAXED;
  RECAP__CHECK(dev->exchange_capture_mode(&mode));
  recap_status_t s = dev->raw_malloc((void **)&src->table, sizeof *src->table);
  dev->exchange_capture_mode(&mode);
  RECAP__CHECK(s);
  d->source_count++;
  return dev->params_source_launch(stream, src->table);
}

bool recap__params_device_applies(const params_device_t *d) {
  return d && d->on && d->host_applier;
}

bool recap__params_device_sourced(const params_device_t *d, recap_param_t param) {
  return source_of(d, param) != NULL;
}

/* ------------------------------------------------------------------------------------------
 * What params.c asks
 * ---------------------------------------------------------------------------------------- */

void recap__params_device_stage(params_device_t *d, size_t use, uint64_t bits) {
  memcpy(d->staged + 8 * use, &bits, 8);
}

void recap__params_device_touched(params_device_t *d) {
  if (d) d->uploaded = NULL;
}
