/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake.c — the CPU fake device behind the device seam, for tests without a GPU: its state,
 * failures, configuration, the table of its functions, and the test controls that act on the
 * whole fake (reset, counters).
 *
 * Memory is host memory (aligned like cudaMalloc's, never touched by the fake, so large
 * segments cost only address space), bounded per device by a configurable capacity. A stream is
 * a pair of counters, work items enqueued and completed, that the test moves by hand. An event
 * remembers the stream and the item its record enqueued, and is done once that item completed.
 * Captures are simulated with ids, joined side streams, an invalidated flag, and CUDA's rules on
 * which calls a capture forbids, so that the allocator's capture routing and its discipline
 * (no event record or query on a capturing stream, no unrelaxed cudaMalloc during a capture)
 * are tested for real. See fake.h for the semantics tests rely on, and fake_state.h for the
 * files and the locking rule.
 *
 * The fake is not part of the library: it is built as a library of its own (recap_fake) that
 * only the tests and fuzzers link, and it installs itself through recap__device_install.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake_state.h"

/* The fake's devices report this compute capability unless the test configures another. */
enum { FAKE_DEFAULT_COMPUTE_CAPABILITY = 90 };
/* The minimum VMM granularity of an H100 or H200. */
#define FAKE_DEFAULT_VMM_GRANULARITY ((size_t)2 << 20)

fake_state_t recap__fake = {.lock = PTHREAD_MUTEX_INITIALIZER,
                            .refuse_node = SIZE_MAX,
                            .updated_slowdown = 1.0};
_Thread_local int recap__fake_tl_device;
_Thread_local recap__capture_mode_t recap__fake_tl_capture_mode = RECAP__CAPTURE_MODE_GLOBAL;

/* ---- failures --------------------------------------------------------------------------- */

recap_status_t recap__fake_note(fake_failure_t *f, recap_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
  f->status = status;
  return status;
}

recap_status_t recap__fake_unlock_and_report(fake_failure_t *f) {
  pthread_mutex_unlock(&recap__fake.lock);
  if (f->status != RECAP_SUCCESS) return recap__error(f->status, "%s", f->message);
  return RECAP_SUCCESS;
}

const char *recap__fake_mode_name(recap__capture_mode_t mode) {
  switch (mode) {
    case RECAP__CAPTURE_MODE_GLOBAL: return "global";
    case RECAP__CAPTURE_MODE_THREAD_LOCAL: return "thread-local";
    case RECAP__CAPTURE_MODE_RELAXED: return "relaxed";
  }
  return "unknown";
}

/* ---- configuration (called with the lock held) ------------------------------------------ */

void recap__fake_configure(const recap__fake_config_t *cfg) {
  int count = 1;
  size_t memory = FAKE_DEFAULT_MEMORY;
  int capability = FAKE_DEFAULT_COMPUTE_CAPABILITY;
  bool no_kernel_image = false;
  size_t vmm_granularity = FAKE_DEFAULT_VMM_GRANULARITY;
  size_t vmm_recommended = 0;
  bool vmm_unsupported = false;
  if (cfg) {
    /* 0 keeps the default, so that designated initializers can name only what they change; a
     * negative count simulates a machine with no device. */
    if (cfg->device_count < 0) count = 0;
    if (cfg->device_count > 0) count = cfg->device_count;
    if (cfg->memory_per_device > 0) memory = cfg->memory_per_device;
    if (cfg->compute_capability > 0) capability = cfg->compute_capability;
    no_kernel_image = cfg->no_kernel_image;
    if (cfg->vmm_granularity > 0) vmm_granularity = cfg->vmm_granularity;
    vmm_recommended = cfg->vmm_recommended_granularity;
    vmm_unsupported = cfg->vmm_unsupported;
  }
  if (count > RECAP__FAKE_MAX_DEVICES) count = RECAP__FAKE_MAX_DEVICES;
  recap__fake.device_count = count;
  recap__fake.capacity = memory;
  recap__fake.compute_capability = capability;
  recap__fake.no_kernel_image = no_kernel_image;
  recap__fake.vmm_granularity = vmm_granularity;
  /* A multiple of the minimum, as on CUDA. */
  if (vmm_recommended < vmm_granularity) vmm_recommended = vmm_granularity;
  recap__fake.vmm_recommended =
      (vmm_recommended + vmm_granularity - 1) / vmm_granularity * vmm_granularity;
  recap__fake.vmm_unsupported = vmm_unsupported;
  recap__fake.configured = true;
}

void recap__fake_ensure_configured(void) {
  if (!recap__fake.configured) recap__fake_configure(NULL);
}

/* ---- the table -------------------------------------------------------------------------- */

