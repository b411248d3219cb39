/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region_state.c — the lifetime of a graph's region state (region_internal.h) and the hooks
 * through which the graph sees its regions: the replay of a host-loop program (the replay's
 * launch), the graphs of that program in the graph's counts, and a capture paused or abandoned
 * between the graphs regions capture into.
 *
 * The state hangs on the graph's hooks: it is made with the capture's first condition or
 * region, and the graph's release of what it captured (reset, destroy, a failed capture, the
 * end of a recapture that replaced it) frees it with everything it holds: the host path's flags
 * (allocated from the graph's pool), the program's graphs and executables, and on the device
 * path the top-level graph while the capture of a body is abandoned.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "regions/region_internal.h"
#include "recap/alloc.h"

/* ------------------------------------------------------------------------------------------
 * The program
 * ---------------------------------------------------------------------------------------- */

recap__region_step_t *recap__region_block_append(recap__region_block_t *block) {
  if (block->count == block->capacity) {
    size_t capacity = block->capacity ? block->capacity * 2 : 4;
    recap__region_step_t *grown = recap__host_realloc(block->steps, capacity * sizeof *grown);
    if (!grown) {
      recap__error(RECAP_ERROR_OUT_OF_MEMORY, "regions: out of host memory");
      return NULL;
    }
    block->steps = grown;
    block->capacity = capacity;
  }
  recap__region_step_t *step = &block->steps[block->count++];
  memset(step, 0, sizeof *step);
  return step;
}

static void block_free(recap__region_block_t *block) {
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; i < block->count; i++) {
    recap__region_step_t *step = &block->steps[i];
    if (step->exec) dev->graph_exec_destroy(step->exec);
    if (step->graph) dev->graph_destroy(step->graph);
    if (step->bodies) {
      for (unsigned b = 0; b < step->branches; b++) block_free(&step->bodies[b]);
      recap__host_free(step->bodies);
    }
  }
  recap__host_free(block->steps);
  memset(block, 0, sizeof *block);
}

/* Instantiate every segment of block (of owner's capture) that holds work; an empty one goes
 * (replays skip it). *bytes grows by what each executable took of the device. */
static recap_status_t block_instantiate(recap_graph_t owner, recap__region_block_t *block,
                                        int64_t *bytes) {
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; i < block->count; i++) {
    recap__region_step_t *step = &block->steps[i];
    if (step->is_region) {
      for (unsigned b = 0; b < step->branches; b++)
        RECAP__CHECK(block_instantiate(owner, &step->bodies[b], bytes));
      continue;
    }
    if (!step->graph || step->exec) continue;
    size_t nodes = 0;
    RECAP__CHECK(dev->graph_node_count(step->graph, &nodes));
    if (nodes == 0) {
      dev->graph_destroy(step->graph);
      step->graph = NULL;
      continue;
    }
    int64_t taken = 0;
    RECAP__CHECK(recap__graph_instantiate_measured(owner, &step->exec, step->graph, &taken));
    if (taken > 0) *bytes += taken; /* not measured: the graph's own figure says so */
  }
  return RECAP_SUCCESS;
}

/* The flag's value, read back to the host: a copy and a wait for the stream. */
static recap_status_t read_flag(recap__regions_t *r, const uint32_t *flag, recap_stream_t stream,
                                unsigned *value) {
  const recap__device_ops_t *dev = recap__device();
  RECAP__CHECK(dev->memcpy_async(&r->word, flag, sizeof r->word, stream));
  RECAP__CHECK(dev->stream_synchronize(stream));
  *value = r->word;
  return RECAP_SUCCESS;
}

static recap_status_t block_run(recap__regions_t *r, const recap__region_block_t *block,
                                recap_stream_t stream) {
  const recap__device_ops_t *dev = recap__device();
  for (size_t i = 0; i < block->count; i++) {
    const recap__region_step_t *step = &block->steps[i];
    if (!step->is_region) {
      if (step->exec) RECAP__CHECK(dev->graph_launch(step->exec, stream));
      continue;
    }
    unsigned value;
    RECAP__CHECK(read_flag(r, step->flag, stream, &value));
    switch (step->kind) {
      case RECAP_REGION_WHILE:
        while (value) {
          RECAP__CHECK(block_run(r, &step->bodies[0], stream));
          RECAP__CHECK(read_flag(r, step->flag, stream, &value));
        }
        break;
      case RECAP_REGION_IF:
        if (value) RECAP__CHECK(block_run(r, &step->bodies[0], stream));
        break;
      case RECAP_REGION_IF_ELSE:
        RECAP__CHECK(block_run(r, &step->bodies[value ? 0 : 1], stream));
        break;
      case RECAP_REGION_SWITCH:
        if (value < step->branches) RECAP__CHECK(block_run(r, &step->bodies[value], stream));
        break;
    }
  }
  return RECAP_SUCCESS;
}

/* The replay's launch on the host path (the launch event): the host loop's program, then the
 * executable, which holds the work after the last region. */
static recap_status_t launch(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  recap__regions_t *r = ctx;
  if (r->host_loop) RECAP__CHECK(block_run(r, &r->top, stream));
  return recap__graph_launch_exec(graph, stream);
}

/* ------------------------------------------------------------------------------------------
 * Hooks
 * ---------------------------------------------------------------------------------------- */

static void release(void *ctx, recap_graph_t graph) {
  (void)graph;
  recap__regions_t *r = ctx;
  /* A capture that ended without handing its graph out, nor through
   * the capture_abandoned event: the top-level graph is still the region layer's. */
  if (r->top_graph) recap__device()->graph_destroy(r->top_graph);
  for (unsigned d = 0; d < r->depth; d++) recap__host_free(r->frames[d].bodies);
  block_free(&r->top);
  /* The flags came from the graph's pool during the capture; the pool is the graph's until it
   * releases it, which happens after this. */
  for (size_t i = 0; i < r->cond_count; i++)
    if (r->conds[i].cond.flag) (void)recap_free(r->conds[i].cond.flag);
  recap__host_free(r->conds);
  recap__host_free(r);
}

