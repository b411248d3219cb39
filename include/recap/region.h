/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/region.h — loops and branches that run on the GPU inside a captured graph.
 *
 * During a recap capture, open a region on the capturing stream, enqueue its body on that same
 * stream as usual (kernels, cuBLAS, recap_malloc, random numbers, nested regions), and close it.
 * The body is captured into a body graph of a CUDA conditional node, so that a replay decides
 * and loops on the device without coming back to the host:
 *
 *     recap_cond_t more;
 *     recap_cond_create(&more, 1, stream);             // the condition, 1 on entry
 *     recap_region_begin(RECAP_REGION_WHILE, more, 1, stream);
 *     step(stream);                                     // the body: any captured work
 *     recap_cond_compare_t c = RECAP_COND_COMPARE_INIT; // more = residual > tol && ++it < max
 *     c.value = residual; c.threshold = 1e-6; c.iterations = it; c.max_iterations = 1000;
 *     recap_cond_compare(more, &c, stream);
 *     recap_region_end(stream);
 *
 * Kernels of your own set a condition with recap_cond_set (recap/cond_device.cuh).
 *
 * Where the driver has no conditional nodes, or when the capture asks for it (capture option
 * `regions`, recap/graph.h), the same calls capture the work between and inside regions as
 * separate graphs, and a replay runs them as a host loop that reads the condition back after
 * each body: the same results, at the cost of a device-to-host copy and a synchronisation per
 * decision. recap_graph_regions_on_device says which path a graph takes. See docs/regions.md.
 */
#ifndef RECAP_REGION_H
#define RECAP_REGION_H

#include "core.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a region does with its condition. */
typedef enum recap_region_kind {
  /* The body runs while the condition is nonzero, checked before every iteration (also before
   * the first: a condition of 0 on entry runs no iteration). One branch. */
  RECAP_REGION_WHILE = 0,
  /* The body runs once when the condition is nonzero. One branch. */
  RECAP_REGION_IF = 1,
  /* Branch 0 runs when the condition is nonzero, branch 1 when it is zero. Two branches. */
  RECAP_REGION_IF_ELSE = 2,
  /* Branch n runs when the condition is n; a condition of `branches` or more runs none. */
  RECAP_REGION_SWITCH = 3
} recap_region_kind_t;

/* "while", "if", "if_else", "switch"; "unknown" out of range. */
RECAP_API const char *recap_region_kind_name(recap_region_kind_t kind);

/* SWITCH branches at most, and regions open at once (nested) at most, per capture. */
enum { RECAP_REGION_MAX_BRANCHES = 1024, RECAP_REGION_MAX_DEPTH = 32 };

/* A condition: a small value passed by value to kernels (from C too), which set it on the device
 * with recap_cond_set (recap/cond_device.cuh) or with the ready kernels below. Valid in the
 * graph whose capture created it, for the graph's life. On the device path `handle` is a CUDA
 * conditional handle and `flag` NULL; on the host-loop path `handle` is 0 and `flag` the device
 * word the condition lives in. Treat both as opaque. */
typedef struct recap_cond {
  uint64_t handle;
  uint32_t *flag;
} recap_cond_t;

