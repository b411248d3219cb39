/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_front_cache.c — the front cache of recap_malloc/recap_free (src/alloc/front_cache.c):
 * exact, whether it holds a block or not.
 *
 * The differential test runs random workloads (sizes, three streams, record_stream, streams
 * completing, captures routed to graph pools, empty_cache, option changes, injected device
 * faults) twice from one seed: with the cache switched off, then on. After every step it
 * compares the step's status, every statistic and the snapshot (addresses as offsets in their
 * segment, streams and pools by index: the fake's addresses differ between runs), and runs
 * recap_memory_check. Neither the statistics, the snapshot nor the checker merges the cached
 * block, so the cache keeps serving pairs while the test looks; the test also requires that it
 * did serve many.
 */
#include <cjson/cJSON.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake_util.h"

enum { STREAMS = 3, LIVE = 48, STEPS = 400, SEEDS = 8 };

/* What one step left behind, in the run with the cache off; the run with it on must match. */
typedef struct step_record {
  recap_status_t status;
  recap_memory_stats_t stats;
  char *snapshot; /* normalized */
} step_record_t;

typedef struct world {
  recap_stream_t streams[STREAMS];
  void *live[LIVE];
  int live_stream[LIVE];
  size_t live_count;
  recap_graph_t graphs[4];
  int graph_count;
  unsigned rng;
  size_t last_freed_size;
  int last_freed_stream;
} world_t;

static unsigned next_random(world_t *w) {
  w->rng = w->rng * 1103515245u + 12345u;
  return (w->rng >> 8) & 0xffffff;
}

static const size_t sizes[] = {512,           700,     4096,     64 << 10, 1 << 20,
                               (1 << 20) + 1, 4 << 20, 12 << 20, 25 << 20};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

static int stream_index(const world_t *w, const char *text) {
  unsigned long long value = strtoull(text, NULL, 16);
  for (int i = 0; i < STREAMS; i++)
    if ((uintptr_t)w->streams[i] == (uintptr_t)value) return i;
  return -1;
}

/* The two runs compare a pool's segments as a set (sorted within each pool). The fake's
 * segments are host memory, and where the host heap is not glibc's own (AddressSanitizer,
 * valgrind) their addresses depend on every earlier host allocation, which the cache changes
 * (it makes fewer block records): equal segments then swap places in the address order that
 * best-fit ties use, and the runs may put a block in different ones of two equal free segments
 * with every statistic equal. The tie rule itself is a_tie_goes_to_the_lowest_address's. */
static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort each pool's segment entries (a " segment" line and its block lines) in text, in place. */
static void sort_segments(char *text) {
  size_t len = strlen(text);
  char *copy = malloc(len + 1), *out = text;
  char **entries = malloc((len / 2 + 1) * sizeof *entries);
  assert_non_null(copy);
  assert_non_null(entries);
  memcpy(copy, text, len + 1);
  char *p = copy;
  while (*p) {
    char *line_end = strchr(p, '\n');
    size_t n = line_end ? (size_t)(line_end - p + 1) : strlen(p);
    /* A pool line: copied as is, then its segments. */
    memcpy(out, p, n);
    out += n;
    p += n;
    size_t count = 0;
    while (*p && strncmp(p, " segment ", 9) == 0) {
      char *start = p;
      do {
        char *e = strchr(p, '\n');
        p = e ? e + 1 : p + strlen(p);
      } while (*p && strncmp(p, "  +", 3) == 0);
      char *entry = malloc((size_t)(p - start) + 1);
      assert_non_null(entry);
      memcpy(entry, start, (size_t)(p - start));
      entry[p - start] = 0;
      entries[count++] = entry;
    }
    qsort(entries, count, sizeof *entries, compare_strings);
    for (size_t i = 0; i < count; i++) {
      size_t m = strlen(entries[i]);
      memcpy(out, entries[i], m);
      out += m;
      free(entries[i]);
    }
  }
  *out = 0;
  free(entries);
  free(copy);
}

/* The snapshot with addresses made relative: segments by their place in their pool's list,
 * blocks by their offset in their segment, streams by index; pools by their place. */
