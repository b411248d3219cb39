/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_mlp — the MLP of examples/mlp trained by recap's ways, for comparison with PyTorch
 * training the same shapes (bench/torch_mlp.py) on the same machine.
 *
 * For width/depth/batch = 512/8/32, 1024/16/64 and 4096/4/256 (3 classes, 2 input features,
 * dropout 0.1, Adam), the model of examples/mlp (mlp_model.h) trains in four ways:
 *
 *   eager           every cuBLAS call and kernel launched from the host;
 *   graphed         the network as one recap graphed callable (forward and backward graphs),
 *                   the loss eager, the Adam step a recap graph — torch's counterpart is
 *                   make_graphed_callables(model) plus a captured optimizer step;
 *   graphed_layers  the same with one callable per layer, chained;
 *   whole_step      forward, loss, backward and Adam as one recap graph — torch's counterpart
 *                   is one torch.cuda.graph of the whole step with capturable Adam. This is the
 *                   floor: nothing is launched per step but the batch copy and one replay.
 *
 * Each way starts from the same state, trains `warmup` steps untimed, then `steps` timed steps.
 * A step's time is the GPU-timeline time between cudaEvents recorded just before and just after
 * the step is enqueued (the batch copy from pinned memory included), with no synchronisation per
 * step; the median over the timed steps is reported, with the CPU time to enqueue a step. The
 * ways must give the same losses bit for bit ("bitwise" in the JSON); that is checked, not
 * timed. Goals (reported by bench/plot_mlp.py against torch_mlp.json, never asserted): recap's
 * graphed step at least 4x faster than torch's make_graphed_callables step at small shapes, and
 * within 1.1x of the whole-step graph.
 *
 *     bench_mlp [--quick] [--json PATH]
 *
 * Exit status: 0 done, 1 a call failed or the ways disagree, 2 no CUDA device.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "mlp_data.h"
#include "mlp_model.h"

#define NAME "bench_mlp"

typedef struct shape {
  int width, depth, batch;
} shape_t;

static const shape_t shapes[] = {{512, 8, 32}, {1024, 16, 64}, {4096, 4, 256}};
enum { SHAPE_COUNT = sizeof shapes / sizeof shapes[0] };

typedef struct way_spec {
  const char *name;
  mlp_way_t way;
  mlp_split_t split;
} way_spec_t;

static const way_spec_t ways[] = {
    {"eager", MLP_WAY_EAGER, MLP_SPLIT_MODEL},
    {"graphed", MLP_WAY_GRAPHED, MLP_SPLIT_MODEL},
    {"graphed_layers", MLP_WAY_GRAPHED, MLP_SPLIT_LAYER},
    {"whole_step", MLP_WAY_WHOLE, MLP_SPLIT_MODEL},
};
enum { WAY_COUNT = sizeof ways / sizeof ways[0] };

typedef struct way_result {
  bench_stats_t step_us, host_us;
  double setup_ms;
  float final_loss;
} way_result_t;

typedef struct shape_result {
  shape_t shape;
  size_t parameters;
  int bitwise;
  way_result_t ways[WAY_COUNT];
} shape_result_t;

