/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp — train a multi-layer perceptron in C on cuBLAS, four ways, with recap.
 *
 *   eager       every kernel and cuBLAS call launched from the host at every step;
 *   graphed     the network as recap graphed callables (PyTorch's make_graphed_callables):
 *               forward and backward captured as graphs sharing one pool, the loss launched
 *               eagerly between them, the Adam step captured as a graph of its own;
 *   whole-step  forward, loss, backward and Adam captured as one recap graph;
 *   loop        K steps per launch: the batch schedule on the device, one recap graph holding
 *               a WHILE region whose body gathers the batch at the step counter's index and
 *               runs the whole step (recap/region.h); run for K = 1, 10 and 100 by default.
 *
 * The task: K noisy interleaved spirals made on the host from a seed. Each step copies its
 * batch from pinned host memory into a device staging buffer (outside every graph), then
 * trains (the loop way copies the same bytes on the device from its copy of the schedule).
 * With the same seed every way gives the same loss at every step, bit for bit;
 * the program checks that and says so. It reports loss and accuracy as training goes, the
 * median step time of each way and the speedups, the memory recap's pools hold, and writes the
 * whole-step graph as recap's inspection JSON, Graphviz DOT and an HTML page (drawn by the
 * viewer library, tools/view, straight from recap_graph_inspect) into an output folder.
 *
 *     mlp [--way all|eager|graphed|whole|loop] [--per-launch K,...] [--steps N] [--width W]
 *         [--depth D] [--batch B] [--callables model|layer] [--out DIR | --no-out] [--check]
 *         ...                                                              (mlp --help)
 *
 * Exit status: 0 success; 1 a failure, or the ways disagree; 2 a bad command line, or no
 * GPU; 77 no GPU with --check (the test runner's "skipped").
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "mlp_data.h"
#include "mlp_model.h"
#include "recap.h"
#include "recap_view.h"

#define PROGRAM "mlp"
#include "example_check.h"
#include "example_args.h"
enum { EXIT_NO_DEVICE = 2, EXIT_CHECK_SKIP = 77, MAX_GRAPHS = 64, STEPS_UNDER_A_TOOL = 5 };
enum { WAYS = 4, MAX_LOOPS = 4, MAX_RUNS = 4 + MAX_LOOPS };

/* ==========================================================================================
 * Failing clearly
 * ======================================================================================== */

/* Calls into the model module: its own message says what failed and why. */
#define CHECK_MLP(call)                                                             \
  do {                                                                              \
    recap_status_t status_ = (call);                                                \
    if (status_ != RECAP_SUCCESS)                                                   \
      die("%s failed (%s):\n  %s", #call, recap_status_name(status_), mlp_error()); \
  } while (0)

/* ==========================================================================================
 * Options
 * ======================================================================================== */

typedef struct options {
  mlp_config_t model;
  int steps;
  int per_class;
  float noise;
  int eval_every;
  int ways[WAYS];            /* which of eager, graphed, whole-step, loop run */
  int per_launch[MAX_LOOPS]; /* the loop way's K, one run each */
  int loops;
  mlp_split_t split;
  int check;
  const char *out_dir; /* NULL: no output folder */
} options_t;

static void usage(FILE *f) {
  fprintf(f, "usage: " PROGRAM
             " [options]\n"
             "\n"
             "Train an MLP on noisy spirals with cuBLAS and recap: eagerly, with graphed\n"
             "callables, as one whole-step graph, and K steps per launch in a WHILE loop on the\n"
             "GPU; compare losses bit for bit and step times.\n"
             "\n"
             "  --way all|eager|graphed|whole|loop  which way(s) to run (default all)\n"
             "  --per-launch K[,K...]  the loop way's steps per launch, one run each, at most\n"
             "                       4 values (default 1,10,100)\n"
             "  --check              run every way (graphed with model and per-layer\n"
             "                       callables); compare per-step losses and final parameters bit\n"
             "                       for bit; exit 0 if identical, 1 if not, 77 without a GPU\n"
             "  --steps N            training steps per way (default 600)\n"
             "  --width W            units per hidden layer (default 512)\n"
             "  --depth D            hidden layers (default 4)\n"
             "  --batch B            samples per step (default 256)\n"
             "  --classes K          spirals, i.e. classes (default 3)\n"
             "  --points N           points per spiral (default 2000; 20%% held out for test)\n"
             "  --noise X            angle noise of the spirals, radians (default 0.2)\n"
             "  --dropout P          dropout after each hidden layer (default 0.1)\n"
             "  --lr LR              Adam learning rate (default 0.002)\n"
             "  --seed S             seed of data, parameters and dropout (default 1234)\n"
             "  --eval-every N       evaluate every N steps (default 100; 0: at the end only)\n"
             "  --callables model|layer  graphed way: one callable for the network, or one\n"
             "                       per layer, chained (default model)\n"
             "  --out DIR            output folder (default ./mlp-out)\n"
             "  --no-out             write no output folder\n"
             "  -h, --help           this text\n");
}

/* A count of at most a billion. */
static int parse_int(const char *s, int min, int *out) {
  return example_parse_int(s, min, 1000000000L, out);
}

/* "1,10,100": 1 to MAX_LOOPS positive integers. */
static int parse_list(const char *s, int *values, int *count) {
  char buf[128];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return 0;
  *count = 0;
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
       item = strtok_r(NULL, ",", &save)) {
    if (*count == MAX_LOOPS || !parse_int(item, 1, &values[*count])) return 0;
    (*count)++;
  }
  return *count > 0;
}

static int parse_float(const char *s, float *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !isfinite(v)) return 0;
  *out = (float)v;
  return 1;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, options_t *o) {
  enum {
    OPT_WAY = 256,
    OPT_STEPS,
    OPT_WIDTH,
    OPT_DEPTH,
    OPT_BATCH,
    OPT_CLASSES,
    OPT_POINTS,
    OPT_NOISE,
    OPT_DROPOUT,
    OPT_LR,
    OPT_SEED,
    OPT_EVAL_EVERY,
    OPT_CALLABLES,
    OPT_OUT,
    OPT_NO_OUT,
    OPT_CHECK,
    OPT_PER_LAUNCH
  };
  static const struct option options[] = {
      {"way", required_argument, NULL, OPT_WAY},
      {"steps", required_argument, NULL, OPT_STEPS},
      {"width", required_argument, NULL, OPT_WIDTH},
      {"depth", required_argument, NULL, OPT_DEPTH},
      {"batch", required_argument, NULL, OPT_BATCH},
      {"classes", required_argument, NULL, OPT_CLASSES},
      {"points", required_argument, NULL, OPT_POINTS},
      {"noise", required_argument, NULL, OPT_NOISE},
      {"dropout", required_argument, NULL, OPT_DROPOUT},
      {"lr", required_argument, NULL, OPT_LR},
      {"seed", required_argument, NULL, OPT_SEED},
      {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
      {"callables", required_argument, NULL, OPT_CALLABLES},
      {"out", required_argument, NULL, OPT_OUT},
      {"no-out", no_argument, NULL, OPT_NO_OUT},
      {"check", no_argument, NULL, OPT_CHECK},
      {"per-launch", required_argument, NULL, OPT_PER_LAUNCH},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  mlp_config_t init = MLP_CONFIG_INIT;
  *o = (options_t){.model = init,
                   .steps = 600,
                   .per_class = 2000,
                   .noise = 0.2f,
                   .eval_every = 100,
                   .ways = {1, 1, 1, 1},
                   .per_launch = {1, 10, 100},
                   .loops = 3,
                   .split = MLP_SPLIT_MODEL,
                   .out_dir = "mlp-out"};
  int c, index = 0;
  while ((c = getopt_long(argc, argv, "h", options, &index)) != -1) {
    const char *v = optarg;
    int ok = 1;
    float f;
    switch (c) {
      case 'h': usage(stdout); return 0;
      case OPT_CHECK: o->check = 1; break;
      case OPT_NO_OUT: o->out_dir = NULL; break;
      case OPT_WAY: {
        static const char *const names[WAYS] = {"eager", "graphed", "whole", "loop"};
        int all = !strcmp(v, "all"), known = all;
        for (int w = 0; w < WAYS; w++) {
          o->ways[w] = all || !strcmp(v, names[w]);
          known |= o->ways[w];
        }
        ok = known;
        break;
      }
      case OPT_PER_LAUNCH: ok = parse_list(v, o->per_launch, &o->loops); break;
      case OPT_STEPS: ok = parse_int(v, 1, &o->steps); break;
      case OPT_WIDTH: ok = parse_int(v, 1, &o->model.width); break;
      case OPT_DEPTH: ok = parse_int(v, 1, &o->model.depth); break;
      case OPT_BATCH: ok = parse_int(v, 1, &o->model.batch); break;
      case OPT_CLASSES: ok = parse_int(v, 2, &o->model.classes); break;
      case OPT_POINTS: ok = parse_int(v, 2, &o->per_class); break;
      case OPT_NOISE: ok = parse_float(v, &o->noise) && o->noise >= 0.0f; break;
      case OPT_DROPOUT:
        ok = parse_float(v, &f) && f >= 0.0f && f < 1.0f;
        o->model.dropout = f;
        break;
      case OPT_LR:
        ok = parse_float(v, &f) && f > 0.0f;
        o->model.lr = f;
        break;
      case OPT_SEED: {
        char *end;
        errno = 0;
        o->model.seed = strtoull(v, &end, 0);
        ok = !errno && !*end && end != v;
        break;
      }
      case OPT_EVAL_EVERY: ok = parse_int(v, 0, &o->eval_every); break;
      case OPT_CALLABLES:
        ok = !strcmp(v, "model") || !strcmp(v, "layer");
        o->split = !strcmp(v, "layer") ? MLP_SPLIT_LAYER : MLP_SPLIT_MODEL;
        break;
      case OPT_OUT: o->out_dir = v; break;
      default: /* getopt_long said what was wrong: an unknown option or a missing value */
        usage(stderr);
        return 2;
    }
    if (!ok) {
      fprintf(stderr, PROGRAM ": option --%s needs a valid value, not %s\n", options[index].name,
              v);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, PROGRAM ": unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  o->model.loss_capacity = o->steps;
  return -1;
}

/* ==========================================================================================
 * Small helpers
 * ======================================================================================== */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Quantile q of sorted samples, interpolated. */
static double quantile(const double *sorted, int n, double q) {
  if (n <= 0) return 0.0;
  double pos = q * (n - 1);
  int lo = (int)pos;
  if (lo + 1 >= n) return sorted[n - 1];
  return sorted[lo] + (pos - lo) * (sorted[lo + 1] - sorted[lo]);
}

static double mib(int64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* mkdir -p. */
static int make_dirs(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
  return 0;
}

static void join(char *out, size_t size, const char *dir, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

/* ==========================================================================================
 * One run of one way
 * ======================================================================================== */

typedef struct way_run {
  mlp_way_t way;
  mlp_split_t split;
  int per_launch; /* the loop way's K */
  char label[32];
  int ran;
  float *losses; /* steps */
  float *params; /* flat */
  uint64_t generator_offset;
  double setup_ms;
  double step_us[3]; /* median, p10, p90 of the GPU-timeline step time */
  double host_us;    /* median host time to enqueue a step */
  double train_loss, train_acc, test_loss, test_acc;
} way_run_t;

typedef struct context {
  options_t *o;
  mlp_model_t *model;
  cudaStream_t stream;
  unsigned char *schedule; /* pinned: steps packed batches */
  size_t batch_bytes;
  mlp_eval_set_t *train_set, *test_set;
  cudaEvent_t *start, *end; /* per step (per launch in the loop way) */
  double *samples;
  int *launch_steps; /* the loop way: steps of each launch */
  int tty;
  int quiet; /* --check: no per-way report */
} context_t;

static void clear_progress(const context_t *c) {
  if (c->tty) printf("\r\033[K");
}

static void evaluate(context_t *c, way_run_t *r, int step) {
  CHECK_MLP(mlp_evaluate(c->model, c->train_set, &r->train_loss, &r->train_acc));
  CHECK_MLP(mlp_evaluate(c->model, c->test_set, &r->test_loss, &r->test_acc));
  if (c->quiet) return;
  float batch_loss = 0.0f;
  float *losses = r->losses;
  CHECK_MLP(mlp_model_read_losses(c->model, losses, step));
  batch_loss = losses[step - 1];
  clear_progress(c);
  printf(
      "  step %6d/%-6d batch loss %.4f | train loss %.4f acc %5.1f%% | test loss %.4f "
      "acc %5.1f%%\n",
      step, c->o->steps, (double)batch_loss, r->train_loss, 100.0 * r->train_acc, r->test_loss,
      100.0 * r->test_acc);
  fflush(stdout);
}

static void print_graphs_and_pools(mlp_trainer_t *trainer) {
  mlp_graph_entry_t graphs[MAX_GRAPHS];
  int count = 0;
  CHECK_MLP(mlp_trainer_graphs(trainer, graphs, MAX_GRAPHS, &count));
  if (count > 0) {
    printf("  graphs   ");
    for (int i = 0; i < count; i++) {
      size_t nodes = 0;
      CHECK_RECAP(recap_graph_node_count(graphs[i].graph, &nodes));
      printf("%s%s %zu nodes", i ? ", " : "", graphs[i].name, nodes);
      if (i % 4 == 3 && i + 1 < count) printf("\n           ");
    }
    printf("\n");
  }
  /* The pools behind the graphs, each once. */
  recap_pool_id_t seen[MAX_GRAPHS];
  int uses[MAX_GRAPHS], first[MAX_GRAPHS], pools = 0;
  for (int i = 0; i < count; i++) {
    recap_pool_id_t p;
    CHECK_RECAP(recap_graph_pool(graphs[i].graph, &p));
    int k = 0;
    while (k < pools && !(seen[k].a == p.a && seen[k].b == p.b)) k++;
    if (k == pools) {
      seen[pools] = p;
      uses[pools] = 0;
      first[pools] = i;
      pools++;
    }
    uses[k]++;
  }
  for (int k = 0; k < pools; k++) {
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    recap_status_t s = recap_pool_memory(seen[k], &info);
    printf("  pool     {%llu,%llu} of %d graph%s (%s%s): ", (unsigned long long)seen[k].a,
           (unsigned long long)seen[k].b, uses[k], uses[k] == 1 ? "" : "s", graphs[first[k]].name,
           uses[k] > 1 ? ", ..." : "");
    if (s == RECAP_SUCCESS)
      printf("%lld segment%s, %.1f MiB reserved, %.1f MiB allocated\n", (long long)info.segments,
             info.segments == 1 ? "" : "s", mib(info.reserved_bytes), mib(info.allocated_bytes));
    else
      printf("no memory (%s)\n",
             s == RECAP_ERROR_NOT_FOUND ? "the graph allocated nothing" : recap_last_error());
  }
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  CHECK_RECAP(recap_memory_stats(-1, &stats));
  printf(
      "  memory   recap on the device: %.1f MiB allocated, %.1f MiB reserved (peak %.1f MiB "
      "reserved)\n",
      mib(stats.allocated_bytes[RECAP_STAT_ALL].current),
      mib(stats.reserved_bytes[RECAP_STAT_ALL].current),
      mib(stats.reserved_bytes[RECAP_STAT_ALL].peak));
}

/* Capture the whole step once more, keeping the template and with annotation scopes on, and
 * write what it holds: recap's inspection JSON, and the viewer's DOT and HTML page. */
static void write_step_graph(context_t *c) {
  const char *dir = c->o->out_dir;
  char json_path[4096], dot_path[4096], html_path[4096];
  join(json_path, sizeof json_path, dir, "whole_step_graph.json");
  join(dot_path, sizeof dot_path, dir, "whole_step_graph.dot");
  join(html_path, sizeof html_path, dir, "whole_step_graph.html");

  recap_graph_t graph;
  recap_annotations_enable(1);
  recap_status_t captured = mlp_capture_step(c->model, RECAP_GRAPH_KEEP, &graph);
  recap_annotations_enable(-1);
  CHECK_MLP(captured);
  recap_graph_info_t *info;
  char *json;
  CHECK_RECAP(recap_graph_inspect(graph, &info));
  CHECK_RECAP(recap_graph_info_json(info, &json));
  size_t by_type[RECAP_NODE_TYPE_COUNT] = {0};
  for (size_t i = 0; i < info->node_count; i++)
    if ((int)info->nodes[i].type >= 0 && info->nodes[i].type < RECAP_NODE_TYPE_COUNT)
      by_type[info->nodes[i].type]++;
  printf("  inspect  whole-step graph: %zu nodes, %zu edges (", info->node_count, info->edge_count);
  int any = 0;
  for (int t = 0; t < RECAP_NODE_TYPE_COUNT; t++) {
    if (!by_type[t]) continue;
    printf("%s%zu %s", any++ ? ", " : "", by_type[t], recap_node_type_name((recap_node_type_t)t));
  }
  printf(")\n");
  FILE *f = fopen(json_path, "w");
  if (!f || fputs(json, f) < 0 || fclose(f) != 0)
    die("cannot write %s: %s", json_path, strerror(errno));
  recap_string_free(json);
  printf("  wrote    %s\n", json_path);

  recap_view_graph_t view;
  char err[512];
  if (recap_view_from_info(&view, info, err, sizeof err) != 0) die("the graph viewer: %s", err);
  recap_graph_info_free(info);
  recap_pool_id_t pool;
  CHECK_RECAP(recap_graph_pool(graph, &pool));
  CHECK_RECAP(recap_graph_destroy(graph));
  char text[64];
  snprintf(text, sizeof text, "{%llu, %llu}", (unsigned long long)pool.a,
           (unsigned long long)pool.b);
  if (recap_view_set_string(&view.pool, text) != 0) die("out of host memory");
  if (recap_view_save_dot(&view, dot_path, "the mlp example's whole-step graph", err, sizeof err) !=
      0)
    die("cannot write %s: %s", dot_path, err);
  printf("  wrote    %s\n", dot_path);
  char title[128];
  snprintf(title, sizeof title, "mlp whole step (width %d, depth %d, batch %d)", c->o->model.width,
           c->o->model.depth, c->o->model.batch);
  if (recap_view_save_html(&view, html_path, title, err, sizeof err) != 0)
    die("cannot write %s: %s", html_path, err);
  printf("  wrote    %s\n", html_path);
  recap_view_graph_free(&view);
}

static const char *way_description(mlp_way_t way, mlp_split_t split) {
  switch (way) {
    case MLP_WAY_EAGER: return "every kernel and cuBLAS call launched from the host";
    case MLP_WAY_GRAPHED:
      return split == MLP_SPLIT_LAYER
                 ? "one graphed callable per layer (forward/backward graphs, one pool), loss "
                   "eager, Adam graph"
                 : "the network as a graphed callable (forward/backward graphs), loss eager, "
                   "Adam graph";
    case MLP_WAY_WHOLE: return "forward, loss, backward and Adam as one graph";
    case MLP_WAY_LOOP:
      return "K steps per launch: a WHILE region over the whole step, the batch gathered on "
             "the device";
  }
  return "";
}

static mlp_trainer_t *make_trainer(context_t *c, way_run_t *r) {
  if (!c->quiet) {
    printf("\n== %s: %s ==\n", r->label, way_description(r->way, r->split));
    fflush(stdout);
  }
  CHECK_RECAP(recap_empty_cache());
  CHECK_RECAP(recap_memory_reset_peak(-1));
  uint64_t t0 = now_ns();
  mlp_trainer_t *trainer;
  if (r->way == MLP_WAY_LOOP)
    CHECK_MLP(mlp_trainer_create_loop(&trainer, c->model, r->per_launch));
  else
    CHECK_MLP(mlp_trainer_create(&trainer, c->model, r->way, r->split));
  r->setup_ms = (double)(now_ns() - t0) / 1e6;
  if (!c->quiet) {
    printf("  prepared in %.1f ms (one eager warm-up step%s, then reset)\n", r->setup_ms,
           r->way == MLP_WAY_GRAPHED ? ", recap_graphed_create's warm-up and captures, the "
                                       "Adam capture"
           : r->way == MLP_WAY_WHOLE ? ", the whole-step capture"
           : r->way == MLP_WAY_LOOP  ? ", the loop's capture"
                                     : "");
    if (r->way != MLP_WAY_EAGER && !recap_graphs_enabled())
      printf("  RECAP_DISABLE_GRAPHS=1: nothing is captured, this way runs eagerly\n");
  }
  return trainer;
}

static void show_progress(const context_t *c, const way_run_t *r, int before, int done) {
  const int steps = c->o->steps, every = steps >= 50 ? steps / 50 : 1;
  if (c->tty && !c->quiet && done / every != before / every) {
    printf("\r  [%s] step %d/%d", r->label, done, steps);
    fflush(stdout);
  }
}

/* Whether to evaluate after the steps (before, done]: at every multiple of --eval-every they
 * cross, and at the end. */
static int evaluate_now(const context_t *c, int before, int done) {
  const int every = c->o->eval_every;
  return (!c->quiet && every > 0 && done / every != before / every) || done == c->o->steps;
}

/* One step per call; returns the samples taken (one per step). */
static int train_steps(context_t *c, way_run_t *r, mlp_trainer_t *trainer) {
  const int steps = c->o->steps;
  for (int s = 0; s < steps; s++) {
    const void *batch = c->schedule + (size_t)s * c->batch_bytes;
    CHECK_CUDA(cudaEventRecord(c->start[s], c->stream));
    uint64_t h0 = now_ns();
    CHECK_MLP(mlp_trainer_step(trainer, batch));
    c->samples[s] = (double)(now_ns() - h0) / 1e3;
    CHECK_CUDA(cudaEventRecord(c->end[s], c->stream));
    c->launch_steps[s] = 1;
    show_progress(c, r, s, s + 1);
    if (evaluate_now(c, s, s + 1)) evaluate(c, r, s + 1);
  }
  return steps;
}

/* The loop way: K steps per launch; returns the launches made (one sample each). */
static int train_launches(context_t *c, way_run_t *r, mlp_trainer_t *trainer) {
  int done = 0, launches = 0;
  while (done < c->o->steps) {
    int n = 0;
    CHECK_CUDA(cudaEventRecord(c->start[launches], c->stream));
    uint64_t h0 = now_ns();
    CHECK_MLP(mlp_trainer_launch(trainer, &n));
    c->samples[launches] = (double)(now_ns() - h0) / 1e3;
    CHECK_CUDA(cudaEventRecord(c->end[launches], c->stream));
    c->launch_steps[launches++] = n;
    show_progress(c, r, done, done + n);
    if (evaluate_now(c, done, done + n)) evaluate(c, r, done + n);
    done += n;
  }
  return launches;
}

/* Per-step host and GPU-timeline times from `count` samples (each covering launch_steps[i]
 * steps): medians and quantiles. */
static void summarize_times(context_t *c, way_run_t *r, int count) {
  for (int i = 0; i < count; i++) c->samples[i] /= c->launch_steps[i];
  qsort(c->samples, (size_t)count, sizeof(double), compare_double);
  r->host_us = quantile(c->samples, count, 0.5);
  for (int i = 0; i < count; i++) {
    float ms = 0.0f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, c->start[i], c->end[i]));
    c->samples[i] = (double)ms * 1e3 / c->launch_steps[i];
  }
  qsort(c->samples, (size_t)count, sizeof(double), compare_double);
  r->step_us[0] = quantile(c->samples, count, 0.5);
  r->step_us[1] = quantile(c->samples, count, 0.1);
  r->step_us[2] = quantile(c->samples, count, 0.9);
}

static void run_way(context_t *c, way_run_t *r) {
  mlp_trainer_t *trainer = make_trainer(c, r);
  int count = r->way == MLP_WAY_LOOP ? train_launches(c, r, trainer) : train_steps(c, r, trainer);
  CHECK_CUDA(cudaStreamSynchronize(c->stream));
  clear_progress(c);
  summarize_times(c, r, count);

  CHECK_MLP(mlp_model_read_losses(c->model, r->losses, c->o->steps));
  CHECK_MLP(mlp_model_read_parameters(c->model, r->params));
  CHECK_RECAP(recap_generator_offset_get(mlp_model_generator(c->model), &r->generator_offset));
  r->ran = 1;

  if (!c->quiet) {
    printf(
        "  time     %.1f us per step (median; p10 %.1f, p90 %.1f), host %.1f us to enqueue "
        "a step\n",
        r->step_us[0], r->step_us[1], r->step_us[2], r->host_us);
    if (r->way == MLP_WAY_LOOP)
      printf("  launches %d of up to %d steps each\n", count, r->per_launch);
    print_graphs_and_pools(trainer);
    if (r->way == MLP_WAY_WHOLE && c->o->out_dir && !!recap_graphs_enabled()) write_step_graph(c);
  }
  mlp_trainer_destroy(trainer);
  fflush(stdout);
}

/* ==========================================================================================
 * Comparing the ways
 * ======================================================================================== */

/* 1 when run b matches run a bit for bit; otherwise prints the first difference. */
static int compare_runs(const context_t *c, const way_run_t *a, const way_run_t *b) {
  const int steps = c->o->steps;
  for (int s = 0; s < steps; s++) {
    if (float_bits(a->losses[s]) != float_bits(b->losses[s])) {
      printf("MISMATCH: the loss of step %d differs: %s %.9g (0x%08x), %s %.9g (0x%08x)\n", s + 1,
             a->label, (double)a->losses[s], float_bits(a->losses[s]), b->label,
             (double)b->losses[s], float_bits(b->losses[s]));
      return 0;
    }
  }
  const size_t flat = mlp_model_flat_count(c->model);
  for (size_t i = 0; i < flat; i++) {
    if (float_bits(a->params[i]) != float_bits(b->params[i])) {
      printf("MISMATCH: parameter %zu after training differs: %s %.9g, %s %.9g\n", i, a->label,
             (double)a->params[i], b->label, (double)b->params[i]);
      return 0;
    }
  }
  if (a->generator_offset != b->generator_offset) {
    printf("MISMATCH: the generator's offset after training differs: %s %llu, %s %llu\n", a->label,
           (unsigned long long)a->generator_offset, b->label,
           (unsigned long long)b->generator_offset);
    return 0;
  }
  return 1;
}

/* A curve of NaNs, or one the loss kernel never wrote, would compare equal everywhere and
 * prove nothing. */
static int losses_sane(const context_t *c, const way_run_t *r) {
  for (int s = 0; s < c->o->steps; s++) {
    if (!isfinite(r->losses[s]) || r->losses[s] < 0.0f || (s == 0 && r->losses[s] == 0.0f)) {
      printf("BAD LOSS: %s step %d has loss %g (not a finite positive number)\n", r->label, s + 1,
             (double)r->losses[s]);
      return 0;
    }
  }
  return 1;
}

static void write_outputs(const context_t *c, const way_run_t *runs, int count, int identical,
                          const char *device) {
  const options_t *o = c->o;
  char path[4096];
  join(path, sizeof path, o->out_dir, "losses.csv");
  FILE *f = fopen(path, "w");
  if (!f) die("cannot write %s: %s", path, strerror(errno));
  fprintf(f, "step");
  for (int i = 0; i < count; i++)
    if (runs[i].ran) fprintf(f, ",%s", runs[i].label);
  fprintf(f, "\n");
  for (int s = 0; s < o->steps; s++) {
    fprintf(f, "%d", s + 1);
    for (int i = 0; i < count; i++)
      if (runs[i].ran) fprintf(f, ",%.9g", (double)runs[i].losses[s]);
    fprintf(f, "\n");
  }
  if (fclose(f) != 0) die("cannot write %s", path);
  printf("  wrote    %s\n", path);

  join(path, sizeof path, o->out_dir, "summary.json");
  f = fopen(path, "w");
  if (!f) die("cannot write %s: %s", path, strerror(errno));
  const mlp_config_t *m = &o->model;
  fprintf(f,
          "{\n  \"program\": \"mlp\",\n  \"recap\": \"%s\",\n  \"device\": \"%s\",\n"
          "  \"config\": {\"width\": %d, \"depth\": %d, \"batch\": %d, \"classes\": %d, "
          "\"dropout\": %g, \"lr\": %g, \"seed\": %llu, \"steps\": %d, \"callables\": \"%s\"},\n"
          "  \"timing\": \"step_us: cudaEvent time from before to after each step's enqueue, no "
          "synchronisation per step; host_us: CPU time to enqueue one step\",\n"
          "  \"bitwise_identical\": %s,\n  \"ways\": [",
          recap_version_string(), device, m->width, m->depth, m->batch, m->classes,
          (double)m->dropout, (double)m->lr, (unsigned long long)m->seed, o->steps,
          mlp_split_name(o->split), identical ? "true" : "false");
  const way_run_t *eager = runs[0].ran ? &runs[0] : NULL;
  int first = 1;
  for (int i = 0; i < count; i++) {
    const way_run_t *r = &runs[i];
    if (!r->ran) continue;
    fprintf(f,
            "%s\n    {\"way\": \"%s\", \"step_us\": {\"median\": %.3f, \"p10\": %.3f, \"p90\": "
            "%.3f}, \"host_us\": %.3f, \"speedup_vs_eager\": %.3f, \"setup_ms\": %.3f, "
            "\"final_batch_loss\": %.9g, \"train_accuracy\": %.6f, \"test_accuracy\": %.6f}",
            first ? "" : ",", r->label, r->step_us[0], r->step_us[1], r->step_us[2], r->host_us,
            eager ? eager->step_us[0] / r->step_us[0] : 0.0, r->setup_ms,
            (double)r->losses[o->steps - 1], r->train_acc, r->test_acc);
    first = 0;
  }
  fprintf(f, "\n  ]\n}\n");
  if (fclose(f) != 0) die("cannot write %s", path);
  printf("  wrote    %s\n", path);
}

/* ==========================================================================================
 * main
 * ======================================================================================== */

/* Under a CUDA tool (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for compute-sanitizer, or a
 * profiler's CUDA_INJECTION64_PATH) every kernel costs milliseconds or more: a few steps per
 * way still take every path, the bit-for-bit check included, and the timings mean nothing
 * there anyway. */
static void shorten_under_a_tool(options_t *o) {
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  bool under_tool = (flag && !strcmp(flag, "1")) || (injected && *injected);
  if (under_tool && o->steps > STEPS_UNDER_A_TOOL) {
    printf("a CUDA tool is attached: %d steps per way instead of %d\n", STEPS_UNDER_A_TOOL,
           o->steps);
    o->steps = STEPS_UNDER_A_TOOL;
    o->model.loss_capacity = o->steps;
  }
}

/* The device line of the report: name, SMs, driver and runtime. */
static void describe_device(char *out, size_t size, struct cudaDeviceProp *prop) {
  int driver = 0, runtime = 0;
  CHECK_CUDA(cudaGetDeviceProperties(prop, 0));
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  snprintf(out, size, "%s (%d SMs), driver %d.%d, runtime %d.%d", prop->name,
           prop->multiProcessorCount, driver / 1000, driver % 1000 / 10, runtime / 1000,
           runtime % 1000 / 10);
}

/* The data, the model, the batch schedule (pinned, and on the device for the loop way) and
 * the per-step events. */
static void context_init(context_t *c, options_t *o, mlp_dataset_t *train, mlp_dataset_t *test) {
  *c = (context_t){.o = o, .tty = isatty(STDOUT_FILENO), .quiet = o->check};
  CHECK_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  if (mlp_spirals(o->model.classes, o->per_class, o->noise, 0.2, o->model.seed, train, test) != 0)
    die("out of host memory for the data set");
  if (train->count < 1 || test->count < 1)
    die("--points %d leaves an empty train or test set", o->per_class);
  c->batch_bytes = mlp_batch_bytes(o->model.batch, train->dim);
  CHECK_CUDA(cudaHostAlloc((void **)&c->schedule, (size_t)o->steps * c->batch_bytes,
                           cudaHostAllocDefault));
  mlp_schedule_fill(train, o->model.batch, o->steps, o->model.seed, c->schedule);

  CHECK_MLP(mlp_model_create(&c->model, &o->model, c->stream));
  CHECK_MLP(mlp_eval_set_create(c->model, train, &c->train_set));
  CHECK_MLP(mlp_eval_set_create(c->model, test, &c->test_set));
  if (o->check || o->ways[MLP_WAY_LOOP])
    CHECK_MLP(mlp_model_upload_schedule(c->model, c->schedule, o->steps));

  c->start = calloc((size_t)o->steps, sizeof *c->start);
  c->end = calloc((size_t)o->steps, sizeof *c->end);
  c->samples = calloc((size_t)o->steps, sizeof *c->samples);
  c->launch_steps = calloc((size_t)o->steps, sizeof *c->launch_steps);
  if (!c->start || !c->end || !c->samples || !c->launch_steps) die("out of host memory");
  for (int s = 0; s < o->steps; s++) {
    CHECK_CUDA(cudaEventCreate(&c->start[s]));
    CHECK_CUDA(cudaEventCreate(&c->end[s]));
  }
}

static void context_destroy(context_t *c) {
  for (int s = 0; s < c->o->steps; s++) {
    cudaEventDestroy(c->start[s]);
    cudaEventDestroy(c->end[s]);
  }
  free(c->start);
  free(c->end);
  free(c->samples);
  free(c->launch_steps);
  mlp_eval_set_destroy(c->train_set);
  mlp_eval_set_destroy(c->test_set);
  mlp_model_destroy(c->model);
  cudaFreeHost(c->schedule);
}

static void label_run(way_run_t *r, int check) {
  if (r->way == MLP_WAY_LOOP)
    snprintf(r->label, sizeof r->label, "loop/K=%d", r->per_launch);
  else if (r->way == MLP_WAY_GRAPHED && (check || r->split == MLP_SPLIT_LAYER))
    snprintf(r->label, sizeof r->label, "graphed/%s", mlp_split_name(r->split));
  else
    snprintf(r->label, sizeof r->label, "%s", mlp_way_name(r->way));
}

/* The runs: eager, graphed, whole-step, then the loop way once per K; --check runs every way
 * and adds the other callable split. Returns the count. */
static int plan_runs(const context_t *c, way_run_t *runs) {
  const options_t *o = c->o;
  int count = 0;
  const mlp_split_t other = o->split == MLP_SPLIT_MODEL ? MLP_SPLIT_LAYER : MLP_SPLIT_MODEL;
  for (int w = 0; w < WAYS; w++) {
    if (!o->check && !o->ways[w]) continue;
    if (w == MLP_WAY_LOOP) {
      for (int k = 0; k < o->loops; k++)
        runs[count++] = (way_run_t){.way = MLP_WAY_LOOP, .per_launch = o->per_launch[k]};
      continue;
    }
    runs[count++] = (way_run_t){.way = (mlp_way_t)w, .split = o->split};
    if (o->check && w == MLP_WAY_GRAPHED)
      runs[count++] = (way_run_t){.way = MLP_WAY_GRAPHED, .split = other};
  }
  const size_t flat = mlp_model_flat_count(c->model);
  for (int i = 0; i < count; i++) {
    label_run(&runs[i], o->check);
    runs[i].losses = calloc((size_t)o->steps, sizeof(float));
    runs[i].params = calloc(flat, sizeof(float));
    if (!runs[i].losses || !runs[i].params) die("out of host memory");
  }
  return count;
}

static void print_intro(const context_t *c, const mlp_dataset_t *train, const mlp_dataset_t *test,
                        const char *device, const char *device_name, int count) {
  const options_t *o = c->o;
  const mlp_config_t *m = &o->model;
  if (o->check) {
    printf(PROGRAM " --check: %d ways x %d steps (width %d, depth %d, batch %d) on %s\n", count,
           o->steps, m->width, m->depth, m->batch, device_name);
    return;
  }
  printf("recap %s: an MLP trained in C on cuBLAS, four ways\n", recap_version_string());
  printf("  device   %s\n", device);
  printf("  task     %d noisy spirals, %d features: %d training and %d test points\n", m->classes,
         train->dim, train->count, test->count);
  printf(
      "  model    %d -> %d x %d (ReLU, dropout %.2g) -> %d: %zu parameters; Adam lr %g; "
      "batch %d; %d steps per way; seed %llu\n",
      train->dim, m->depth, m->width, (double)m->dropout, m->classes,
      mlp_model_parameter_count(c->model), (double)m->lr, m->batch, o->steps,
      (unsigned long long)m->seed);
  printf(
      "  timing   step time = cudaEvent time from just before to just after a step's (or a\n"
      "           launch's, over its steps) enqueue, with no synchronisation per step (the GPU\n"
      "           timeline of steady training); host = CPU time to enqueue one step\n");
  if (o->out_dir && make_dirs(o->out_dir) != 0)
    die("cannot create the output folder %s: %s", o->out_dir, strerror(errno));
}

/* Bit for bit: every run against the first. */
static int compare_all(const context_t *c, const way_run_t *runs, int count) {
  int identical = 1;
  for (int i = 0; i < count; i++) identical &= losses_sane(c, &runs[i]);
  for (int i = 1; i < count && identical; i++) identical &= compare_runs(c, &runs[0], &runs[i]);
  return identical;
}

static void print_check(const context_t *c, const way_run_t *runs, int count, int identical) {
  if (identical)
    printf(PROGRAM
           " --check: PASS: the %d ways agree bit for bit: %d per-step losses, %zu "
           "parameters, generator offset %llu\n",
           count, c->o->steps, mlp_model_flat_count(c->model),
           (unsigned long long)runs[0].generator_offset);
  else
    printf(PROGRAM " --check: FAIL: the ways disagree (first difference above)\n");
}

static void print_summary(const context_t *c, const way_run_t *runs, int count, int identical) {
  const options_t *o = c->o;
  printf("\n== summary (%d steps, width %d, depth %d, batch %d) ==\n", o->steps, o->model.width,
         o->model.depth, o->model.batch);
  printf("  %-14s %12s %12s %10s %10s %11s %9s\n", "way", "step (us)", "host (us)", "vs eager",
         "vs whole", "final loss", "test acc");
  const way_run_t *eager = NULL, *whole = NULL;
  for (int i = 0; i < count; i++) {
    if (runs[i].way == MLP_WAY_EAGER) eager = &runs[i];
    if (runs[i].way == MLP_WAY_WHOLE) whole = &runs[i];
  }
  for (int i = 0; i < count; i++) {
    const way_run_t *r = &runs[i];
    char vs_eager[16] = "-", vs_whole[16] = "-";
    if (eager) snprintf(vs_eager, sizeof vs_eager, "%.2fx", eager->step_us[0] / r->step_us[0]);
    if (whole) snprintf(vs_whole, sizeof vs_whole, "%.2fx", r->step_us[0] / whole->step_us[0]);
    printf("  %-14s %12.1f %12.2f %10s %10s %11.4f %8.1f%%\n", r->label, r->step_us[0], r->host_us,
           vs_eager, vs_whole, (double)r->losses[o->steps - 1], 100.0 * r->test_acc);
  }
  printf(
      "  (vs eager: speedup over the eager step; vs whole: step time over the whole-step "
      "graph's;\n   loop/K=k: k steps per launch, times per step)\n");
  if (count > 1 && identical)
    printf(
        "  bit for bit: the %d loss curves (%d steps), the final parameters and the "
        "generator offset are identical\n",
        count, o->steps);
  else if (count > 1)
    printf("  bit for bit: NO, the ways disagree (first difference above)\n");
}

int main(int argc, char **argv) {
  options_t o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed >= 0) return parsed;
  setvbuf(stdout, NULL, _IOLBF, 0);
  shorten_under_a_tool(&o);

  /* Before any CUDA call of our own: recap says plainly when there is no driver or device. */
  int devices = 0;
  if (recap_device_count(&devices) != RECAP_SUCCESS || devices < 1) {
    const char *why = recap_last_error();
    fprintf(stderr, PROGRAM ": this example needs an NVIDIA GPU: %s\n",
            why[0] ? why : "no CUDA device was found");
    return o.check ? EXIT_CHECK_SKIP : EXIT_NO_DEVICE;
  }
  CHECK_CUDA(cudaSetDevice(0));
  struct cudaDeviceProp prop;
  char device[512];
  describe_device(device, sizeof device, &prop);

  context_t c;
  mlp_dataset_t train, test;
  context_init(&c, &o, &train, &test);
  way_run_t runs[MAX_RUNS];
  const int count = plan_runs(&c, runs);
  print_intro(&c, &train, &test, device, prop.name, count);

  for (int i = 0; i < count; i++) {
    run_way(&c, &runs[i]);
    if (o.check)
      printf("  %-14s final loss %.6f, test accuracy %.1f%%, generator offset %llu\n",
             runs[i].label, (double)runs[i].losses[o.steps - 1], 100.0 * runs[i].test_acc,
             (unsigned long long)runs[i].generator_offset);
  }
  const int identical = compare_all(&c, runs, count);
  if (o.check) {
    print_check(&c, runs, count, identical);
  } else {
    print_summary(&c, runs, count, identical);
    if (o.out_dir) {
      printf("\n== output ==\n");
      write_outputs(&c, runs, count, identical, device);
      printf("  folder   %s\n", o.out_dir);
    }
  }

  for (int i = 0; i < count; i++) {
    free(runs[i].losses);
    free(runs[i].params);
  }
  context_destroy(&c);
  mlp_dataset_free(&train);
  mlp_dataset_free(&test);
  recap_empty_cache();
  cudaStreamDestroy(c.stream);
  return identical ? 0 : 1;
}