recap_status_t recap__regions_hold_unused(recap__regions_t *r, uint64_t context,
                                          recap_cuda_graph_t graph) {
  for (size_t i = 0; i < r->cond_count; i++) {
    recap__region_cond_t *c = &r->conds[i];
    if (c->used || c->held || c->context != context || !c->cond.handle) continue;
    recap__graph_node_t node;
    recap_cuda_graph_t body;
    RECAP__CHECK(recap__device()->cond_node_add(graph, NULL, 0, RECAP__COND_IF, c->cond.handle, 1,
                                                &node, &body));
    c->held = true;
    RECAP__CHECK(recap__device()->graph_add_empty(body));
  }
  return RECAP_SUCCESS;
}

static recap_status_t captured(void *ctx, recap_graph_t graph, recap__captured_t *what) {
  (void)what;
  recap__regions_t *r = ctx;
  if (r->on_device) return RECAP_SUCCESS;
  return block_instantiate(graph, &r->top, &r->exec_bytes);
}

static void capture_ended(void *ctx, recap_graph_t graph, bool succeeded) {
  (void)graph;
  recap__regions_t *r = ctx;
  /* The end handed the top-level graph out as the template: the graph owns it now. */
  if (succeeded) r->top_graph = NULL;
}

/* The capture's stream is paused between two graphs the regions capture into. */
static bool capture_paused(void *ctx, recap_graph_t graph) {
  (void)graph;
  return ((recap__regions_t *)ctx)->paused;
}

static recap_cuda_graph_t capture_abandoned(void *ctx, recap_graph_t graph,
                                            recap_cuda_graph_t ended) {
  (void)graph;
  recap__regions_t *r = ctx;
  if (!r->top_graph) return ended;
  /* Device path: inside a body, what the capture ended is a body, owned by its conditional
   * node inside the top-level graph; at the top level, the top-level graph itself; and a
   * failed end handed nothing back. The graph to destroy is the top-level one in each case. */
  recap_cuda_graph_t top = r->top_graph;
  r->top_graph = NULL;
  for (unsigned d = 0; d < r->depth; d++) r->frames[d].parent_graph = NULL;
  return top;
}

static size_t block_nodes(const recap__region_block_t *block) {
  size_t total = 0;
  for (size_t i = 0; i < block->count; i++) {
    const recap__region_step_t *step = &block->steps[i];
    size_t nodes = 0;
    if (step->graph && recap__device()->graph_node_count(step->graph, &nodes) == RECAP_SUCCESS)
      total += nodes;
    for (unsigned b = 0; step->is_region && b < step->branches; b++)
      total += block_nodes(&step->bodies[b]);
  }
  return total;
}

/* Host path: once a region was captured, the replay runs the host loop's program before the
 * executable, and the graph counts its graphs' nodes and executables' bytes. */
static bool own_graphs(void *ctx, recap_graph_t graph, size_t *nodes, int64_t *exec_bytes) {
  (void)graph;
  recap__regions_t *r = ctx;
  if (!r->host_loop) return false;
  *nodes += block_nodes(&r->top);
  *exec_bytes += r->exec_bytes;
  return true;
}

/* The device path's hooks, and the host path's, which supply the replay's launch: a graph whose
 * regions run on the device replays as any other. */
static const recap__graph_hooks_t device_hooks = {.name = "regions",
                                                  .embed_refusal =
                                                      "conditional nodes (regions on the "
                                                      "device), which CUDA does not allow "
                                                      "inside a child graph node",
                                                  .release = release,
                                                  .captured = captured,
                                                  .capture_ended = capture_ended,
                                                  .capture_paused = capture_paused,
                                                  .capture_abandoned = capture_abandoned};
static const recap__graph_hooks_t host_hooks = {.name = "regions on the host path",
                                                .release = release,
                                                .captured = captured,
                                                .capture_ended = capture_ended,
                                                .capture_paused = capture_paused,
                                                .capture_abandoned = capture_abandoned,
                                                .launch = launch,
                                                .own_graphs = own_graphs};

recap_status_t recap__regions_attach(recap_graph_t graph, recap__regions_t *r) {
  return recap__graph_add_hook(graph, r->on_device ? &device_hooks : &host_hooks, r);
}

/* The host path's marker: its context is this byte, nothing to free. The device path, which
 * every driver of CUDA 12.8 or later takes by default, leaves no mark, so that its captures
 * carry no hook at all. */
static const char host_path;
static const recap__graph_hooks_t host_path_hooks = {0};

recap_status_t recap__regions_path_chosen(recap_graph_t graph, bool on_device) {
  if (on_device) return RECAP_SUCCESS;
  return recap__graph_add_hook(graph, &host_path_hooks, (void *)&host_path);
}

bool recap__regions_path_on_device(recap_graph_t graph) {
  return recap__graph_hook_ctx(graph, &host_path_hooks) == NULL;
}

recap__regions_t *recap__regions_attached(recap_graph_t graph) {
  recap__regions_t *r = recap__graph_hook_ctx(graph, &device_hooks);
  return r ? r : recap__graph_hook_ctx(graph, &host_hooks);
}

unsigned recap__graph_region_depth(recap_graph_t graph) {
  recap__regions_t *r = graph ? recap__regions_attached(graph) : NULL;
  return r ? r->depth : 0;
}
