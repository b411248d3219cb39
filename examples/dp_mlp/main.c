/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_mlp — data-parallel training of the MLP example's network with NCCL, the all-reduce of
 * the gradients inside the whole-step recap graph. One process per GPU (launch.sh, mpirun, srun or
 * torchrun --no-python starts them; examples/common/launch_env.h reads their environments).
 *
 * Every rank holds the whole network (same seed, same initial parameters) and trains on its
 * share of each global batch: rank r takes samples [r*b, (r+1)*b) of it, b = global batch /
 * ranks. Between the backward and Adam the gradients are averaged over the ranks by
 * recap_nccl_all_reduce(RECAP_NCCL_AVG) (the model's gradient hook), so every rank takes the
 * same optimizer step. The program trains twice, eagerly and as one whole-step graph per rank
 * (forward, loss, backward, all-reduce, Adam), checks the graph's collectives across the ranks
 * before its first replay (recap_graph_check_collectives), and shows that a WHILE loop of steps
 * refuses the all-reduce in its body. Rank 0 then trains the same global batches in one process
 * without NCCL and compares: with one rank the losses and parameters are equal bit for bit;
 * with more, each rank's GEMMs sum over its share of the batch and NCCL adds the shares, an
 * order of summation that differs from one GEMM over the whole batch, and the program prints the
 * largest difference (README.md).
 *
 *     dp_mlp [--steps N] [--batch B] [--width W] [--depth D] [--check]
 *            [--rank R --world W --id-file F]   (default: launch.sh's environment, or mpirun's,
 *                                                srun's, torchrun's; README.md, dp_mlp --help)
 *
 * Dropout is off: each rank would draw masks for its own samples, not the single process's.
 *
 * Exit status: 0 success; 1 a failure or a disagreement; 2 a bad command line, or no GPU or no
 * NCCL; 77 no GPU or no NCCL with --check (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "dp_comm.h"
#include "launch_env.h"
#include "mlp_data.h"
#include "mlp_model.h"
#include "recap.h"

#define PROGRAM "dp_mlp"
#include "example_check.h"
#include "example_args.h"

enum { EXIT_UNAVAILABLE = 2, EXIT_CHECK_SKIP = 77, ID_WAIT_SECONDS = 120, STEPS_UNDER_A_TOOL = 5 };

#define CHECK_MLP(call)                                                             \
  do {                                                                              \
    recap_status_t status_ = (call);                                                \
    if (status_ != RECAP_SUCCESS)                                                   \
      die("%s failed (%s):\n  %s", #call, recap_status_name(status_), mlp_error()); \
  } while (0)

typedef struct options {
  int steps, batch, width, depth, per_class;
  int rank, world;
  launch_env_t env; /* the launcher's environment; rank and world as the options leave them */
  const char *id_file;
  int check;
} options_t;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROGRAM
             " [options]\n"
             "\n"
             "Data-parallel training of an MLP with NCCL, one process per GPU: every rank trains\n"
             "on its share of each global batch and the gradients are averaged by an all-reduce\n"
             "inside the whole-step recap graph. Start one process per GPU with launch.sh,\n"
             "mpirun, srun or torchrun --no-python (README.md); run alone, the program is one\n"
             "rank.\n"
             "\n"
             "  --steps N     training steps (default 300)\n"
             "  --batch B     global batch: samples per step over all ranks, a multiple of the\n"
             "                ranks (default 256)\n"
             "  --width W     units per hidden layer (default 512)\n"
             "  --depth D     hidden layers (default 4)\n"
             "  --points N    points per spiral of the data set (default 2000)\n"
             "  --check       exit 77 (skipped) without a GPU or NCCL; fail when the ways or the\n"
             "                single-process run disagree beyond what the arithmetic allows\n"
             "  --rank R      this process's rank (default: the launcher's, RECAP_DP_RANK,\n"
             "                RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID; else 0)\n"
             "  --world W     the number of ranks (default: the launcher's, else 1)\n"
             "  --id-file F   where rank 0 leaves NCCL's unique id for the others (default\n"
             "                $RECAP_DP_ID_FILE; without one, rank 0 hands it over TCP at\n"
             "                MASTER_ADDR, port RECAP_DP_PORT or MASTER_PORT + 1)\n"
             "  -h, --help    this text\n");
}

/* A count of at most a billion. */
static int parse_int(const char *s, int min, int *out) {
  return example_parse_int(s, min, 1000000000L, out);
}

static void parse_args(int argc, char **argv, options_t *o) {
  *o = (options_t){.steps = 300,
                   .batch = 256,
                   .width = 512,
                   .depth = 4,
                   .per_class = 2000,
                   .rank = 0,
                   .world = 1,
                   .id_file = getenv("RECAP_DP_ID_FILE")};
  char why[512];
  if (launch_env_read(&o->env, NULL, NULL, why, sizeof why)) {
    fprintf(stderr, PROGRAM ": %s\n", why);
    exit(EXIT_UNAVAILABLE);
  }
  o->rank = o->env.rank;
  o->world = o->env.world;
  enum {
    OPT_STEPS = 256,
    OPT_BATCH,
    OPT_WIDTH,
    OPT_DEPTH,
    OPT_POINTS,
    OPT_RANK,
    OPT_WORLD,
    OPT_ID
  };
  static const struct option longs[] = {{"steps", required_argument, NULL, OPT_STEPS},
                                        {"batch", required_argument, NULL, OPT_BATCH},
                                        {"width", required_argument, NULL, OPT_WIDTH},
                                        {"depth", required_argument, NULL, OPT_DEPTH},
                                        {"points", required_argument, NULL, OPT_POINTS},
                                        {"rank", required_argument, NULL, OPT_RANK},
                                        {"world", required_argument, NULL, OPT_WORLD},
                                        {"id-file", required_argument, NULL, OPT_ID},
                                        {"check", no_argument, NULL, 'c'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    int ok = 1;
    switch (opt) {
      case OPT_STEPS: ok = parse_int(optarg, 1, &o->steps); break;
      case OPT_BATCH: ok = parse_int(optarg, 1, &o->batch); break;
      case OPT_WIDTH: ok = parse_int(optarg, 1, &o->width); break;
      case OPT_DEPTH: ok = parse_int(optarg, 1, &o->depth); break;
      case OPT_POINTS: ok = parse_int(optarg, 2, &o->per_class); break;
      case OPT_RANK: ok = parse_int(optarg, 0, &o->rank); break;
      case OPT_WORLD: ok = parse_int(optarg, 1, &o->world); break;
      case OPT_ID: o->id_file = optarg; break;
      case 'c': o->check = 1; break;
      case 'h': usage(stdout); exit(0);
      default: usage(stderr); exit(EXIT_UNAVAILABLE);
    }
    if (!ok) {
      fprintf(stderr, PROGRAM ": bad value '%s' for --%s\n", optarg, longs[opt - OPT_STEPS].name);
      exit(EXIT_UNAVAILABLE);
    }
  }
  const char *bad = NULL;
  if (optind < argc)
    bad = "unexpected arguments";
  else if (o->rank >= o->world)
    bad = "the rank must be below the number of ranks (--world)";
  else if (o->batch % o->world != 0)
    bad = "the global batch (--batch) must be a multiple of the number of ranks";
  else if (o->world > 1 && (!o->id_file || !*o->id_file) && !o->env.host[0])
    bad = "more than one rank needs --id-file or MASTER_ADDR (README.md)";
  if (bad) {
    fprintf(stderr, PROGRAM ": %s (rank %d, world %d, batch %d)\n", bad, o->rank, o->world,
            o->batch);
    exit(EXIT_UNAVAILABLE);
  }
  o->env.rank = o->rank;
  o->env.world = o->world;
}

/* This rank's GPU: its rank on this node (the rank itself when the launcher gives none). A
 * launcher that gives each process one GPU of its own (CUDA_VISIBLE_DEVICES of one GPU, as srun
 * --gpus-per-task does) leaves GPU 0. */
static int choose_gpu(const options_t *o, int devices) {
  const int local = o->env.local_rank >= 0 ? o->env.local_rank : o->rank;
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  if (local < devices) return local;
  if (devices == 1 && visible && *visible) return 0;
  fprintf(stderr,
          PROGRAM
          ": rank %d is rank %d on this node and needs GPU %d; this process sees %d (NCCL "
          "takes one GPU per rank)\n",
          o->rank, local, local, devices);
  exit(EXIT_UNAVAILABLE);
}

/* Under a CUDA tool (compute-sanitizer sets CUDA_INJECTION64_PATH; tools/gpu-check sets
 * RECAP_UNDER_TOOL=1) every kernel runs many times slower: a few steps show as much. */
static void shorten_under_a_tool(options_t *o) {
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  const bool under_tool = (flag && !strcmp(flag, "1")) || (injected && *injected);
  if (under_tool && o->steps > STEPS_UNDER_A_TOOL) {
    if (o->rank == 0)
      printf("a CUDA tool is attached: %d steps instead of %d\n", STEPS_UNDER_A_TOOL, o->steps);
    o->steps = STEPS_UNDER_A_TOOL;
  }
}

/* Leave: skipped under --check, "unavailable" otherwise. */
static void unavailable(const options_t *o, const char *what, const char *detail) {
  printf(PROGRAM ": rank %d: %s%s%s; %s\n", o->rank, what, detail ? ": " : "", detail ? detail : "",
         o->check ? "skipped" : "nothing to run");
  exit(o->check ? EXIT_CHECK_SKIP : EXIT_UNAVAILABLE);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* ==========================================================================================
 * The gradient hook: the all-reduce between the backward and Adam
 * ======================================================================================== */

static recap_status_t average_gradients(void *ctx, float *grads, size_t count,
                                        cudaStream_t stream) {
  return recap_nccl_all_reduce(grads, grads, count, RECAP_NCCL_FLOAT32, RECAP_NCCL_AVG,
                               (recap_nccl_comm_t)ctx, (recap_stream_t)stream);
}

/* ==========================================================================================
 * One way of training on this rank
 * ======================================================================================== */

typedef struct run {
  const char *name;
  float *losses; /* the global loss of each step: the mean of the ranks' means */
  float *params; /* this rank's parameters at the end */
  double step_us, host_us;
  double check_us; /* recap_graph_check_collectives (the graph way), else 0 */
  size_t collectives;
} run_t;

typedef struct context {
  const options_t *o;
  recap_nccl_comm_t comm;
  cudaStream_t stream;
  mlp_model_t *model;
  size_t local_bytes;
  unsigned char *local; /* pinned: this rank's share of every step's batch */
  float *device_losses; /* for the eager all-reduce of the loss history */
} context_t;

/* The mean over ranks of each step's loss (each rank's is the mean over its share). */
static void global_losses(context_t *c, float *losses) {
  const size_t bytes = (size_t)c->o->steps * sizeof(float);
  CHECK_MLP(mlp_model_read_losses(c->model, losses, c->o->steps));
  CHECK_CUDA(cudaMemcpy(c->device_losses, losses, bytes, cudaMemcpyHostToDevice));
  CHECK_RECAP(recap_nccl_all_reduce(c->device_losses, c->device_losses, (size_t)c->o->steps,
                                    RECAP_NCCL_FLOAT32, RECAP_NCCL_AVG, c->comm,
                                    (recap_stream_t)c->stream));
  CHECK_CUDA(cudaStreamSynchronize(c->stream));
  CHECK_CUDA(cudaMemcpy(losses, c->device_losses, bytes, cudaMemcpyDeviceToHost));
}

/* The whole-step graph's collectives, compared across the ranks before its first replay. */
static void check_graph(context_t *c, mlp_trainer_t *trainer, run_t *r) {
  mlp_graph_entry_t graphs[4];
  int count = 0;
  CHECK_MLP(mlp_trainer_graphs(trainer, graphs, 4, &count));
  if (count == 0) return; /* RECAP_DISABLE_GRAPHS=1: the step runs eagerly */
  recap_collective_t record[4];
  for (int i = 0; i < 4; i++) record[i] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  CHECK_RECAP(recap_graph_collectives(graphs[0].graph, record, 4, &r->collectives, NULL));
  const double t0 = now_us();
  CHECK_RECAP(recap_graph_check_collectives(graphs[0].graph, c->comm));
  r->check_us = now_us() - t0;
}

static void train(context_t *c, mlp_way_t way, run_t *r) {
  const int steps = c->o->steps;
  mlp_trainer_t *trainer = NULL;
  CHECK_MLP(mlp_trainer_create(&trainer, c->model, way, MLP_SPLIT_MODEL));
  if (way == MLP_WAY_WHOLE) check_graph(c, trainer, r);
  CHECK_CUDA(cudaStreamSynchronize(c->stream));
  const double t0 = now_us();
  for (int s = 0; s < steps; s++)
    CHECK_MLP(mlp_trainer_step(trainer, c->local + (size_t)s * c->local_bytes));
  const double t1 = now_us();
  CHECK_CUDA(cudaStreamSynchronize(c->stream));
  const double t2 = now_us();
  r->host_us = (t1 - t0) / steps;
  r->step_us = (t2 - t0) / steps;
  mlp_trainer_destroy(trainer);
  r->losses = host_alloc((size_t)steps * sizeof(float));
  r->params = host_alloc(mlp_model_flat_count(c->model) * sizeof(float));
  global_losses(c, r->losses);
  CHECK_MLP(mlp_model_read_parameters(c->model, r->params));
}

/* A WHILE loop of steps (the model's loop way) holds the all-reduce in its body: recap refuses
 * it at the wrapper, before NCCL is called, so no rank waits for another. */
static void show_loop_refused(context_t *c, int rank0) {
  if (getenv("RECAP_DISABLE_GRAPHS") && strcmp(getenv("RECAP_DISABLE_GRAPHS"), "1") == 0) return;
  CHECK_MLP(mlp_model_upload_schedule(c->model, c->local, c->o->steps));
  mlp_trainer_t *loop = NULL;
  recap_status_t s = mlp_trainer_create_loop(&loop, c->model, 10);
  if (s == RECAP_SUCCESS) {
    mlp_trainer_destroy(loop);
    die("the loop way accepted an all-reduce inside its WHILE body");
  }
  if (s != RECAP_ERROR_INVALID_USAGE || !strstr(mlp_error(), "pytorch #180960"))
    die("the loop way failed otherwise than by refusing the collective (%s):\n  %s",
        recap_status_name(s), mlp_error());
  if (rank0) printf("  loop way (WHILE region): refused, %s\n", recap_status_name(s));
}

/* ==========================================================================================
 * Comparing
 * ======================================================================================== */

static size_t differing(const float *a, const float *b, size_t n, double *worst) {
  size_t count = 0;
  *worst = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    count++;
    const double scale = fmax(fabs((double)a[i]), fabs((double)b[i]));
    const double rel = scale > 0 ? fabs((double)a[i] - (double)b[i]) / scale : INFINITY;
    if (rel > *worst) *worst = rel;
  }
  return count;
}

/* Prints the comparison (rank 0, or any rank where it fails); returns 0 when it is as good as
 * required: bit for bit when exact, else within the relative tolerance. */
static int compare(int rank, const char *what, const float *a, const float *b, size_t n, int exact,
                   double tolerance) {
  double worst = 0;
  const size_t count = differing(a, b, n, &worst);
  const int bad = count > 0 && (exact || worst > tolerance);
  if (rank != 0 && !bad) return 0;
  if (count == 0)
    printf("  %-42s equal bit for bit (%zu values)\n", what, n);
  else
    printf("  %s%-42s %zu of %zu differ, largest relative difference %.3g%s\n", rank ? "rank " : "",
           what, count, n, worst, bad ? ": FAILED" : "");
  return bad;
}

/* Rank 0: the same global batches in one process, no NCCL (the model without its hook). */
static void reference(const options_t *o, const mlp_config_t *base, cudaStream_t stream,
                      const unsigned char *schedule, size_t global_bytes, run_t *r) {
  mlp_config_t config = *base;
  config.batch = o->batch;
  config.gradient_hook = NULL;
  config.hook_ctx = NULL;
  mlp_model_t *model = NULL;
  CHECK_MLP(mlp_model_create(&model, &config, stream));
  mlp_trainer_t *trainer = NULL;
  CHECK_MLP(mlp_trainer_create(&trainer, model, MLP_WAY_WHOLE, MLP_SPLIT_MODEL));
  const double t0 = now_us();
  for (int s = 0; s < o->steps; s++)
    CHECK_MLP(mlp_trainer_step(trainer, schedule + (size_t)s * global_bytes));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  r->step_us = (now_us() - t0) / o->steps;
  mlp_trainer_destroy(trainer);
  r->losses = host_alloc((size_t)o->steps * sizeof(float));
  r->params = host_alloc(mlp_model_flat_count(model) * sizeof(float));
  CHECK_MLP(mlp_model_read_losses(model, r->losses, o->steps));
  CHECK_MLP(mlp_model_read_parameters(model, r->params));
  mlp_model_destroy(model);
}

/* This rank's share of each global batch, packed as a batch of its own. */
static void take_share(const options_t *o, const unsigned char *global, size_t global_bytes,
                       unsigned char *local, size_t local_bytes, int dim) {
  const int b = o->batch / o->world;
  const size_t feature_bytes = (size_t)b * (size_t)dim * sizeof(float);
  for (int s = 0; s < o->steps; s++) {
    const unsigned char *g = global + (size_t)s * global_bytes;
    unsigned char *l = local + (size_t)s * local_bytes;
    const unsigned char *g_labels = g + (size_t)o->batch * (size_t)dim * sizeof(float);
    memcpy(l, g + (size_t)o->rank * feature_bytes, feature_bytes);
    memcpy(l + feature_bytes, g_labels + (size_t)o->rank * (size_t)b * sizeof(int32_t),
           (size_t)b * sizeof(int32_t));
  }
}

int main(int argc, char **argv) {
  options_t o;
  parse_args(argc, argv, &o);
  shorten_under_a_tool(&o);
  const int rank0 = o.rank == 0;
  setvbuf(stdout, NULL, _IOLBF, 0);

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    unavailable(&o, "no CUDA device", NULL);
  CHECK_CUDA(cudaSetDevice(choose_gpu(&o, devices)));
  int version = 0;
  if (recap_nccl_version(&version) != RECAP_SUCCESS)
    unavailable(&o, "NCCL is not available", recap_last_error());
  if (rank0) {
    if (o.world == 1)
      printf(
          "One rank: this process on GPU 0, the all-reduce through NCCL with one rank (in "
          "place: NCCL moves nothing). launch.sh starts one process per GPU.\n");
    else
      printf("%d ranks, one process per GPU (launcher: %s).\n", o.world, o.env.launcher);
    printf("NCCL %d.%d.%d; global batch %d, %d per rank; MLP 2-%dx%d-3; %d steps\n",
           version / 10000, version / 100 % 100, version % 100, o.batch, o.batch / o.world, o.width,
           o.depth, o.steps);
  }

  const char *error = NULL;
  context_t c = {.o = &o};
  c.comm = dp_comm_create(&o.env, o.id_file, ID_WAIT_SECONDS, &error);
  if (!c.comm) die("rank %d: %s", o.rank, error);
  CHECK_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));

  mlp_dataset_t train_set, test_set;
  if (mlp_spirals(3, o.per_class, 0.2f, 0.2, 1234u, &train_set, &test_set) != 0)
    die("out of host memory for the data set");
  mlp_config_t config = MLP_CONFIG_INIT;
  config.width = o.width;
  config.depth = o.depth;
  config.batch = o.batch / o.world;
  config.dropout = 0.0f;
  config.loss_capacity = o.steps;
  config.gradient_hook = average_gradients;
  config.hook_ctx = c.comm;

  const size_t global_bytes = mlp_batch_bytes(o.batch, train_set.dim);
  c.local_bytes = mlp_batch_bytes(config.batch, train_set.dim);
  unsigned char *schedule = NULL;
  CHECK_CUDA(cudaHostAlloc((void **)&schedule, (size_t)o.steps * global_bytes, 0));
  CHECK_CUDA(cudaHostAlloc((void **)&c.local, (size_t)o.steps * c.local_bytes, 0));
  mlp_schedule_fill(&train_set, o.batch, o.steps, config.seed, schedule);
  take_share(&o, schedule, global_bytes, c.local, c.local_bytes, train_set.dim);
  CHECK_CUDA(cudaMalloc((void **)&c.device_losses, (size_t)o.steps * sizeof(float)));
  CHECK_MLP(mlp_model_create(&c.model, &config, c.stream));

  run_t eager = {.name = "eager"}, graph = {.name = "whole-step graph"};
  train(&c, MLP_WAY_EAGER, &eager);
  train(&c, MLP_WAY_WHOLE, &graph);
  int bad = 0;
  if (rank0) {
    printf("\n%-18s %12s %14s\n", "way (rank 0)", "us per step", "host us/step");
    printf("%-18s %12.1f %14.2f\n", eager.name, eager.step_us, eager.host_us);
    printf("%-18s %12.1f %14.2f\n", graph.name, graph.step_us, graph.host_us);
    printf("graph / eager: step time %.3f, host time %.3f\n", graph.step_us / eager.step_us,
           graph.host_us / eager.host_us);
    if (graph.collectives)
      printf("the step graph records %zu collective(s); recap_graph_check_collectives: %.1f us\n",
             graph.collectives, graph.check_us);
    printf("\nlosses, first and last step: %.6f -> %.6f\n", (double)graph.losses[0],
           (double)graph.losses[o.steps - 1]);
  }
  const size_t flat = mlp_model_flat_count(c.model);
  /* NCCL's reduction runs the same way eagerly and in the graph: the two ways agree exactly. */
  if (rank0) printf("\nchecks:\n");
  bad |= compare(o.rank, "eager vs graph, global losses", eager.losses, graph.losses,
                 (size_t)o.steps, 1, 0);
  bad |= compare(o.rank, "eager vs graph, the rank's parameters", eager.params, graph.params, flat,
                 1, 0);
  if (rank0) {
    run_t single = {.name = "single process"};
    reference(&o, &config, c.stream, schedule, global_bytes, &single);
    /* One rank is exactly the single process. With more, the summation order differs (see the
     * README): the difference must stay small. */
    const int exact = o.world == 1;
    bad |= compare(0, "one process, same global batches: losses", single.losses, graph.losses,
                   (size_t)o.steps, exact, 1e-3);
    bad |= compare(0, "one process: parameters", single.params, graph.params, flat, exact, 1e-2);
    double loss = 0, accuracy = 0;
    mlp_eval_set_t *test = NULL;
    CHECK_MLP(mlp_eval_set_create(c.model, &test_set, &test));
    CHECK_MLP(mlp_evaluate(c.model, test, &loss, &accuracy));
    mlp_eval_set_destroy(test);
    printf("test set after training: loss %.4f, accuracy %.1f%%\n", loss, 100 * accuracy);
    free(single.losses);
    free(single.params);
  }
  /* Last: the loop trainer's warm-up step trains the model once more before its capture fails. */
  show_loop_refused(&c, rank0);
  printf("%s" PROGRAM ": rank %d of %d: %s\n", rank0 ? "\n" : "", o.rank, o.world,
         bad ? "FAILED (see above)" : "ok");

  free(eager.losses);
  free(eager.params);
  free(graph.losses);
  free(graph.params);
  mlp_model_destroy(c.model);
  cudaFree(c.device_losses);
  cudaFreeHost(c.local);
  cudaFreeHost(schedule);
  mlp_dataset_free(&train_set);
  mlp_dataset_free(&test_set);
  CHECK_CUDA(cudaStreamSynchronize(c.stream));
  cudaStreamDestroy(c.stream);
  /* The model's memory went back to recap's cache: give the cached segments back to CUDA. */
  CHECK_RECAP(recap_empty_cache());
  dp_comm_destroy(c.comm);
  return bad ? 1 : 0;
}
