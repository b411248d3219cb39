/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/rng.h — Philox random numbers that stay right across graph replays: eager and
 * graphed draws interleave as eager draws alone would, and each replay draws new numbers. Kernels
 * unpack the state with recap/rng_device.cuh. See docs/rng.md.
 */
#ifndef RECAP_RNG_H
#define RECAP_RNG_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct recap_generator *recap_generator_t;

/* What a random kernel receives, by value; recap_philox_unpack (recap/rng_device.cuh) reads
 * seed and offset from it, eager or captured. */
typedef struct recap_philox_state {
  uint64_t seed;
  uint64_t offset;
  const uint64_t *seed_ptr;   /* device memory, valid in captured states */
  const uint64_t *offset_ptr; /* device memory, valid in captured states */
  uint64_t offset_intragraph;
  int captured;
} recap_philox_state_t;

/* Create a generator with seed and offset 0 on the current device (24 bytes of device memory,
 * however many graphs and replays). */
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_create(recap_generator_t *generator,
                                                                uint64_t seed);
/* Destroy the generator. Graphs that captured it keep it alive until they are reset or
 * destroyed. NULL is a no-op. */
RECAP_API recap_status_t recap_generator_destroy(recap_generator_t generator);

/* Set the seed and reset the offset to 0 (as torch.manual_seed does). Refused with
 * RECAP_ERROR_INVALID_USAGE while a capture that uses the generator is under way; between
 * replays it takes effect at the next replay. */
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_seed_set(recap_generator_t generator,
                                                                  uint64_t seed);
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_seed_get(recap_generator_t generator,
                                                                  uint64_t *seed);
/* Read or set the offset (a multiple of 4). Refused while a capture that uses the generator is
 * under way: its final value is only known when the graph replays. After a replay whose region
 * bodies draw, both wait for the device first (see above). */
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_offset_get(recap_generator_t generator,
                                                                    uint64_t *offset);
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_offset_set(recap_generator_t generator,
                                                                    uint64_t offset);

/* The state for a kernel about to be enqueued on stream that draws `increment` 32-bit values
 * per thread. If stream is capturing into a recap graph, the state is a captured one and the
 * graph records the use; otherwise the offset advances now. */
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_philox_state(recap_generator_t generator,
                                                                      uint64_t increment,
                                                                      recap_stream_t stream,
                                                                      recap_philox_state_t *state);

/* The names of 0.1, kept for one more release. */
RECAP_DEPRECATED("use recap_generator_seed_set")
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_set_seed(recap_generator_t generator,
                                                                  uint64_t seed);
RECAP_DEPRECATED("use recap_generator_seed_get")
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_get_seed(recap_generator_t generator,
                                                                  uint64_t *seed);
RECAP_DEPRECATED("use recap_generator_offset_get")
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_get_offset(recap_generator_t generator,
                                                                    uint64_t *offset);
RECAP_DEPRECATED("use recap_generator_offset_set")
RECAP_NODISCARD RECAP_API recap_status_t recap_generator_set_offset(recap_generator_t generator,
                                                                    uint64_t offset);

/* ---- Library kernels on the same state; each enqueues on stream and may be captured ------- */

/* out[i] uniform in [0, 1), as PyTorch's torch.rand: not cuRAND's curand_uniform range, (0, 1]
 * (docs/rng.md, "Library kernels"). */
RECAP_NODISCARD RECAP_API recap_status_t recap_rng_uniform(recap_generator_t generator, float *out,
                                                           size_t n, recap_stream_t stream);
/* out[i] normal with mean and stddev. */
RECAP_NODISCARD RECAP_API recap_status_t recap_rng_normal(recap_generator_t generator, float *out,
                                                          size_t n, float mean, float stddev,
                                                          recap_stream_t stream);
/* out[i] uniform in [low, high) (high > low). */
RECAP_NODISCARD RECAP_API recap_status_t recap_rng_randint(recap_generator_t generator,
                                                           int32_t *out, size_t n, int32_t low,
                                                           int32_t high, recap_stream_t stream);
/* Inverted dropout: mask[i] = 1 with probability 1 - p, out[i] = in[i] * mask[i] / (1 - p).
 * p in [0, 1); mask may be NULL. in and out may be the same buffer. */
RECAP_NODISCARD RECAP_API recap_status_t recap_rng_dropout(recap_generator_t generator,
                                                           const float *in, float *out,
                                                           uint8_t *mask, size_t n, float p,
                                                           recap_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_RNG_H */
