/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conditions.c — the conditions of regions (recap/region.h): recap_cond_create, and the ready
 * condition kernels that set a condition inside the capture (a value, a device word, a
 * countdown, a comparison).
 *
 * A condition belongs to the capture under way on its stream. On the device path it is a
 * conditional handle of the graph that will hold the region's node (set by the driver at every
 * launch at the top level, by a kernel inside a body); on the host path it is a device word
 * from the graph's pool that the host loop reads back after each segment. Either way the ready
 * kernels are one-thread launches through the seam (device/cond_launch.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "device/cond_launch.h"
#include "recap/alloc.h"
#include "regions/region_internal.h"

/* ------------------------------------------------------------------------------------------
 * Conditions
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_cond_create(recap_cond_t *cond, unsigned initial, recap_stream_t stream) {
  static const char fn[] = "recap_cond_create";
  RECAP__ARG(cond != NULL, "recap_cond_create: cond is NULL");
  memset(cond, 0, sizeof *cond);
  recap_graph_t g;
  RECAP__CHECK(recap__regions_find_graph(stream, fn, &g));
  recap__regions_t *r = recap__regions_get(g);
  if (!r) return recap_last_status();
  if (r->cond_count == r->cond_capacity) {
    size_t capacity = r->cond_capacity ? r->cond_capacity * 2 : 8;
    recap__region_cond_t *grown = recap__host_realloc(r->conds, capacity * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    r->conds = grown;
    r->cond_capacity = capacity;
  }
  const recap__device_ops_t *dev = recap__device();
  recap_cond_t made = {0, NULL};
  if (r->on_device) {
    /* The handle belongs to the graph that will hold the region's node. At the top level the
     * driver sets it at every launch; inside a body a kernel sets it each time the body
     * reaches this point. */
    recap_cuda_graph_t target;
    if (r->depth == 0) {
      recap__graph_node_t *nodes = NULL;
      size_t count = 0;
      RECAP__CHECK(dev->capture_nodes(g->capture_stream, &target, &nodes, &count));
      free(nodes);
    } else {
      const recap__region_frame_t *f = &r->frames[r->depth - 1];
      target = f->bodies[f->branch];
    }
    RECAP__CHECK(dev->cond_handle_create(target, initial, r->depth == 0, &made.handle));
  } else {
    void *flag = NULL;
    RECAP__CHECK(recap_malloc(&flag, sizeof(uint32_t), stream));
    made.flag = flag;
  }
  if (!r->on_device || r->depth > 0) {
    recap__cond_launch_t launch;
    memset(&launch, 0, sizeof launch);
    launch.kind = RECAP__COND_SET_VALUE;
    launch.cond = made;
    launch.stream = stream;
    launch.value = initial;
    recap_status_t s = dev->cond_launch(&launch);
    if (s != RECAP_SUCCESS) {
      if (made.flag) {
        recap__saved_error_t cause;
        recap__error_save(&cause);
        (void)recap_free(made.flag);
        recap__error_restore(&cause);
      }
      return s;
    }
  }
  r->conds[r->cond_count++] =
      (recap__region_cond_t){.cond = made, .context = r->context, .used = false, .held = false};
  *cond = made;
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Ready kernels
 * ---------------------------------------------------------------------------------------- */

/* cond valid in the capture under way on stream: the launch's common part. */
static recap_status_t ready_launch(recap_cond_t cond, recap_stream_t stream, const char *function,
                                   recap__cond_launch_t *launch) {
  recap_graph_t g;
  RECAP__CHECK(recap__regions_find_graph(stream, function, &g));
  if (!recap__regions_find_cond(recap__regions_attached(g), cond))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: cond was not made by recap_cond_create in the capture under way on "
                        "stream %p",
                        function, (void *)stream);
  launch->cond = cond;
  launch->stream = stream;
  return recap__device()->cond_launch(launch);
}

