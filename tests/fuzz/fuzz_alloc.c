/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_alloc.c — a libFuzzer target: sequences of allocator and pool operations on the CPU fake
 * device, with the allocator's invariants checked after every operation.
 *
 * Each input is a program: every operation takes an opcode byte and a few argument bytes.
 * Operations: allocate (sizes around every boundary of the size classes, zero included; or, in a
 * logged capture, the size its pool's previous capture allocated next) on one of four streams, free, record_stream, let a stream's work finish, begin a capture on a stream
 * and route a pool to it, join a side stream to a capture, end a capture and its route (in
 * either order), invalidate a capture, release a pool, empty the cache, change an option
 * (max_split_size, memory_cap), arm a device fault (segment allocation, event creation or
 * record), and read the statistics, a snapshot, the memory page and a block's info.
 * Captures routed to pools 0 and 1 record their allocation log and replay the previous one of
 * their pool (as a graph's recapture does; src/alloc/replay.c); those routed to pools 2 and 3
 * take the usual path.
 *
 * After every operation: recap_memory_check() passes, the live blocks the program holds never
 * overlap, the statistics count exactly those blocks, and every call returned a status its
 * situation allows (e.g. recap_empty_cache refuses only while a capture is routed); at the end
 * of a logged capture, its log holds one entry of a rounded size per hit or miss. At the end
 * the program releases everything it holds, and the fake device must hold no memory. Any
 * violation aborts with a message, which libFuzzer reports as a crash with the input.
 *
 * Build: -DRECAP_BUILD_FUZZERS=ON with clang (see tests/CMakeLists.txt); run:
 *   build-fuzz/tests/fuzz_alloc -max_total_time=60 corpus-dir tests/fuzz/corpus
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "fuzz_util.h"
#include "reset.h"
#include "recap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

enum { STREAMS = 4, SLOTS = 64, POOLS = 4, LOGGED_POOLS = 2, MAX_OPS = 512 };

typedef struct slot {
  char *p;
  size_t size;
  uint64_t tag;
} slot_t;

typedef struct capture {
  bool active; /* a fake capture begun on this stream (its origin) */
  bool routed; /* a pool routed to it */
  int pool;    /* which of pools[] */
} capture_t;

static struct {
  const uint8_t *data;
  size_t size, at;
  recap_stream_t streams[STREAMS];
  capture_t captures[STREAMS]; /* by origin stream */
  int joined_to[STREAMS];      /* -1, or the origin whose capture the stream joined */
  slot_t slots[SLOTS];
  recap_pool_id_t pools[POOLS];
  int references[POOLS]; /* pool references this program holds (route_begin minus release) */
  int routes;            /* pools routed now */
  /* Per logged pool: the log its last capture recorded (replayed by the next) and the one the
   * next records into. */
  recap__alloc_log_t logs[LOGGED_POOLS][2];
  int last_log[LOGGED_POOLS];
  /* The stream of the pool's last capture when it was an op_recapture in which every allocation
   * succeeded, with max_split_size 0 (else -1), and the pool's reserved bytes it left. */
  int clean_stream[LOGGED_POOLS];
  int64_t clean_reserved[LOGGED_POOLS];
  uint64_t next_tag;
  int op_index;
} st;

static void die(const char *what, recap_status_t status) {
  fprintf(stderr, "fuzz_alloc: operation %d: %s (status %s, last error: %s)\n", st.op_index, what,
          recap_status_name(status), recap_last_error());
  abort();
}

static uint8_t byte(void) { return st.at < st.size ? st.data[st.at++] : 0; }

/* RECAP_FUZZ_TRACE=1 prints every operation, to turn a crashing input into a story. */
static bool tracing;

/* The size classes of the allocator's options now (scaled down by some inputs, see below). */
static struct { size_t small_size, large_threshold, small_segment, large_segment, round; } sizes;

static void read_sizes(void) {
  uint64_t v[5];
  const char *names[5] = {"small_size", "large_threshold", "small_segment", "large_segment",
                          "min_block_size"};
  for (int i = 0; i < 5; i++)
    if (recap_option_get(names[i], &v[i]) != RECAP_SUCCESS) die("recap_option_get failed", 0);
  sizes.small_size = v[0];
  sizes.large_threshold = v[1];
  sizes.small_segment = v[2];
  sizes.large_segment = v[3];
  sizes.round = v[4];
}

static size_t pick_size(void) {
  const size_t edges[] = {0,
                          1,
                          sizes.round - 1,
                          sizes.round,
                          sizes.round + 1,
                          sizes.small_size - 1,
                          sizes.small_size,
                          sizes.small_size + 1,
                          sizes.small_segment,
                          sizes.large_threshold - 1,
                          sizes.large_threshold,
                          sizes.large_threshold + 1,
                          sizes.large_segment,
                          sizes.large_segment + 1,
                          3 * sizes.large_segment};
  uint8_t kind = byte();
  uint16_t x = (uint16_t)(byte() | (byte() << 8));
  size_t small = sizes.small_size, large = sizes.large_threshold;
  switch (kind % 5) {
    case 0: return edges[x % (sizeof edges / sizeof edges[0])];
    case 1: return 1 + x % 4096;                                     /* tiny */
    case 2: return 1 + (size_t)x * small / 65536;                    /* the small pool */
    case 3: return small + 1 + (size_t)x * (large - small) / 65536;  /* large segments */
    default: return large + (size_t)(x % 1024) * (2 * large / 1024); /* own segments */
  }
}

static int capturing_origin(int stream) {
  if (st.captures[stream].active) return stream;
  return st.joined_to[stream];
}

static bool any_capture(void) {
  for (int i = 0; i < STREAMS; i++)
    if (st.captures[i].active) return true;
  return false;
}

static void check_invariants(void) {
  recap_memory_stats_t stats = fuzz_checked_stats(die);
  int64_t live = 0;
  for (int i = 0; i < SLOTS; i++) live += st.slots[i].p != NULL;
  if (stats.allocation[RECAP_STAT_ALL].current != live) {
    fprintf(stderr, "fuzz_alloc: %lld blocks counted, %lld held\n",
            (long long)stats.allocation[RECAP_STAT_ALL].current, (long long)live);
    die("the statistics disagree with the blocks held", RECAP_SUCCESS);
  }
}

/* The new block [p, p + size) overlaps no other live block, and its tag space is its own. */
static void check_no_overlap(int self) {
  const slot_t *n = &st.slots[self];
  for (int i = 0; i < SLOTS; i++) {
    const slot_t *o = &st.slots[i];
    if (i == self || !o->p) continue;
    if (fuzz_overlap(n->p, n->size, o->p, o->size)) die("two live blocks overlap", RECAP_SUCCESS);
  }
}

/* The block's tag, at its start and at its end (blocks of 16 bytes and more). */
static void write_tag(slot_t *s) {
  if (s->size < 2 * sizeof s->tag) return;
  memcpy(s->p, &s->tag, sizeof s->tag);
  memcpy(s->p + s->size - sizeof s->tag, &s->tag, sizeof s->tag);
}

static void check_tag(const slot_t *s) {
  if (s->size < 2 * sizeof s->tag) return;
  uint64_t a, b;
  memcpy(&a, s->p, sizeof a);
  memcpy(&b, s->p + s->size - sizeof b, sizeof b);
  if (a != s->tag || b != s->tag) die("a live block's contents were overwritten", RECAP_SUCCESS);
}

static int capturing_origin(int stream);

/* The size the capture of stream's next allocation had in its pool's previous capture (an
 * identical sequence so far, so that the replay is exercised); else one picked by pick_size. */
static size_t replayed_size(int stream) {
  int origin = capturing_origin(stream);
  const capture_t *c = origin >= 0 ? &st.captures[origin] : NULL;
  size_t pick = pick_size();
  if (!c || !c->routed || c->pool >= LOGGED_POOLS) return pick;
  const recap__alloc_log_t *replay = &st.logs[c->pool][st.last_log[c->pool]];
  const recap__alloc_log_t *record = &st.logs[c->pool][1 - st.last_log[c->pool]];
  return record->count < replay->count ? replay->v[record->count].size : pick;
}

static void malloc_into(int i, int stream, size_t size);

static void op_malloc(void) {
  int i = byte() % SLOTS;
  int stream = byte() % STREAMS;
  if (st.slots[i].p) return;
  malloc_into(i, stream, pick_size());
}

static void op_malloc_replayed(void) {
  int i = byte() % SLOTS;
  int stream = byte() % STREAMS;
  if (st.slots[i].p) return;
  malloc_into(i, stream, replayed_size(stream));
}

static void malloc_into(int i, int stream, size_t size) {
  void *p = (void *)1;
  recap_status_t s = recap_malloc(&p, size, st.streams[stream]);
  TRACE("malloc slot %d, %zu bytes, stream %d -> %p (%s)", i, size, stream, p,
        recap_status_name(s));
  /* Out of memory (the memory_cap option, an injected fault), or a segment allocation that a
   * global-mode capture without a route forbids (CUDA's cudaErrorStreamCaptureUnsupported). */
  if (s == RECAP_ERROR_OUT_OF_MEMORY || (s == RECAP_ERROR_CAPTURE_INVALIDATED && any_capture())) {
    if (p) die("a failed recap_malloc left *ptr set", s);
    if (!recap_last_error()[0]) die("a failed recap_malloc left no message", s);
    return;
  }
  if (s != RECAP_SUCCESS) die("recap_malloc failed unexpectedly", s);
  if (size == 0) {
    if (p) die("recap_malloc of 0 bytes gave a pointer", s);
    return;
  }
  if (!p) die("recap_malloc succeeded with NULL", s);
  st.slots[i] = (slot_t){p, size, ++st.next_tag};
  check_no_overlap(i);
  write_tag(&st.slots[i]);
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  s = recap_block_info(p, &info);
  if (s != RECAP_SUCCESS || info.base != p || info.bytes < size || info.requested != size)
    die("recap_block_info disagrees", s);
}

static void free_slot(slot_t *sl) {
  if (!sl->p) return;
  TRACE("free slot %d (%p)", (int)(sl - st.slots), (void *)sl->p);
  check_tag(sl);
  recap_status_t s = recap_free(sl->p);
  if (s != RECAP_SUCCESS) die("recap_free of a live block failed", s);
  memset(sl, 0, sizeof *sl);
}

static void op_free(void) { free_slot(&st.slots[byte() % SLOTS]); }

static void op_record_stream(void) {
  slot_t *sl = &st.slots[byte() % SLOTS];
  int stream = byte() % STREAMS;
  if (!sl->p) return;
  TRACE("record_stream slot %d, stream %d", (int)(sl - st.slots), stream);
  recap_status_t s = recap_record_stream(sl->p, st.streams[stream]);
  if (s != RECAP_SUCCESS) die("recap_record_stream of a live block failed", s);
  /* Some work on that stream, which the block's reuse must wait for. */
  recap__fake_stream_enqueue(st.streams[stream]);
}

static void op_complete(void) {
  int stream = byte() % STREAMS;
  TRACE("complete stream %d", stream);
  recap__fake_stream_complete(st.streams[stream]);
}

static void capture_begin(int stream, int pool, uint8_t mode) {
  TRACE("capture begin on stream %d, mode %d, pool %d", stream, mode, pool);
  if (!recap__fake_capture_begin(st.streams[stream], (recap__capture_mode_t)mode))
    die("the fake refused a capture", RECAP_SUCCESS);
  st.captures[stream] = (capture_t){.active = true, .routed = false, .pool = pool};
  recap_status_t s = recap_pool_route_begin(st.pools[pool], st.streams[stream]);
  bool pool_busy = false;
  for (int i = 0; i < STREAMS; i++)
    if (i != stream && st.captures[i].active && st.captures[i].routed &&
        st.captures[i].pool == pool)
      pool_busy = true;
  if (pool_busy) {
    if (s != RECAP_ERROR_INVALID_USAGE) die("a pool routed twice at once was not refused", s);
    return; /* the capture goes on without a route */
  }
  if (s != RECAP_SUCCESS) die("recap_pool_route_begin failed", s);
  st.captures[stream].routed = true;
  st.references[pool]++;
  st.routes++;
  if (pool < LOGGED_POOLS) {
    recap__alloc_log_t *record = &st.logs[pool][1 - st.last_log[pool]];
    recap__alloc_log_free(record);
    int device;
    s = recap__alloc_current_device(&device);
    if (s == RECAP_SUCCESS)
      s = recap__pool_route_set_logs(device, st.pools[pool], record,
                                     &st.logs[pool][st.last_log[pool]]);
    if (s != RECAP_SUCCESS) die("recap__pool_route_set_logs failed", s);
  }
}

/* The counters of pool's route since its logs were attached. */
static void route_replay_stats(int pool, uint64_t *hits, uint64_t *misses) {
  int device;
  recap_status_t s = recap__alloc_current_device(&device);
  if (s == RECAP_SUCCESS) s = recap__pool_route_replay_stats(device, st.pools[pool], hits, misses);
  if (s != RECAP_SUCCESS) die("recap__pool_route_replay_stats failed", s);
}

/* Before a logged route ends: every allocation it routed was counted once and logged once,
 * with a rounded size; the new log is the one the pool's next capture replays. */
static void end_logged_route(int pool) {
  if (pool >= LOGGED_POOLS) return;
  uint64_t hits = 0, misses = 0;
  route_replay_stats(pool, &hits, &misses);
  const recap__alloc_log_t *record = &st.logs[pool][1 - st.last_log[pool]];
  if (record->incomplete || hits + misses != record->count)
    die("a logged route counted other allocations than its log holds", RECAP_SUCCESS);
  for (size_t i = 0; i < record->count; i++)
    if (record->v[i].size == 0 || record->v[i].size % sizes.round)
      die("a log entry has a size that is not rounded", RECAP_SUCCESS);
  TRACE("logged route of pool %d: %zu allocations, %llu replayed", pool, record->count,
        (unsigned long long)hits);
  st.last_log[pool] = 1 - st.last_log[pool];
  st.clean_stream[pool] = -1;
}

static void op_capture_begin(void) {
  int stream = byte() % STREAMS;
  int pool = byte() % POOLS;
  uint8_t mode = byte() % 3;
  if (capturing_origin(stream) >= 0) return;
  capture_begin(stream, pool, mode);
}

static void end_capture(int origin, bool route_first);

/* Whether max_split_size is 0 now (the contract below is checked only then: with a limit, a
 * free block that merged with its neighbours may be refused to a request its part was given). */
static bool no_split_limit(void) {
  uint64_t v = 1;
  recap_status_t s = recap_option_get("max_split_size", &v);
  if (s != RECAP_SUCCESS) die("recap_option_get failed", s);
  return v == 0;
}

/* A whole recapture of a logged pool on one stream, as a graph's: begin, allocate the sizes its
 * previous capture allocated, in order (a few picked ones when it allocated none), free every
 * other one before the end (intermediates), end, and free the rest too when the input says
 * so. The next one replays what this one logged, and hits where these blocks are free again.
 * The contract of the replay is checked when the previous capture of the pool was such a
 * recapture on the same stream that allocated everything it asked for, and the pool holds
 * nothing allocated or waiting and as many bytes as it left: every allocation gets its old
 * address (all of them, or the ones made before the program's slots ran out), and the pool
 * does not grow. */
static void op_recapture(void) {
  int stream = byte() % STREAMS;
  int pool = byte() % LOGGED_POOLS;
  uint8_t flags = byte();
  if (capturing_origin(stream) >= 0) return;
  capture_begin(stream, pool, RECAP__CAPTURE_MODE_RELAXED);
  bool routed = st.captures[stream].routed;
  const recap__alloc_log_t *replay = &st.logs[pool][st.last_log[pool]];
  size_t n = routed ? replay->count : 0;
  size_t count = n ? n : 1 + (size_t)(flags % 6);
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  bool expect_all = n && st.clean_stream[pool] == stream && no_split_limit() &&
                    recap_pool_memory(st.pools[pool], &info) == RECAP_SUCCESS &&
                    info.allocated_bytes == 0 && info.waiting_bytes == 0 &&
                    info.reserved_bytes == st.clean_reserved[pool];
  bool clean = routed && count <= SLOTS;
  int held[SLOTS], held_count = 0;
  uint64_t made = 0; /* a prefix of the sequence when the slots run out */
  for (size_t k = 0; k < count && k < SLOTS; k++) {
    int i = 0;
    while (i < SLOTS && st.slots[i].p) i++;
    if (i == SLOTS) {
      clean = false;
      break;
    }
    size_t size = n ? replay->v[k].size : pick_size();
    malloc_into(i, stream, size);
    if (!st.slots[i].p) {
      clean = expect_all = false; /* the sequence differs from here on */
      continue;
    }
    made++;
    if (k % 2)
      free_slot(&st.slots[i]);
    else
      held[held_count++] = i;
    check_invariants();
  }
  if (expect_all) {
    uint64_t hits = 0, misses = 0;
    route_replay_stats(pool, &hits, &misses);
    TRACE("recapture of pool %d: %llu of %llu replayed", pool, (unsigned long long)hits,
          (unsigned long long)made);
    if (hits != made || misses != 0)
      die("a recapture of the same sequence did not get its old addresses", RECAP_SUCCESS);
  }
  end_capture(stream, flags & 0x80);
  if (flags & 0x40)
    for (int k = 0; k < held_count; k++) free_slot(&st.slots[held[k]]);
  if (expect_all && (recap_pool_memory(st.pools[pool], &info) != RECAP_SUCCESS ||
                     info.reserved_bytes != st.clean_reserved[pool]))
    die("a recapture of the same sequence grew its pool", RECAP_SUCCESS);
  if (clean && no_split_limit() && recap_pool_memory(st.pools[pool], &info) == RECAP_SUCCESS) {
    st.clean_stream[pool] = stream;
    st.clean_reserved[pool] = info.reserved_bytes;
  }
}

static void op_join(void) {
  int side = byte() % STREAMS;
  int origin = byte() % STREAMS;
  if (side == origin || capturing_origin(side) >= 0 || !st.captures[origin].active) return;
  TRACE("join stream %d to the capture of stream %d", side, origin);
  if (!recap__fake_capture_join(st.streams[side], st.streams[origin]))
    die("the fake refused a join", RECAP_SUCCESS);
  st.joined_to[side] = origin;
}

static void end_capture(int origin, bool route_first) {
  capture_t *c = &st.captures[origin];
  if (!c->active) return;
  TRACE("capture end on stream %d (%s)", origin, route_first ? "route first" : "capture first");
  if (c->routed) end_logged_route(c->pool);
  if (c->routed && route_first) {
    recap_status_t s = recap_pool_route_end(st.pools[c->pool]);
    if (s != RECAP_SUCCESS) die("recap_pool_route_end failed", s);
  }
  recap__fake_capture_end(st.streams[origin]);
  if (c->routed && !route_first) {
    recap_status_t s = recap_pool_route_end(st.pools[c->pool]);
    if (s != RECAP_SUCCESS) die("recap_pool_route_end failed", s);
  }
  if (c->routed) st.routes--;
  for (int i = 0; i < STREAMS; i++)
    if (st.joined_to[i] == origin) st.joined_to[i] = -1;
  c->active = c->routed = false;
}

static void op_capture_end(void) {
  int origin = byte() % STREAMS;
  end_capture(origin, byte() & 1);
}

static void op_invalidate(void) {
  int stream = byte() % STREAMS;
  if (capturing_origin(stream) < 0) return;
  TRACE("invalidate the capture of stream %d", stream);
  recap__fake_capture_invalidate(st.streams[stream]);
}

static void op_pool_release(void) {
  int pool = byte() % POOLS;
  recap_status_t s = recap_pool_release(st.pools[pool]);
  TRACE("release pool %d (%d references held) -> %s", pool, st.references[pool],
        recap_status_name(s));
  if (st.references[pool] > 0) {
    if (s != RECAP_SUCCESS) die("recap_pool_release of a held reference failed", s);
    st.references[pool]--;
  } else if (s != RECAP_ERROR_INVALID_USAGE) {
    die("recap_pool_release without a reference was not refused", s);
  }
}

static void op_empty_cache(void) {
  recap_status_t s = recap_empty_cache();
  TRACE("empty_cache -> %s", recap_status_name(s));
  if (st.routes > 0 && s != RECAP_ERROR_INVALID_USAGE)
    die("recap_empty_cache during a routed capture was not refused", s);
  /* Without a route, giving a segment back during a global-mode capture is refused by the
   * device (cudaFree is forbidden then), and the cache stays as it was. */
  if (st.routes == 0 && s != RECAP_SUCCESS &&
      !(s == RECAP_ERROR_CAPTURE_INVALIDATED && any_capture()))
    die("recap_empty_cache failed", s);
}

static void op_option(void) {
  /* max_split_size is 0 (no limit) or larger than large_segment (20 MiB). */
  static const char *const split[] = {"0", "1.05", "1.2", "1.6", "3.2"};
  static const char *const cap[] = {"0", "3.2", "6.4", "25.6"};
  uint8_t which = byte(), value = byte();
  const char *name = which & 1 ? "max_split_size" : "memory_cap";
  /* In units of large_segment (max_split_size) and large_threshold (memory_cap), so that the
   * values fit the scaled options too. */
  double factor = atof(which & 1 ? split[value % (sizeof split / sizeof split[0])]
                                 : cap[value % (sizeof cap / sizeof cap[0])]);
  size_t unit = which & 1 ? sizes.large_segment : sizes.large_threshold;
  uint64_t bytes = (uint64_t)(factor * (double)unit);
  TRACE("option %s = %llu", name, (unsigned long long)bytes);
  recap_status_t s = recap_option_set_u64(name, bytes);
  if (s != RECAP_SUCCESS) die("recap_option_set of a valid value failed", s);
}

static void op_fault(void) {
  static const recap__fake_fault_t kinds[] = {RECAP__FAKE_FAULT_RAW_MALLOC,
                                              RECAP__FAKE_FAULT_EVENT_CREATE,
                                              RECAP__FAKE_FAULT_EVENT_RECORD};
  uint8_t k = byte(), n = byte();
  TRACE("fault: fake call kind %d fails at its %dth call from now", (int)kinds[k % 3], 1 + n % 4);
  recap__fake_fail_nth(kinds[k % 3], 1 + n % 4);
}

static void op_inspect(void) {
  uint8_t what = byte();
  recap_status_t s;
  if (what % 3 == 0) {
    char *json = NULL;
    s = recap_memory_snapshot_json(-1, &json);
    if (s != RECAP_SUCCESS || !json || json[0] != '{') die("recap_memory_snapshot_json failed", s);
    recap_string_free(json);
    /* The memory page of the same state. */
    char *html = NULL;
    s = recap_memory_html_string(&html);
    if (s != RECAP_SUCCESS || !html || strncmp(html, "<!DOCTYPE html>", 15) != 0)
      die("recap_memory_html_string failed", s);
    recap_string_free(html);
  } else if (what % 3 == 1) {
    s = recap_memory_reset_peak(-1);
    if (s != RECAP_SUCCESS) die("recap_memory_reset_peak failed", s);
  } else {
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    s = recap_pool_memory(st.pools[byte() % POOLS], &info);
    if (s != RECAP_SUCCESS && s != RECAP_ERROR_NOT_FOUND) die("recap_pool_memory failed", s);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  recap_test_reset(NULL);
  memset(&st, 0, sizeof st);
  for (int i = 0; i < LOGGED_POOLS; i++) st.clean_stream[i] = -1;
  tracing = getenv("RECAP_FUZZ_TRACE") != NULL;
  recap_log_set(tracing ? NULL : fuzz_quiet, NULL);
  st.data = data;
  st.size = size;
  for (int i = 0; i < STREAMS; i++) {
    st.streams[i] = recap__fake_stream_new();
    st.joined_to[i] = -1;
  }
  for (int i = 0; i < POOLS; i++) st.pools[i] = recap_pool_handle();
  recap_status_t scaled = fuzz_scale_down(data, size);
  if (scaled != RECAP_SUCCESS) die("the scaled-down options were refused", scaled);
  read_sizes();

  /* Opcodes below 0xF0 mod 16, so that the seeds keep their meaning; 0xF0 to 0xFF are the
   * replay's (tests/fuzz/README.md). */
  static void (*const ops[])(
      void) = {op_malloc,      op_malloc,        op_malloc,     op_free,
               op_free,        op_record_stream, op_complete,   op_capture_begin,
               op_join,        op_capture_end,   op_invalidate, op_pool_release,
               op_empty_cache, op_option,        op_fault,      op_inspect};
  for (st.op_index = 0; st.at < st.size && st.op_index < MAX_OPS; st.op_index++) {
    uint8_t code = byte();
    if (code >= 0xF0)
      (code & 8 ? op_recapture : op_malloc_replayed)();
    else
      ops[code % 16]();
    check_invariants();
  }

  /* Release everything: captures, blocks, pool references; then nothing may be left. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_RECORD, 0);
  st.op_index = -1;
  for (int i = 0; i < STREAMS; i++) end_capture(i, true);
  for (int i = 0; i < SLOTS; i++) {
    if (!st.slots[i].p) continue;
    check_tag(&st.slots[i]);
    recap_status_t s = recap_free(st.slots[i].p);
    if (s != RECAP_SUCCESS) die("recap_free at the end failed", s);
    st.slots[i].p = NULL;
  }
  for (int i = 0; i < POOLS; i++)
    for (; st.references[i] > 0; st.references[i]--) {
      recap_status_t s = recap_pool_release(st.pools[i]);
      if (s != RECAP_SUCCESS) die("recap_pool_release at the end failed", s);
    }
  for (int i = 0; i < STREAMS; i++) recap__fake_stream_complete(st.streams[i]);
  recap_status_t s = recap_empty_cache();
  if (s != RECAP_SUCCESS) die("recap_empty_cache at the end failed", s);
  check_invariants();
  for (int i = 0; i < LOGGED_POOLS; i++) {
    recap__alloc_log_free(&st.logs[i][0]);
    recap__alloc_log_free(&st.logs[i][1]);
    st.last_log[i] = 0;
  }
  if (recap__fake_now().bytes_in_use[0] != 0) {
    fprintf(stderr, "fuzz_alloc: %zu bytes of device memory left\n",
            recap__fake_now().bytes_in_use[0]);
    die("memory left after everything was released", RECAP_SUCCESS);
  }
  recap_log_set(NULL, NULL);
  return 0;
}