static char *normalize(const world_t *w, const char *json) {
  cJSON *root = cJSON_Parse(json);
  if (!root) fail_msg("the snapshot is not JSON: %s", json);
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  assert_non_null(out);
  out[0] = 0;
#define EMIT(...)                                         \
  do {                                                    \
    int n_ = snprintf(out + len, cap - len, __VA_ARGS__); \
    while ((size_t)n_ >= cap - len) {                     \
      cap *= 2;                                           \
      out = realloc(out, cap);                            \
      assert_non_null(out);                               \
      n_ = snprintf(out + len, cap - len, __VA_ARGS__);   \
    }                                                     \
    len += (size_t)n_;                                    \
  } while (0)
  cJSON *device = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
  cJSON *pools = device ? cJSON_GetObjectItem(device, "pools") : NULL;
  int pool_index = 0;
  cJSON *pool;
  cJSON_ArrayForEach(pool, pools) {
    EMIT("pool %d refs %d routed %d reserved %.0f allocated %.0f\n", pool_index++,
         cJSON_GetObjectItem(pool, "references")->valueint,
         cJSON_IsTrue(cJSON_GetObjectItem(pool, "routed")),
         cJSON_GetObjectItem(pool, "reserved_bytes")->valuedouble,
         cJSON_GetObjectItem(pool, "allocated_bytes")->valuedouble);
    cJSON *seg;
    cJSON_ArrayForEach(seg, cJSON_GetObjectItem(pool, "segments")) {
      unsigned long long base =
          strtoull(cJSON_GetObjectItem(seg, "address")->valuestring, NULL, 16);
      EMIT(" segment %.0f small %d stream %d\n", cJSON_GetObjectItem(seg, "size")->valuedouble,
           cJSON_IsTrue(cJSON_GetObjectItem(seg, "small")),
           stream_index(w, cJSON_GetObjectItem(seg, "stream")->valuestring));
      cJSON *b;
      cJSON_ArrayForEach(b, cJSON_GetObjectItem(seg, "blocks")) {
        unsigned long long at = strtoull(cJSON_GetObjectItem(b, "address")->valuestring, NULL, 16);
        EMIT("  +%llu %.0f req %.0f %s\n", at - base, cJSON_GetObjectItem(b, "size")->valuedouble,
             cJSON_GetObjectItem(b, "requested")->valuedouble,
             cJSON_GetObjectItem(b, "state")->valuestring);
      }
    }
  }
#undef EMIT
  cJSON_Delete(root);
  sort_segments(out);
  return out;
}

static recap_status_t do_malloc(world_t *w, int stream) {
  if (w->live_count == LIVE) return RECAP_SUCCESS;
  size_t size = sizes[next_random(w) % SIZE_COUNT];
  /* Half the time, the pair the cache is for: the size just freed, on its stream. */
  if (w->last_freed_size && next_random(w) % 2) {
    size = w->last_freed_size;
    stream = w->last_freed_stream;
  }
  void *p = NULL;
  recap_status_t s = recap_malloc(&p, size, w->streams[stream]);
  if (s == RECAP_SUCCESS) {
    w->live[w->live_count] = p;
    w->live_stream[w->live_count++] = stream;
  }
  return s;
}

static recap_status_t do_free(world_t *w) {
  if (!w->live_count) return RECAP_SUCCESS;
  /* Mostly the latest allocation (a pair), else any. */
  size_t i = next_random(w) % 3 ? w->live_count - 1 : next_random(w) % w->live_count;
  void *p = w->live[i];
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(p, &info));
  w->last_freed_size = info.requested;
  w->last_freed_stream = w->live_stream[i];
  w->live[i] = w->live[w->live_count - 1];
  w->live_stream[i] = w->live_stream[w->live_count - 1];
  w->live_count--;
  return recap_free(p);
}

/* A capture on stream 0, routed to a fresh graph's pool: a few allocations and frees on the
 * capturing stream and on another one, a kernel, the end. The graph is kept for a while. */
static recap_status_t do_capture(world_t *w) {
  if (w->graph_count == 4) {
    OK(recap_graph_destroy(w->graphs[--w->graph_count]));
    return RECAP_SUCCESS;
  }
  recap_graph_t g = NULL;
  OK(recap_graph_create(&g, 0));
  recap_status_t s = recap_graph_capture_begin(g, NULL, w->streams[0]);
  if (s != RECAP_SUCCESS) {
    OK(recap_graph_destroy(g));
    return s;
  }
  int steps = 2 + (int)(next_random(w) % 6);
  recap_status_t inner = RECAP_SUCCESS;
  for (int i = 0; i < steps; i++) {
    recap_status_t t = next_random(w) % 2 ? do_malloc(w, (int)(next_random(w) % 2)) : do_free(w);
    if (t != RECAP_SUCCESS) inner = t;
  }
  recap__fake_stream_enqueue(w->streams[0]);
  s = recap_graph_capture_end(g);
  if (s == RECAP_SUCCESS)
    w->graphs[w->graph_count++] = g;
  else
    OK(recap_graph_destroy(g));
  return s != RECAP_SUCCESS ? s : inner;
}

