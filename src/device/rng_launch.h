/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rng_launch.h — how the random-number layer asks the device seam to run its kernels.
 *
 * The launch shape is fixed by the element count alone (never by the device), so the offset a
 * kernel consumes — and therefore every number drawn after it — is the same on every GPU, and
 * the same eagerly and in a graph. Each thread draws 4 values per round (one Philox block).
 * Shared by C (src/rng/) and CUDA (src/device/rng_kernels.cu).
 */
#ifndef RECAP_RNG_LAUNCH_H
#define RECAP_RNG_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "recap/core.h"
#include "recap/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum recap__rng_kind {
  RECAP__RNG_UNIFORM = 0,
  RECAP__RNG_NORMAL,
  RECAP__RNG_RANDINT,
  RECAP__RNG_DROPOUT
} recap__rng_kind_t;

enum {
  RECAP__RNG_BLOCK = 256,     /* threads per block */
  RECAP__RNG_MAX_GRID = 1024, /* blocks at most: the rest loops, with a fixed shape */
  RECAP__RNG_PER_ROUND = 4    /* values per thread per round */
};

typedef struct recap__rng_launch {
  recap__rng_kind_t kind;
  recap_philox_state_t state;
  void *out;       /* float (uniform, normal, dropout) or int32_t (randint) */
  const float *in; /* dropout */
  uint8_t *mask;   /* dropout, may be NULL */
  size_t n;
  float a, b;        /* normal: mean, stddev; dropout: p */
  int32_t low, high; /* randint */
  unsigned grid;     /* from recap__rng_shape */
  recap_stream_t stream;
} recap__rng_launch_t;

/* The grid for n elements, and the increment (32-bit values per thread) it consumes. */
static inline void recap__rng_shape(size_t n, unsigned *grid, uint64_t *increment) {
  size_t per_block = (size_t)RECAP__RNG_BLOCK * RECAP__RNG_PER_ROUND;
  size_t blocks = (n + per_block - 1) / per_block;
  if (blocks == 0) blocks = 1;
  if (blocks > RECAP__RNG_MAX_GRID) blocks = RECAP__RNG_MAX_GRID;
  size_t per_round = blocks * per_block;
  size_t rounds = (n + per_round - 1) / per_round;
  *grid = (unsigned)blocks;
  *increment = (uint64_t)(rounds ? rounds : 1) * RECAP__RNG_PER_ROUND;
}

#ifdef __cplusplus
}
#endif

#endif /* RECAP_RNG_LAUNCH_H */
