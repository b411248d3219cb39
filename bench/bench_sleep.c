/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_sleep — pools that sleep and wake (recap/sleep.h) against the floor of raw CUDA.
 *
 *   floor     raw CUDA virtual memory on the same device: map a range (64 GiB by default) in
 *             physical chunks of 1 GiB, 64 MiB and 2 MiB (cuMemCreate + cuMemMap +
 *             cuMemSetAccess per chunk into one reserved range), then unmap and release every
 *             chunk; ms of each half. And the pinned host copy bandwidth, each way
 *             (cudaMemcpyAsync between a cudaHostAlloc buffer and a device buffer, 4 GiB).
 *   pools     with expandable_segments=1, a private pool of 1, 16 and 64 GiB: one graph
 *             captured into it allocates the pool's blocks (1 GiB each) with recap_malloc and
 *             writes a pattern into each; it is replayed, then
 *             DISCARD  recap_pool_sleep + recap_pool_wake, each timed; the device's free bytes
 *                      awake, asleep and woken (the share of the pool given back); the graph
 *                      replayed after the wake, its blocks' checksums against those before;
 *             OFFLOAD  the same with the contents copied to pinned host memory and back: GB/s
 *                      of the pool's bytes in use against the pinned bandwidth measured above,
 *                      and the contents checked right after the wake, before any replay. Two
 *                      ways: the first cycle (offload_keep_pinned=0: the sleep pins a buffer,
 *                      the wake unpins it), the first cycle with the buffer pinned ahead
 *                      (recap_pinned_reserve of the bytes in use, timed apart; the sleep pins
 *                      nothing), then warm cycles (offload_keep_pinned=1, the buffer kept from a
 *                      priming cycle: the copies alone), and the kept buffer's release by
 *                      recap_empty_cache;
 *             recapture what a program without sleep does instead: destroy the graph, free
 *                      its blocks, recap_empty_cache, then capture + instantiate again.
 *
 * Goals: DISCARD sleep + wake <= 0.1 s at 64 GiB and <= 3x the floor (mapping and
 * unmapping the pool's bytes in 1 GiB chunks, as wake maps); >= 99% of the pool's physical
 * memory back while asleep; OFFLOAD at >= 0.8 of the pinned bandwidth; replays after a wake bit
 * identical. The OFFLOAD figures come twice, the first cycle's (what pinning costs) beside the
 * warm cycles' (the copies). Figures are reported, never failed; a recap call that fails, or
 * contents that differ, make the exit status 1.
 *
 * The driver's cuMem* calls are fetched with cudaGetDriverEntryPointByVersion, so nothing links
 * libcuda. Sizes larger than the device can hold are cut to 45% of its free memory, and OFFLOAD
 * runs only for pools that fit in 45% of the host's available memory (/proc/meminfo), saying so.
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "memory_kernels.h"
#include "recap/sleep.h"

#define NAME "bench_sleep"
#define DISCARD_GOAL_MS 100.0 /* sleep + wake of 64 GiB */
#define FLOOR_GOAL 3.0        /* sleep + wake against the floor of the same bytes */
#define BACK_GOAL 99.0        /* percent of the pool in cudaMemGetInfo while asleep */
#define OFFLOAD_GOAL 0.8      /* OFFLOAD GB/s against the pinned bandwidth */

static const size_t GiB = (size_t)1 << 30, MiB = (size_t)1 << 20;

/* ---- the driver's VMM calls ------------------------------------------------------------- */

typedef struct driver {
  PFN_cuMemAddressReserve_v10020 reserve;
  PFN_cuMemAddressFree_v10020 address_free;
  PFN_cuMemCreate_v10020 create;
  PFN_cuMemRelease_v10020 release;
  PFN_cuMemMap_v10020 map;
  PFN_cuMemUnmap_v10020 unmap;
  PFN_cuMemSetAccess_v10020 set_access;
  PFN_cuMemGetAllocationGranularity_v10020 granularity;
} driver_t;

/* Copies the entry point into a function pointer; memcpy, because ISO C has no cast from an
 * object pointer to a function pointer. */
static void fetch(const char *symbol, void *fn, size_t fn_size) {
  void *p = NULL;
  enum cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSuccess;
  /* 12000: the ABI of these calls has not changed since CUDA 10.2. */
  BENCH_CUDA(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &query));
  if (!p || query != cudaDriverEntryPointSuccess) {
    fprintf(stderr, NAME ": the driver has no %s (query result %d)\n", symbol, (int)query);
    exit(1);
  }
  memcpy(fn, &p, fn_size);
}

#define FETCH(d, field, symbol) fetch(symbol, &(d)->field, sizeof((d)->field))

static void driver_load(driver_t *d) {
  FETCH(d, reserve, "cuMemAddressReserve");
  FETCH(d, address_free, "cuMemAddressFree");
  FETCH(d, create, "cuMemCreate");
  FETCH(d, release, "cuMemRelease");
  FETCH(d, map, "cuMemMap");
  FETCH(d, unmap, "cuMemUnmap");
  FETCH(d, set_access, "cuMemSetAccess");
  FETCH(d, granularity, "cuMemGetAllocationGranularity");
}

static void check_cu(CUresult r, const char *call, int line) {
  if (r == CUDA_SUCCESS) return;
  fprintf(stderr, "%s:%d: %s failed: CUresult %d\n", __FILE__, line, call, (int)r);
  exit(1);
}
#define CU(call) check_cu((call), #call, __LINE__)

/* ---- the floor -------------------------------------------------------------------------- */

static const size_t floor_chunks[] = {(size_t)1 << 30, (size_t)64 << 20, (size_t)2 << 20};
enum { FLOOR_COUNT = sizeof floor_chunks / sizeof floor_chunks[0] };

