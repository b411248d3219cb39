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
 * argument or a shape set, a rebind). Where the driver lacks the feature, the capture says so
 * once and its parameters are patched from the host as without the option.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/host.h"
#include "device/applier_launch.h"
#include "rebind/params_device.h"
#include "rebind/rebind_internal.h"

struct params_device {
  bool on;                         /* false: the driver has no device-updatable nodes */
  recap_stream_t stream;           /* the capture's, for the writes at its end */
  recap__applier_table_t *table;   /* device memory, the applier's argument */
  recap__applier_entry_t *entries; /* device memory */
  recap__applier_ring_t *ring;     /* pinned host memory */
  uint32_t slot_bytes, count;
  unsigned char *staged;            /* host: what the next replay applies */
  uint64_t published;               /* replays whose values were published */
  recap_cuda_graph_exec_t uploaded; /* the executable uploaded since its last host set */
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
  recap__error_restore(&saved);
  recap__host_free(d->staged);
  recap__host_free(d);
}

recap_status_t recap__params_device_prepare(params_device_t **out) {
  static const char fn[] = "recap_graph_capture_begin";
  *out = NULL;
  params_device_t *d = recap__host_calloc(1, sizeof *d);
  if (!d) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  const recap__device_ops_t *dev = recap__device();
  recap_status_t s = dev->params_device_supported(&d->on);
  if (s == RECAP_SUCCESS && !d->on) {
    static atomic_bool warned;
    if (!atomic_exchange(&warned, true))
      RECAP__WARN(
          "%s: options.params_on_device: the driver has no device-updatable kernel "
          "nodes (CUDA 12.4 or later), so the graphs' parameters are set from the host "
          "(said once per process)",
          fn);
  }
  if (s == RECAP_SUCCESS && d->on) s = dev->raw_malloc((void **)&d->table, sizeof *d->table);
  if (s != RECAP_SUCCESS) {
    device_free(d);
    return s;
  }
  *out = d;
  return RECAP_SUCCESS;
}

void recap__params_device_discard(params_device_t *d) { device_free(d); }

/* ------------------------------------------------------------------------------------------
 * The hooks
 * ---------------------------------------------------------------------------------------- */

/* The device handle of node in handles (nodes[i] made device-updatable), made on first need. */
static recap_status_t node_handle(rebind_t *r, size_t node, size_t *nodes, uint64_t *handles,
                                  size_t *made, uint64_t *handle) {
  for (size_t i = 0; i < *made; i++)
    if (nodes[i] == node) {
      *handle = handles[i];
      return RECAP_SUCCESS;
    }
  RECAP__CHECK(recap__device()->patch_plan_device_node(r->plan, node, handle));
  nodes[*made] = node;
  handles[(*made)++] = *handle;
  return RECAP_SUCCESS;
}

/* The table's entries for r's sites (one per write; the value of use i at byte 8i of a slot). */
static recap_status_t build_entries(rebind_t *r, recap__applier_entry_t *entries) {
  size_t n = r->write_count ? r->write_count : 1;
  size_t *nodes = recap__host_malloc(n * sizeof *nodes);
  uint64_t *handles = recap__host_malloc(n * sizeof *handles);
  recap_status_t s = nodes && handles ? RECAP_SUCCESS
                                      : recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                                                     "recap_graph_capture_end: out of host memory");
  size_t made = 0;
  for (size_t i = 0; s == RECAP_SUCCESS && i < r->use_count; i++) {
    const param_use_t *use = &r->uses[i];
    for (size_t k = 0; s == RECAP_SUCCESS && k < use->count; k++) {
      const recap__arg_write_t *w = &r->writes[use->first + k];
      uint64_t handle = 0;
      s = node_handle(r, w->node, nodes, handles, &made, &handle);
      entries[use->first + k] = (recap__applier_entry_t){.node = handle,
                                                         .offset = (uint32_t)w->offset,
                                                         .size = w->size,
                                                         .value = (uint32_t)(8 * i)};
    }
  }
  recap__host_free(nodes);
  recap__host_free(handles);
  return s;
}

