/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.c — clock, statistics, argument parsing and device checks shared by the benchmarks.
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_take_option(int *argc, char **argv, const char *name, const char **value) {
  size_t len = strlen(name);
  int found = 0;
  int kept = 1;
  for (int i = 1; i < *argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) == 0 && strncmp(arg + 2, name, len) == 0) {
      if (arg[2 + len] == '=') {
        *value = arg + 3 + len;
        found = 1;
        continue;
      }
      if (arg[2 + len] == '\0') {
        if (i + 1 >= *argc) {
          fprintf(stderr, "%s: '--%s' needs a value\n", argv[0], name);
          exit(1);
        }
        *value = argv[++i];
        found = 1;
        continue;
      }
    }
    argv[kept++] = argv[i];
  }
  argv[kept] = NULL;
  *argc = kept;
  return found;
}

size_t bench_gib_option(const char *bench, const char *option, const char *value) {
  char *end = NULL;
  double gib = strtod(value, &end);
  if (end == value || *end != '\0' || !(gib > 0) || gib > 1e6) {
    fprintf(stderr, "%s: --%s '%s' is not a positive number of GiB (e.g. 64 or 0.5)\n", bench,
            option, value);
    exit(1);
  }
  size_t mib = (size_t)(gib * 1024.0);
  if (mib == 0) mib = 1;
  return mib << 20;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of sorted samples, interpolating between neighbours. */
static double quantile(const double *sorted, size_t count, double q) {
  double position = q * (double)(count - 1);
  size_t below = (size_t)position;
  if (below + 1 >= count) return sorted[count - 1];
  double fraction = position - (double)below;
  return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

void bench_stats(double *samples, size_t count, bench_stats_t *out) {
  memset(out, 0, sizeof *out);
  out->count = count;
  if (count == 0) return;
  qsort(samples, count, sizeof *samples, compare_doubles);
  out->median = quantile(samples, count, 0.5);
  out->p10 = quantile(samples, count, 0.1);
  out->p90 = quantile(samples, count, 0.9);
  out->min = samples[0];
  out->max = samples[count - 1];
}

double bench_median(double *samples, size_t count) {
  bench_stats_t s;
  bench_stats(samples, count, &s);
  return s.median;
}

void bench_stats_json(FILE *f, const bench_stats_t *s) {
  fprintf(f,
          "{\"median\": %.4f, \"p10\": %.4f, \"p90\": %.4f, \"min\": %.4f, \"max\": %.4f, "
          "\"count\": %zu}",
          s->median, s->p10, s->p90, s->min, s->max, s->count);
}

static void usage(FILE *f, const char *name, const char *usage_extra) {
  fprintf(f,
          "usage: %s [--quick] [--json PATH | PATH]\n"
          "  --quick      fewer repetitions (a smoke run; the figures are noisier)\n"
          "  --json PATH  where to write the results (default $OUT/%s.json when OUT is set,\n"
          "               else ./%s.json)\n"
          "%s"
          "Exit status: 0 done, 1 a call or a check failed, 2 no CUDA device.\n",
          name, name, name, usage_extra ? usage_extra : "");
}

int bench_parse_args(int argc, char **argv, const char *name, const char *usage_extra,
                     bench_args_t *args, int *exit_code) {
  static const struct option options[] = {
      {"quick", no_argument, NULL, 'q'},
      {"json", required_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  memset(args, 0, sizeof *args);
  opterr = 0; /* the messages below name the benchmark, not argv[0]'s path */
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
    switch (c) {
      case 'q': args->quick = 1; break;
      case 'j': args->json_path = optarg; break;
      case 'h':
        usage(stdout, name, usage_extra);
        *exit_code = 0;
        return 0;
      case ':':
        fprintf(stderr, "%s: '%s' needs a value\n", name, argv[optind - 1]);
        usage(stderr, name, usage_extra);
        *exit_code = 1;
        return 0;
      default:
        fprintf(stderr, "%s: unknown argument '%s'\n", name, argv[optind - 1]);
        usage(stderr, name, usage_extra);
        *exit_code = 1;
        return 0;
    }
  }
  /* One bare PATH may stand for --json PATH. */
  if (optind < argc && !args->json_path) args->json_path = argv[optind++];
  if (optind < argc) {
    fprintf(stderr, "%s: unknown argument '%s'\n", name, argv[optind]);
    usage(stderr, name, usage_extra);
    *exit_code = 1;
    return 0;
  }
  if (!args->json_path) {
    const char *out = getenv("OUT");
    if (out && *out)
      snprintf(args->json_buffer, sizeof args->json_buffer, "%s/%s.json", out, name);
    else
      snprintf(args->json_buffer, sizeof args->json_buffer, "%s.json", name);
    args->json_path = args->json_buffer;
  }
  return 1;
}

int bench_require_device(const char *name) {
  int count = 0;
  recap_status_t status = recap_device_count(&count);
  if (status != RECAP_SUCCESS || count < 1) {
    const char *why = recap_last_error();
    fprintf(stderr, "%s: no CUDA device: %s\n", name,
            status != RECAP_SUCCESS && why[0] ? why : "the driver reports no device");
    return 2;
  }
  BENCH_CUDA(cudaSetDevice(0));
  /* Create the context now, so that no benchmark's first sample pays for it. */
  BENCH_CUDA(cudaFree(NULL));
  return 0;
}

int bench_have_device(const char *name) {
  int count = 0;
  recap_status_t status = recap_device_count(&count);
  if (status != RECAP_SUCCESS || count < 1) {
    const char *why = recap_last_error();
    printf("%s: skipped: no GPU (%s)\n", name,
           status != RECAP_SUCCESS && why[0] ? why : "the driver reports no device");
    return 0;
  }
  BENCH_CUDA(cudaSetDevice(0));
  BENCH_CUDA(cudaFree(NULL));
  return 1;
}

static void versions(int *driver, int *runtime) {
  *driver = 0;
  *runtime = 0;
  cudaDriverGetVersion(driver);
  cudaRuntimeGetVersion(runtime);
}

void bench_describe_device(char *line, size_t size) {
  struct cudaDeviceProp prop;
  int device = 0, driver, runtime;
  BENCH_CUDA(cudaGetDevice(&device));
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  versions(&driver, &runtime);
  snprintf(line, size, "%s (sm_%d%d), driver %d.%d, runtime %d.%d, recap %s", prop.name, prop.major,
           prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
           recap_version_string());
}

void bench_banner(const char *name, int quick) {
  char line[512];
  bench_describe_device(line, sizeof line);
  printf("%s: %s%s\n", name, line, quick ? " (quick run)" : "");
  fflush(stdout);
}

int bench_start(int argc, char **argv, const char *name, bench_args_t *args) {
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, name, NULL, args, &exit_code)) return exit_code;
  int missing = bench_require_device(name);
  if (missing) return missing;
  bench_banner(name, args->quick);
  return -1;
}

void bench_device_json(FILE *f) {
  struct cudaDeviceProp prop;
  int device = 0, driver, runtime;
  BENCH_CUDA(cudaGetDevice(&device));
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  versions(&driver, &runtime);
  /* A device name holds no quotes or backslashes. */
  fprintf(f,
          "\"device\": \"%s\", \"compute_capability\": \"%d.%d\", \"driver_version\": %d, "
          "\"runtime_version\": %d, \"recap_version\": \"%s\"",
          prop.name, prop.major, prop.minor, driver, runtime, recap_version_string());
}

FILE *bench_json_begin(const char *path, const char *name) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return NULL;
  }
  /* A benchmark's name holds no quotes or backslashes. */
  fprintf(f, "{\n  \"benchmark\": \"%s\", ", name);
  bench_device_json(f);
  return f;
}

