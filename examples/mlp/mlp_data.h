/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_data.h — the MLP example's task, made on the host from a seed: K interleaved noisy
 * spirals in the plane, one class per arm, split into a training and a test set, and the
 * schedule of training batches (shuffled epochs) laid out one step after another.
 *
 * Everything here is plain C on the host and depends only on the seed, so every run of every
 * way of training sees the same batches in the same order.
 */
#ifndef MLP_DATA_H
#define MLP_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A small deterministic generator (splitmix64), for data and initial parameters. */
typedef struct mlp_rng {
  uint64_t state;
} mlp_rng_t;

uint64_t mlp_rng_next(mlp_rng_t *rng);
/* Uniform in [0, 1), 24 random bits. */
float mlp_rng_uniform(mlp_rng_t *rng);
/* Standard normal (Box-Muller, in double). */
double mlp_rng_normal(mlp_rng_t *rng);

/* Samples of dim features (sample after sample) and their labels in [0, classes). */
typedef struct mlp_dataset {
  int count, dim, classes;
  float *x;
  int32_t *y;
} mlp_dataset_t;

/* classes spirals of per_class points each, angle noise `noise` (radians, normal), shuffled
 * and split: the first round(test_fraction * total) points become the test set. Returns 0 on
 * success, -1 when out of host memory. dim is 2. */
int mlp_spirals(int classes, int per_class, float noise, double test_fraction, uint64_t seed,
                mlp_dataset_t *train, mlp_dataset_t *test);
void mlp_dataset_free(mlp_dataset_t *set);

/* The bytes of one packed batch: batch * dim floats of features, then batch int32 labels. */
size_t mlp_batch_bytes(int batch, int dim);

/* Fill dst with `steps` packed batches of `batch` samples from train, one after another
 * (mlp_batch_bytes apart), drawing epochs in a shuffled order. dst holds
 * steps * mlp_batch_bytes(batch, train->dim) bytes. */
void mlp_schedule_fill(const mlp_dataset_t *train, int batch, int steps, uint64_t seed, void *dst);

#ifdef __cplusplus
}
#endif

#endif /* MLP_DATA_H */
