/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/region.h — loops and branches that run on the GPU inside a captured graph, as CUDA
 * conditional nodes, or as a host loop that reads each condition back. Kernels of your own set a
 * condition with recap_cond_set (recap/cond_device.cuh). See docs/regions.md.
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
  /* The body runs while the condition is nonzero, checked before every iteration (the first
   * included). One branch. */
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

/* A condition, opaque, passed by value to kernels, which set it (recap/cond_device.cuh, or the
 * ready kernels below). Valid in the graph whose capture created it, for the graph's life. */
typedef struct recap_cond {
  uint64_t handle;
  uint32_t *flag;
} recap_cond_t;

/* Create a condition for the one region opened next at this point of the capture on stream,
 * with the value `initial` each time a replay reaches this point. INVALID_USAGE: stream not
 * capturing into a recap graph. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_create(recap_cond_t *cond, unsigned initial,
                                                           recap_stream_t stream);

/* Open a region of `kind` on cond in the capture on stream, which then captures its first
 * branch. `branches`: 1 (WHILE, IF), 2 (IF_ELSE), up to RECAP_REGION_MAX_BRANCHES (SWITCH); 0:
 * that default. Join side streams first. Errors leave the capture unharmed (docs/regions.md). */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_begin(recap_region_kind_t kind,
                                                            recap_cond_t cond, unsigned branches,
                                                            recap_stream_t stream);
/* Close the branch being captured and begin capturing the next one of the innermost region
 * (IF_ELSE: the ELSE branch; SWITCH: branch n + 1). Same checks as recap_region_end. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_next_branch(recap_stream_t stream);
/* Close the innermost region open on stream; branches not captured run nothing. A body node
 * CUDA cannot run there is NOT_SUPPORTED and abandons the capture; INVALID_USAGE (no region open
 * here) leaves it unharmed. On an invalidated capture: CAPTURE_INVALIDATED, graph fresh. */
RECAP_NODISCARD RECAP_API recap_status_t recap_region_end(recap_stream_t stream);

/* ---- Ready kernels: each enqueues a kernel on stream that sets cond (made in that capture) --- */

/* cond = value. */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_set_value(recap_cond_t cond, unsigned value,
                                                              recap_stream_t stream);
/* cond = *value (device memory, read when the kernel runs). */
RECAP_NODISCARD RECAP_API recap_status_t recap_cond_set_from(recap_cond_t cond,
                                                             const uint32_t *value,
                                                             recap_stream_t stream);
/* *counter -= 1 (device memory), then cond = (*counter != 0): from a counter of N >= 1, a WHILE
 * body (condition 1 on entry) ending with it runs N times. */
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

/* A device scalar compared with a threshold, and an optional iteration cap. Start from
 * RECAP_COND_COMPARE_INIT (docs/api.md, "Versioned structs"). */
typedef struct recap_cond_compare {
  size_t size;              /* sizeof(recap_cond_compare_t), set by the INIT macro */
  const void *value;        /* device memory, of dtype; read when the kernel runs */
  recap_cond_dtype_t dtype; /* default RECAP_COND_F32 */
  recap_cond_op_t op;       /* default RECAP_COND_GT */
  double threshold;         /* converted to dtype (integers: truncated toward zero) */
  /* NULL, or a device counter of the iterations done, capped by max_iterations (below). */
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

/* A WHILE loop: `unroll` calls of step, then check, which sets the condition; it may run up to
 * unroll - 1 steps past a check after every step. Start from RECAP_LOOP_INIT (docs/api.md). */
typedef struct recap_loop {
  size_t size; /* sizeof(recap_loop_t), set by the INIT macro */
  /* Enqueue one step on stream; a failure stops the capture of the loop. */
  recap_status_t (*step)(void *ctx, recap_stream_t stream, unsigned copy);
  /* Enqueue what sets cond for the next iteration. */
  recap_status_t (*check)(void *ctx, recap_cond_t cond, recap_stream_t stream);
  void *ctx;
  unsigned unroll;  /* steps per check; default (and 0) 1 */
  unsigned initial; /* the condition on entry; default 1 (at least one iteration) */
} recap_loop_t;

#define RECAP_LOOP_INIT \
  { sizeof(recap_loop_t), NULL, NULL, NULL, 1, 1 }

/* Capture loop as a WHILE region in the capture on stream. A step or check that fails
 * abandons the capture (graph fresh) and its status is returned. */
RECAP_NODISCARD RECAP_API recap_status_t recap_loop_capture(const recap_loop_t *loop,
                                                            recap_stream_t stream);

/* ---- Which path ------------------------------------------------------------------------------ */

/* *supported = 1 when the current device's driver runs conditional nodes of all four kinds
 * (CUDA 12.8 or later), else 0. Errors: no device (RECAP_ERROR_NO_DEVICE). */
RECAP_NODISCARD RECAP_API recap_status_t recap_device_conditional_nodes(int *supported);

/* *on_device = 1 when the graph's regions run as conditional nodes, 0 as a host loop (decided at
 * capture_begin). RECAP_ERROR_INVALID_USAGE while the graph holds no capture and makes none. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_regions_on_device(recap_graph_t graph,
                                                                       int *on_device);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_REGION_H */