typedef struct floor_result {
  size_t chunk, count;
  double map_ms, unmap_ms;
} floor_result_t;

/* Map `bytes` in chunks of `chunk` into the reserved range at base, then unmap and release. */
static void floor_one(const driver_t *d, int device, CUdeviceptr base, size_t bytes, size_t chunk,
                      floor_result_t *out) {
  size_t count = bytes / chunk;
  CUmemGenericAllocationHandle *handles = bench_calloc(NAME, count, sizeof *handles);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  uint64_t t0 = bench_now_ns();
  for (size_t i = 0; i < count; i++) {
    CU(d->create(&handles[i], chunk, &prop, 0));
    CU(d->map(base + i * chunk, chunk, 0, handles[i], 0));
    CU(d->set_access(base + i * chunk, chunk, &access, 1));
  }
  uint64_t t1 = bench_now_ns();
  for (size_t i = 0; i < count; i++) {
    CU(d->unmap(base + i * chunk, chunk));
    CU(d->release(handles[i]));
  }
  uint64_t t2 = bench_now_ns();
  free(handles);
  out->chunk = chunk;
  out->count = count;
  out->map_ms = (double)(t1 - t0) / 1e6;
  out->unmap_ms = (double)(t2 - t1) / 1e6;
}

static void measure_floor(const driver_t *d, size_t bytes, floor_result_t *results) {
  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  CUdeviceptr base = 0;
  CU(d->reserve(&base, bytes, 0, 0, 0));
  for (int i = 0; i < FLOOR_COUNT; i++) {
    floor_one(d, device, base, bytes, floor_chunks[i], &results[i]);
    printf("  floor: %zu GiB in %zu chunks of %zu MiB: map %.1f ms, unmap + release %.1f ms\n",
           bytes / GiB, results[i].count, floor_chunks[i] / MiB, results[i].map_ms,
           results[i].unmap_ms);
    fflush(stdout);
  }
  CU(d->address_free(base, bytes));
}

/* ---- pinned copies ---------------------------------------------------------------------- */

typedef struct pinned_result {
  size_t bytes;
  double d2h_gbps, h2d_gbps;
} pinned_result_t;

static double copy_gbps(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                        cudaStream_t stream) {
  BENCH_CUDA(cudaStreamSynchronize(stream));
  uint64_t t0 = bench_now_ns();
  BENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  uint64_t t1 = bench_now_ns();
  return (double)bytes / (double)(t1 - t0); /* bytes per ns = GB/s */
}

