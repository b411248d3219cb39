/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * smoother.h — a small library built on recap, as docs/libraries.md describes: one call,
 * smoother_run, that works eagerly, replays the library's own graph, and inside a caller's
 * capture becomes part of the caller's graph.
 *
 * A smoother holds three buffers of n floats in recap's memory: the input the caller writes,
 * the output it reads, and a scratch buffer. A run copies the input, applies `sweeps` sweeps of
 * the 1-D stencil y[i] = (x[i-1] + 2 x[i] + x[i+1]) / 4 (the ends kept), and leaves the result
 * in the output. Its addresses never change, so its graph, captured once, stays valid.
 */
#ifndef SMOOTHER_H
#define SMOOTHER_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "recap.h"

typedef struct smoother smoother_t;

/* A smoother of n >= 3 points and 1 <= sweeps <= 1000 sweeps per run. */
recap_status_t smoother_create(smoother_t **s, size_t n, int sweeps);
void smoother_destroy(smoother_t *s);

float *smoother_input(smoother_t *s);
const float *smoother_output(const smoother_t *s);

/* Capture the library's graph of one run on stream (a stream that is not capturing), kept for
 * every later smoother_run. Optional: an unprepared smoother launches its kernels. */
recap_status_t smoother_prepare(smoother_t *s, cudaStream_t stream);

/* One run on stream. Prepared: a replay of the library's graph, which recap embeds as a child
 * graph node when stream is capturing into a recap graph. Unprepared: the kernels themselves,
 * which a capture on stream records like any other work. */
recap_status_t smoother_run(smoother_t *s, cudaStream_t stream);

/* Whether the last smoother_run replayed the library's graph (1) or launched kernels (0). */
int smoother_replayed(const smoother_t *s);

#endif /* SMOOTHER_H */
