/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region_internal.h — the state of a graph's regions (recap/region.h), shared by regions.c (the
 * public calls of regions, which build it during a capture), conditions.c (conditions and the
 * ready kernels) and region_state.c (its lifetime, and the hooks through which the graph sees
 * it: the host loop's replay, its graphs, a capture paused or abandoned).
 */
#ifndef RECAP_REGION_INTERNAL_H
#define RECAP_REGION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "graph/graph_internal.h"
#include "recap/region.h"

/* The host loop's program: a block is a list of steps run in order; a step is a segment (a
 * graph captured between regions, instantiated at capture end) or a region (its kind, its flag
 * and one block per branch). */
typedef struct recap__region_step recap__region_step_t;
typedef struct recap__region_block {
  recap__region_step_t *steps;
  size_t count, capacity;
} recap__region_block_t;

struct recap__region_step {
  bool is_region;
  recap_cuda_graph_t graph;      /* segment: the captured graph (NULL once found empty) */
  recap_cuda_graph_exec_t exec;  /* segment: its executable, made by the captured hook */
  recap_region_kind_t kind;      /* region */
  uint32_t *flag;                /* region: the condition's device word */
  unsigned branches;             /* region */
  recap__region_block_t *bodies; /* region: branches blocks */
};

/* A condition made by recap_cond_create in this capture. `context` names the graph or body it
 * was created in (0: the graph's top level); a region may use it there, once. */
typedef struct recap__region_cond {
  recap_cond_t cond;
  uint64_t context;
  bool used;
  bool held; /* no region used it, and an empty IF node holds its handle (device path) */
} recap__region_cond_t;

/* An open region. */
typedef struct recap__region_frame {
  recap_region_kind_t kind;
  unsigned branches, branch; /* the branch being captured */
  recap_stream_t stream;     /* where it was opened */
  uint64_t parent_context;   /* the context to go back to at its end */
  /* Device path: the graph the region's conditional node was added to (resumed at the end),
   * the node, and its bodies (owned by the node). */
  recap_cuda_graph_t parent_graph;
  recap__graph_node_t node;
  recap_cuda_graph_t *bodies;
  /* Host path: the block the region's step sits in, and the step's index there. */
  recap__region_block_t *parent_block;
  size_t step;
} recap__region_frame_t;

typedef struct recap__regions {
  recap_graph_t graph;
  bool on_device; /* the path of the capture that made this state */
  recap__region_cond_t *conds;
  size_t cond_count, cond_capacity;
  uint64_t context, next_context; /* the context being captured; the last one handed out */
  recap__region_frame_t frames[RECAP_REGION_MAX_DEPTH];
  unsigned depth;
  /* Device path, once a region opened at the top level: the capture's graph, which the first
   * pause handed to the region layer and every resumption captures into again. Ending the
   * capture hands it to the graph (capture_ended clears this); a capture that fails or is
   * abandoned leaves it to the region layer to destroy (the capture_abandoned hook). */
  recap_cuda_graph_t top_graph;
  /* Between a pause of the stream's capture and its resumption the stream does not capture:
   * the abandon paths must not take that for misuse. */
  bool paused;
  /* Host path: the program's top-level steps (the segment after the last region is the graph's
   * own template), the block being captured into, and whether a region was captured. */
  recap__region_block_t top;
  recap__region_block_t *current;
  bool host_loop;
  int64_t exec_bytes; /* what the program's executables took at instantiation (measured) */
  uint32_t word;      /* where a replay reads a flag back */
} recap__regions_t;

/* Attach r (made for graph's capture under way, on_device set) through the hooks that tie it
 * to the capture: its release frees it, and on the host path the replay's launch runs the host
 * loop. The state attached to the capture graph holds, or NULL. */
recap_status_t recap__regions_attach(recap_graph_t graph, recap__regions_t *r);
recap__regions_t *recap__regions_attached(recap_graph_t graph);

/* For src/capture/ (regions.c): the path a capture with opts takes (*on_device), decided before
 * it begins: RECAP_REGIONS_DEVICE where the driver has no conditional nodes is
 * RECAP_ERROR_NOT_SUPPORTED; and the refusal of capture_end while a region is open. */
recap_status_t recap__regions_decide(const recap_capture_options_t *opts, const char *function,
                                     bool *on_device);
recap_status_t recap__regions_check_end(recap_graph_t graph);

/* The path decided, kept with the capture that has just begun on graph (region_state.c): a hook
 * with no events, attached for the host path only (the default device path costs nothing), so
 * that it goes with the capture (a reset, a failed capture) and a recapture sets it aside with
 * the rest of the capture it replaces. Fails only for host memory.
 * recap__regions_path_on_device: the path of the capture graph holds or is making. */
recap_status_t recap__regions_path_chosen(recap_graph_t graph, bool on_device);
bool recap__regions_path_on_device(recap_graph_t graph);

/* Device path: give every condition made in `context` (0: the graph's top level) that no region
 * used a conditional node of its own in graph, the graph its handle was made on: an IF with an
 * empty body, which never runs anything. CUDA refuses to instantiate a graph holding a handle no
 * node holds (measured on an H200, driver 580: cudaErrorInvalidValue), and a condition may be
 * left unused by a refused region_begin or by the caller. */
recap_status_t recap__regions_hold_unused(recap__regions_t *r, uint64_t context,
                                          recap_cuda_graph_t graph);

/* How many regions are open in the capture under way on graph (0: none, or no capture); the
 * NCCL wrappers read it to refuse collectives inside region bodies. */
unsigned recap__graph_region_depth(recap_graph_t graph);

/* Shared by regions.c and conditions.c. The graph capturing on stream (RECAP_ERROR_INVALID_USAGE
 * naming function when none does; a capture CUDA invalidated is abandoned first, and says so).
 * The regions' state of graph's capture under way, made and attached on first use (NULL with
 * the error set when host memory runs out). The condition cond in r (NULL: not made in this
 * capture). */
recap_status_t recap__regions_find_graph(recap_stream_t stream, const char *function,
                                         recap_graph_t *graph);
recap__regions_t *recap__regions_get(recap_graph_t graph);
recap__region_cond_t *recap__regions_find_cond(recap__regions_t *r, recap_cond_t cond);

/* A block grown by one step (NULL without host memory, the error set). */
recap__region_step_t *recap__region_block_append(recap__region_block_t *block);

#endif /* RECAP_REGION_INTERNAL_H */