/* Capture end, after the rebinding state took in the capture (its hook attached first): make
 * the parameters' nodes device-updatable and give the applier its table. */
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
  d->count = (uint32_t)r->write_count;
  d->slot_bytes = (uint32_t)(r->use_count ? 8 * r->use_count : 8);
  size_t entry_bytes = (d->count ? d->count : 1) * sizeof(recap__applier_entry_t);
  recap__applier_entry_t *entries = recap__host_calloc(d->count ? d->count : 1, sizeof *entries);
  d->staged = recap__host_calloc(1, d->slot_bytes);
  if (!entries || !d->staged) {
    recap__host_free(entries);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  recap_status_t s = build_entries(r, entries);
  if (s == RECAP_SUCCESS) s = dev->raw_malloc((void **)&d->entries, entry_bytes);
  if (s == RECAP_SUCCESS)
    s = dev->host_alloc_pinned((void **)&d->ring, recap__applier_ring_bytes(d->slot_bytes));
  if (s == RECAP_SUCCESS) {
    memset(d->ring, 0, recap__applier_ring_bytes(d->slot_bytes));
    for (size_t i = 0; i < r->use_count; i++)
      memcpy(d->staged + 8 * i, &r->writes[r->uses[i].first].bits, 8);
    recap__applier_table_t table = {.replays = 0,
                                    .ring = d->ring,
                                    .entries = d->entries,
                                    .count = d->count,
                                    .slot_bytes = d->slot_bytes};
    s = dev->memcpy_async(d->entries, entries, entry_bytes, d->stream);
    if (s == RECAP_SUCCESS) s = dev->memcpy_async(d->table, &table, sizeof table, d->stream);
    if (s == RECAP_SUCCESS) s = dev->stream_synchronize(d->stream);
  }
  recap__host_free(entries);
  RECAP__CHECK(s);
  r->device = d;
  captured->device_nodes = d->count > 0;
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
  uint64_t slot = d->published % RECAP__APPLIER_SLOTS;
  if (d->published >= RECAP__APPLIER_SLOTS) RECAP__CHECK(wait_for_slot(d, slot));
  if (d->uploaded != graph->exec) {
    RECAP__CHECK(recap__device()->graph_upload(graph->exec, stream));
    d->uploaded = graph->exec;
  }
  memcpy(recap__applier_slot(d->ring, d->slot_bytes, slot), d->staged, d->slot_bytes);
  atomic_thread_fence(memory_order_release);
  ((volatile uint64_t *)d->ring->published)[slot] = d->published + 1;
  d->published++;
  return RECAP_SUCCESS;
}

static void hook_replay_failed(void *ctx, recap_graph_t graph) {
  (void)graph;
  params_device_t *d = ctx;
  if (d->on && d->ring) d->published--; /* the slot is published again by the next replay */
}

static recap_status_t hook_exec_patching(void *ctx, recap_graph_t graph,
                                         const recap__graph_read_t *sites, size_t count,
                                         const recap__patch_range_t *to, size_t moves) {
  (void)ctx, (void)graph, (void)sites, (void)count, (void)to, (void)moves;
  return RECAP_SUCCESS;
}

static void hook_exec_patched(void *ctx, recap_graph_t graph, bool applied) {
  (void)graph;
  params_device_t *d = ctx;
  if (applied) d->uploaded = NULL;
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  device_free(ctx);
}

static const recap__graph_hooks_t device_hooks = {
    .before_replay = hook_before_replay,
    .replay_failed = hook_replay_failed,
    .captured = hook_captured,
    .exec_patching = hook_exec_patching,
    .exec_patched = hook_exec_patched,
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
  return d->on ? recap__device()->params_apply_launch(stream, d->table) : RECAP_SUCCESS;
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

bool recap__params_device_on(recap_graph_t graph) {
  rebind_t *r = graph->state == RECAP__GRAPH_CAPTURED ? recap__rebind_of(graph) : NULL;
  return r && r->device;
}
