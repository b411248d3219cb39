/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_rng.c — the CPU fake device's random-number kernels: the state write before a replay
 * and the four random kernels, as kernel nodes in a capture and as simple fills eagerly.
 */
#include <stdlib.h>

#include "fake/fake_state.h"

/* ---- random numbers ------------------------------------------------------------------------
 * The fake computes no real random numbers: eager kernels fill their output with a simple
 * function of the seed, the offset and the index (fake.h), which is enough for tests to see
 * that eager calls advance the generator and that replays are fed the right state. */

static const char *fake_rng_kernel_name(recap__rng_kind_t kind) {
  switch (kind) {
    case RECAP__RNG_UNIFORM: return "recap_rng_uniform";
    case RECAP__RNG_NORMAL: return "recap_rng_normal";
    case RECAP__RNG_RANDINT: return "recap_rng_randint";
    case RECAP__RNG_DROPOUT: return "recap_rng_dropout";
  }
  return NULL;
}

/* The failure the CUDA seam reports before recap's first kernel launch on a device its kernels
 * have no image for (recap__fake_config_t.no_kernel_image), worded the same way. */
bool recap__fake_no_kernel_image(fake_failure_t *f) {
  if (!recap__fake.no_kernel_image) return false;
  char message[400];
  int capability = recap__fake.compute_capability;
  recap__device_no_kernel_image_message(message, sizeof message, recap__fake_tl_device,
                                        "fake device", capability / 10, capability % 10);
  recap__fake_note(f, RECAP_ERROR_NOT_SUPPORTED, "%s", message);
  return true;
}

recap_status_t recap__fake_op_rng_write_state(recap_stream_t stream, uint64_t *state, uint64_t seed,
                                              uint64_t offset) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = recap__fake_stream_of(stream);
  bool eager = false;
  if (!state) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "fake_rng_state: the state pointer is NULL");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "fake_rng_state<<<1, 1>>>", stream);
  } else if (recap__fake_no_kernel_image(&f)) {
    /* Nothing is launched. */
  } else if (recap__fake_enqueue(&f, s, "fake_rng_state<<<1, 1>>>", RECAP_NODE_KERNEL,
                                 "fake_rng_state", 1, &eager) == RECAP_SUCCESS &&
             eager) {
    /* Fake device memory is host memory: the kernel's write happens now. */
    state[0] = seed;
    state[1] = offset + state[2]; /* what loops drew on the device counts */
    recap__fake.rng_state_writes++;
  }
  return recap__fake_unlock_and_report(&f);
}

/* The fake's stand-in for a uniform draw in (0, 1]: ((seed + offset + i) mod 1000 + 1) / 1000. */
static float fake_rng_uniform_at(uint64_t seed, uint64_t offset, size_t i) {
  return (float)((seed + offset + (uint64_t)i) % 1000u + 1u) / 1000.0f;
}

static void fake_rng_fill(const recap__rng_launch_t *l) {
  uint64_t seed = l->state.seed, offset = l->state.offset;
  if (l->state.captured) { /* not expected eagerly, but read the words as a kernel would */
    seed = *l->state.seed_ptr;
    offset = *l->state.offset_ptr + l->state.offset_intragraph;
  }
  switch (l->kind) {
    case RECAP__RNG_UNIFORM: {
      float *out = l->out;
      /* recap_rng_uniform's range is [0, 1): 1.0 maps to 0.0, as the CUDA kernel maps it. */
      for (size_t i = 0; i < l->n; i++) {
        float u = fake_rng_uniform_at(seed, offset, i);
        out[i] = u == 1.0f ? 0.0f : u;
      }
      break;
    }
    case RECAP__RNG_NORMAL: {
      float *out = l->out;
      for (size_t i = 0; i < l->n; i++)
        out[i] = l->a + l->b * (fake_rng_uniform_at(seed, offset, i) - 0.5f);
      break;
    }
    case RECAP__RNG_RANDINT: {
      int32_t *out = l->out;
      uint64_t range = (uint64_t)((int64_t)l->high - (int64_t)l->low);
      for (size_t i = 0; i < l->n; i++)
        out[i] = (int32_t)((int64_t)l->low + (int64_t)((seed + offset + (uint64_t)i) % range));
      break;
    }
    case RECAP__RNG_DROPOUT: {
      float *out = l->out;
      float scale = 1.0f / (1.0f - l->a);
      for (size_t i = 0; i < l->n; i++) {
        bool keep = fake_rng_uniform_at(seed, offset, i) > l->a;
        out[i] = l->in[i] * (float)keep * scale;
        if (l->mask) l->mask[i] = keep ? 1 : 0;
      }
      break;
    }
  }
}

recap_status_t recap__fake_op_rng_launch(const recap__rng_launch_t *l) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_stream_t *s = l ? recap__fake_stream_of(l->stream) : NULL;
  const char *name = l ? fake_rng_kernel_name(l->kind) : NULL;
  bool eager = false;
  if (!l) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "random kernel launch: launch is NULL");
  } else if (!name) {
    recap__fake_note(&f, RECAP_ERROR_INTERNAL, "random kernel launch: unknown kind %d",
                     (int)l->kind);
  } else if (l->n == 0) {
    /* Nothing to launch. */
  } else if (!l->out || (l->kind == RECAP__RNG_DROPOUT && !l->in)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: out or in is NULL", name);
  } else if (l->kind == RECAP__RNG_RANDINT && l->high <= l->low) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: the range [%d, %d) is empty", name,
                     (int)l->low, (int)l->high);
  } else if (l->kind == RECAP__RNG_DROPOUT && !(l->a >= 0.0f && l->a < 1.0f)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: p = %g is not in [0, 1)", name,
                     (double)l->a);
  } else if (l->grid == 0 || l->grid > RECAP__RNG_MAX_GRID) {
    recap__fake_note(&f, RECAP_ERROR_INTERNAL, "%s: grid %u is not a shape recap__rng_shape gives",
                     name, l->grid);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, name, l->stream);
  } else if (recap__fake_no_kernel_image(&f)) {
    /* Nothing is launched. */
  } else if (recap__fake_enqueue(&f, s, name, RECAP_NODE_KERNEL, name, 1, &eager) ==
                 RECAP_SUCCESS &&
             eager) {
    fake_rng_fill(l);
    recap__fake.rng_launches++;
  }
  return recap__fake_unlock_and_report(&f);
}

/* state[1] += step, state[2] += step: args are {state, step}. */
static void fake_rng_advance_fn(void *const *args, size_t n) {
  (void)n;
  uint64_t *state = args[0];
  uint64_t step = (uint64_t)(uintptr_t)args[1];
  state[1] += step;
  state[2] += step;
}

/* A kernel that computes, unlike the other random kernels: graph launches run it (the fake runs
 * regions' bodies), so that the state words show what loops drew. */
recap_status_t recap__fake_op_rng_advance(recap_stream_t stream, uint64_t *state, uint64_t step) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_RNG_ADVANCE, "recap_rng_advance<<<1, 1>>>",
                       "random state advance");
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (!state) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "recap_rng_advance: the state pointer is NULL");
  } else if (!s) {
    recap__fake_note_bad_stream(&f, "recap_rng_advance<<<1, 1>>>", stream);
  } else if (!recap__fake_no_kernel_image(&f)) {
    const void *args[2] = {state, (const void *)(uintptr_t)step};
    recap__fake_enqueue_fn(&f, s, "recap_rng_advance<<<1, 1>>>", "recap_rng_advance",
                           fake_rng_advance_fn, args, 2);
  }
  return recap__fake_unlock_and_report(&f);
}
