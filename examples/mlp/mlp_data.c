/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_data.c — the spirals task and the batch schedule (see mlp_data.h).
 */
#include "mlp_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double kPi = 3.14159265358979323846;

uint64_t mlp_rng_next(mlp_rng_t *rng) {
  uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float mlp_rng_uniform(mlp_rng_t *rng) {
  return (float)(mlp_rng_next(rng) >> 40) * (1.0f / 16777216.0f);
}

double mlp_rng_normal(mlp_rng_t *rng) {
  /* u1 in (0, 1] so that the logarithm is finite. */
  double u1 = ((double)(mlp_rng_next(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  double u2 = (double)(mlp_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * kPi * u2);
}

/* An index in [0, n): a 53-bit uniform fraction times n (no modulo bias to speak of). */
static size_t draw_index(mlp_rng_t *rng, size_t n) {
  size_t i = (size_t)((double)(mlp_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * (double)n);
  return i < n ? i : n - 1;
}

static void shuffle(int *order, int n, mlp_rng_t *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)draw_index(rng, (size_t)i + 1);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

static int dataset_alloc(mlp_dataset_t *set, int count, int dim, int classes) {
  set->count = count;
  set->dim = dim;
  set->classes = classes;
  set->x = malloc((size_t)(count ? count : 1) * (size_t)dim * sizeof(float));
  set->y = malloc((size_t)(count ? count : 1) * sizeof(int32_t));
  return set->x && set->y ? 0 : -1;
}

void mlp_dataset_free(mlp_dataset_t *set) {
  if (!set) return;
  free(set->x);
  free(set->y);
  memset(set, 0, sizeof *set);
}

int mlp_spirals(int classes, int per_class, float noise, double test_fraction, uint64_t seed,
                mlp_dataset_t *train, mlp_dataset_t *test) {
  memset(train, 0, sizeof *train);
  memset(test, 0, sizeof *test);
  const int total = classes * per_class;
  mlp_rng_t rng = {seed ^ 0x53504952414C53ull}; /* "SPIRALS": data apart from parameters */
  float *x = malloc((size_t)total * 2 * sizeof(float));
  int32_t *y = malloc((size_t)total * sizeof(int32_t));
  int *order = malloc((size_t)total * sizeof(int));
  int test_count = (int)lround(test_fraction * total);
  if (test_count < 0) test_count = 0;
  if (test_count > total) test_count = total;
  int ok = x && y && order && dataset_alloc(train, total - test_count, 2, classes) == 0 &&
           dataset_alloc(test, test_count, 2, classes) == 0;
  if (!ok) {
    free(x);
    free(y);
    free(order);
    mlp_dataset_free(train);
    mlp_dataset_free(test);
    return -1;
  }
  /* Arm k: radius r from 0 to 1 while the angle turns one and a half times, starting at
   * 2 pi k / classes; the angle is jittered, so neighbouring arms overlap a little near the
   * centre and the task is not separable by a straight line anywhere. */
  for (int k = 0; k < classes; k++) {
    for (int i = 0; i < per_class; i++) {
      int at = k * per_class + i;
      double r = per_class > 1 ? (double)i / (per_class - 1) : 1.0;
      double t = 2.0 * kPi * k / classes + 3.0 * kPi * r + noise * mlp_rng_normal(&rng);
      x[2 * at] = (float)(r * sin(t));
      x[2 * at + 1] = (float)(r * cos(t));
      y[at] = k;
    }
  }
  for (int i = 0; i < total; i++) order[i] = i;
  shuffle(order, total, &rng);
  for (int i = 0; i < total; i++) {
    mlp_dataset_t *set = i < test_count ? test : train;
    int j = i < test_count ? i : i - test_count;
    set->x[2 * j] = x[2 * order[i]];
    set->x[2 * j + 1] = x[2 * order[i] + 1];
    set->y[j] = y[order[i]];
  }
  free(x);
  free(y);
  free(order);
  return 0;
}

size_t mlp_batch_bytes(int batch, int dim) {
  return (size_t)batch * (size_t)dim * sizeof(float) + (size_t)batch * sizeof(int32_t);
}

void mlp_schedule_fill(const mlp_dataset_t *train, int batch, int steps, uint64_t seed, void *dst) {
  mlp_rng_t rng = {seed ^ 0x42415443484553ull}; /* "BATCHES" */
  const int n = train->count, dim = train->dim;
  int *order = malloc((size_t)(n ? n : 1) * sizeof(int));
  const size_t step_bytes = mlp_batch_bytes(batch, dim);
  int next = n; /* start with a fresh shuffle */
  for (int s = 0; s < steps; s++) {
    unsigned char *at = (unsigned char *)dst + (size_t)s * step_bytes;
    float *bx = (float *)at;
    int32_t *by = (int32_t *)(at + (size_t)batch * (size_t)dim * sizeof(float));
    for (int b = 0; b < batch; b++) {
      int index;
      if (order) {
        if (next == n) {
          for (int i = 0; i < n; i++) order[i] = i;
          shuffle(order, n, &rng);
          next = 0;
        }
        index = order[next++];
      } else {
        /* No memory for an epoch order: sample with replacement instead. */
        index = (int)draw_index(&rng, (size_t)n);
      }
      memcpy(bx + (size_t)b * dim, train->x + (size_t)index * dim, (size_t)dim * sizeof(float));
      by[b] = train->y[index];
    }
  }
  free(order);
}