const recap__device_ops_t recap__fake_ops = {
    .name = "fake",
    .device_count = recap__fake_op_device_count,
    .get_device = recap__fake_op_get_device,
    .set_device = recap__fake_op_set_device,
    .device_synchronize = recap__fake_op_device_synchronize,
    .raw_malloc = recap__fake_op_raw_malloc,
    .raw_free = recap__fake_op_raw_free,
    .mem_get_info = recap__fake_op_mem_get_info,
    .event_create = recap__fake_op_event_create,
    .event_destroy = recap__fake_op_event_destroy,
    .event_record = recap__fake_op_event_record,
    .event_query = recap__fake_op_event_query,
    .event_synchronize = recap__fake_op_event_synchronize,
    .stream_wait_event = recap__fake_op_stream_wait_event,
    .stream_create = recap__fake_op_stream_create,
    .stream_blocking = recap__fake_op_stream_blocking,
    .stream_destroy = recap__fake_op_stream_destroy,
    .stream_synchronize = recap__fake_op_stream_synchronize,
    .memcpy_async = recap__fake_op_memcpy_async,
    .stream_capture_info = recap__fake_op_stream_capture_info,
    .exchange_capture_mode = recap__fake_op_exchange_capture_mode,
    .stream_capture_id = recap__fake_op_stream_capture_info,
    .stream_begin_capture = recap__fake_op_stream_begin_capture,
    .stream_end_capture = recap__fake_op_stream_end_capture,
    .graph_instantiate = recap__fake_op_graph_instantiate,
    .graph_launch = recap__fake_op_graph_launch,
    .graph_upload = recap__fake_op_graph_upload,
    .graph_destroy = recap__fake_op_graph_destroy,
    .graph_exec_destroy = recap__fake_op_graph_exec_destroy,
    .graph_node_count = recap__fake_op_graph_node_count,
    .graph_debug_dot = recap__fake_op_graph_debug_dot,
    .graph_inspect = recap__fake_op_graph_inspect,
    .capture_nodes = recap__fake_op_capture_nodes,
    .graph_nodes = recap__fake_op_graph_nodes,
    .graph_reads_check = recap__fake_op_graph_reads_check,
    .graph_reads = recap__fake_op_graph_reads,
    .patch_plan_create = recap__fake_op_patch_plan_create,
    .patch_plan_apply = recap__fake_op_patch_plan_apply,
    .patch_plan_sync = recap__fake_op_patch_plan_sync,
    .patch_plan_destroy = recap__fake_op_patch_plan_destroy,
    .patch_plan_find = recap__fake_op_patch_plan_find,
    .patch_plan_arg = recap__fake_op_patch_plan_arg,
    .patch_plan_write = recap__fake_op_patch_plan_write,
    .patch_plan_shape = recap__fake_op_patch_plan_shape,
    .patch_plan_set_shape = recap__fake_op_patch_plan_set_shape,
    .params_device_supported = recap__fake_op_params_device_supported,
    .patch_plan_device_node = recap__fake_op_patch_plan_device_node,
    .patch_plan_precede_only = recap__fake_op_patch_plan_precede_only,
    .params_apply_launch = recap__fake_op_params_apply_launch,
    .params_source_launch = recap__fake_op_params_source_launch,
    .graph_exec_update = recap__fake_op_graph_exec_update,
    .timing_event_create = recap__fake_op_timing_event_create,
    .event_elapsed = recap__fake_op_event_elapsed,
    .rng_write_state = recap__fake_op_rng_write_state,
    .rng_launch = recap__fake_op_rng_launch,
    .rng_advance = recap__fake_op_rng_advance,
    .cond_supported = recap__fake_op_cond_supported,
    .capture_pause = recap__fake_op_capture_pause,
    .capture_to_graph = recap__fake_op_capture_to_graph,
    .cond_handle_create = recap__fake_op_cond_handle_create,
    .cond_node_add = recap__fake_op_cond_node_add,
    .cond_launch = recap__fake_op_cond_launch,
    .graph_add_empty = recap__fake_op_graph_add_empty,
    .capture_add_child = recap__fake_op_capture_add_child,
    .vmm_granularity = recap__fake_op_vmm_granularity,
    .vmm_reserve = recap__fake_op_vmm_reserve,
    .vmm_release_range = recap__fake_op_vmm_release_range,
    .vmm_create = recap__fake_op_vmm_create,
    .vmm_release = recap__fake_op_vmm_release,
    .vmm_map = recap__fake_op_vmm_map,
    .vmm_unmap = recap__fake_op_vmm_unmap,
    .vmm_set_access = recap__fake_op_vmm_set_access,
    .host_alloc_pinned = recap__fake_op_host_alloc_pinned,
    .host_free_pinned = recap__fake_op_host_free_pinned,
};

/* ---- test controls ---------------------------------------------------------------------- */