static recap_status_t step(world_t *w) {
  unsigned r = next_random(w) % 100;
  if (r < 38) return do_malloc(w, (int)(next_random(w) % STREAMS));
  if (r < 74) return do_free(w);
  if (r < 80) {
    if (!w->live_count) return RECAP_SUCCESS;
    size_t i = next_random(w) % w->live_count;
    return recap_record_stream(w->live[i], w->streams[next_random(w) % STREAMS]);
  }
  if (r < 86) {
    recap__fake_stream_complete(w->streams[next_random(w) % STREAMS]);
    return RECAP_SUCCESS;
  }
  if (r < 88) return recap_empty_cache();
  if (r < 90) return recap_option_set_u64("max_split_size", next_random(w) % 2 ? 0 : 32 * MiB);
  if (r < 93) {
    static const recap__fake_fault_t kinds[] = {RECAP__FAKE_FAULT_RAW_MALLOC,
                                                RECAP__FAKE_FAULT_EVENT_CREATE,
                                                RECAP__FAKE_FAULT_EVENT_RECORD};
    recap__fake_fail_nth(kinds[next_random(w) % 3], 1 + next_random(w) % 3);
    return RECAP_SUCCESS;
  }
  if (r < 97) return do_capture(w);
  /* A small device: out of memory, the retry that empties the cache and the report. */
  if (r < 98) {
    void *p = NULL;
    recap_status_t s = recap_malloc(&p, (size_t)1 << 40, w->streams[0]);
    if (s == RECAP_SUCCESS) OK(recap_free(p));
    return s;
  }
  OK(recap_memory_reset_peak(-1));
  return RECAP_SUCCESS;
}

/* A failure inside a forked run: said on stderr, and the run's exit status. */
#define RUN_CHECK(cond, ...)                         \
  do {                                               \
    if (!(cond)) {                                   \
      fprintf(stderr, "seed %u step %d: ", seed, i); \
      fprintf(stderr, __VA_ARGS__);                  \
      fprintf(stderr, "\n");                         \
      _exit(1);                                      \
    }                                                \
  } while (0)

/* Run one seed's workload, in a forked child so that both runs start from the same process
 * state (the fake's memory is the host heap's: its addresses, which break best-fit ties, must
 * come out the same). With the cache off, write each step's record to `records`; with it on,
 * read them back and compare. Then write the cache's counters to `counts`. Exits 0 when all
 * matched and recap_memory_check passed at every step. */
static void run(unsigned seed, bool cache_on, FILE *records, FILE *counts) {
  int i = -1;
  reset_with_memory(256 * MiB);
  recap__alloc_front_cache_enable(cache_on);
  world_t w = {.rng = seed};
  for (int k = 0; k < STREAMS; k++) w.streams[k] = recap__fake_stream_new();
  for (i = 0; i < STEPS; i++) {
    step_record_t now = {.status = step(&w), .stats = RECAP_MEMORY_STATS_INIT};
    RUN_CHECK(recap_memory_check() == RECAP_SUCCESS, "%s", recap_last_error());
    RUN_CHECK(recap_memory_stats(0, &now.stats) == RECAP_SUCCESS, "stats");
    char *json = NULL;
    RUN_CHECK(recap_memory_snapshot_json(0, &json) == RECAP_SUCCESS, "snapshot");
    now.snapshot = normalize(&w, json);
    recap_string_free(json);
    size_t len = strlen(now.snapshot);
    if (!cache_on) {
      RUN_CHECK(fwrite(&now.status, sizeof now.status, 1, records) == 1 &&
                    fwrite(&now.stats, sizeof now.stats, 1, records) == 1 &&
                    fwrite(&len, sizeof len, 1, records) == 1 &&
                    fwrite(now.snapshot, 1, len, records) == len,
                "cannot write the record");
    } else {
      step_record_t was;
      size_t was_len = 0;
      RUN_CHECK(fread(&was.status, sizeof was.status, 1, records) == 1 &&
                    fread(&was.stats, sizeof was.stats, 1, records) == 1 &&
                    fread(&was_len, sizeof was_len, 1, records) == 1,
                "cannot read the record");
      was.snapshot = calloc(1, was_len + 1);
      RUN_CHECK(was.snapshot && fread(was.snapshot, 1, was_len, records) == was_len,
                "cannot read the record");
      RUN_CHECK(now.status == was.status, "status %s with the cache, %s without",
                recap_status_name(now.status), recap_status_name(was.status));
      RUN_CHECK(memcmp(&now.stats, &was.stats, sizeof now.stats) == 0,
                "the statistics differ with the cache");
      RUN_CHECK(strcmp(now.snapshot, was.snapshot) == 0,
                "the snapshot differs with the cache:\n%s\nwithout:\n%s", now.snapshot,
                was.snapshot);
      free(was.snapshot);
    }
    free(now.snapshot);
  }
  while (w.graph_count)
    RUN_CHECK(recap_graph_destroy(w.graphs[--w.graph_count]) == RECAP_SUCCESS, "destroy");
  for (size_t k = 0; k < w.live_count; k++)
    RUN_CHECK(recap_free(w.live[k]) == RECAP_SUCCESS, "free");
  RUN_CHECK(recap_memory_check() == RECAP_SUCCESS, "%s", recap_last_error());
  uint64_t c[2] = {recap__alloc.front.hits, recap__alloc.front.admitted};
  RUN_CHECK(fwrite(c, sizeof c, 1, counts) == 1 && fflush(counts) == 0 && fflush(records) == 0,
            "cannot write the counts");
  _exit(0);
}

