/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * library — a program that uses a library built on recap (smoother.h) in the four ways
 * docs/libraries.md describes, and checks that they compute the same bits.
 *
 * A step of the program: its own kernel writes the library's input from an accumulator, the
 * library smooths it (`sweeps` stencil sweeps), and its own kernel adds the library's output to
 * the accumulator. The program runs `steps` steps from the same start four ways:
 *
 *   eager      the library unprepared: each step's kernels launched one by one;
 *   library    the library prepared: each step replays the library's own graph, between the
 *              program's two launches;
 *   step       the program captures one step into a recap graph of its own, the library
 *              prepared: the library's replay inside that capture embeds its graph as a child
 *              graph node; each step is one replay of the program's graph;
 *   step, raw  the same with the library unprepared: its kernels are captured into the
 *              program's graph as nodes of its own.
 *
 * The accumulators after the last step must be equal bit for bit. The program prints the host
 * time per step of each way and the program's graph's nodes.
 *
 *     library [--steps N] [--n N] [--sweeps K]                               (library --help)
 *
 * Exit status: 0 the ways agree; 1 a failure or a difference; 2 a bad command line; 77 no CUDA
 * device (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "recap.h"
#include "smoother.h"
#include "smoother_kernels.h"

#define PROGRAM "library"
#include "example_check.h"
#include "example_args.h"

enum { EXIT_BAD_USAGE = 2, EXIT_NO_DEVICE = 77, WAYS = 4 };
static const char *const WAY_NAMES[WAYS] = {"eager", "library", "step", "step, raw"};

typedef struct options {
  int steps, sweeps;
  size_t n;
} options_t;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROGRAM
             " [options]\n"
             "\n"
             "A program around a library built on recap (examples/library/smoother.h), run\n"
             "eagerly, with the library's own graph, and inside the program's own captured step\n"
             "(the library's graph embedded); the results are compared bit for bit.\n"
             "\n"
             "  --steps N    steps per way, 1 to 100000 (default 200)\n"
             "  --n N        points, 3 to 16777216 (default 65536)\n"
             "  --sweeps K   stencil sweeps per library call, 1 to 1000 (default 8)\n"
             "  -h, --help   this text\n"
             "\n"
             "Exit status: 0 the ways agree; 1 a failure or a difference; 2 a bad command line;\n"
             "77 no CUDA device.\n");
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum { OPT_STEPS = 256, OPT_N, OPT_SWEEPS };
  static const struct option options[] = {
      {"steps", required_argument, NULL, OPT_STEPS},
      {"n", required_argument, NULL, OPT_N},
      {"sweeps", required_argument, NULL, OPT_SWEEPS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (options_t){.steps = 200, .n = 65536, .sweeps = 8};
  int c, index = 0, n = 0;
  opterr = 0; /* the messages below name the program and the option */
  while ((c = getopt_long(argc, argv, ":h", options, &index)) != -1) {
    const char *arg = optarg;
    switch (c) {
      case OPT_STEPS:
        if (!example_parse_int(arg, 1, 100000, &o->steps)) goto bad_value;
        break;
      case OPT_N:
        if (!example_parse_int(arg, 3, 16777216, &n)) goto bad_value;
        o->n = (size_t)n;
        break;
      case OPT_SWEEPS:
        if (!example_parse_int(arg, 1, 1000, &o->sweeps)) goto bad_value;
        break;
      case 'h': usage(stdout); return 0;
      default: return example_option_error(PROGRAM, c, argv, optind, usage);
    }
    continue;
  bad_value:
    return example_bad_value(PROGRAM, arg, options[index].name);
  }
  if (optind < argc) return example_extra_argument(PROGRAM, argv[optind]);
  return -1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One step of the program, eager or captured: the library's call between its own kernels. */
static void enqueue_step(smoother_t *lib, float *acc, size_t n, cudaStream_t s) {
  CHECK_CUDA(program_produce(smoother_input(lib), acc, n, s));
  CHECK_RECAP(smoother_run(lib, s));
  CHECK_CUDA(program_consume(acc, smoother_output(lib), n, s));
}

typedef struct outcome {
  float *acc; /* host copy after the last step */
  double host_us_per_step;
  size_t nodes; /* the program's graph's nodes (0: no graph) */
  int embedded; /* the library replayed its graph inside the program's capture */
} outcome_t;

static void run_way(int way, const options_t *o, cudaStream_t s, outcome_t *out) {
  size_t n = o->n, bytes = n * sizeof(float);
  smoother_t *lib = NULL;
  CHECK_RECAP(smoother_create(&lib, n, o->sweeps));
  float *acc = NULL;
  CHECK_RECAP(recap_malloc((void **)&acc, bytes, (recap_stream_t)s));
  CHECK_CUDA(cudaMemsetAsync(acc, 0, bytes, s));
  if (way == 1 || way == 2) CHECK_RECAP(smoother_prepare(lib, s));
  recap_graph_t step = NULL;
  if (way >= 2) {
    CHECK_RECAP(recap_graph_create(&step, 0));
    CHECK_RECAP(recap_graph_capture_begin(step, NULL, (recap_stream_t)s));
    enqueue_step(lib, acc, n, s);
    out->embedded = smoother_replayed(lib);
    CHECK_RECAP(recap_graph_capture_end(step));
    CHECK_RECAP(recap_graph_node_count(step, &out->nodes));
  }
  CHECK_CUDA(cudaStreamSynchronize(s));
  uint64_t t0 = now_ns();
  for (int t = 0; t < o->steps; t++) {
    if (step)
      CHECK_RECAP(recap_graph_replay(step, (recap_stream_t)s));
    else
      enqueue_step(lib, acc, n, s);
  }
  uint64_t t1 = now_ns();
  CHECK_CUDA(cudaStreamSynchronize(s));
  out->host_us_per_step = (double)(t1 - t0) / 1e3 / o->steps;
  out->acc = host_alloc(bytes);
  CHECK_CUDA(cudaMemcpy(out->acc, acc, bytes, cudaMemcpyDeviceToHost));
  if (step) CHECK_RECAP(recap_graph_destroy(step));
  CHECK_RECAP(recap_free(acc));
  smoother_destroy(lib);
}

int main(int argc, char **argv) {
  options_t o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed >= 0) return parsed;
  if (!example_have_device()) return EXIT_NO_DEVICE;
  if (example_under_a_tool() && o.steps > 20) o.steps = 20;
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf(PROGRAM ": %d steps of %zu points, %d sweeps per library call\n", o.steps, o.n, o.sweeps);
  outcome_t outcomes[WAYS];
  memset(outcomes, 0, sizeof outcomes);
  for (int w = 0; w < WAYS; w++) run_way(w, &o, s, &outcomes[w]);
  if (!outcomes[2].embedded || outcomes[3].embedded)
    die("the library replayed its graph inside the program's capture: %d prepared, %d "
        "unprepared (1 and 0 expected)",
        outcomes[2].embedded, outcomes[3].embedded);
  printf("\n%-12s %14s %12s %10s\n", "way", "host us/step", "graph nodes", "identical");
  int all_same = 1;
  for (int w = 0; w < WAYS; w++) {
    int same = memcmp(outcomes[w].acc, outcomes[0].acc, o.n * sizeof(float)) == 0;
    all_same &= same;
    printf("%-12s %14.2f %12zu %10s\n", WAY_NAMES[w], outcomes[w].host_us_per_step,
           outcomes[w].nodes,
           w == 0 ? "reference"
           : same ? "yes"
                  : "NO");
  }
  printf("\n%s\n", all_same ? "all ways give the same accumulator bit for bit" : "the ways DIFFER");
  for (int w = 0; w < WAYS; w++) free(outcomes[w].acc);
  CHECK_CUDA(cudaStreamDestroy(s));
  return all_same ? 0 : 1;
}