void recap__fake_reset(const recap__fake_config_t *cfg) {
  pthread_mutex_lock(&recap__fake.lock);
  for (fake_stream_t *s = recap__fake.streams, *next; s; s = next) {
    next = s->next;
    recap__fake_stream_waits_free(s);
    free(s);
  }
  recap__fake.streams = NULL;
  for (struct recap__event *e = recap__fake.events, *next; e; e = next) {
    next = e->next;
    e->magic = FAKE_EVENT_DEAD;
    free(e);
  }
  recap__fake.events = NULL;
  recap__fake.live_events = 0;
  for (fake_capture_t *c = recap__fake.captures, *next; c; c = next) {
    next = c->next;
    if (!c->into_graph) recap__fake_graph_free(c->graph);
    free(c);
  }
  recap__fake.captures = NULL;
  recap__fake.next_capture_id = 0;
  /* Freeing a graph frees its bodies, which are listed too: free from the head, each time a
   * graph of its own (the owner of the bodies after it). */
  while (recap__fake.graphs) {
    fake_graph_t *g = recap__fake.graphs;
    while (g->owner) g = g->owner;
    recap__fake_graph_free(g);
  }
  recap__fake.graphs = NULL;
  recap__fake.live_graphs = 0;
  for (fake_exec_t *x = recap__fake.execs, *next; x; x = next) {
    next = x->next;
    recap__fake_nodes_free(&x->nodes);
    free(x);
  }
  recap__fake.execs = NULL;
  recap__fake.live_execs = 0;
  recap__fake.graph_launches = 0;
  recap__fake.graph_uploads = 0;
  for (size_t i = 0; i < recap__fake.blocks_cap; i++) free(recap__fake.blocks[i].ptr);
  free(recap__fake.blocks);
  recap__fake.blocks = NULL;
  recap__fake.blocks_cap = 0;
  recap__fake.blocks_count = 0;
  memset(recap__fake.in_use, 0, sizeof recap__fake.in_use);
  memset(recap__fake.exec_bytes, 0, sizeof recap__fake.exec_bytes);
  recap__fake_stream_waits_free(&recap__fake.legacy);
  memset(&recap__fake.legacy, 0, sizeof recap__fake.legacy);
  memset(recap__fake.calls, 0, sizeof recap__fake.calls);
  memset(recap__fake.fail_countdown, 0, sizeof recap__fake.fail_countdown);
  recap__fake.dot_driver_style = false;
  recap__fake.exec_patches = 0;
  recap__fake.template_patches = 0;
  recap__fake.exec_updates = 0;
  recap__fake.update_refusals = 0;
  recap__fake.eager_copies = 0;
  recap__fake.capture_queries = 0;
  recap__fake.refuse_armed = false;
  recap__fake.refuse_reason = RECAP_UPDATE_REASON_NONE;
  recap__fake.refuse_node = SIZE_MAX;
  recap__fake.updated_slowdown = 1.0;
  recap__fake.changed_after = 0;
  recap__fake.changed_slowdown = 1.0;
  recap__fake.strict_joins = false;
  recap__fake_cond_reset();
  recap__fake_applier_reset();
  recap__fake_vmm_reset();
  recap__fake_configure(cfg);
  pthread_mutex_unlock(&recap__fake.lock);

  /* Only the calling thread's per-thread state can be reset; other threads keep theirs. */
  recap__fake_tl_device = 0;
  recap__fake_tl_capture_mode = RECAP__CAPTURE_MODE_GLOBAL;

  recap__device_install(&recap__fake_ops);
  recap__fake_nccl_reset();
}

void recap__fake_counters(recap__fake_counters_t *out) {
  pthread_mutex_lock(&recap__fake.lock);
  memcpy(out->bytes_in_use, recap__fake.in_use, sizeof out->bytes_in_use);
  memcpy(out->exec_bytes, recap__fake.exec_bytes, sizeof out->exec_bytes);
  memcpy(out->calls, recap__fake.calls, sizeof out->calls);
  out->live_events = recap__fake.live_events;
  out->live_graphs = recap__fake.live_graphs;
  out->live_execs = recap__fake.live_execs;
  out->graph_launches = recap__fake.graph_launches;
  out->graph_uploads = recap__fake.graph_uploads;
  out->rng_state_writes = recap__fake.rng_state_writes;
  out->rng_launches = recap__fake.rng_launches;
  out->exec_patches = recap__fake.exec_patches;
  out->template_patches = recap__fake.template_patches;
  out->exec_updates = recap__fake.exec_updates;
  out->eager_copies = recap__fake.eager_copies;
  out->capture_queries = recap__fake.capture_queries;
  out->update_refusals = recap__fake.update_refusals;
  out->cond_nodes_run = recap__fake.cond_nodes_run;
  out->body_launches = recap__fake.body_launches;
  out->cond_kernels_run = recap__fake.cond_kernels_run;
  out->vmm_chunks_live = recap__fake.vmm_chunks_live;
  out->vmm_bytes_mapped = recap__fake.vmm_bytes_mapped;
  out->vmm_unmaps_unfinished = recap__fake.vmm_unmaps_unfinished;
  out->vmm_ranges_live = recap__fake.vmm_ranges_live;
  out->vmm_bytes_reserved = recap__fake.vmm_bytes_reserved;
  out->pinned_live = recap__fake.pinned_live;
  out->pinned_bytes = recap__fake.pinned_bytes;
  pthread_mutex_unlock(&recap__fake.lock);
}