/* Fork a child that runs; the child's exit status. */
static int run_forked(unsigned seed, bool cache_on, FILE *records, FILE *counts) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) run(seed, cache_on, records, counts);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

RECAP_TEST(random_workloads_match_the_slow_path) {
  /* Big host allocations (the fake's segments) always from mmap, whose addresses follow the
   * same calls in the same order: glibc's threshold would otherwise move with the frees. */
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  reset();
  uint64_t hits = 0, admitted = 0;
  for (unsigned seed = 1; seed <= SEEDS; seed++) {
    FILE *records = tmpfile(), *counts = tmpfile();
    assert_non_null(records);
    assert_non_null(counts);
    if (run_forked(seed, false, records, counts) != 0)
      fail_msg("seed %u: the run without the front cache failed (see above)", seed);
    rewind(records);
    uint64_t c[2];
    /* Read past the parent's stdio buffer: the child wrote through the shared descriptor. */
    assert_int_equal(pread(fileno(counts), c, sizeof c, 0), (ssize_t)sizeof c);
    assert_int_equal(c[0], 0); /* off: nothing cached */
    assert_int_equal(c[1], 0);
    rewind(counts);
    if (run_forked(seed, true, records, counts) != 0)
      fail_msg("seed %u: the run with the front cache differs (see above)", seed);
    assert_int_equal(pread(fileno(counts), c, sizeof c, 0), (ssize_t)sizeof c);
    hits += c[0];
    admitted += c[1];
    fclose(records);
    fclose(counts);
  }
  /* The cache was really used: a test of a cache that never serves could not fail. */
  if (hits < 100 || admitted < hits)
    fail_msg("the front cache served %llu mallocs of %llu blocks admitted",
             (unsigned long long)hits, (unsigned long long)admitted);
}

/* The pair the cache is for: stats as the slow path's, the snapshot showing one free block,
 * the checker content, the same address back, and a hit per pair. */
RECAP_TEST(a_pair_is_served_by_the_cache_with_exact_stats) {
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new();
    void *first = NULL, *p = NULL;
    OK(recap_malloc(&first, 512, s));
    OK(recap_free(first));
    for (int i = 0; i < 10; i++) {
      OK(recap_malloc(&p, 512, s));
      assert_ptr_equal(p, first);
      OK(recap_free(p));
      check();
    }
    assert_int_equal(recap__alloc.front.hits, on ? 10 : 0);
    recap_memory_stats_t st = stats();
    assert_int_equal(st.allocation[RECAP_STAT_ALL].current, 0);
    assert_int_equal(st.allocation[RECAP_STAT_ALL].allocated, 11);
    assert_int_equal(st.active[RECAP_STAT_ALL].peak, 1);
    assert_int_equal(st.active_bytes[RECAP_STAT_ALL].freed, 11 * 512);
    /* The segment is one free block again: not split, whatever the cache holds. */
    assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, 0);
    assert_int_equal(st.inactive_split[RECAP_STAT_ALL].allocated, 11);
    assert_int_equal(st.inactive_split_bytes[RECAP_STAT_ALL].current, 0);
    char *json = NULL;
    OK(recap_memory_snapshot_json(-1, &json));
    EXPECT_CONTAINS(json, "\"blocks\":[{\"address\"",
                    "\"size\":2097152,\"requested\":0,\"state\":\"free\"}]");
    recap_string_free(json);
    /* empty_cache merges the cached block and gives the segment back. */
    OK(recap_empty_cache());
    assert_int_equal(stats().reserved_bytes[RECAP_STAT_ALL].current, 0);
    check();
  }
  recap__alloc_front_cache_enable(true);
}

/* A block whose free would merge it into a free block before it, or whose merged block is not
 * the best fit of its size, is not cached: the next malloc of its size goes to the best fit, as
 * the slow path's. */
