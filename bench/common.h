/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.h — what recap's benchmarks share: a monotonic clock, sample statistics, the device
 * check every benchmark starts with, checked CUDA and recap calls, and the output path rule.
 *
 * The benchmarks time host-side costs: the CPU time a call takes to return, not the
 * GPU time of the work it enqueues. Each figure is the median of many batches; a batch times
 * many calls in a row with one clock read before and one after, so the clock's own cost is
 * spread over the batch.
 */
#ifndef RECAP_BENCH_COMMON_H
#define RECAP_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "recap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);

/* Order statistics of a set of samples. */
typedef struct bench_stats {
  double median, p10, p90, min, max;
  size_t count;
} bench_stats_t;

/* Sorts samples[0..count) in place and fills out. count 0 gives zeros. */
void bench_stats(double *samples, size_t count, bench_stats_t *out);

/* Writes a stats object as JSON: {"median":..,"p10":..,"p90":..,"min":..,"max":..,"count":..}. */
void bench_stats_json(FILE *f, const bench_stats_t *stats);

/* Options every benchmark takes: --quick (fewer repetitions), --json PATH (or a bare PATH). */
typedef struct bench_args {
  int quick;
  const char *json_path;
  char json_buffer[4096];
} bench_args_t;

/* Parses argv with getopt_long (--quick, --json PATH, -h/--help, one bare PATH). Prints usage
 * and returns 0 for -h/--help or a bad argument (*exit_code tells which exit status to use),
 * else 1. The JSON path defaults to $OUT/<name>.json when OUT is set, else ./<name>.json. */
int bench_parse_args(int argc, char **argv, const char *name, const char *usage_extra,
                     bench_args_t *args, int *exit_code);

/* Takes a benchmark's own option out of argv before bench_parse_args sees it: "--name VALUE"
 * or "--name=VALUE". Returns 1 and sets *value when it is there (the last one wins), else 0;
 * *argc and argv lose the option either way. "--name" with no value is reported and exits 1. */
int bench_take_option(int *argc, char **argv, const char *name, const char **value);

/* A size in GiB from an option's value ("64", "0.5"): bytes, rounded down to whole MiB; exits 1
 * saying which option was wrong when the value is not a positive number. */
size_t bench_gib_option(const char *bench, const char *option, const char *value);

/* Like bench_require_device, for the benchmarks that skip instead of failing: without a
 * device it prints "<name>: skipped: no GPU (<why>)" on stdout and returns 0; with one, it
 * makes device 0 current and returns 1. */
int bench_have_device(const char *name);

/* Checks that recap sees a CUDA device and makes device 0 current. Without one, prints
 * "<name>: no CUDA device: <recap_last_error()>" on stderr and returns 2 (the benchmark's
 * exit status); 0 when a device is there. */
int bench_require_device(const char *name);

/* The current device's name, the driver and runtime versions and recap's version, as one line
 * ("NVIDIA H200, driver 13.0, runtime 13.0, recap 0.2.0") and as JSON members (no braces). */
void bench_describe_device(char *line, size_t size);
void bench_device_json(FILE *f);
/* Opens a benchmark's JSON output at path and writes its start: '{', the "benchmark" member
 * naming name, and the device members of bench_device_json, leaving the object open for the
 * benchmark's own members. Returns NULL after perror(path) when the file cannot be opened. */
FILE *bench_json_begin(const char *path, const char *name);
/* The first line of a benchmark's output: "<name>: <the device line>[ (quick run)]". */
void bench_banner(const char *name, int quick);
/* The start of a benchmark that needs a device: bench_parse_args (no extra usage text),
 * bench_require_device, then bench_banner. -1 when the benchmark goes on; otherwise the exit
 * status main returns (help, a bad argument, no device). */
int bench_start(int argc, char **argv, const char *name, bench_args_t *args);

/* The median of samples[0..count) (sorted in place, as bench_stats does). */
double bench_median(double *samples, size_t count);

/* The figures of a benchmark's JSON output, one per table, row and column (a row's name is cut
 * at 47 characters; past 256 figures the rest are dropped). bench_write_figures writes them as
 * bench_json_begin's object with "quick", "checks_passed" and a "figures" array of
 * {"table", "row", "column", "value"}; it returns 1 when the file was written, else 0. */
void bench_record(const char *table, const char *row, const char *column, double value);
int bench_write_figures(const char *path, const char *name, int quick, int checks_ok);

/* calloc(count, size), or exit(1) saying "<name>: out of host memory". */
void *bench_calloc(const char *name, size_t count, size_t size);

/* Abort the benchmark on a failed call: prints the call, its place and the error. */
void bench_fail_cuda(cudaError_t error, const char *call, const char *file, int line);
void bench_fail_recap(recap_status_t status, const char *call, const char *file, int line);

#define BENCH_CUDA(call)                                                                       \
  do {                                                                                         \
    cudaError_t bench_error_ = (call);                                                         \
    if (bench_error_ != cudaSuccess) bench_fail_cuda(bench_error_, #call, __FILE__, __LINE__); \
  } while (0)

#define BENCH_RECAP(call)                                         \
  do {                                                            \
    recap_status_t bench_status_ = (call);                        \
    if (bench_status_ != RECAP_SUCCESS)                           \
      bench_fail_recap(bench_status_, #call, __FILE__, __LINE__); \
  } while (0)

/* kernels.cu: one thread adds 1 to *counter. The launch's error is returned (cudaGetLastError),
 * so a failed launch is seen at once, in eager runs and during capture alike. */
cudaError_t bench_launch_increment(cudaStream_t stream, int *counter);
/* One thread adds value to *counter: a kernel with a scalar parameter. */
cudaError_t bench_launch_add_value(cudaStream_t stream, int *counter, int value);
/* One thread adds *input to *counter: a kernel that reads a buffer (a rebind's site). */
cudaError_t bench_launch_add_from(cudaStream_t stream, int *counter, const int *input);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_BENCH_COMMON_H */
