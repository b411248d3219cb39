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
 * Where the driver has no conditional nodes (CUDA 12.8), or when the capture option `regions`
 * asks for it, the same calls run as a host loop that reads each condition back: the same
 * results, at the cost of a copy and a synchronisation per decision. See docs/regions.md.
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

/* A condition, passed by value to kernels (from C too), which set it with recap_cond_set
 * (recap/cond_device.cuh) or with the ready kernels below. Valid in the graph whose capture
 * created it, for the graph's life. Opaque. */
typedef struct recap_cond {
  uint64_t handle;
  uint32_t *flag;
} recap_cond_t;

/* Create a condition for the region opened next at this point of the capture under way on
 * stream (one condition serves one region, opened where it was created). `initial` is its value
 * each time the capture reaches this point, until a kernel sets it. Errors: stream not
 * capturing into a recap graph (RECAP_ERROR_INVALID_USAGE), the driver's failures. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_create(recap_cond_t *cond, unsigned initial,
                                                           recap_stream_t stream);

/* Open a region of `kind` on cond in the capture under way on stream, which then captures its
 * first branch. `branches`: 1 for WHILE and IF, 2 for IF_ELSE, 1 to RECAP_REGION_MAX_BRANCHES
 * for SWITCH; 0 means that default (SWITCH has none). Join side streams back into stream first.
 * Errors leave the capture unharmed: INVALID_USAGE or INVALID_ARGUMENT (not capturing, a
 * condition not made here or used, a bad kind or count, too deep), NOT_SUPPORTED (host-loop path
 * with rebind or check_input_liveness). docs/regions.md, "Errors that leave the capture
 * unharmed". */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_begin(recap_region_kind_t kind,
                                                            recap_cond_t cond, unsigned branches,
                                                            recap_stream_t stream);
/* Close the branch being captured and begin capturing the next one of the innermost region
 * (IF_ELSE: the ELSE branch; SWITCH: branch n + 1). Same checks as recap_region_end. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_next_branch(recap_stream_t stream);
/* Close the innermost region open on stream; the capture goes on after it. Branches not
 * captured run nothing. The body may hold kernels, copies, memsets, empty nodes, child graphs
 * and regions only: another node is RECAP_ERROR_NOT_SUPPORTED naming it, and the capture is
 * abandoned (docs/regions.md, "What a body may hold"). INVALID_USAGE, capture unharmed: not
 * capturing, no region open, the region opened on another stream. On a capture CUDA
 * invalidated, this and every region call abandon it: RECAP_ERROR_CAPTURE_INVALIDATED, the
 * graph as before the capture began. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_end(recap_stream_t stream);

/* ------------------------------------------------------------------------------------------
 * Ready kernels: set a condition on the device without writing a kernel. Each enqueues one
 * small kernel on stream (captured like any other); cond must be valid in the graph being
 * captured there (a condition created in it).
 * ---------------------------------------------------------------------------------------- */

/* cond = value. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_set_value(recap_cond_t cond, unsigned value,
                                                              recap_stream_t stream);
/* cond = *value (device memory, read when the kernel runs). */
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

/* ---- Loops, checked every `unroll` steps ----------------------------------------------------- */

/* A WHILE loop over a step, written once: the body is `unroll` calls of step, then one call of
 * check, which enqueues what sets the condition. Checking every U steps costs about one check
 * per U steps; the loop may run up to U - 1 steps past where a check after every step would
 * stop. Start from RECAP_LOOP_INIT (options rule, recap/graph.h). */
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

/* ---- Which path ------------------------------------------------------------------------------ */

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