RECAP_TEST(a_block_the_slow_path_would_place_elsewhere_is_not_cached) {
  recap_stream_t s = stream_after_reset();
  void *a, *b, *c, *d;
  OK(recap_malloc(&a, 512, s));
  OK(recap_malloc(&b, 512, s));
  OK(recap_malloc(&c, 1024, s));
  OK(recap_malloc(&d, 512, s)); /* keeps c's free block apart from the segment's rest */
  OK(recap_free(a));
  OK(recap_free(c)); /* a 1 KiB hole: a better fit for 512 B than the 2 MiB rest */
  uint64_t admitted = recap__alloc.front.admitted;
  OK(recap_free(b)); /* would merge with a (free, before it): not cached */
  assert_int_equal(recap__alloc.front.admitted, admitted);
  assert_null(recap__alloc.front.block);
  check();
  void *e;
  OK(recap_malloc(&e, 512, s));
  assert_ptr_equal(e, a); /* the merged a+b hole, lowest of the two 1 KiB holes */
  OK(recap_free(e));      /* e's rest is free: e and it merge into a 1 KiB block, the best fit */
  assert_ptr_equal(recap__alloc.front.block->ptr, a);
  /* d's free: c before it is free, so d would merge into c: not cached. */
  admitted = recap__alloc.front.admitted;
  OK(recap_free(d));
  assert_int_equal(recap__alloc.front.admitted, admitted);
  assert_null(recap__alloc.front.block);
  check();
  OK(recap_malloc(&e, 512, s));
  assert_ptr_equal(e, a);
  OK(recap_free(e));
  check();

  /* A block whose merged block (itself and the segment's big free rest) is not the best fit of
   * its size: a 1 KiB hole is. */
  reset();
  s = recap__fake_stream_new();
  OK(recap_malloc(&a, 512, s));
  OK(recap_malloc(&b, 1024, s));
  OK(recap_malloc(&c, 512, s));
  OK(recap_malloc(&d, 512, s)); /* the last block before the segment's free rest */
  OK(recap_free(b));            /* the hole: cached (its merged block is the best fit of 1 KiB) */
  assert_ptr_equal(recap__alloc.front.block->ptr, b);
  OK(recap_free(d));
  assert_null(recap__alloc.front.block);
  check();
  OK(recap_malloc(&e, 512, s));
  assert_ptr_equal(e, b);
  assert_int_equal(recap__alloc.front.hits, 0);
  FREE_ALL(e, a, c);
  check();
}

/* Ties go to the lowest address, as in the slow path: a freed block of the same size as another
 * free block is cached only when it has the lower address. */
RECAP_TEST(a_tie_goes_to_the_lowest_address) {
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new();
    void *x, *y, *z, *w, *p;
    OK(recap_malloc(&x, MiB, s)); /* segment 1: x and y */
    OK(recap_malloc(&y, MiB, s));
    OK(recap_malloc(&z, MiB, s)); /* segment 2: z and w */
    OK(recap_malloc(&w, MiB, s));
    void *lo = (char *)x < (char *)z ? x : z, *hi = lo == x ? z : x;
    /* Two free blocks of 1 MiB; the latest free, hi, is not the best fit. */
    FREE_ALL(lo, hi);
    assert_null(recap__alloc.front.block);
    check();
    OK(recap_malloc(&p, MiB, s));
    assert_ptr_equal(p, lo);
    OK(recap_free(p)); /* now lo is the best fit: cached, and taken back */
    assert_ptr_equal(recap__alloc.front.block ? recap__alloc.front.block->ptr : NULL,
                     on ? lo : NULL);
    OK(recap_malloc(&p, MiB, s));
    assert_ptr_equal(p, lo);
    assert_int_equal(recap__alloc.front.hits, on ? 1 : 0);
    check();
    FREE_ALL(p, y, w);
    check();
  }
  recap__alloc_front_cache_enable(true);
}

/* ------------------------------------------------------------------------------------------
 * Folded pairs (front_cache.c): a repeated pair counts nothing until something reads or
 * changes the allocator; then every statistic is the slow path's.
 * ---------------------------------------------------------------------------------------- */

/* Everything a reader can see of the default pool's counters, for comparison between runs. */
typedef struct readings {
  recap_memory_stats_t stats;
  recap_pool_memory_t info;
  recap_pool_memory_t memory;
} readings_t;

static readings_t read_all(void) {
  readings_t r;
  memset(&r, 0, sizeof r);
  r.stats = stats();
  r.info = (recap_pool_memory_t)RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory((recap_pool_id_t){0, 0}, &r.info));
  r.memory = (recap_pool_memory_t)RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory((recap_pool_id_t){0, 0}, &r.memory));
  char *json = NULL;
  OK(recap_memory_snapshot_json(-1, &json)); /* the snapshot walks the blocks: it must agree */
  recap_string_free(json);
  check();
  return r;
}