void bench_fail_cuda(cudaError_t error, const char *call, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(error),
          cudaGetErrorString(error));
  exit(1);
}

void *bench_calloc(const char *name, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "%s: out of host memory\n", name);
    exit(1);
  }
  return p;
}

void bench_fail_recap(recap_status_t status, const char *call, const char *file, int line) {
  fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, call, recap_status_name(status),
          recap_last_error());
  exit(1);
}

typedef struct figure {
  const char *table;
  char row[48];
  const char *column;
  double value;
} figure_t;
static figure_t figures[256];
static size_t figure_count;

void bench_record(const char *table, const char *row, const char *column, double value) {
  if (figure_count == sizeof figures / sizeof figures[0]) return;
  figure_t *f = &figures[figure_count++];
  f->table = table;
  snprintf(f->row, sizeof f->row, "%s", row);
  f->column = column;
  f->value = value;
}

int bench_write_figures(const char *path, const char *name, int quick, int checks_ok) {
  FILE *f = bench_json_begin(path, name);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": %s,\n  \"figures\": [\n",
          quick ? "true" : "false", checks_ok ? "true" : "false");
  for (size_t i = 0; i < figure_count; i++)
    fprintf(f, "    {\"table\": \"%s\", \"row\": \"%s\", \"column\": \"%s\", \"value\": %.4f}%s\n",
            figures[i].table, figures[i].row, figures[i].column, figures[i].value,
            i + 1 < figure_count ? "," : "");
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}
