/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cond_launch.h — how the region layer asks the device seam to run its condition kernels (the
 * ready kernels of recap/region.h). One kernel of one thread each: they set a condition from a
 * constant, from a device word, from a countdown, or from a comparison. Shared by C
 * (src/regions/) and CUDA (src/device/cond_kernels.cu).
 */
#ifndef RECAP_COND_LAUNCH_H
#define RECAP_COND_LAUNCH_H

#include <stdint.h>

#include "recap/core.h"
#include "recap/region.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum recap__cond_op_kind {
  RECAP__COND_SET_VALUE = 0, /* cond = value */
  RECAP__COND_SET_FROM,      /* cond = *from */
  RECAP__COND_COUNTDOWN,     /* *counter -= 1; cond = *counter != 0 */
  RECAP__COND_COMPARE        /* cond = (*operand op threshold) && (!counter || ++*counter < max) */
} recap__cond_op_kind_t;

typedef struct recap__cond_launch {
  recap__cond_op_kind_t kind;
  recap_cond_t cond;
  recap_stream_t stream;
  unsigned value;       /* SET_VALUE */
  const uint32_t *from; /* SET_FROM */
  uint32_t *counter;    /* COUNTDOWN; COMPARE: the iteration counter, or NULL */
  uint32_t max;         /* COMPARE with a counter */
  const void *operand;  /* COMPARE */
  recap_cond_dtype_t dtype;
  recap_cond_op_t op;
  /* COMPARE: the threshold, converted once on the host to the operand's type. */
  union {
    float f32;
    double f64;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
  } threshold;
} recap__cond_launch_t;

#ifdef __cplusplus
}
#endif

#endif /* RECAP_COND_LAUNCH_H */