/* Create a condition for a region to be opened next at this point of the capture under way on
 * stream (in the same graph or body: the region that uses it must be opened where the condition
 * was created, and a condition serves one region). `initial` is its value every time the
 * capture reaches this point (the top level of a graph: at every replay; inside a body: each
 * time the body runs), until a kernel sets it. A condition that no region uses in the end gets
 * an IF node of its own with a body that does nothing (CUDA refuses to instantiate a graph holding
 * a conditional handle that no node holds). Errors: stream not capturing into a recap graph
 * (RECAP_ERROR_INVALID_USAGE), the driver's failures. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_create(recap_cond_t *cond, unsigned initial,
                                                           recap_stream_t stream);

/* Open a region of `kind` on cond, on the stream of the capture under way, which then captures
 * the region's first branch. `branches`: 1 for WHILE and IF, 2 for IF_ELSE, 1 to
 * RECAP_REGION_MAX_BRANCHES for SWITCH; 0 means that default (SWITCH has none: 0 is refused).
 * Side streams forked from the capture must be joined back into stream first (CUDA ends the
 * capture otherwise: RECAP_ERROR_CAPTURE_INVALIDATED, and the graph is fresh again). Errors:
 * stream not capturing into a recap graph, a condition not created at this point of this
 * capture or already used, a bad kind or branch count, too deep a nesting: each
 * RECAP_ERROR_INVALID_ARGUMENT or RECAP_ERROR_INVALID_USAGE with the capture unharmed; on the
 * host-loop path, a capture with rebind or check_input_liveness (RECAP_ERROR_NOT_SUPPORTED, the
 * capture unharmed). Inside a body on the host-loop path, the part of the body captured before
 * this region is checked here as recap_region_end checks a body. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_begin(recap_region_kind_t kind,
                                                            recap_cond_t cond, unsigned branches,
                                                            recap_stream_t stream);
/* Close the branch being captured and begin capturing the next one of the innermost region
 * (IF_ELSE: the ELSE branch; SWITCH: branch n + 1). Same checks as recap_region_end. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_next_branch(recap_stream_t stream);
/* Close the innermost region open on stream; the capture goes on after it. Branches not
 * captured (an IF_ELSE closed in its first branch, a SWITCH before its last) run nothing (recap
 * gives every body that holds no node an empty node: CUDA refuses empty bodies). The
 * body is checked before anything else happens: CUDA runs kernels, copies, memsets, empty
 * nodes, child graphs and regions inside a body, and nothing else (no event record or wait
 * nodes, such as collectives and external events put there; no memory alloc or free nodes,
 * such as cudaMallocAsync; no host nodes). A body holding another kind of node is
 * RECAP_ERROR_NOT_SUPPORTED with a message naming the node (index in the body, kind, kernel
 * name where there is one) and the region; the capture is then abandoned (the graph is fresh
 * again, as after an invalidated capture). Errors that leave the capture unharmed: stream not
 * capturing into a recap graph, no region open (RECAP_ERROR_INVALID_USAGE), the innermost
 * region opened on another stream (RECAP_ERROR_INVALID_USAGE naming both streams), and a failure
 * of what recap appends to every body before it ends (the random-number layer's advance of a
 * generator's offset): the region stays open, and closing it again retries. A child graph node
 * in a body (a graph launched inside it) counts as allowed; what it holds is checked by CUDA
 * when the graph is instantiated. A capture that CUDA invalidated (a call made during it that
 * capture does not permit) cannot go on: this call, and every other region call on a stream of
 * it (recap_cond_create, recap_region_begin, recap_region_next_branch, the ready kernels,
 * recap_loop_capture),
 * abandons it and returns RECAP_ERROR_CAPTURE_INVALIDATED naming the call and the regions open;
 * the graph is then as before the capture began (fresh, or holding the capture a recapture was
 * to replace), with no pool reference of the capture left, and the stream can capture again.
 * recap_graph_capture_end on such a capture reports the invalidation the same way, whatever
 * regions are open. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_end(recap_stream_t stream);

/* ------------------------------------------------------------------------------------------
 * Ready kernels: set a condition on the device without writing a kernel. Each enqueues one
 * small kernel on stream (captured like any other); cond must be valid in the graph being
 * captured there (a condition created in it).
 * ---------------------------------------------------------------------------------------- */

/* cond = value. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_set_value(recap_cond_t cond, unsigned value,
                                                              recap_stream_t stream);
/* cond = *value (device memory, read when the kernel runs): a SWITCH index computed on the
 * device, say. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_set_from(recap_cond_t cond,
                                                             const uint32_t *value,
                                                             recap_stream_t stream);
/* *counter -= 1 (device memory), then cond = (*counter != 0): with the counter set to N before
 * a WHILE region whose condition starts at 1, the body runs N times (N >= 1). */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_countdown(recap_cond_t cond, uint32_t *counter,
                                                              recap_stream_t stream);

typedef enum recap_cond_op {
  RECAP_COND_GT = 0, /* value >  threshold */
  RECAP_COND_GE = 1, /* value >= threshold */
  RECAP_COND_LT = 2, /* value <  threshold */
  RECAP_COND_LE = 3, /* value <= threshold */
  RECAP_COND_EQ = 4, /* value == threshold */
  RECAP_COND_NE = 5  /* value != threshold */
} recap_cond_op_t;