static void assert_readings_equal(const readings_t *on, const readings_t *off, int checkpoint) {
  if (memcmp(&on->stats, &off->stats, sizeof on->stats) != 0) {
    const int64_t *a = (const int64_t *)&on->stats, *b = (const int64_t *)&off->stats;
    for (size_t i = 0; i < sizeof on->stats / sizeof *a; i++)
      if (a[i] != b[i])
        fail_msg("checkpoint %d: statistics word %zu is %lld with folding, %lld without",
                 checkpoint, i, (long long)a[i], (long long)b[i]);
  }
  assert_memory_equal(&on->info, &off->info, sizeof on->info);
  assert_memory_equal(&on->memory, &off->memory, sizeof on->memory);
}

/* Many pairs with no reader between, then every reader; the same with a block lent (taken,
 * not freed yet) when the readers come; then requests of another requested size with the same
 * rounding, which ends the run and starts another. Exact figures, and the same as the slow
 * path's. */
RECAP_TEST(folded_pairs_count_exactly_for_every_reader) {
  enum { PAIRS = 1000 };
  readings_t seen[2][4];
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new();
    void *keep = NULL, *p = NULL;
    OK(recap_malloc(&keep, 4096, s)); /* the segment is split: the pair's block has a rest */
    for (int i = 0; i < PAIRS; i++) {
      OK(recap_malloc(&p, 512, s));
      OK(recap_free(p));
    }
    if (on) assert_true(recap__alloc.front.folds >= PAIRS - 2);
    seen[on][0] = read_all();
    const recap_memory_stats_t *st = &seen[on][0].stats;
    assert_int_equal(st->allocation[RECAP_STAT_ALL].current, 1);
    assert_int_equal(st->allocation[RECAP_STAT_ALL].allocated, PAIRS + 1);
    assert_int_equal(st->allocation[RECAP_STAT_SMALL].freed, PAIRS);
    assert_int_equal(st->allocated_bytes[RECAP_STAT_ALL].peak, 4096 + 512);
    assert_int_equal(st->requested_bytes[RECAP_STAT_ALL].allocated, 4096 + PAIRS * 512);
    assert_int_equal(st->active_bytes[RECAP_STAT_SMALL].freed, PAIRS * 512);
    assert_int_equal(st->inactive_split[RECAP_STAT_ALL].current, 1);
    assert_int_equal(st->inactive_split_bytes[RECAP_STAT_ALL].current, 2 * MiB - 4096);

    /* A block lent by a folded take when the readers come: counted as allocated. */
    for (int i = 0; i < 10; i++) {
      OK(recap_malloc(&p, 512, s));
      OK(recap_free(p));
    }
    OK(recap_malloc(&p, 512, s));
    seen[on][1] = read_all();
    assert_int_equal(seen[on][1].stats.allocation[RECAP_STAT_ALL].current, 2);
    assert_int_equal(seen[on][1].info.allocated_bytes, 4096 + 512);
    recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
    OK(recap_block_info(p, &info));
    assert_int_equal(info.requested, 512);
    OK(recap_free(p));

    /* Another requested size of the same rounded size ends the run; its pairs fold again. */
    for (int i = 0; i < 50; i++) {
      OK(recap_malloc(&p, i < 25 ? 512 : 500, s));
      OK(recap_free(p));
    }
    seen[on][2] = read_all();
    assert_int_equal(seen[on][2].stats.requested_bytes[RECAP_STAT_ALL].allocated,
                     4096 + (PAIRS + 11 + 25) * 512 + 25 * 500);

    /* A pair of another size in the middle of a run, and a free of another block. */
    for (int i = 0; i < 20; i++) {
      OK(recap_malloc(&p, 512, s));
      OK(recap_free(p));
    }
    void *q = NULL;
    OK(recap_malloc(&p, 512, s));
    OK(recap_malloc(&q, 64 * KiB, s));
    FREE_ALL(keep, p, q);
    seen[on][3] = read_all();
    assert_int_equal(seen[on][3].stats.allocation[RECAP_STAT_ALL].current, 0);
    OK(recap_empty_cache());
    assert_int_equal(stats().reserved_bytes[RECAP_STAT_ALL].current, 0);
    check();
  }
  for (int k = 0; k < 4; k++) assert_readings_equal(&seen[1][k], &seen[0][k], k);
  recap__alloc_front_cache_enable(true);
}

/* The peaks of a folded run: after a reset of the peaks, the first pair raises them to the
 * pair's own level (not the reset's, not the earlier high) and the folded ones keep them. */