recap_status_t recap_cond_set_value(recap_cond_t cond, unsigned value, recap_stream_t stream) {
  recap__cond_launch_t launch;
  memset(&launch, 0, sizeof launch);
  launch.kind = RECAP__COND_SET_VALUE;
  launch.value = value;
  return ready_launch(cond, stream, "recap_cond_set_value", &launch);
}

recap_status_t recap_cond_set_from(recap_cond_t cond, const uint32_t *value,
                                   recap_stream_t stream) {
  RECAP__ARG(value != NULL, "recap_cond_set_from: value is NULL");
  recap__cond_launch_t launch;
  memset(&launch, 0, sizeof launch);
  launch.kind = RECAP__COND_SET_FROM;
  launch.from = value;
  return ready_launch(cond, stream, "recap_cond_set_from", &launch);
}

recap_status_t recap_cond_countdown(recap_cond_t cond, uint32_t *counter, recap_stream_t stream) {
  RECAP__ARG(counter != NULL, "recap_cond_countdown: counter is NULL");
  recap__cond_launch_t launch;
  memset(&launch, 0, sizeof launch);
  launch.kind = RECAP__COND_COUNTDOWN;
  launch.counter = counter;
  return ready_launch(cond, stream, "recap_cond_countdown", &launch);
}

/* The threshold in the operand's type; integers truncated toward zero, and refused out of
 * their range (the conversion would be undefined). */
static recap_status_t convert_threshold(const recap_cond_compare_t *c,
                                        recap__cond_launch_t *launch) {
  static const char fn[] = "recap_cond_compare";
  double t = c->threshold, whole = trunc(t);
  switch (c->dtype) {
    case RECAP_COND_F32: launch->threshold.f32 = (float)t; return RECAP_SUCCESS;
    case RECAP_COND_F64: launch->threshold.f64 = t; return RECAP_SUCCESS;
    case RECAP_COND_I32:
      RECAP__ARG(whole >= -2147483648.0 && whole <= 2147483647.0,
                 "%s: compare->threshold %g does not fit RECAP_COND_I32", fn, t);
      launch->threshold.i32 = (int32_t)whole;
      return RECAP_SUCCESS;
    case RECAP_COND_U32:
      RECAP__ARG(whole >= 0.0 && whole <= 4294967295.0,
                 "%s: compare->threshold %g does not fit RECAP_COND_U32", fn, t);
      launch->threshold.u32 = (uint32_t)whole;
      return RECAP_SUCCESS;
    case RECAP_COND_I64:
      RECAP__ARG(whole >= -9223372036854775808.0 && whole < 9223372036854775808.0,
                 "%s: compare->threshold %g does not fit RECAP_COND_I64", fn, t);
      launch->threshold.i64 = (int64_t)whole;
      return RECAP_SUCCESS;
  }
  return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                      "%s: compare->dtype %d is not a recap_cond_dtype_t", fn, (int)c->dtype);
}

recap_status_t recap_cond_compare(recap_cond_t cond, const recap_cond_compare_t *compare,
                                  recap_stream_t stream) {
  static const char fn[] = "recap_cond_compare";
  RECAP__ARG(compare != NULL, "%s: compare is NULL", fn);
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  RECAP__CHECK(RECAP__OPTIONS_COPY(&c, compare, recap_cond_compare_t, max_iterations, fn,
                                   "RECAP_COND_COMPARE_INIT"));
  RECAP__ARG(c.value != NULL, "%s: compare->value is NULL (give the device scalar to compare)", fn);
  RECAP__ARG(c.op >= RECAP_COND_GT && c.op <= RECAP_COND_NE,
             "%s: compare->op %d is not a recap_cond_op_t", fn, (int)c.op);
  recap__cond_launch_t launch;
  memset(&launch, 0, sizeof launch);
  launch.kind = RECAP__COND_COMPARE;
  launch.operand = c.value;
  launch.dtype = c.dtype;
  launch.op = c.op;
  launch.counter = c.iterations;
  launch.max = c.max_iterations;
  RECAP__CHECK(convert_threshold(&c, &launch));
  return ready_launch(cond, stream, fn, &launch);
}