static void measure_pinned(size_t bytes, int reps, cudaStream_t stream, pinned_result_t *out) {
  void *host = NULL, *dev = NULL;
  /* A host that cannot pin this much gets a smaller buffer, said below. */
  while (cudaHostAlloc(&host, bytes, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    if (bytes <= 256 * MiB) {
      fprintf(stderr, NAME ": cudaHostAlloc failed even for %zu MiB\n", bytes / MiB);
      exit(1);
    }
    bytes /= 2;
  }
  BENCH_CUDA(cudaMalloc(&dev, bytes));
  BENCH_CUDA(cudaMemsetAsync(dev, 0x5a, bytes, stream));
  memset(host, 0xa5, bytes); /* touch every page once, outside the timing */
  double *d2h = bench_calloc(NAME, (size_t)reps, sizeof *d2h);
  double *h2d = bench_calloc(NAME, (size_t)reps, sizeof *h2d);
  copy_gbps(host, dev, bytes, cudaMemcpyDeviceToHost, stream); /* warm-up, both ways */
  copy_gbps(dev, host, bytes, cudaMemcpyHostToDevice, stream);
  for (int r = 0; r < reps; r++) {
    d2h[r] = copy_gbps(host, dev, bytes, cudaMemcpyDeviceToHost, stream);
    h2d[r] = copy_gbps(dev, host, bytes, cudaMemcpyHostToDevice, stream);
  }
  bench_stats_t s;
  bench_stats(d2h, (size_t)reps, &s);
  out->d2h_gbps = s.median;
  bench_stats(h2d, (size_t)reps, &s);
  out->h2d_gbps = s.median;
  out->bytes = bytes;
  free(d2h);
  free(h2d);
  BENCH_CUDA(cudaFree(dev));
  BENCH_CUDA(cudaFreeHost(host));
  printf("  pinned copies of %zu MiB: device to host %.1f GB/s, host to device %.1f GB/s\n",
         bytes / MiB, out->d2h_gbps, out->h2d_gbps);
  fflush(stdout);
}

/* ---- pools ------------------------------------------------------------------------------ */

typedef struct cycle_result {
  int done;                       /* 0: not run (or failed: failed says so) */
  int failed;                     /* a recap call failed; figures incomplete */
  double sleep_ms, wake_ms;       /* medians over the cycles */
  double back_percent;            /* of the pool's reserved bytes, in free memory while asleep */
  double vs_floor;                /* DISCARD: (sleep + wake) / floor of the same bytes */
  double sleep_gbps, wake_gbps;   /* OFFLOAD: bytes in use / time */
  double sleep_ratio, wake_ratio; /* OFFLOAD: against the pinned bandwidth */
  int identical;                  /* checksums equal to those before the sleep */
  int64_t sleeping_bytes, offloaded_bytes;
  size_t free_awake, free_asleep, free_woken; /* cudaMemGetInfo around the last cycle */
  const char *skipped;                        /* why it was not run */
} cycle_result_t;

/* OFFLOAD with offload_keep_pinned=1: the priming cycle (pins at the sleep, keeps at the wake),
 * the warm cycles after it, and recap_empty_cache freeing the kept buffer. */
typedef struct warm_result {
  cycle_result_t prime, warm;
  size_t kept_bytes; /* the snapshot's pinned_kept_bytes after the priming cycle */
  double release_ms; /* recap_empty_cache with the buffer kept */
  int released;      /* recap_empty_cache ran and left nothing kept */
} warm_result_t;

typedef struct pool_result {
  size_t bytes, block, blocks;
  int64_t reserved_bytes, allocated_bytes, vmm_segments;
  double capture_ms, first_replay_ms;
  double floor_ms; /* map + unmap of reserved_bytes in 1 GiB chunks, scaled from the floor */
  cycle_result_t discard, offload; /* offload: the first cycle, offload_keep_pinned=0 */
  cycle_result_t offload_reserved; /* the first cycle again, its buffer pinned ahead */
  double reserve_ms;               /* recap_pinned_reserve of the bytes in use */
  warm_result_t offload_keep;
  double free_ms, recapture_ms, recapture_replay_ms;
  int recapture_identical;
  int failed;
} pool_result_t;

typedef struct pool_run {
  recap_pool_id_t pool;
  recap_graph_t graph;
  void **blocks;
  size_t count, block;
  unsigned long long *sums_dev; /* one checksum per block, device */
  unsigned long long *sums;     /* host copies */
} pool_run_t;

static int all_ok = 1;

/* A recap call that may fail without ending the benchmark: the failure is reported, the pool's
 * figures marked, and the exit status becomes 1. */
static int try_recap(recap_status_t status, const char *what, size_t pool_bytes) {
  if (status == RECAP_SUCCESS) return 1;
  fprintf(stderr, NAME ": %zu GiB pool: %s FAILED: %s: %s\n", pool_bytes / GiB, what,
          recap_status_name(status), recap_last_error());
  all_ok = 0;
  return 0;
}

/* Capture the graph that allocates the pool's blocks and writes a pattern into each. */
static void capture_pool(pool_run_t *run, cudaStream_t stream) {
  BENCH_RECAP(recap_graph_create(&run->graph, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = run->pool;
  BENCH_RECAP(recap_graph_capture_begin(run->graph, &opts, stream));
  for (size_t i = 0; i < run->count; i++) {
    BENCH_RECAP(recap_malloc(&run->blocks[i], run->block, stream));
    BENCH_CUDA(bench_mem_fill(run->blocks[i], run->block / 4, (uint32_t)(i + 1), stream));
  }
  BENCH_RECAP(recap_graph_capture_end(run->graph));
}

/* The blocks' checksums into run->sums. */
static void checksums(pool_run_t *run, cudaStream_t stream) {
  BENCH_CUDA(cudaMemsetAsync(run->sums_dev, 0, run->count * sizeof *run->sums_dev, stream));
  for (size_t i = 0; i < run->count; i++)
    BENCH_CUDA(bench_mem_checksum(run->blocks[i], run->block / 4, &run->sums_dev[i], stream));
  BENCH_CUDA(cudaMemcpyAsync(run->sums, run->sums_dev, run->count * sizeof *run->sums,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
}

static int same_sums(const pool_run_t *run, const unsigned long long *before) {
  return memcmp(run->sums, before, run->count * sizeof *before) == 0;
}

static size_t free_bytes(void) {
  size_t free = 0, total = 0;
  BENCH_CUDA(cudaMemGetInfo(&free, &total));
  return free;
}

static double replay_ms(recap_graph_t graph, cudaStream_t stream) {
  uint64_t t0 = bench_now_ns();
  BENCH_RECAP(recap_graph_replay(graph, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  return (double)(bench_now_ns() - t0) / 1e6;
}

/* `cycles` sleeps and wakes in `mode`; the contents are checked after each wake: right after
 * it for OFFLOAD (they must have come back), after a replay for DISCARD (the graph rewrites
 * them). */
static void sleep_cycles(pool_run_t *run, recap_sleep_mode_t mode, int cycles,
                         const unsigned long long *before, int64_t reserved, int64_t in_use,
                         cudaStream_t stream, cycle_result_t *out) {
  const char *mode_name = mode == RECAP_SLEEP_DISCARD ? "DISCARD" : "OFFLOAD";
  double *sleep_ms = bench_calloc(NAME, (size_t)cycles, sizeof(double));
  double *wake_ms = bench_calloc(NAME, (size_t)cycles, sizeof(double));
  double *back = bench_calloc(NAME, (size_t)cycles, sizeof(double));
  size_t pool_bytes = run->count * run->block;
  char what[64];
  out->identical = 1;
  int c = 0;
  for (; c < cycles; c++) {
    BENCH_CUDA(cudaDeviceSynchronize());
    size_t awake = free_bytes();
    snprintf(what, sizeof what, "recap_pool_sleep(%s)", mode_name);
    uint64_t t0 = bench_now_ns();
    if (!try_recap(recap_pool_sleep(run->pool, mode), what, pool_bytes)) break;
    uint64_t t1 = bench_now_ns();
    size_t asleep = free_bytes();
    recap_pool_memory_t pm = RECAP_POOL_MEMORY_INIT;
    BENCH_RECAP(recap_pool_memory(run->pool, &pm));
    out->sleeping_bytes = pm.sleeping_bytes;
    out->offloaded_bytes = pm.offloaded_bytes;
    uint64_t t2 = bench_now_ns();
    if (!try_recap(recap_pool_wake(run->pool), "recap_pool_wake", pool_bytes)) break;
    uint64_t t3 = bench_now_ns();
    out->free_awake = awake;
    out->free_asleep = asleep;
    out->free_woken = free_bytes();
    sleep_ms[c] = (double)(t1 - t0) / 1e6;
    wake_ms[c] = (double)(t3 - t2) / 1e6;
    back[c] = reserved > 0 ? 100.0 * ((double)asleep - (double)awake) / (double)reserved : 0;
    if (mode == RECAP_SLEEP_OFFLOAD) {
      checksums(run, stream);
      out->identical &= same_sums(run, before);
    }
    if (!try_recap(recap_graph_replay(run->graph, stream), "replay after the wake", pool_bytes))
      break;
    checksums(run, stream);
    out->identical &= same_sums(run, before);
  }
  out->failed = c < cycles;
  if (c > 0) {
    bench_stats_t s;
    bench_stats(sleep_ms, (size_t)c, &s);
    out->sleep_ms = s.median;
    bench_stats(wake_ms, (size_t)c, &s);
    out->wake_ms = s.median;
    bench_stats(back, (size_t)c, &s);
    out->back_percent = s.min; /* the worst cycle */
    out->done = 1;
    if (in_use > 0 && out->sleep_ms > 0 && out->wake_ms > 0) {
      out->sleep_gbps = (double)in_use / (out->sleep_ms * 1e6);
      out->wake_gbps = (double)in_use / (out->wake_ms * 1e6);
    }
  }
  if (!out->identical) {
    fprintf(stderr, NAME ": %zu GiB pool: the contents after a %s wake differ from before\n",
            pool_bytes / GiB, mode_name);
    all_ok = 0;
  }
  free(sleep_ms);
  free(wake_ms);
  free(back);
}

typedef struct config {
  int quick;
  size_t offload_max;
  const floor_result_t *floor_1g; /* the floor in 1 GiB chunks, and its bytes */
  size_t floor_bytes;
  const pinned_result_t *pinned;
} config_t;

/* GB/s of an OFFLOAD cycle against the pinned bandwidth each way. */
static void offload_ratios(cycle_result_t *c, const pinned_result_t *pinned) {
  if (!c->done) return;
  c->sleep_ratio = pinned->d2h_gbps > 0 ? c->sleep_gbps / pinned->d2h_gbps : 0;
  c->wake_ratio = pinned->h2d_gbps > 0 ? c->wake_gbps / pinned->h2d_gbps : 0;
}

static void print_offload(const char *what, const cycle_result_t *c) {
  if (!c->done) return;
  printf(
      "    OFFLOAD, %s: sleep %.1f ms (%.1f GB/s, %.2fx pinned), wake %.1f ms (%.1f GB/s, "
      "%.2fx pinned), %.2f%% back, contents identical: %s\n",
      what, c->sleep_ms, c->sleep_gbps, c->sleep_ratio, c->wake_ms, c->wake_gbps, c->wake_ratio,
      c->back_percent, c->identical ? "yes" : "NO");
  fflush(stdout);
}

/* The snapshot's pinned_kept_bytes (recap's pinned buffers kept for the next OFFLOAD sleep). */
static size_t kept_bytes(void) {
  char *json = NULL;
  BENCH_RECAP(recap_memory_snapshot_json(-1, &json));
  const char *at = strstr(json, "\"pinned_kept_bytes\":");
  unsigned long long bytes = 0;
  if (!at || sscanf(at, "\"pinned_kept_bytes\":%llu", &bytes) != 1) {
    fprintf(stderr, NAME ": the snapshot has no pinned_kept_bytes\n");
    all_ok = 0;
  }
  recap_string_free(json);
  return (size_t)bytes;
}

/* OFFLOAD twice over: the first cycle as a program without the option runs it (the sleep pins
 * its buffer, the wake unpins it), then with offload_keep_pinned=1 a priming cycle whose wake
 * keeps the buffer and warm cycles that reuse it, then recap_empty_cache frees it. */
static void offload_both(pool_run_t *run, const config_t *cfg, const unsigned long long *before,
                         const recap_pool_memory_t *pm, cudaStream_t stream, pool_result_t *out) {
  BENCH_RECAP(recap_option_set("offload_keep_pinned", "0"));
  out->offload_keep.released = 0;
  sleep_cycles(run, RECAP_SLEEP_OFFLOAD, 1, before, pm->reserved_bytes, pm->allocated_bytes, stream,
               &out->offload);
  offload_ratios(&out->offload, cfg->pinned);
  print_offload("first cycle (pins and unpins)", &out->offload);
  if (out->offload.failed) {
    out->offload_reserved.skipped = out->offload_keep.prime.skipped =
        out->offload_keep.warm.skipped = "first cycle failed";
    out->offload_keep.released = 1;
    return;
  }
  /* The first cycle of a program that pins ahead: recap_pinned_reserve, timed apart, then a
   * cycle whose sleep takes the reserved buffer (the option still 0: the wake unpins it). */
  BENCH_CUDA(cudaDeviceSynchronize());
  uint64_t r0 = bench_now_ns();
  recap_status_t reserved = recap_pinned_reserve((size_t)pm->allocated_bytes);
  out->reserve_ms = (double)(bench_now_ns() - r0) / 1e6;
  if (try_recap(reserved, "recap_pinned_reserve", out->bytes)) {
    sleep_cycles(run, RECAP_SLEEP_OFFLOAD, 1, before, pm->reserved_bytes, pm->allocated_bytes,
                 stream, &out->offload_reserved);
    offload_ratios(&out->offload_reserved, cfg->pinned);
    printf("    OFFLOAD, recap_pinned_reserve ahead: %.1f ms\n", out->reserve_ms);
    print_offload("first cycle, pinned ahead", &out->offload_reserved);
  } else {
    out->offload_reserved.failed = 1;
  }
  warm_result_t *k = &out->offload_keep;
  BENCH_RECAP(recap_option_set("offload_keep_pinned", "1"));
  sleep_cycles(run, RECAP_SLEEP_OFFLOAD, 1, before, pm->reserved_bytes, pm->allocated_bytes, stream,
               &k->prime);
  offload_ratios(&k->prime, cfg->pinned);
  k->kept_bytes = kept_bytes();
  print_offload("priming cycle (pins, keeps)", &k->prime);
  if (k->prime.failed) {
    k->warm.skipped = "priming cycle failed";
  } else {
    sleep_cycles(run, RECAP_SLEEP_OFFLOAD, cfg->quick ? 1 : 3, before, pm->reserved_bytes,
                 pm->allocated_bytes, stream, &k->warm);
    offload_ratios(&k->warm, cfg->pinned);
    print_offload("warm (offload_keep_pinned=1)", &k->warm);
  }
  BENCH_RECAP(recap_option_set("offload_keep_pinned", "0"));
  BENCH_CUDA(cudaDeviceSynchronize());
  uint64_t t0 = bench_now_ns();
  BENCH_RECAP(recap_empty_cache());
  k->release_ms = (double)(bench_now_ns() - t0) / 1e6;
  k->released = kept_bytes() == 0;
  printf("    OFFLOAD, the kept buffer (%.2f GiB): recap_empty_cache %.1f ms%s\n",
         (double)k->kept_bytes / (double)GiB, k->release_ms, k->released ? "" : ", NOT freed");
  if (!k->released) all_ok = 0;
  fflush(stdout);
}

static void bench_pool(size_t bytes, const config_t *cfg, cudaStream_t stream, pool_result_t *out) {
  memset(out, 0, sizeof *out);
  pool_run_t run;
  memset(&run, 0, sizeof run);
  run.block = bytes < GiB ? bytes : GiB;
  run.count = bytes / run.block;
  run.pool = recap_pool_handle();
  run.blocks = bench_calloc(NAME, run.count, sizeof *run.blocks);
  run.sums = bench_calloc(NAME, run.count, sizeof *run.sums);
  unsigned long long *before = bench_calloc(NAME, run.count, sizeof *before);
  BENCH_CUDA(cudaMalloc((void **)&run.sums_dev, run.count * sizeof *run.sums_dev));
  out->bytes = bytes;
  out->block = run.block;
  out->blocks = run.count;

  BENCH_RECAP(recap_empty_cache());
  BENCH_CUDA(cudaDeviceSynchronize());
  uint64_t t0 = bench_now_ns();
  capture_pool(&run, stream);
  out->capture_ms = (double)(bench_now_ns() - t0) / 1e6;
  out->first_replay_ms = replay_ms(run.graph, stream);
  checksums(&run, stream);
  memcpy(before, run.sums, run.count * sizeof *before);

  recap_pool_memory_t pm = RECAP_POOL_MEMORY_INIT;
  BENCH_RECAP(recap_pool_memory(run.pool, &pm));
  out->reserved_bytes = pm.reserved_bytes;
  out->allocated_bytes = pm.allocated_bytes;
  out->vmm_segments = pm.vmm_segments;
  out->floor_ms = (cfg->floor_1g->map_ms + cfg->floor_1g->unmap_ms) * (double)pm.reserved_bytes /
                  (double)cfg->floor_bytes;
  printf(
      "  %zu GiB pool: %zu blocks of %zu MiB, reserved %.2f GiB in %lld VMM segment(s); "
      "capture + instantiate %.1f ms, first replay %.1f ms\n",
      bytes / GiB, run.count, run.block / MiB, (double)pm.reserved_bytes / (double)GiB,
      (long long)pm.vmm_segments, out->capture_ms, out->first_replay_ms);
  fflush(stdout);

  int cycles = cfg->quick ? 1 : 3;
  sleep_cycles(&run, RECAP_SLEEP_DISCARD, cycles, before, pm.reserved_bytes, pm.allocated_bytes,
               stream, &out->discard);
  if (out->discard.done) {
    out->discard.vs_floor =
        out->floor_ms > 0 ? (out->discard.sleep_ms + out->discard.wake_ms) / out->floor_ms : 0;
    printf(
        "    DISCARD: sleep %.1f ms + wake %.1f ms = %.1f ms (%.2fx the floor's %.1f ms), "
        "%.2f%% back while asleep (free %.1f / %.1f / %.1f GiB awake / asleep / woken), "
        "replay after wake identical: %s\n",
        out->discard.sleep_ms, out->discard.wake_ms, out->discard.sleep_ms + out->discard.wake_ms,
        out->discard.vs_floor, out->floor_ms, out->discard.back_percent,
        (double)out->discard.free_awake / (double)GiB,
        (double)out->discard.free_asleep / (double)GiB,
        (double)out->discard.free_woken / (double)GiB, out->discard.identical ? "yes" : "NO");
    fflush(stdout);
  }

  /* Not run: the warm figures say why as the first cycle's do. */
  out->offload_keep.released = 1;
  if (out->discard.failed) {
    out->offload.skipped = out->offload_reserved.skipped = out->offload_keep.prime.skipped =
        out->offload_keep.warm.skipped = "DISCARD failed";
  } else if (bytes > cfg->offload_max) {
    out->offload.skipped = out->offload_reserved.skipped = out->offload_keep.prime.skipped =
        out->offload_keep.warm.skipped = "host memory";
    printf(
        "    OFFLOAD: skipped, %zu GiB would not fit in 45%% of the host's available memory "
        "(--offload-max-gib)\n",
        bytes / GiB);
  } else {
    offload_both(&run, cfg, before, &pm, stream, out);
  }
  out->failed = out->discard.failed || out->offload.failed || out->offload_reserved.failed ||
                out->offload_keep.prime.failed || out->offload_keep.warm.failed ||
                !out->offload_keep.released;

  /* What a program without sleep does: give everything back, capture again. A pool that
   * failed to wake stays asleep; its graph and blocks are only dropped. */
  BENCH_CUDA(cudaDeviceSynchronize());
  uint64_t f0 = bench_now_ns();
  BENCH_RECAP(recap_graph_destroy(run.graph));
  run.graph = NULL;
  for (size_t i = 0; i < run.count; i++) BENCH_RECAP(recap_free(run.blocks[i]));
  BENCH_RECAP(recap_empty_cache());
  uint64_t f1 = bench_now_ns();
  out->free_ms = (double)(f1 - f0) / 1e6;
  if (!out->failed) {
    run.pool = recap_pool_handle();
    uint64_t c0 = bench_now_ns();
    capture_pool(&run, stream);
    out->recapture_ms = (double)(bench_now_ns() - c0) / 1e6;
    out->recapture_replay_ms = replay_ms(run.graph, stream);
    checksums(&run, stream);
    out->recapture_identical = same_sums(&run, before);
    printf(
        "    recapture after a full free: free %.1f ms, capture + instantiate %.1f ms, first "
        "replay %.1f ms\n",
        out->free_ms, out->recapture_ms, out->recapture_replay_ms);
    BENCH_RECAP(recap_graph_destroy(run.graph));
    for (size_t i = 0; i < run.count; i++) BENCH_RECAP(recap_free(run.blocks[i]));
    BENCH_RECAP(recap_empty_cache());
  }
  BENCH_CUDA(cudaFree(run.sums_dev));
  free(before);
  free(run.sums);
  free(run.blocks);
}

/* ---- output ----------------------------------------------------------------------------- */

static void json_number(FILE *f, const char *key, double value, int present) {
  if (present)
    fprintf(f, "\"%s\": %.4f", key, value);
  else
    fprintf(f, "\"%s\": null", key);
}

static void json_cycle(FILE *f, const char *key, const cycle_result_t *c, int offload) {
  fprintf(f, "\"%s\": ", key);
  if (!c->done) {
    if (c->skipped)
      fprintf(f, "{\"skipped\": \"%s\"}", c->skipped);
    else
      fprintf(f, "{\"failed\": true}");
    return;
  }
  fprintf(f, "{\"sleep_ms\": %.4f, \"wake_ms\": %.4f, \"total_ms\": %.4f, ", c->sleep_ms,
          c->wake_ms, c->sleep_ms + c->wake_ms);
  fprintf(f, "\"back_percent\": %.4f, \"identical\": %s, \"failed\": %s, ", c->back_percent,
          c->identical ? "true" : "false", c->failed ? "true" : "false");
  fprintf(f, "\"sleeping_bytes\": %lld, \"offloaded_bytes\": %lld, ", (long long)c->sleeping_bytes,
          (long long)c->offloaded_bytes);
  fprintf(f, "\"free_awake\": %zu, \"free_asleep\": %zu, \"free_woken\": %zu, ", c->free_awake,
          c->free_asleep, c->free_woken);
  if (offload)
    fprintf(f,
            "\"sleep_gbps\": %.4f, \"wake_gbps\": %.4f, \"sleep_vs_pinned\": %.4f, "
            "\"wake_vs_pinned\": %.4f}",
            c->sleep_gbps, c->wake_gbps, c->sleep_ratio, c->wake_ratio);
  else
    fprintf(f, "\"vs_floor\": %.4f}", c->vs_floor);
}

/* "offload_warm" (the warm cycles, as "offload" is the first) and "offload_keep" (the priming
 * cycle, the kept bytes and their release). */
static void json_warm(FILE *f, const warm_result_t *k) {
  json_cycle(f, "offload_warm", &k->warm, 1);
  fprintf(f, ",\n     \"offload_keep\": {");
  json_cycle(f, "prime", &k->prime, 1);
  fprintf(f, ", \"kept_bytes\": %zu, ", k->kept_bytes);
  json_number(f, "release_ms", k->release_ms, k->prime.done);
  fprintf(f, ", \"released\": %s}", k->released ? "true" : "false");
}

static int write_json(const char *path, int quick, size_t floor_bytes, const floor_result_t *fl,
                      const pinned_result_t *pinned, const pool_result_t *pools, int count) {
  FILE *f = bench_json_begin(path, NAME);
  if (!f) return 0;
  fprintf(f, ",\n  \"quick\": %s, \"checks_passed\": %s,\n", quick ? "true" : "false",
          all_ok ? "true" : "false");
  fprintf(f,
          "  \"goals\": {\"discard_ms_64gib\": %.1f, \"discard_vs_floor\": %.1f, "
          "\"back_percent\": %.1f, \"offload_vs_pinned\": %.2f},\n",
          DISCARD_GOAL_MS, FLOOR_GOAL, BACK_GOAL, OFFLOAD_GOAL);
  fprintf(f, "  \"floor\": {\"bytes\": %zu, \"chunks\": [", floor_bytes);
  for (int i = 0; i < FLOOR_COUNT; i++)
    fprintf(f, "%s\n    {\"chunk\": %zu, \"count\": %zu, \"map_ms\": %.4f, \"unmap_ms\": %.4f}",
            i ? "," : "", fl[i].chunk, fl[i].count, fl[i].map_ms, fl[i].unmap_ms);
  fprintf(f, "]},\n");
  fprintf(f, "  \"pinned\": {\"bytes\": %zu, \"d2h_gbps\": %.4f, \"h2d_gbps\": %.4f},\n",
          pinned->bytes, pinned->d2h_gbps, pinned->h2d_gbps);
  fprintf(f, "  \"pools\": [");
  for (int i = 0; i < count; i++) {
    const pool_result_t *p = &pools[i];
    fprintf(f, "%s\n    {\"bytes\": %zu, \"blocks\": %zu, \"block\": %zu, ", i ? "," : "", p->bytes,
            p->blocks, p->block);
    fprintf(f, "\"reserved_bytes\": %lld, \"allocated_bytes\": %lld, \"vmm_segments\": %lld, ",
            (long long)p->reserved_bytes, (long long)p->allocated_bytes,
            (long long)p->vmm_segments);
    fprintf(f, "\"capture_ms\": %.4f, \"first_replay_ms\": %.4f, \"floor_ms\": %.4f,\n     ",
            p->capture_ms, p->first_replay_ms, p->floor_ms);
    json_cycle(f, "discard", &p->discard, 0);
    fprintf(f, ",\n     ");
    json_cycle(f, "offload", &p->offload, 1);
    fprintf(f, ",\n     ");
    json_cycle(f, "offload_reserved", &p->offload_reserved, 1);
    fprintf(f, ", ");
    json_number(f, "reserve_ms", p->reserve_ms, p->offload_reserved.done);
    fprintf(f, ",\n     ");
    json_warm(f, &p->offload_keep);
    fprintf(f, ",\n     \"recapture\": {\"free_ms\": %.4f, ", p->free_ms);
    int re = !p->failed;
    json_number(f, "capture_ms", p->recapture_ms, re);
    fprintf(f, ", ");
    json_number(f, "first_replay_ms", p->recapture_replay_ms, re);
    fprintf(f, ", \"identical\": %s}, ", re ? (p->recapture_identical ? "true" : "false") : "null");
    double discard_total = p->discard.sleep_ms + p->discard.wake_ms;
    double recapture_total = p->free_ms + p->recapture_ms;
    json_number(f, "discard_vs_recapture",
                recapture_total > 0 ? discard_total / recapture_total : 0,
                re && p->discard.done && recapture_total > 0);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) == 0;
}

static const char *yes(int ok) { return ok ? "yes" : "NO"; }

static void print_tables(size_t floor_bytes, const floor_result_t *fl,
                         const pinned_result_t *pinned, const pool_result_t *pools, int count) {
  printf(
      "\nfloor: raw CUDA VMM, %zu GiB mapped in chunks (cuMemCreate + cuMemMap + "
      "cuMemSetAccess per chunk), ms\n",
      floor_bytes / GiB);
  printf("%10s %8s %10s %14s %10s\n", "chunk", "chunks", "map", "unmap+release", "total");
  for (int i = 0; i < FLOOR_COUNT; i++)
    printf("%6zu MiB %8zu %10.1f %14.1f %10.1f\n", fl[i].chunk / MiB, fl[i].count, fl[i].map_ms,
           fl[i].unmap_ms, fl[i].map_ms + fl[i].unmap_ms);
  printf("pinned copies (%zu MiB): device to host %.1f GB/s, host to device %.1f GB/s\n",
         pinned->bytes / MiB, pinned->d2h_gbps, pinned->h2d_gbps);

  printf(
      "\nDISCARD sleep + wake, ms (goals: <= %.0f ms at 64 GiB, <= %.0fx the floor, >= %.0f%% "
      "back)\n",
      DISCARD_GOAL_MS, FLOOR_GOAL, BACK_GOAL);
  printf("%8s %9s %9s %9s %9s %9s %4s %8s %4s %10s\n", "pool", "sleep", "wake", "total", "floor",
         "/floor", "met", "back %", "met", "identical");
  for (int i = 0; i < count; i++) {
    const pool_result_t *p = &pools[i];
    const cycle_result_t *c = &p->discard;
    if (!c->done) {
      printf("%5zu GiB %9s\n", p->bytes / GiB, "failed");
      continue;
    }
    double total = c->sleep_ms + c->wake_ms;
    int met = c->vs_floor <= FLOOR_GOAL && (p->bytes < 64 * GiB || total <= DISCARD_GOAL_MS);
    printf("%5zu GiB %9.1f %9.1f %9.1f %9.1f %9.2f %4s %8.2f %4s %10s\n", p->bytes / GiB,
           c->sleep_ms, c->wake_ms, total, p->floor_ms, c->vs_floor, yes(met), c->back_percent,
           yes(c->back_percent >= BACK_GOAL), yes(c->identical));
  }

  printf(
      "\nOFFLOAD sleep + wake, GB/s of the bytes in use against the pinned bandwidth (goal >= "
      "%.1f)\n"
      "  first: offload_keep_pinned=0, the sleep pins its buffer and the wake unpins it; ahead:\n"
      "  the same with the buffer pinned before by recap_pinned_reserve (reserve: its ms); warm:\n"
      "  offload_keep_pinned=1, the buffer kept from a priming cycle; release: recap_empty_cache\n"
      "  freeing the kept buffer\n",
      OFFLOAD_GOAL);
  printf("%8s %6s %9s %9s %8s %9s %9s %8s %4s %8s %10s\n", "pool", "cycle", "sleep ms", "GB/s",
         "/pinned", "wake ms", "GB/s", "/pinned", "met", "back %", "identical");
  for (int i = 0; i < count; i++) {
    const pool_result_t *p = &pools[i];
    const struct {
      const char *name;
      const cycle_result_t *c;
    } rows[] = {{"first", &p->offload},
                {"ahead", &p->offload_reserved},
                {"warm", &p->offload_keep.warm}};
    for (int r = 0; r < 3; r++) {
      const cycle_result_t *c = rows[r].c;
      if (!c->done) {
        printf("%5zu GiB %6s %9s\n", p->bytes / GiB, rows[r].name,
               c->skipped ? c->skipped : "failed");
        continue;
      }
      int met = c->sleep_ratio >= OFFLOAD_GOAL && c->wake_ratio >= OFFLOAD_GOAL;
      printf("%5zu GiB %6s %9.1f %9.1f %8.2f %9.1f %9.1f %8.2f %4s %8.2f %10s\n", p->bytes / GiB,
             rows[r].name, c->sleep_ms, c->sleep_gbps, c->sleep_ratio, c->wake_ms, c->wake_gbps,
             c->wake_ratio, yes(met), c->back_percent, yes(c->identical));
    }
    if (p->offload_reserved.done)
      printf("%5zu GiB %6s %.1f ms\n", p->bytes / GiB, "reserve", p->reserve_ms);
    if (p->offload_keep.prime.done)
      printf("%5zu GiB %6s %.1f ms, %.2f GiB kept\n", p->bytes / GiB, "release",
             p->offload_keep.release_ms, (double)p->offload_keep.kept_bytes / (double)GiB);
  }

  printf("\nsleep + wake against a full free and recapture, ms\n");
  printf("%8s %10s %9s %10s %10s %14s %10s\n", "pool", "DISCARD", "free", "recapture", "1st replay",
         "DISCARD/recap", "identical");
  for (int i = 0; i < count; i++) {
    const pool_result_t *p = &pools[i];
    if (p->failed || !p->discard.done) {
      printf("%5zu GiB %10s\n", p->bytes / GiB, "failed");
      continue;
    }
    double total = p->discard.sleep_ms + p->discard.wake_ms;
    double recapture = p->free_ms + p->recapture_ms;
    printf("%5zu GiB %10.1f %9.1f %10.1f %10.1f %14.3f %10s\n", p->bytes / GiB, total, p->free_ms,
           p->recapture_ms, p->recapture_replay_ms, recapture > 0 ? total / recapture : 0.0,
           yes(p->recapture_identical));
  }
}

/* ---- sizes ------------------------------------------------------------------------------ */

/* Bytes the host can still give, from /proc/meminfo's MemAvailable; 0 if unknown. */
static size_t host_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  fclose(f);
  return (size_t)kib << 10;
}

/* bytes, or 45% of the device's free memory (whole GiB) when bytes would not leave a tenth of
 * it free. */
static size_t fit_device(size_t bytes, const char *what) {
  size_t free = free_bytes();
  if (bytes + free / 10 <= free) return bytes;
  size_t cut = (size_t)((double)free * 0.45) / GiB * GiB;
  if (cut == 0) cut = GiB;
  printf("  %s: %zu GiB asked, the device has %.1f GiB free: cut to %zu GiB\n", what, bytes / GiB,
         (double)free / (double)GiB, cut / GiB);
  return cut;
}

#define MAX_POOLS 8

static int parse_pools(const char *list, size_t *out) {
  int n = 0;
  const char *p = list;
  while (*p && n < MAX_POOLS) {
    char *end = NULL;
    unsigned long long gib = strtoull(p, &end, 10);
    if (end == p || gib == 0 || gib > 4096 || (*end != ',' && *end != '\0')) {
      fprintf(stderr, NAME ": --pools '%s': give whole GiB separated by commas (e.g. 1,16,64)\n",
              list);
      exit(1);
    }
    out[n++] = (size_t)gib * GiB;
    p = *end ? end + 1 : end;
  }
  return n;
}

int main(int argc, char **argv) {
  const char *value = NULL;
  size_t floor_bytes = 64 * GiB, pinned_bytes = 4 * GiB, offload_max = 0;
  size_t pool_sizes[MAX_POOLS] = {1 * GiB, 16 * GiB, 64 * GiB};
  int pool_count = 3;
  if (bench_take_option(&argc, argv, "floor-gib", &value))
    floor_bytes = bench_gib_option(NAME, "floor-gib", value) / GiB * GiB;
  if (bench_take_option(&argc, argv, "pinned-gib", &value))
    pinned_bytes = bench_gib_option(NAME, "pinned-gib", value);
  if (bench_take_option(&argc, argv, "offload-max-gib", &value))
    offload_max = bench_gib_option(NAME, "offload-max-gib", value);
  if (bench_take_option(&argc, argv, "pools", &value)) pool_count = parse_pools(value, pool_sizes);
  if (floor_bytes == 0) floor_bytes = GiB;

  bench_args_t args;
  int exit_code = 0;
  if (!bench_parse_args(argc, argv, NAME,
                        "  --floor-gib N        bytes the floor maps (default 64)\n"
                        "  --pools A,B,..       pool sizes in GiB (default 1,16,64)\n"
                        "  --pinned-gib N       the pinned copy buffer (default 4)\n"
                        "  --offload-max-gib N  largest pool to OFFLOAD (default 45% of the\n"
                        "                       host's available memory)\n"
                        "Without a CUDA device it prints \"skipped: no GPU\" and exits 0.\n",
                        &args, &exit_code))
    return exit_code;
  if (!bench_have_device(NAME)) return 0;
  bench_banner(NAME, args.quick);

  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  driver_t driver;
  driver_load(&driver);

  floor_bytes = fit_device(floor_bytes, "floor");
  floor_result_t floor_results[FLOOR_COUNT];
  measure_floor(&driver, floor_bytes, floor_results);
  pinned_result_t pinned;
  measure_pinned(pinned_bytes, args.quick ? 2 : 5, stream, &pinned);

  if (offload_max == 0) offload_max = (size_t)((double)host_available() * 0.45);
  BENCH_RECAP(recap_option_set("expandable_segments", "1"));
  config_t cfg = {args.quick, offload_max, &floor_results[0], floor_bytes, &pinned};
  pool_result_t pools[MAX_POOLS];
  for (int i = 0; i < pool_count; i++) {
    size_t bytes = fit_device(pool_sizes[i], "pool");
    bench_pool(bytes, &cfg, stream, &pools[i]);
  }

  print_tables(floor_bytes, floor_results, &pinned, pools, pool_count);
  int written = write_json(args.json_path, args.quick, floor_bytes, floor_results, &pinned, pools,
                           pool_count);
  if (written) printf("\nresults: %s\n", args.json_path);
  BENCH_CUDA(cudaStreamDestroy(stream));
  if (!all_ok) fprintf(stderr, NAME ": a recap call failed or contents differed (see above)\n");
  return written && all_ok ? 0 : 1;
}