RECAP_TEST(a_peak_reached_in_a_folded_run_is_kept) {
  readings_t seen[2][2];
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new();
    void *big = NULL, *p = NULL, *keep = NULL;
    OK(recap_malloc(&big, MiB, s));
    OK(recap_free(big));
    OK(recap_memory_reset_peak(-1));
    for (int i = 0; i < 100; i++) {
      OK(recap_malloc(&p, 4096, s));
      OK(recap_free(p));
    }
    seen[on][0] = read_all();
    const recap_memory_stats_t *st = &seen[on][0].stats;
    assert_int_equal(st->allocated_bytes[RECAP_STAT_ALL].peak, 4096);
    assert_int_equal(st->active[RECAP_STAT_ALL].peak, 1);
    assert_int_equal(st->allocation[RECAP_STAT_ALL].allocated, 101);
    /* A higher level reached inside a run: a block held, then pairs, then a reset between two
     * of them, then more. */
    OK(recap_malloc(&keep, 8192, s));
    for (int i = 0; i < 100; i++) {
      OK(recap_malloc(&p, 4096, s));
      OK(recap_free(p));
      if (i == 50) OK(recap_memory_reset_peak(-1));
    }
    OK(recap_free(keep));
    seen[on][1] = read_all();
    st = &seen[on][1].stats;
    assert_int_equal(st->allocated_bytes[RECAP_STAT_ALL].peak, 8192 + 4096);
    assert_int_equal(st->active[RECAP_STAT_ALL].peak, 2);
    check();
  }
  for (int k = 0; k < 2; k++) assert_readings_equal(&seen[1][k], &seen[0][k], k);
  recap__alloc_front_cache_enable(true);
}

/* What ends a folded pair between its take and its free: an option change (the free goes the
 * slow path's way), recap_record_stream on the lent block (its free waits for the other
 * stream), a lookup. Each time, the same statistics as without the cache. */
RECAP_TEST(what_comes_between_a_folded_take_and_its_free) {
  readings_t seen[2][3];
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
    void *keep = NULL, *p = NULL;
    OK(recap_malloc(&keep, 1024, s));
    for (int i = 0; i < 20; i++) {
      OK(recap_malloc(&p, 2048, s));
      OK(recap_free(p));
    }
    OK(recap_malloc(&p, 2048, s));
    OK(recap_option_set_u64("max_split_size", 32 * MiB));
    OK(recap_free(p));
    seen[on][0] = read_all();

    for (int i = 0; i < 20; i++) {
      OK(recap_malloc(&p, 2048, s));
      OK(recap_free(p));
    }
    OK(recap_malloc(&p, 2048, s));
    OK(recap_record_stream(p, other));
    OK(recap_free(p));
    seen[on][1] = read_all();
    recap__fake_stream_complete(other);

    for (int i = 0; i < 20; i++) {
      OK(recap_malloc(&p, 2048, s));
      recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
      OK(recap_block_info(p, &info));
      OK(recap_free(p));
    }
    OK(recap_free(keep));
    seen[on][2] = read_all();
    check();
  }
  for (int k = 0; k < 3; k++) assert_readings_equal(&seen[1][k], &seen[0][k], k);
  recap__alloc_front_cache_enable(true);
}

/* Pairs during a capture routed to a pool with no allocation log (recap_pool_route_begin; a
 * graph's own capture logs its allocations, and logged requests skip the cache): they fold
 * too, through the general path of the take, and the pool's capture peak and every statistic
 * are the slow path's, read while the route lasts and after. */
RECAP_TEST(pairs_in_a_routed_capture_fold_and_count_exactly) {
  readings_t seen[2][2];
  recap_pool_memory_t pool[2][2];
  for (int on = 0; on < 2; on++) {
    reset();
    recap__alloc_front_cache_enable(on);
    recap_stream_t s = recap__fake_stream_new();
    recap_pool_id_t id = recap_pool_handle();
    assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
    OK(recap_pool_route_begin(id, s));
    void *keep = NULL, *p = NULL;
    OK(recap_malloc(&keep, 4096, s));
    for (int i = 0; i < 200; i++) {
      OK(recap_malloc(&p, 512, s));
      OK(recap_free(p));
    }
    if (on) assert_true(recap__alloc.front.folds >= 190);
    OK(recap_malloc(&p, 512, s)); /* lent while the readers come */
    for (int k = 0; k < 2; k++) {
      pool[on][k] = (recap_pool_memory_t)RECAP_POOL_MEMORY_INIT;
      OK(recap_pool_memory(id, &pool[on][k]));
      seen[on][k] = read_all();
      if (k == 0) {
        assert_int_equal(pool[on][0].allocated_bytes, 4096 + 512);
        assert_int_equal(seen[on][0].stats.allocation[RECAP_STAT_ALL].allocated, 202);
        FREE_ALL(p, keep);
        assert_true(recap__fake_capture_end(s));
        OK(recap_pool_route_end(id));
      }
    }
    check();
  }
  for (int k = 0; k < 2; k++) {
    assert_readings_equal(&seen[1][k], &seen[0][k], k);
    assert_memory_equal(&pool[1][k], &pool[0][k], sizeof pool[0][k]);
  }
  recap__alloc_front_cache_enable(true);
}