#define BENCH_MLP(call)                                                          \
  do {                                                                           \
    recap_status_t bench_status_ = (call);                                       \
    if (bench_status_ != RECAP_SUCCESS) {                                        \
      fprintf(stderr, "%s:%d: %s failed: %s\n  %s\n", __FILE__, __LINE__, #call, \
              recap_status_name(bench_status_), mlp_error());                    \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static void run_shape(const shape_t *shape, int warmup, int steps, cudaStream_t stream,
                      shape_result_t *result) {
  const int total = warmup + steps;
  mlp_config_t config = MLP_CONFIG_INIT;
  config.width = shape->width;
  config.depth = shape->depth;
  config.batch = shape->batch;
  config.lr = 1e-3f;
  config.loss_capacity = total;

  mlp_dataset_t train, test;
  if (mlp_spirals(config.classes, 2000, 0.2f, 0.2, config.seed, &train, &test) != 0) {
    fprintf(stderr, NAME ": out of host memory\n");
    exit(1);
  }
  const size_t batch_bytes = mlp_batch_bytes(config.batch, train.dim);
  unsigned char *schedule;
  BENCH_CUDA(cudaHostAlloc((void **)&schedule, (size_t)total * batch_bytes, cudaHostAllocDefault));
  mlp_schedule_fill(&train, config.batch, total, config.seed, schedule);

  mlp_model_t *model;
  BENCH_MLP(mlp_model_create(&model, &config, stream));
  result->shape = *shape;
  result->parameters = mlp_model_parameter_count(model);
  result->bitwise = 1;

  cudaEvent_t *start = bench_calloc(NAME, (size_t)steps, sizeof *start);
  cudaEvent_t *end = bench_calloc(NAME, (size_t)steps, sizeof *end);
  double *step_us = bench_calloc(NAME, (size_t)steps, sizeof *step_us);
  double *host_us = bench_calloc(NAME, (size_t)steps, sizeof *host_us);
  float *losses[WAY_COUNT];
  for (int w = 0; w < WAY_COUNT; w++) losses[w] = bench_calloc(NAME, (size_t)total, sizeof(float));
  for (int s = 0; s < steps; s++) {
    BENCH_CUDA(cudaEventCreate(&start[s]));
    BENCH_CUDA(cudaEventCreate(&end[s]));
  }

  for (int w = 0; w < WAY_COUNT; w++) {
    way_result_t *r = &result->ways[w];
    BENCH_RECAP(recap_empty_cache());
    uint64_t t0 = bench_now_ns();
    mlp_trainer_t *trainer;
    BENCH_MLP(mlp_trainer_create(&trainer, model, ways[w].way, ways[w].split));
    r->setup_ms = (double)(bench_now_ns() - t0) / 1e6;
    for (int s = 0; s < warmup; s++)
      BENCH_MLP(mlp_trainer_step(trainer, schedule + (size_t)s * batch_bytes));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int s = 0; s < steps; s++) {
      const void *batch = schedule + (size_t)(warmup + s) * batch_bytes;
      BENCH_CUDA(cudaEventRecord(start[s], stream));
      uint64_t h0 = bench_now_ns();
      BENCH_MLP(mlp_trainer_step(trainer, batch));
      host_us[s] = (double)(bench_now_ns() - h0) / 1e3;
      BENCH_CUDA(cudaEventRecord(end[s], stream));
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int s = 0; s < steps; s++) {
      float ms;
      BENCH_CUDA(cudaEventElapsedTime(&ms, start[s], end[s]));
      step_us[s] = (double)ms * 1e3;
    }
    bench_stats(step_us, (size_t)steps, &r->step_us);
    bench_stats(host_us, (size_t)steps, &r->host_us);
    BENCH_MLP(mlp_model_read_losses(model, losses[w], total));
    r->final_loss = losses[w][total - 1];
    mlp_trainer_destroy(trainer);
    if (memcmp(losses[w], losses[0], (size_t)total * sizeof(float)) != 0) {
      int s = 0;
      while (s < total && memcmp(&losses[w][s], &losses[0][s], sizeof(float)) == 0) s++;
      fprintf(stderr, NAME ": %d/%d/%d: %s's loss differs from eager's at step %d (%.9g vs %.9g)\n",
              shape->width, shape->depth, shape->batch, ways[w].name, s + 1, (double)losses[w][s],
              (double)losses[0][s]);
      result->bitwise = 0;
    }
  }

  for (int s = 0; s < steps; s++) {
    cudaEventDestroy(start[s]);
    cudaEventDestroy(end[s]);
  }
  for (int w = 0; w < WAY_COUNT; w++) free(losses[w]);
  free(start);
  free(end);
  free(step_us);
  free(host_us);
  mlp_model_destroy(model);
  BENCH_CUDA(cudaFreeHost(schedule));
  mlp_dataset_free(&train);
  mlp_dataset_free(&test);
  BENCH_RECAP(recap_empty_cache());
}

static void write_json(const char *path, const shape_result_t *results, int warmup, int steps) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, NAME ": cannot write %s\n", path);
    exit(1);
  }
  fprintf(f, "{\n  \"benchmark\": \"%s\",\n  ", NAME);
  bench_device_json(f);
  fprintf(f,
          ",\n  \"warmup_steps\": %d,\n  \"timed_steps\": %d,\n"
          "  \"timing\": \"step_us: cudaEvent time from just before to just after each step's "
          "enqueue (batch copy included), no synchronisation per step; host_us: CPU time to "
          "enqueue one step\",\n  \"shapes\": [",
          warmup, steps);
  for (int i = 0; i < SHAPE_COUNT; i++) {
    const shape_result_t *r = &results[i];
    fprintf(f,
            "%s\n    {\"width\": %d, \"depth\": %d, \"batch\": %d, \"parameters\": %zu, "
            "\"bitwise\": %s, \"ways\": {",
            i ? "," : "", r->shape.width, r->shape.depth, r->shape.batch, r->parameters,
            r->bitwise ? "true" : "false");
    for (int w = 0; w < WAY_COUNT; w++) {
      fprintf(f, "%s\n      \"%s\": {\"step_us\": ", w ? "," : "", ways[w].name);
      bench_stats_json(f, &r->ways[w].step_us);
      fprintf(f, ", \"host_us\": ");
      bench_stats_json(f, &r->ways[w].host_us);
      fprintf(f, ", \"setup_ms\": %.3f, \"final_loss\": %.9g}", r->ways[w].setup_ms,
              (double)r->ways[w].final_loss);
    }
    fprintf(f, "\n    }}");
  }
  fprintf(f, "\n  ]\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, NAME ": cannot write %s\n", path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME,
                        "Trains the MLP of examples/mlp at width/depth/batch 512/8/32,\n"
                        "1024/16/64 and 4096/4/256 eagerly, with graphed callables and as a\n"
                        "whole-step graph; compare with bench/torch_mlp.py (bench/plot_mlp.py).\n",
                        &args, &exit_code))
    return exit_code;
  int no_device = bench_require_device(NAME);
  if (no_device) return no_device;

  const int warmup = args.quick ? 10 : 30;
  const int steps = args.quick ? 60 : 300;
  char line[512];
  bench_describe_device(line, sizeof line);
  printf("%s: %s\n", NAME, line);
  printf(
      "median step time in us (GPU timeline per step, %d timed steps after %d warm-up); "
      "host = CPU us to enqueue a step\n\n",
      steps, warmup);
  printf("%-14s %10s %10s %10s %10s %10s %9s %9s %8s\n", "width/depth/B", "params", "eager",
         "graphed", "gr_layers", "whole", "gr/whole", "eager/gr", "bitwise");

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  shape_result_t results[SHAPE_COUNT];
  memset(results, 0, sizeof results);
  int all_bitwise = 1;
  for (int i = 0; i < SHAPE_COUNT; i++) {
    run_shape(&shapes[i], warmup, steps, stream, &results[i]);
    const shape_result_t *r = &results[i];
    char label[32];
    snprintf(label, sizeof label, "%d/%d/%d", r->shape.width, r->shape.depth, r->shape.batch);
    const double eager = r->ways[0].step_us.median, graphed = r->ways[1].step_us.median,
                 layers = r->ways[2].step_us.median, whole = r->ways[3].step_us.median;
    printf("%-14s %10zu %10.1f %10.1f %10.1f %10.1f %8.2fx %8.2fx %8s\n", label, r->parameters,
           eager, graphed, layers, whole, graphed / whole, eager / graphed,
           r->bitwise ? "yes" : "NO");
    printf("%-14s %10s %10.1f %10.1f %10.1f %10.1f   (host us per step)\n", "", "",
           r->ways[0].host_us.median, r->ways[1].host_us.median, r->ways[2].host_us.median,
           r->ways[3].host_us.median);
    fflush(stdout);
    all_bitwise &= r->bitwise;
  }
  BENCH_CUDA(cudaStreamDestroy(stream));
  write_json(args.json_path, results, warmup, steps);
  printf("\nwrote %s (compare with torch_mlp.json: python3 bench/plot_mlp.py)\n", args.json_path);
  if (!all_bitwise) {
    fprintf(stderr, NAME ": the ways did not agree bit for bit (see above)\n");
    return 1;
  }
  return 0;
}