typedef enum recap_cond_dtype {
  RECAP_COND_F32 = 0,
  RECAP_COND_F64 = 1,
  RECAP_COND_I32 = 2,
  RECAP_COND_U32 = 3,
  RECAP_COND_I64 = 4
} recap_cond_dtype_t;

/* A comparison of a device scalar with a threshold, and an optional iteration cap. Start from
 * RECAP_COND_COMPARE_INIT (the options rule of recap/graph.h applies to `size`). */
typedef struct recap_cond_compare {
  size_t size;              /* sizeof(recap_cond_compare_t), set by the INIT macro */
  const void *value;        /* device memory, of dtype; read when the kernel runs */
  recap_cond_dtype_t dtype; /* default RECAP_COND_F32 */
  recap_cond_op_t op;       /* default RECAP_COND_GT */
  double threshold;         /* converted to dtype (integers: truncated toward zero) */
  /* NULL, or a device counter of the iterations done: the kernel adds 1 to it and the
   * condition also needs *iterations < max_iterations (so with the counter at 0 on entry and
   * the kernel at the end of a WHILE body, at most max_iterations iterations run). */
  uint32_t *iterations;
  uint32_t max_iterations;
} recap_cond_compare_t;

#define RECAP_COND_COMPARE_INIT \
  { sizeof(recap_cond_compare_t), NULL, RECAP_COND_F32, RECAP_COND_GT, 0.0, NULL, 0 }

/* cond = (*value op threshold) && (iterations == NULL || ++*iterations < max_iterations). */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_compare(recap_cond_t cond,
                                                            const recap_cond_compare_t *compare,
                                                            recap_stream_t stream);

/* ------------------------------------------------------------------------------------------
 * Loops, checked every `unroll` steps
 * ---------------------------------------------------------------------------------------- */

/* A WHILE loop over a step, written once: the body is `unroll` calls of step followed by one
 * call of check, which enqueues what sets the condition (a ready kernel, say). A WHILE node
 * costs mostly a fixed overhead per iteration, so checking every U steps runs U steps for about
 * the price of one check; the result is that of a host loop that checks every U steps (the
 * loop may run up to U - 1 steps past the point where a check after every step would stop).
 * Start from RECAP_LOOP_INIT (the options rule of recap/graph.h applies to `size`). */
typedef struct recap_loop {
  size_t size; /* sizeof(recap_loop_t), set by the INIT macro */
  /* Enqueue one step on stream; a status other than RECAP_SUCCESS stops the capture of the
   * loop. */
  recap_status_t (*step)(void *ctx, recap_stream_t stream, unsigned copy);
  /* Enqueue what sets cond for the next iteration. */
  recap_status_t (*check)(void *ctx, recap_cond_t cond, recap_stream_t stream);
  void *ctx;
  unsigned unroll;  /* steps per check; default (and 0) 1 */
  unsigned initial; /* the condition on entry; default 1 (at least one iteration) */
} recap_loop_t;

#define RECAP_LOOP_INIT \
  { sizeof(recap_loop_t), NULL, NULL, NULL, 1, 1 }

/* Capture loop as a WHILE region at this point of the capture under way on stream. A step or
 * check that fails abandons the capture (the graph is fresh again) and its status is returned;
 * errors of the region calls are theirs. */
RECAP_NODISCARD RECAP_API recap_status_t recap_loop_capture(const recap_loop_t *loop,
                                                            recap_stream_t stream);

/* ------------------------------------------------------------------------------------------
 * Which path
 * ---------------------------------------------------------------------------------------- */

/* *supported = 1 when the current device's driver runs conditional nodes of all four kinds
 * (CUDA 12.8 or later), else 0. Errors: no device (RECAP_ERROR_NO_DEVICE). */
RECAP_NODISCARD RECAP_API recap_status_t recap_device_conditional_nodes(int *supported);

/* *on_device = 1 when the graph's regions run as conditional nodes, 0 when they run as a host
 * loop; decided at capture_begin from the capture option `regions`. RECAP_ERROR_INVALID_USAGE
 * before the first capture and after a reset. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_regions_on_device(recap_graph_t graph,
                                                                       int *on_device);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_REGION_H */