/* Random bursts of operations, mostly repeated pairs, with the readers only between bursts:
 * with the cache on, folded runs end in every way the workload allows, and the readings after
 * each burst are the slow path's. Each run forks from the same process state, as in
 * random_workloads_match_the_slow_path: best-fit ties follow the fake's host addresses. */
enum { BURSTS = 60 };

static void bursts_run(unsigned seed, bool on, FILE *out) {
  recap_test_reset(NULL);
  recap__alloc_front_cache_enable(on);
  world_t w = {.rng = seed};
  for (int k = 0; k < 2; k++) w.streams[k] = recap__fake_stream_new();
  void *p = NULL;
  size_t pair_size = 512;
  for (int b = 0; b < BURSTS; b++) {
    int ops = 1 + (int)(next_random(&w) % 60);
    for (int i = 0; i < ops; i++) {
      unsigned r = next_random(&w) % 100;
      if (r < 60) {
        OK(recap_malloc(&p, pair_size, w.streams[0]));
        if (next_random(&w) % 8 || w.live_count == LIVE)
          OK(recap_free(p));
        else
          w.live[w.live_count++] = p;
      } else if (r < 70) {
        pair_size = sizes[next_random(&w) % 5] - next_random(&w) % 3;
      } else if (r < 80) {
        if (w.live_count < LIVE) {
          OK(recap_malloc(&p, sizes[next_random(&w) % 5], w.streams[next_random(&w) % 2]));
          w.live[w.live_count++] = p;
        }
      } else if (r < 90) {
        if (w.live_count) {
          size_t k = next_random(&w) % w.live_count;
          OK(recap_free(w.live[k]));
          w.live[k] = w.live[--w.live_count];
        }
      } else if (r < 93) {
        if (w.live_count) OK(recap_record_stream(w.live[w.live_count - 1], w.streams[1]));
      } else if (r < 95) {
        recap__fake_stream_complete(w.streams[1]);
      } else if (r < 97) {
        OK(recap_memory_reset_peak(-1));
      } else {
        OK(recap_option_set_u64("max_split_size", next_random(&w) % 2 ? 0 : 32 * MiB));
      }
    }
    readings_t now = read_all();
    if (fwrite(&now, sizeof now, 1, out) != 1) _exit(2);
  }
  uint64_t folds = recap__alloc.front.folds;
  while (w.live_count) OK(recap_free(w.live[--w.live_count]));
  check();
  if (fwrite(&folds, sizeof folds, 1, out) != 1 || fflush(out) != 0) _exit(2);
  _exit(0);
}

/* The readings of one forked run, read back from its file. */
static void bursts_readings(unsigned seed, bool on, readings_t *seen, uint64_t *folds) {
  FILE *out = tmpfile();
  assert_non_null(out);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) bursts_run(seed, on, out);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("seed %u: the run with the cache %s failed (see above)", seed, on ? "on" : "off");
  size_t bytes = BURSTS * sizeof *seen;
  assert_int_equal(pread(fileno(out), seen, bytes, 0), (ssize_t)bytes);
  assert_int_equal(pread(fileno(out), folds, sizeof *folds, (off_t)bytes), (ssize_t)sizeof *folds);
  fclose(out);
}

RECAP_TEST(random_bursts_fold_and_match_the_slow_path) {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as in random_workloads_match_the_slow_path */
  static readings_t seen[2][BURSTS];
  uint64_t folds = 0;
  for (unsigned seed = 1; seed <= 4; seed++) {
    uint64_t f[2];
    for (int on = 0; on < 2; on++) bursts_readings(seed, on, seen[on], &f[on]);
    assert_int_equal(f[0], 0);
    folds += f[1];
    for (int b = 0; b < BURSTS; b++)
      assert_readings_equal(&seen[1][b], &seen[0][b], (int)seed * 1000 + b);
  }
  /* The runs folded: a test of folding that never folds could not fail. */
  if (folds < 300) fail_msg("only %llu pairs folded", (unsigned long long)folds);
  recap__alloc_front_cache_enable(true);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(random_workloads_match_the_slow_path),
    cmocka_unit_test(a_pair_is_served_by_the_cache_with_exact_stats),
    cmocka_unit_test(a_block_the_slow_path_would_place_elsewhere_is_not_cached),
    cmocka_unit_test(a_tie_goes_to_the_lowest_address),
    cmocka_unit_test(folded_pairs_count_exactly_for_every_reader),
    cmocka_unit_test(a_peak_reached_in_a_folded_run_is_kept),
    cmocka_unit_test(what_comes_between_a_folded_take_and_its_free),
    cmocka_unit_test(pairs_in_a_routed_capture_fold_and_count_exactly),
    cmocka_unit_test(random_bursts_fold_and_match_the_slow_path),
};
RECAP_TEST_MAIN(tests)
