/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap.c — a libFuzzer target across every layer: sequences of public calls on the CPU
 * fake device, each checked against a shadow model of what the documentation promises.
 *
 * The input is a program of operations (tests/fuzz/README.md has the table): allocations, frees,
 * record_stream and stream progress; graphs in the three capture modes, with private and shared
 * pools, kept templates and input liveness; capture scopes; joined side streams and invalidated
 * captures; replays, resets and destroys; generators (create, destroy, seed, offset, draws in
 * and out of captures); one graphed callable (a small forward and backward on the fake);
 * annotations; kernels that read blocks (for input liveness); the accessors and inspection;
 * cache empties, option changes and injected device faults.
 *
 * The model knows each graph's state, each stream's capture, each pool's references, each
 * generator's offset and which graphs hold it, and every live block. After every call:
 *  - the status is one the documentation allows in that state (an armed fault that fired in
 *    the call adds its own status, since the fake counts the calls of each kind);
 *  - on failure, recap_last_status() equals the status returned and recap_last_error() is set;
 *  - the statistics count the live blocks exactly, blocks and bytes: the program's own and what
 *    the graphed callable holds (measured after its own calls, which alone may change it);
 *    generators keep their state outside the pools (docs/rng.md), so they count nothing;
 *  - pool references and routing match the model; no two live blocks overlap and their tags
 *    hold; recap_memory_check() passes.
 * At the end everything is destroyed and freed, and the statistics, the fake's memory, graphs,
 * executables and captures must all be zero.
 *
 * Known defects can be tolerated one by one: RECAP_FUZZ_KNOWN="1,4,5,rng" makes the check that
 * finds defect 1 (a request takes a fresh segment where max_split_size lies between
 * large_threshold and large_segment), 4 (the last status differs from the status returned) or 5
 * (recap_capture_scope_end ends a plain capture begun after the scope's capture failed), or a
 * failed replay that advanced a generator (rng), note the violation and go on (the model then
 * follows what recap did). Without it every violation aborts. RECAP_FUZZ_TRACE=1 prints every
 * call and its status.
 *
 * Build: cmake --preset fuzz && cmake --build --preset fuzz; run:
 *   build-fuzz/tests/fuzz_recap -max_total_time=60 corpus-dir tests/fuzz/corpus_recap
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "fuzz_util.h"
#include "reset.h"
#include "recap.h"

enum {
  STREAMS = 5, /* four of the program's, and recap's side stream once a scope hands it out */
  SLOTS = 32,
  GRAPHS = 4,
  GENS = 2,
  SHARED = 2, /* pool handles several graphs may share */
  MAX_OPS = 256,
  MAX_INPUTS = 16,
  MAX_DEPTH = 8
};

enum { FRESH, CAPTURING, CAPTURED };

typedef struct slot {
  char *p;
  size_t size, usable;
  int stream;
  uint64_t serial;   /* the allocation's number: a block handed out again gets a new one */
  uint64_t pool;     /* 0: the default pool; else the capture's pool key (see graph_t) */
  bool used_on;      /* recap_record_stream was called on it */
  uint64_t split_at; /* max_split_size when it was allocated */
  bool pinned;       /* the graphed callable's static input: not freed while it lives */
} slot_t;

typedef struct graph {
  recap_graph_t h;
  bool keep;
  bool instantiated; /* an executable exists for sure (KEEP graphs: after an instantiation) */
  int state, stream, mode;
  int shared;         /* -1: a private pool; else which of the shared handles */
  uint64_t pool_key;  /* 100 + shared index, or 1000 + a number of its own per capture */
  bool invalid;       /* the capture was invalidated for sure */
  bool maybe_invalid; /* a call may have invalidated it (the docs say which calls may) */
  bool scope;         /* opened by recap_capture_scope_begin */
  bool liveness;
  unsigned gens;           /* generators used by the capture, then held by the graph */
  uint64_t consumed[GENS]; /* offset each replay advances them by */
  bool consumed_unknown;   /* a library kernel drew (its increment is not documented) */
  uint64_t inputs[MAX_INPUTS];
  int input_count;
  bool inputs_unknown; /* an input was freed or more were read than the model keeps */
  int depth;           /* annotation scopes open */
  int scope_streams[MAX_DEPTH];
  bool annotations_unknown;
  /* Whether recap_graph_pool names the pool of a failed capture (recap/graph.h: from a failed
   * end until a reset or another capture): POOL_NONE, POOL_NAMED, or POOL_UNKNOWN after a
   * failed begin, which names one only if the stream had begun capturing. */
  int failed_pool;
  /* A recapture runs (recap/update.h): the capture it replaces waits in st.saved[g], back when
   * the recapture fails; the route holds a second pool reference meanwhile. */
  bool recapturing;
  uint64_t recaptures; /* recaptures that succeeded since the create or the last reset */
} graph_t;

enum { POOL_NONE, POOL_NAMED, POOL_UNKNOWN };

typedef struct gen {
  recap_generator_t h;
  bool alive;
  uint64_t offset;
  bool offset_known;
} gen_t;

static struct {
  const uint8_t *data;
  size_t size, at;
  recap_stream_t streams[STREAMS];
  int owner[STREAMS]; /* the graph whose capture the stream takes part in, or -1 */
  slot_t slots[SLOTS];
  graph_t graphs[GRAPHS];
  graph_t saved[GRAPHS]; /* the capture a recapture replaces */
  gen_t gens[GENS];
  recap_pool_id_t shared[SHARED];
  uint64_t next_serial, next_pool_key;
  uint64_t max_split, memory_cap;
  /* Faults armed: the fake's call count at which each fires, 0 when none is armed. */
  uint64_t fault_at[RECAP__FAKE_FAULT_KINDS];
  uint64_t fired; /* kinds that fired during the current call, a bit each */
  /* The graphed callable. */
  recap_graphed_t callable;
  int callable_input; /* its static input's slot */
  bool callable_forward_ran, callable_last_eager;
  int64_t callable_blocks, callable_bytes; /* what it holds, measured after its calls */
  /* The previous operation, for the reuse check. */
  int last_free_slot_stream;
  size_t last_free_usable;
  bool last_was_plain_free; /* set by op_free, cleared before every other operation */
  bool prev_plain_free;     /* the flag as the previous operation left it */
  int op_index;
  unsigned tolerated; /* known defects met in this run */
} st;

static bool tracing;
static unsigned known; /* RECAP_FUZZ_KNOWN, as bits */
enum { KNOWN_1 = 1, KNOWN_4 = 2, KNOWN_5 = 4, KNOWN_RNG = 8 };

#define KiB ((size_t)1 << 10)

#define TRACE(...)                             \
  do {                                         \
    if (tracing) {                             \
      fprintf(stderr, "  %3d: ", st.op_index); \
      fprintf(stderr, __VA_ARGS__);            \
      fputc('\n', stderr);                     \
    }                                          \
  } while (0)

static void die(const char *what, recap_status_t status) {
  fprintf(stderr, "fuzz_recap: operation %d: %s (status %s, last status %s, last error: %s)\n",
          st.op_index, what, recap_status_name(status), recap_status_name(recap_last_status()),
          recap_last_error());
  abort();
}

/* A violation of a known defect: noted and tolerated when RECAP_FUZZ_KNOWN names it. */
static void known_defect(unsigned bit, const char *what, recap_status_t status) {
  if (known & bit) {
    if (!(st.tolerated & bit))
      TRACE("known defect tolerated (RECAP_FUZZ_KNOWN): %s (%s)", what, recap_status_name(status));
    st.tolerated |= bit;
    return;
  }
  die(what, status);
}

static uint8_t byte(void) { return st.at < st.size ? st.data[st.at++] : 0; }

/* ---- faults ---------------------------------------------------------------------------------- */

static void arm(recap__fake_fault_t kind, uint64_t n) {
  recap__fake_fail_nth(kind, n);
  st.fault_at[kind] = n ? recap__fake_now().calls[kind] + n : 0;
}

_Static_assert(RECAP__FAKE_FAULT_KINDS <= 64, "st.fired holds one bit per fault kind");

/* Before every call: nothing fired yet. After it: which armed faults fired during it. */
static void call_begins(void) { st.fired = 0; }

static void call_ends(void) {
  recap__fake_counters_t c = recap__fake_now();
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (st.fault_at[k] && c.calls[k] >= st.fault_at[k]) {
      st.fired |= 1ull << k;
      st.fault_at[k] = 0;
    }
}

static bool fired(recap__fake_fault_t kind) { return st.fired & (1ull << kind); }

/* An event that could not be made or recorded makes the allocator wait for the stream instead,
 * and waiting for a capturing stream invalidates its capture (docs/guarantees.md, "Device
 * failures"): after such a call every capture under way may be invalidated. */
static void events_may_have_waited(void) {
  if (!fired(RECAP__FAKE_FAULT_EVENT_CREATE) && !fired(RECAP__FAKE_FAULT_EVENT_RECORD)) return;
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) st.graphs[g].maybe_invalid = true;
}

/* ---- the status checks ------------------------------------------------------------------------ */

/* The last status and message after a failed call (docs/guarantees.md, "Arguments"). */
static void check_last(recap_status_t s, const char *call) {
  if (s == RECAP_SUCCESS) return;
  if (s == RECAP_ERROR_INTERNAL) die(call, s); /* "a bug in recap", never allowed */
  if (!recap_last_error()[0]) die("a failed call left recap_last_error() empty", s);
  if (recap_last_status() != s) {
    char what[256];
    snprintf(what, sizeof what,
             "%s returned %s but recap_last_status() is %s (defect 4: a cleanup overwrote "
             "the error)",
             call, recap_status_name(s), recap_status_name(recap_last_status()));
    known_defect(KNOWN_4, what, s);
  }
}

static void expect(recap_status_t s, recap_status_t allowed, const char *call) {
  check_last(s, call);
  if (s != allowed) {
    fprintf(stderr, "fuzz_recap: %s returned %s, the model expects %s\n", call,
            recap_status_name(s), recap_status_name(allowed));
    die("a status the documentation does not allow here", s);
  }
}

/* s is allowed if it is `allowed`, or the status of a fault that fired in the call. */
static void expect_or_fault(recap_status_t s, recap_status_t allowed, const char *call) {
  bool oom = fired(RECAP__FAKE_FAULT_RAW_MALLOC) && s == RECAP_ERROR_OUT_OF_MEMORY;
  bool cuda = (st.fired & ~(1u << RECAP__FAKE_FAULT_RAW_MALLOC)) && s == RECAP_ERROR_CUDA;
  if (oom || cuda)
    check_last(s, call);
  else
    expect(s, allowed, call);
}

/* ---- the model's bookkeeping ------------------------------------------------------------------ */

static bool any_capture(void) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) return true;
  return false;
}

static int pick_stream(void) {
  int n = st.streams[STREAMS - 1] ? STREAMS : STREAMS - 1;
  return byte() % n;
}

static bool slot_alive(uint64_t serial) {
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p && st.slots[i].serial == serial) return true;
  return false;
}

/* A graph's capture ended (successfully or not) or was abandoned: its streams are free again,
 * and on failure it is fresh, with no pool reference, generator or scope left. */
static void capture_over(int g, bool succeeded) {
  graph_t *gr = &st.graphs[g];
  for (int i = 0; i < STREAMS; i++)
    if (st.owner[i] == g) st.owner[i] = -1;
  gr->scope = false;
  gr->depth = 0;
  gr->recapturing = false;
  if (succeeded) {
    gr->state = CAPTURED;
    gr->instantiated = !gr->keep;
    return;
  }
  gr->state = FRESH;
  gr->gens = 0;
  gr->input_count = 0;
  gr->inputs_unknown = gr->consumed_unknown = false;
  memset(gr->consumed, 0, sizeof gr->consumed);
}

static void graph_fresh(int g) {
  capture_over(g, false);
  st.graphs[g].recaptures = 0; /* a reset zeroes the update counters */
}

/* The invariants after every call. */
static void check_invariants(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) die("recap_memory_check failed", s);
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  s = recap_memory_stats(-1, &stats);
  if (s != RECAP_SUCCESS) die("recap_memory_stats failed", s);
  int64_t blocks = 0, bytes = 0;
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p) {
      blocks++;
      bytes += (int64_t)st.slots[i].usable;
    }
  blocks += st.callable_blocks;
  bytes += st.callable_bytes;
  if (stats.allocation[RECAP_STAT_ALL].current != blocks ||
      stats.allocated_bytes[RECAP_STAT_ALL].current != bytes) {
    fprintf(stderr, "fuzz_recap: %lld blocks of %lld bytes counted, the model holds %lld of %lld\n",
            (long long)stats.allocation[RECAP_STAT_ALL].current,
            (long long)stats.allocated_bytes[RECAP_STAT_ALL].current, (long long)blocks,
            (long long)bytes);
    die("the statistics disagree with the blocks held", RECAP_SUCCESS);
  }
  /* Active bytes also count freed blocks still waiting for the events of record_stream; when
   * the allocator looks at those events again is not documented, so only the bound holds. */
  if (stats.active_bytes[RECAP_STAT_ALL].current < bytes)
    die("fewer active bytes than allocated ones", RECAP_SUCCESS);
  /* The shared pools' references: one per graph capturing or captured into it (recap/alloc.h). */
  for (int k = 0; k < SHARED; k++) {
    int refs = 0, routed = 0;
    for (int g = 0; g < GRAPHS; g++)
      if (st.graphs[g].h && st.graphs[g].shared == k && st.graphs[g].state != FRESH) {
        refs += 1 + st.graphs[g].recapturing;
        routed += st.graphs[g].state == CAPTURING;
      }
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    s = recap_pool_memory(st.shared[k], &info);
    if (s == RECAP_ERROR_NOT_FOUND) {
      if (refs) die("the pool of a captured graph was not found", s);
      continue;
    }
    if (s != RECAP_SUCCESS) die("recap_pool_memory failed", s);
    if (info.references != refs || info.routed != routed) {
      fprintf(stderr, "fuzz_recap: shared pool %d: %d references, routed %d; the model: %d, %d\n",
              k, info.references, info.routed, refs, routed);
      die("a pool's references disagree with the graphs holding it", s);
    }
  }
}

static void check_no_overlap(int self) {
  const slot_t *n = &st.slots[self];
  for (int i = 0; i < SLOTS; i++) {
    const slot_t *o = &st.slots[i];
    if (i == self || !o->p) continue;
    if (fuzz_overlap(n->p, n->usable, o->p, o->usable))
      die("two live blocks overlap", RECAP_SUCCESS);
  }
}

static void write_tag(const slot_t *s) {
  if (s->size >= 16) {
    memcpy(s->p, &s->serial, 8);
    memcpy(s->p + s->size - 8, &s->serial, 8);
  }
}

static void check_tag(const slot_t *s) {
  /* The graphed callable's static input takes the contents of every other input its forward
   * is given (recap/graphed.h): not the program's to check while the callable lives. */
  if (s->size < 16 || s->pinned) return;
  uint64_t a, b;
  memcpy(&a, s->p, 8);
  memcpy(&b, s->p + s->size - 8, 8);
  if (a != s->serial || b != s->serial) die("a live block's contents were overwritten", 0);
}

/* ---- the allocator ---------------------------------------------------------------------------- */

static struct { size_t small, large, segment; } sizes;

/* recap_block_info's struct, the callable description's size and the backward's inputs and
 * outputs changed in one change of the public headers, which RECAP_CALLABLE_DESC_INIT marks:
 * the target builds against the headers before and after it. */
#ifdef RECAP_CALLABLE_DESC_INIT
static recap_status_t block_info(const void *p, void **base, size_t *usable) {
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  recap_status_t s = recap_block_info(p, &info);
  if (s == RECAP_SUCCESS) *base = info.base, *usable = info.bytes;
  return s;
}
#else
static recap_status_t block_info(const void *p, void **base, size_t *usable) {
  return recap_block_info(p, base, usable);
}
#endif

static size_t pick_size(void) {
  uint8_t kind = byte();
  uint16_t x = (uint16_t)(byte() | (byte() << 8));
  switch (kind % 4) {
    case 0: return 1 + x % 4096;
    case 1: return 1 + (size_t)x * sizes.small / 65536;
    case 2: return sizes.small + 1 + (size_t)x * (sizes.large - sizes.small - 1) / 65536;
    default: return sizes.large + (size_t)(x % 64) * (sizes.large / 16);
  }
}

static void op_malloc(void) {
  int i = byte() % SLOTS, j = pick_stream();
  size_t size = pick_size();
  if (st.slots[i].p) return;
  bool reuse_check =
      st.prev_plain_free && st.last_free_slot_stream == j && !any_capture() && st.owner[j] < 0;
  size_t freed_usable = st.last_free_usable;
  recap_memory_stats_t before = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &before) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
  void *p = (void *)1;
  call_begins();
  recap_status_t s = recap_malloc(&p, size, st.streams[j]);
  call_ends();
  TRACE("recap_malloc(slot %d, %zu bytes, stream %d) -> %p %s", i, size, j, p,
        recap_status_name(s));
  events_may_have_waited();
  int g = st.owner[j];
  bool oom_allowed = st.memory_cap || fired(RECAP__FAKE_FAULT_RAW_MALLOC);
  if (s == RECAP_ERROR_OUT_OF_MEMORY && oom_allowed) {
    check_last(s, "recap_malloc");
  } else if (s == RECAP_ERROR_CAPTURE_INVALIDATED && g >= 0 &&
             (st.graphs[g].invalid || st.graphs[g].maybe_invalid)) {
    check_last(s, "recap_malloc");
  } else {
    expect(s, RECAP_SUCCESS, "recap_malloc");
  }
  if (s != RECAP_SUCCESS) {
    if (p) die("a failed recap_malloc left *ptr set", s);
    return;
  }
  if (!p) die("recap_malloc succeeded with NULL", s);
  size_t usable = 0;
  void *base = NULL;
  if (block_info(p, &base, &usable) != RECAP_SUCCESS || base != p || usable < size)
    die("recap_block_info disagrees with recap_malloc", 0);
  st.slots[i] = (slot_t){.p = p,
                         .size = size,
                         .usable = usable,
                         .stream = j,
                         .serial = ++st.next_serial,
                         .pool = g >= 0 ? st.graphs[g].pool_key : 0,
                         .split_at = st.max_split};
  check_no_overlap(i);
  write_tag(&st.slots[i]);
  /* A block freed by the previous call, on this stream, with no other stream's use and no
   * capture about, is in the cache; a request of the same rounded size must take it (or
   * another cached block), not a new segment. Limits: with max_split_size set, a freed block
   * that merged with free neighbours may legitimately be too large to split for a request
   * below the limit (PyTorch's rule), so the check holds for requests below large_threshold
   * only, which share large_segment-sized segments (docs/allocator.md). Where max_split_size
   * lies between large_threshold and large_segment, this is defect 1: every such request takes
   * a fresh segment. Values at or above large_segment cannot hit it. */
  if (reuse_check && usable == freed_usable && (st.max_split == 0 || size < sizes.large)) {
    recap_memory_stats_t after = RECAP_MEMORY_STATS_INIT;
    if (recap_memory_stats(-1, &after) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
    if (after.num_device_alloc != before.num_device_alloc) {
      bool defect_1 = st.max_split >= sizes.large && st.max_split <= sizes.segment;
      const char *what = "a request took a new segment though the block freed just before fits it";
      if (defect_1)
        known_defect(KNOWN_1,
                     "a request took a new segment though the block freed just before fits it "
                     "(defect 1: max_split_size between large_threshold and large_segment)",
                     s);
      else
        die(what, s);
    }
  }
}

static void op_free(void) {
  int i = byte() % SLOTS;
  slot_t *sl = &st.slots[i];
  if (!sl->p || sl->pinned) return;
  check_tag(sl);
  bool plain = !sl->used_on && sl->pool == 0;
  int stream = sl->stream;
  size_t usable = sl->usable;
  call_begins();
  recap_status_t s = recap_free(sl->p);
  call_ends();
  TRACE("recap_free(slot %d) -> %s", i, recap_status_name(s));
  events_may_have_waited();
  expect(s, RECAP_SUCCESS, "recap_free");
  /* A graph that read this block as an input sees it dead from now on; while its capture is
   * under way the block's address may be handed out again and read as another block. */
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING)
      for (int k = 0; k < st.graphs[g].input_count; k++)
        if (st.graphs[g].inputs[k] == sl->serial) st.graphs[g].inputs_unknown = true;
  memset(sl, 0, sizeof *sl);
  st.last_was_plain_free = plain;
  st.last_free_slot_stream = stream;
  st.last_free_usable = usable;
}

static void op_record_stream(void) {
  int i = byte() % SLOTS, j = pick_stream();
  slot_t *sl = &st.slots[i];
  if (!sl->p) return;
  call_begins();
  recap_status_t s = recap_record_stream(sl->p, st.streams[j]);
  call_ends();
  TRACE("recap_record_stream(slot %d, stream %d) -> %s", i, j, recap_status_name(s));
  expect(s, RECAP_SUCCESS, "recap_record_stream");
  if (j != sl->stream) sl->used_on = true;
  recap__fake_launch_kernel(st.streams[j], "fuzz_use");
}

static void op_complete(void) {
  int j = pick_stream();
  TRACE("stream %d completes its work", j);
  recap__fake_stream_complete(st.streams[j]);
}

static void op_empty_cache(void) {
  call_begins();
  recap_status_t s = recap_empty_cache();
  call_ends();
  TRACE("recap_empty_cache() -> %s", recap_status_name(s));
  /* docs/guarantees.md: refused while a capture is under way, nothing freed. An invalidated
   * capture not yet ended is still under way. */
  expect(s, any_capture() ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_empty_cache");
}

static void op_option(void) {
  /* In units of large_threshold (10 MiB, or 160 KiB scaled). 1, 1.2 and 1.6 lie between
   * large_threshold and large_segment, where defect 1 (a fresh segment for every medium request)
   * wastes memory; its fix makes the option refuse them (max_split_size 0 or larger than
   * large_segment), so the model takes either outcome there: accepted, the reuse check in
   * op_malloc holds recap to its promise. */
  static const double split[] = {0, 1, 1.2, 1.6, 2.5, 4};
  static const double cap[] = {0, 3.2, 6.4, 25.6};
  uint8_t which = byte(), value = byte();
  bool is_split = which & 1;
  double f = is_split ? split[value % 6] : cap[value % 4];
  uint64_t bytes = (uint64_t)(f * (double)sizes.large);
  const char *name = is_split ? "max_split_size" : "memory_cap";
  call_begins();
  recap_status_t s = recap_option_set_u64(name, bytes);
  call_ends();
  TRACE("recap_option_set_u64(%s, %llu) -> %s", name, (unsigned long long)bytes,
        recap_status_name(s));
  if (is_split && bytes >= sizes.large && bytes <= sizes.segment && s == RECAP_ERROR_INVALID_VALUE)
    check_last(s, "recap_option_set_u64");
  else
    expect(s, RECAP_SUCCESS, "recap_option_set_u64");
  if (s != RECAP_SUCCESS) return;
  if (is_split)
    st.max_split = bytes;
  else
    st.memory_cap = bytes;
}

static void op_fault(void) {
  static const recap__fake_fault_t kinds[] = {
      RECAP__FAKE_FAULT_RAW_MALLOC,   RECAP__FAKE_FAULT_EVENT_CREATE,
      RECAP__FAKE_FAULT_EVENT_RECORD, RECAP__FAKE_FAULT_CAPTURE_BEGIN,
      RECAP__FAKE_FAULT_CAPTURE_END,  RECAP__FAKE_FAULT_INSTANTIATE,
      RECAP__FAKE_FAULT_LAUNCH,       RECAP__FAKE_FAULT_STREAM_CREATE};
  uint8_t k = byte(), n = byte();
  recap__fake_fault_t kind = kinds[k % 8];
  TRACE("fault: the fake's call kind %d fails at its %dth call from now", (int)kind, 1 + n % 3);
  arm(kind, 1 + n % 3);
}

/* ---- graphs ----------------------------------------------------------------------------------- */

static void op_graph_create(void) {
  int g = byte() % GRAPHS;
  bool keep = byte() & 1;
  if (st.graphs[g].h) return;
  recap_graph_t h = NULL;
  call_begins();
  recap_status_t s = recap_graph_create(&h, keep ? RECAP_GRAPH_KEEP : 0);
  call_ends();
  TRACE("recap_graph_create(graph %d, %s) -> %s", g, keep ? "KEEP" : "0", recap_status_name(s));
  expect(s, RECAP_SUCCESS, "recap_graph_create");
  st.graphs[g] = (graph_t){.h = h, .keep = keep, .state = FRESH, .shared = -1};
}

/* The status capture_begin must give, and on success the model's new capture. */
static recap_status_t begin_expected(int g, int j, int shared) {
  if (st.graphs[g].state != FRESH) return RECAP_ERROR_INVALID_USAGE;
  if (st.owner[j] >= 0) return RECAP_ERROR_INVALID_USAGE;
  if (shared >= 0)
    for (int o = 0; o < GRAPHS; o++)
      if (o != g && st.graphs[o].h && st.graphs[o].state == CAPTURING &&
          st.graphs[o].shared == shared)
        return RECAP_ERROR_INVALID_USAGE; /* the pool is routed for another capture */
  return RECAP_SUCCESS;
}

static void capture_started(int g, int j, int mode, int shared, bool liveness, bool scope) {
  graph_t *gr = &st.graphs[g];
  gr->state = CAPTURING;
  gr->failed_pool = POOL_NONE;
  gr->stream = j;
  gr->mode = mode;
  gr->shared = shared;
  gr->pool_key = shared >= 0 ? 100 + (uint64_t)shared : 1000 + ++st.next_pool_key;
  gr->invalid = gr->maybe_invalid = false;
  gr->scope = scope;
  gr->liveness = liveness;
  gr->gens = 0;
  gr->consumed_unknown = gr->inputs_unknown = gr->annotations_unknown = false;
  memset(gr->consumed, 0, sizeof gr->consumed);
  gr->input_count = gr->depth = 0;
  st.owner[j] = g;
  /* The graph's pool is readable during its capture (recap/graph.h: "valid after
   * capture_begin"), and a shared one is the handle given. */
  recap_pool_id_t pool;
  recap_status_t s = recap_graph_pool(gr->h, &pool);
  if (s != RECAP_SUCCESS) die("recap_graph_pool during a capture failed", s);
  if (shared >= 0 && (pool.a != st.shared[shared].a || pool.b != st.shared[shared].b))
    die("recap_graph_pool is not the shared pool the capture was given", s);
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  s = recap_pool_memory(pool, &info);
  if (s != RECAP_SUCCESS || info.routed != 1 || info.references < 1)
    die("the pool of a capture under way is not routed or not referenced", s);
}

static void op_capture_begin(void) {
  int g = byte() % GRAPHS, j = pick_stream();
  uint8_t m = byte();
  int mode = m % 3, shared = (m >> 2) % 3 - 1;
  bool liveness = (m >> 4) & 1;
  if (!st.graphs[g].h) return;
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.mode = (recap_capture_mode_t)mode;
  if (shared >= 0) o.pool = st.shared[shared];
  o.check_input_liveness = liveness;
  recap_status_t want = begin_expected(g, j, shared);
  call_begins();
  recap_status_t s = recap_graph_capture_begin(st.graphs[g].h, &o, st.streams[j]);
  call_ends();
  TRACE("recap_graph_capture_begin(graph %d, stream %d, mode %d, pool %d, liveness %d) -> %s", g, j,
        mode, shared, liveness, recap_status_name(s));
  expect_or_fault(s, want, "recap_graph_capture_begin");
  if (s == RECAP_SUCCESS) capture_started(g, j, mode, shared, liveness, false);
  if (s != RECAP_SUCCESS && st.graphs[g].state == FRESH) st.graphs[g].failed_pool = POOL_UNKNOWN;
}

/* What ending g's capture must return, given the faults that fired. */
static void capture_ended(int g, recap_status_t s, const char *call) {
  graph_t *gr = &st.graphs[g];
  /* A recapture's end updates the executable, or instantiates afresh after a refusal. */
  bool fault = fired(RECAP__FAKE_FAULT_CAPTURE_END) ||
               ((!gr->keep || gr->recapturing) && fired(RECAP__FAKE_FAULT_INSTANTIATE)) ||
               (gr->recapturing && fired(RECAP__FAKE_FAULT_EXEC_UPDATE));
  events_may_have_waited();
  if (gr->invalid || gr->maybe_invalid) {
    if (s == RECAP_ERROR_CAPTURE_INVALIDATED || (s == RECAP_SUCCESS && !gr->invalid) ||
        (fault && s == RECAP_ERROR_CUDA))
      check_last(s, call);
    else
      expect(s, RECAP_ERROR_CAPTURE_INVALIDATED, call);
  } else {
    expect_or_fault(s, RECAP_SUCCESS, call);
  }
  capture_over(g, s == RECAP_SUCCESS);
  if (s != RECAP_SUCCESS) gr->failed_pool = POOL_NAMED;
}

static void op_capture_end(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  call_begins();
  recap_status_t s = recap_graph_capture_end(gr->h);
  call_ends();
  TRACE("recap_graph_capture_end(graph %d) -> %s", g, recap_status_name(s));
  if (gr->state != CAPTURING) {
    /* Not capturing: refused. */
    expect(s, RECAP_ERROR_INVALID_USAGE, "recap_graph_capture_end");
    return;
  }
  bool recapture = gr->recapturing;
  capture_ended(g, s, "recap_graph_capture_end");
  if (!recapture) return;
  /* A recapture that succeeded keeps the executable (updated or replaced) if there was one; one
   * that failed leaves the graph exactly as before it (recap/update.h). */
  if (s == RECAP_SUCCESS) {
    gr->instantiated = st.saved[g].instantiated;
    gr->failed_pool = st.saved[g].failed_pool;
    gr->recaptures = st.saved[g].recaptures + 1;
  } else {
    *gr = st.saved[g];
  }
}

/* recap_graph_recapture_begin with options NULL: the last capture's options and pool. */
static void op_recapture_begin(void) {
  int g = byte() % GRAPHS, j = pick_stream();
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t want = RECAP_SUCCESS;
  if (gr->state != CAPTURED || st.owner[j] >= 0) want = RECAP_ERROR_INVALID_USAGE;
  if (gr->shared >= 0)
    for (int o = 0; o < GRAPHS; o++)
      if (o != g && st.graphs[o].h && st.graphs[o].state == CAPTURING &&
          st.graphs[o].shared == gr->shared)
        want = RECAP_ERROR_INVALID_USAGE; /* the pool is routed for another capture */
  call_begins();
  recap_status_t s = recap_graph_recapture_begin(gr->h, NULL, st.streams[j]);
  call_ends();
  TRACE("recap_graph_recapture_begin(graph %d, stream %d) -> %s", g, j, recap_status_name(s));
  expect_or_fault(s, want, "recap_graph_recapture_begin");
  if (s != RECAP_SUCCESS) return;
  st.saved[g] = *gr;
  uint64_t key = gr->pool_key;
  capture_started(g, j, gr->mode, gr->shared, gr->liveness, false);
  gr->pool_key = key;
  gr->recapturing = true;
}

/* The update policy (any fields), then the counters: as many recaptures as the model counts,
 * and the instantiations' reasons adding up. */
static void op_update_policy(void) {
  int g = byte() % GRAPHS;
  uint8_t b = byte();
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.never_update = b & 1;
  p.max_failures = (b >> 1) & 3;
  p.retry_after = (b >> 3) & 3;
  p.max_slowdown = (b >> 5) & 1 ? 0.05 : 0.0;
  p.measure_replays = 1 + ((b >> 6) & 1);
  recap_status_t s = recap_graph_update_policy_set(gr->h, &p);
  TRACE("recap_graph_update_policy_set(graph %d, 0x%02x) -> %s", g, b, recap_status_name(s));
  expect(s, RECAP_SUCCESS, "recap_graph_update_policy_set");
  recap_update_stats_t u = RECAP_UPDATE_STATS_INIT;
  s = recap_graph_update_stats(gr->h, &u);
  expect(s, RECAP_SUCCESS, "recap_graph_update_stats");
  uint64_t sum = 0;
  for (int r = 0; r < RECAP_UPDATE_REASON_COUNT; r++) sum += u.by_reason[r];
  if (u.recaptures != gr->recaptures || sum != u.instantiations || u.by_reason[0] != 0 ||
      u.updates + u.instantiations > u.recaptures) {
    fprintf(stderr,
            "fuzz_recap: graph %d: %llu recaptures (the model: %llu), %llu updates, %llu "
            "instantiations, reasons adding up to %llu\n",
            g, (unsigned long long)u.recaptures, (unsigned long long)gr->recaptures,
            (unsigned long long)u.updates, (unsigned long long)u.instantiations,
            (unsigned long long)sum);
    die("the update counters disagree with the recaptures", s);
  }
}

static void op_scope_begin(void) {
  int g = byte() % GRAPHS;
  uint8_t m = byte();
  int j = (m & 1) ? -1 : (m >> 1) % (STREAMS - 1); /* -1: recap's side stream */
  int mode = (m >> 3) % 3, shared = (m >> 5) % 3 - 1;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.stream = j >= 0 ? st.streams[j] : NULL;
  o.capture.mode = (recap_capture_mode_t)mode;
  if (shared >= 0) o.capture.pool = st.shared[shared];
  bool others = any_capture();
  recap_stream_t out = NULL;
  call_begins();
  recap_status_t s = recap_capture_scope_begin(gr->h, &o, &out);
  call_ends();
  TRACE("recap_capture_scope_begin(graph %d, stream %d, mode %d, pool %d) -> %s (stream %p)", g, j,
        mode, shared, recap_status_name(s), (void *)out);
  if (j < 0 && s == RECAP_SUCCESS) {
    if (st.streams[STREAMS - 1] && st.streams[STREAMS - 1] != out)
      die("recap's side stream changed", s);
    st.streams[STREAMS - 1] = out;
  }
  int js = j >= 0 ? j : STREAMS - 1;
  recap_status_t want = gr->state != FRESH                    ? RECAP_ERROR_INVALID_USAGE
                        : (j < 0 && !st.streams[STREAMS - 1]) ? RECAP_SUCCESS
                                                              : begin_expected(g, js, shared);
  /* The scope synchronises the device first (recap/graph.h). Beside another capture under way
   * the documentation says nothing of what that does: CUDA forbids the synchronisation in
   * global mode and the fake refuses it, so the model accepts a refusal there and takes every
   * other capture to be possibly invalidated. */
  if (others && gr->state == FRESH && s != RECAP_SUCCESS) {
    check_last(s, "recap_capture_scope_begin");
  } else {
    expect_or_fault(s, want, "recap_capture_scope_begin");
  }
  if (others && gr->state == FRESH)
    for (int o2 = 0; o2 < GRAPHS; o2++)
      if (st.graphs[o2].state == CAPTURING) st.graphs[o2].maybe_invalid = true;
  if (s == RECAP_SUCCESS) capture_started(g, js, mode, shared, false, true);
  if (s != RECAP_SUCCESS && gr->state == FRESH) gr->failed_pool = POOL_UNKNOWN;
}

static void op_scope_end(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  call_begins();
  recap_status_t s = recap_capture_scope_end(gr->h);
  call_ends();
  TRACE("recap_capture_scope_end(graph %d) -> %s", g, recap_status_name(s));
  if (!gr->scope) {
    /* No scope open: its capture ended (whatever the outcome, recap/graph.h: "as if reset")
     * or none began. A plain capture begun since is not the scope's. */
    if (s != RECAP_ERROR_INVALID_USAGE && gr->state == CAPTURING) {
      known_defect(KNOWN_5,
                   "recap_capture_scope_end ended a plain capture after the scope's capture "
                   "had failed (defect 5)",
                   s);
      capture_ended(g, s, "recap_capture_scope_end");
      return;
    }
    expect(s, RECAP_ERROR_INVALID_USAGE, "recap_capture_scope_end");
    return;
  }
  capture_ended(g, s, "recap_capture_scope_end");
}

static bool graph_inputs_dead(const graph_t *gr) {
  for (int k = 0; k < gr->input_count; k++)
    if (!slot_alive(gr->inputs[k])) return true;
  return false;
}

static void op_replay(void) {
  int g = byte() % GRAPHS, j = pick_stream();
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  uint64_t offsets[GENS];
  for (int k = 0; k < GENS; k++) offsets[k] = st.gens[k].offset;
  call_begins();
  recap_status_t s = recap_graph_replay(gr->h, st.streams[j]);
  call_ends();
  TRACE("recap_graph_replay(graph %d, stream %d) -> %s", g, j, recap_status_name(s));
  if (gr->state != CAPTURED) {
    expect(s, RECAP_ERROR_INVALID_USAGE, "recap_graph_replay");
    return;
  }
  bool dead = gr->liveness && graph_inputs_dead(gr);
  bool inside = st.owner[j] >= 0 && gr->gens; /* draws, inside another capture */
  bool fault = fired(RECAP__FAKE_FAULT_LAUNCH) ||
               (!gr->instantiated && fired(RECAP__FAKE_FAULT_INSTANTIATE));
  if (gr->inputs_unknown && gr->liveness && (s == RECAP_SUCCESS || s == RECAP_ERROR_DEAD_INPUT))
    check_last(s, "recap_graph_replay");
  else if (dead && inside && (s == RECAP_ERROR_DEAD_INPUT || s == RECAP_ERROR_INVALID_USAGE))
    check_last(s, "recap_graph_replay"); /* which check comes first is not documented */
  else if (fault && s == RECAP_ERROR_CUDA)
    check_last(s, "recap_graph_replay");
  else if (st.owner[j] >= 0 && s == RECAP_ERROR_CAPTURE_INVALIDATED &&
           (st.graphs[st.owner[j]].invalid || st.graphs[st.owner[j]].maybe_invalid))
    check_last(s, "recap_graph_replay"); /* launched into a capture that was invalidated */
  else
    expect(s,
           dead     ? RECAP_ERROR_DEAD_INPUT
           : inside ? RECAP_ERROR_INVALID_USAGE
                    : RECAP_SUCCESS,
           "recap_graph_replay");
  if (s == RECAP_SUCCESS) gr->instantiated = true;
  /* Every replay advances the generators the graph draws from by what it consumes; a failed
   * one leaves them as they were (docs/rng.md, "A replay that fails"). */
  for (int k = 0; k < GENS; k++) {
    if (!(gr->gens & (1u << k))) continue;
    if (s == RECAP_SUCCESS) {
      st.gens[k].offset = offsets[k] + gr->consumed[k];
      if (gr->consumed_unknown) st.gens[k].offset_known = false;
    } else if (st.gens[k].alive && st.gens[k].offset_known) {
      uint64_t now_offset = 0;
      recap_status_t r = recap_generator_offset_get(st.gens[k].h, &now_offset);
      if (r == RECAP_SUCCESS && now_offset != offsets[k]) {
        known_defect(KNOWN_RNG, "a failed replay advanced a generator", s);
        st.gens[k].offset = now_offset;
      }
    }
  }
}

static void op_reset(void) {
  int g = byte() % GRAPHS;
  bool destroy = byte() & 1;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  call_begins();
  recap_status_t s = destroy ? recap_graph_destroy(gr->h) : recap_graph_reset(gr->h);
  call_ends();
  TRACE("recap_graph_%s(graph %d) -> %s", destroy ? "destroy" : "reset", g, recap_status_name(s));
  events_may_have_waited();
  expect(s, RECAP_SUCCESS, destroy ? "recap_graph_destroy" : "recap_graph_reset");
  graph_fresh(g);
  gr->failed_pool = POOL_NONE;
  if (destroy) memset(gr, 0, sizeof *gr);
}

static void op_invalidate(void) {
  int j = pick_stream();
  int g = st.owner[j];
  if (g < 0) return;
  TRACE("the capture of stream %d (graph %d) is invalidated", j, g);
  recap__fake_capture_invalidate(st.streams[j]);
  st.graphs[g].invalid = true;
}

static void op_join(void) {
  int side = byte() % (STREAMS - 1), g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h || gr->state != CAPTURING || st.owner[side] >= 0) return;
  bool ok = recap__fake_capture_join(st.streams[side], st.streams[gr->stream]);
  TRACE("stream %d joins the capture of graph %d -> %s", side, g, ok ? "joined" : "refused");
  if (ok) st.owner[side] = g;
}

/* A kernel that reads up to two blocks (what input liveness records). */
static void op_kernel(void) {
  int j = pick_stream();
  int a = byte() % SLOTS, b = byte() % SLOTS;
  const void *args[2];
  size_t n = 0;
  uint64_t serials[2];
  if (st.slots[a].p) serials[n] = st.slots[a].serial, args[n++] = st.slots[a].p;
  if (st.slots[b].p && b != a) serials[n] = st.slots[b].serial, args[n++] = st.slots[b].p;
  TRACE("a kernel on stream %d reads %zu blocks", j, n);
  recap__fake_launch_kernel_args(st.streams[j], "fuzz_read", args, n);
  int g = st.owner[j];
  if (g < 0 || !st.graphs[g].liveness) return;
  graph_t *gr = &st.graphs[g];
  for (size_t k = 0; k < n; k++) {
    const slot_t *sl = NULL;
    for (int i = 0; i < SLOTS; i++)
      if (st.slots[i].p && st.slots[i].serial == serials[k]) sl = &st.slots[i];
    if (!sl || sl->pool == gr->pool_key) continue; /* the graph's own pool: never recorded */
    /* A block of the same shared pool from an earlier capture is the pool's too. */
    if (gr->shared >= 0 && sl->pool == 100 + (uint64_t)gr->shared) continue;
    bool seen = false;
    for (int q = 0; q < gr->input_count; q++) seen |= gr->inputs[q] == serials[k];
    if (seen) continue;
    if (gr->input_count == MAX_INPUTS)
      gr->inputs_unknown = true;
    else
      gr->inputs[gr->input_count++] = serials[k];
  }
}

static void op_liveness(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  call_begins();
  recap_status_t s = recap_graph_check_inputs(gr->h);
  call_ends();
  TRACE("recap_graph_check_inputs(graph %d) -> %s", g, recap_status_name(s));
  /* Documented: INVALID_USAGE for a graph not captured with check_input_liveness. A graph not
   * captured at all is not mentioned; it has no record either, so the same status. */
  if (gr->state != CAPTURED || !gr->liveness) {
    expect(s, RECAP_ERROR_INVALID_USAGE, "recap_graph_check_inputs");
    return;
  }
  if (gr->inputs_unknown && (s == RECAP_SUCCESS || s == RECAP_ERROR_DEAD_INPUT))
    check_last(s, "recap_graph_check_inputs");
  else
    expect(s, graph_inputs_dead(gr) ? RECAP_ERROR_DEAD_INPUT : RECAP_SUCCESS,
           "recap_graph_check_inputs");
  size_t count = 0;
  s = recap_graph_liveness_inputs(gr->h, NULL, 0, &count);
  expect(s, RECAP_SUCCESS, "recap_graph_liveness_inputs");
  if (!gr->inputs_unknown && count != (size_t)gr->input_count) {
    fprintf(stderr, "fuzz_recap: %zu inputs recorded, the model read %d\n", count, gr->input_count);
    die("recap_graph_liveness_inputs disagrees with the blocks the capture read", s);
  }
}

/* The accessors and inspection, each with the states the documentation allows it in. */
static void op_access(void) {
  int g = byte() % GRAPHS, j = pick_stream();
  uint8_t what = byte();
  graph_t *gr = &st.graphs[g];
  recap_status_t s;
  bool captured = gr->state == CAPTURED;
  switch (what % 8) {
    case 0: {
      if (!gr->h) return;
      size_t n = 0;
      s = recap_graph_node_count(gr->h, &n);
      TRACE("recap_graph_node_count(graph %d) -> %s, %zu", g, recap_status_name(s), n);
      expect(s, captured ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE, "recap_graph_node_count");
      return;
    }
    case 1: {
      if (!gr->h) return;
      recap_cuda_graph_t raw = NULL;
      s = recap_graph_raw(gr->h, &raw);
      TRACE("recap_graph_raw(graph %d) -> %s", g, recap_status_name(s));
      expect(s, captured && gr->keep ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE,
             "recap_graph_raw");
      if ((s == RECAP_SUCCESS) != (raw != NULL))
        die("recap_graph_raw's result and status disagree", s);
      return;
    }
    case 2: {
      if (!gr->h) return;
      recap_cuda_graph_exec_t exec = NULL;
      s = recap_graph_raw_exec(gr->h, &exec);
      TRACE("recap_graph_raw_exec(graph %d) -> %s", g, recap_status_name(s));
      /* A KEEP graph's executable exists once instantiated; a failed replay or instantiation
       * may or may not have made one, which the model does not follow. */
      if (captured && gr->keep && !gr->instantiated)
        check_last(s, "recap_graph_raw_exec");
      else
        expect(s, captured && gr->instantiated ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE,
               "recap_graph_raw_exec");
      return;
    }
    case 3:
      if (!gr->h) return;
      call_begins();
      s = recap_graph_instantiate(gr->h);
      call_ends();
      TRACE("recap_graph_instantiate(graph %d) -> %s", g, recap_status_name(s));
      expect_or_fault(s, captured && gr->keep ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE,
                      "recap_graph_instantiate");
      if (s == RECAP_SUCCESS) gr->instantiated = true;
      return;
    case 4: {
      if (!gr->h) return;
      recap_graph_info_t *info = NULL;
      s = recap_graph_inspect(gr->h, &info);
      TRACE("recap_graph_inspect(graph %d) -> %s", g, recap_status_name(s));
      expect(s, captured && gr->keep ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE,
             "recap_graph_inspect");
      if (s != RECAP_SUCCESS) return;
      size_t n = 0;
      expect(recap_graph_node_count(gr->h, &n), RECAP_SUCCESS, "recap_graph_node_count");
      if (info->node_count != n) die("recap_graph_inspect and recap_graph_node_count disagree", s);
      char *json = NULL;
      s = recap_graph_info_json(info, &json);
      expect(s, RECAP_SUCCESS, "recap_graph_info_json");
      if (!json || strncmp(json, "{\"nodes\":[", 10) != 0)
        die("recap_graph_info_json is not JSON", s);
      recap_string_free(json);
      recap_graph_info_free(info);
      return;
    }
    case 5: {
      int capturing = -1;
      s = recap_stream_is_capturing(st.streams[j], &capturing);
      TRACE("recap_stream_is_capturing(stream %d) -> %s, %d", j, recap_status_name(s), capturing);
      expect(s, RECAP_SUCCESS, "recap_stream_is_capturing");
      if (capturing != (st.owner[j] >= 0))
        die("recap_stream_is_capturing disagrees with the captures under way", s);
      return;
    }
    case 6: {
      char *json = NULL;
      s = recap_memory_snapshot_json(-1, &json);
      TRACE("recap_memory_snapshot_json -> %s", recap_status_name(s));
      expect(s, RECAP_SUCCESS, "recap_memory_snapshot_json");
      if (!json || json[0] != '{') die("recap_memory_snapshot_json is not JSON", s);
      recap_string_free(json);
      expect(recap_memory_reset_peak(-1), RECAP_SUCCESS, "recap_memory_reset_peak");
      /* Allocation and free sites are recorded from now on, or no longer (recap/liveness.h). */
      recap_liveness_debug_enable((what >> 3) & 1);
      return;
    }
    default: {
      if (!gr->h) return;
      recap_pool_id_t pool;
      s = recap_graph_pool(gr->h, &pool);
      TRACE("recap_graph_pool(graph %d) -> %s", g, recap_status_name(s));
      if (gr->state == FRESH && gr->failed_pool == POOL_UNKNOWN)
        check_last(s, "recap_graph_pool");
      else
        expect(s,
               gr->state != FRESH || gr->failed_pool == POOL_NAMED ? RECAP_SUCCESS
                                                                   : RECAP_ERROR_INVALID_USAGE,
               "recap_graph_pool");
      if (s == RECAP_SUCCESS && gr->shared >= 0 &&
          (gr->state != FRESH || gr->failed_pool == POOL_NAMED) &&
          (pool.a != st.shared[gr->shared].a || pool.b != st.shared[gr->shared].b))
        die("recap_graph_pool is not the shared pool the capture was given", s);
      return;
    }
  }
}

/* ---- generators ------------------------------------------------------------------------------- */

static int capture_using(int k) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].h && st.graphs[g].state == CAPTURING && (st.graphs[g].gens & (1u << k)))
      return g;
  return -1;
}

static void op_generator(void) {
  int k = byte() % GENS;
  uint8_t what = byte();
  gen_t *ge = &st.gens[k];
  recap_status_t s;
  if (!ge->alive) {
    /* A generator held only by graphs is gone for the program: make a new one in its place
     * only once no graph holds the old (the slot's block count stays one per generator). */
    for (int g = 0; g < GRAPHS; g++)
      if (st.graphs[g].h && st.graphs[g].state != FRESH && (st.graphs[g].gens & (1u << k))) return;
    call_begins();
    s = recap_generator_create(&ge->h, what);
    call_ends();
    TRACE("recap_generator_create(gen %d, seed %d) -> %s", k, what, recap_status_name(s));
    if (s == RECAP_ERROR_OUT_OF_MEMORY && (st.memory_cap || fired(RECAP__FAKE_FAULT_RAW_MALLOC)))
      check_last(s, "recap_generator_create");
    else
      expect(s, RECAP_SUCCESS, "recap_generator_create");
    if (s == RECAP_SUCCESS) *ge = (gen_t){.h = ge->h, .alive = true, .offset_known = true};
    return;
  }
  int g = capture_using(k);
  uint64_t v = 0;
  switch (what % 4) {
    case 0:
      call_begins();
      s = recap_generator_destroy(ge->h);
      call_ends();
      TRACE("recap_generator_destroy(gen %d) -> %s", k, recap_status_name(s));
      expect(s, RECAP_SUCCESS, "recap_generator_destroy");
      ge->alive = false;
      return;
    case 1:
      s = recap_generator_seed_set(ge->h, what);
      TRACE("recap_generator_seed_set(gen %d) -> %s", k, recap_status_name(s));
      expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_seed_set");
      if (s == RECAP_SUCCESS) ge->offset = 0, ge->offset_known = true;
      return;
    case 2:
      v = (uint64_t)byte() * 2; /* odd multiples of 2 are not multiples of 4 */
      s = recap_generator_offset_set(ge->h, v);
      TRACE("recap_generator_offset_set(gen %d, %llu) -> %s", k, (unsigned long long)v,
            recap_status_name(s));
      if (v % 4)
        expect(s, RECAP_ERROR_INVALID_ARGUMENT, "recap_generator_offset_set");
      else
        expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_offset_set");
      if (s == RECAP_SUCCESS) ge->offset = v, ge->offset_known = true;
      return;
    default:
      s = recap_generator_offset_get(ge->h, &v);
      TRACE("recap_generator_offset_get(gen %d) -> %s, %llu", k, recap_status_name(s),
            (unsigned long long)v);
      expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_offset_get");
      if (s != RECAP_SUCCESS) return;
      if (ge->offset_known && v != ge->offset) {
        fprintf(stderr, "fuzz_recap: generator %d at offset %llu, the model says %llu\n", k,
                (unsigned long long)v, (unsigned long long)ge->offset);
        die("a generator's offset disagrees with the draws and replays", s);
      }
      ge->offset = v;
      ge->offset_known = true;
      return;
  }
}

static void op_draw(void) {
  int k = byte() % GENS, j = pick_stream();
  uint8_t what = byte();
  int i = byte() % SLOTS;
  gen_t *ge = &st.gens[k];
  if (!ge->alive) return;
  int g = st.owner[j];
  int other = capture_using(k);
  bool library = what & 1; /* recap_rng_uniform into a block, else a philox state */
  if (library && !st.slots[i].p) return;
  uint64_t increment = 1 + what % 13;
  recap_philox_state_t ph;
  size_t n = library ? st.slots[i].size / sizeof(float) : 0;
  call_begins();
  recap_status_t s =
      library ? recap_rng_uniform(ge->h, (float *)(void *)st.slots[i].p, n, st.streams[j])
              : recap_generator_philox_state(ge->h, increment, st.streams[j], &ph);
  call_ends();
  TRACE("%s(gen %d, stream %d) -> %s", library ? "recap_rng_uniform" : "philox_state", k, j,
        recap_status_name(s));
  if (library && n == 0) {
    expect(s, RECAP_SUCCESS, "recap_rng_uniform");
    return;
  }
  if (library) write_tag(&st.slots[i]); /* the fake wrote numbers into the block */
  if (g < 0) {
    expect(s, RECAP_SUCCESS, library ? "recap_rng_uniform" : "recap_generator_philox_state");
    if (library) {
      ge->offset_known = false;
    } else {
      if (ph.captured || (ge->offset_known && ph.offset != ge->offset))
        die("an eager draw got another offset than the generator's", s);
      ge->offset = ph.offset + ((increment + 3) & ~(uint64_t)3);
    }
    return;
  }
  graph_t *gr = &st.graphs[g];
  const char *call = library ? "recap_rng_uniform" : "recap_generator_philox_state";
  if (gr->invalid || gr->maybe_invalid) {
    if (s == RECAP_ERROR_CAPTURE_INVALIDATED || (s == RECAP_SUCCESS && !gr->invalid)) {
      check_last(s, call);
    } else if (other >= 0 && other != g) {
      expect(s, RECAP_ERROR_INVALID_USAGE, call);
    } else {
      expect(s, RECAP_ERROR_CAPTURE_INVALIDATED, call);
    }
  } else {
    expect(s, other >= 0 && other != g ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, call);
  }
  if (s != RECAP_SUCCESS) return;
  if (!library && !ph.captured) die("a draw in a recap graph's capture got an eager state", s);
  gr->gens |= 1u << k;
  if (library)
    gr->consumed_unknown = true;
  else
    gr->consumed[k] += (increment + 3) & ~(uint64_t)3;
}

/* ---- annotations ------------------------------------------------------------------------------ */

static void op_annotate(void) {
  int j = pick_stream();
  uint8_t what = byte();
  int g = st.owner[j];
  graph_t *gr = g >= 0 ? &st.graphs[g] : NULL;
  recap_status_t s;
  if (what & 1) {
    const char *label = (what & 6) == 0 ? "" : "fuzz";
    s = recap_annotate_push(label, st.streams[j]);
    TRACE("recap_annotate_push(stream %d, \"%s\") -> %s", j, label, recap_status_name(s));
    if (!label[0]) {
      expect(s, RECAP_ERROR_INVALID_ARGUMENT, "recap_annotate_push");
    } else if (!gr) {
      expect(s, RECAP_SUCCESS, "recap_annotate_push");
    } else if (gr->invalid || gr->maybe_invalid || gr->annotations_unknown) {
      /* On an invalidated capture a push does nothing; the model no longer knows the depth. */
      check_last(s, "recap_annotate_push");
      gr->annotations_unknown = true;
    } else if (gr->depth == MAX_DEPTH) {
      expect(s, RECAP_SUCCESS, "recap_annotate_push");
      gr->annotations_unknown = true;
    } else {
      expect(s, RECAP_SUCCESS, "recap_annotate_push");
      gr->scope_streams[gr->depth++] = j;
    }
    return;
  }
  s = recap_annotate_pop(st.streams[j]);
  TRACE("recap_annotate_pop(stream %d) -> %s", j, recap_status_name(s));
  if (!gr) {
    expect(s, RECAP_SUCCESS, "recap_annotate_pop");
  } else if (gr->invalid || gr->maybe_invalid || gr->annotations_unknown) {
    /* What a pop does on an invalidated capture is not documented. */
    if (s != RECAP_SUCCESS) expect(s, RECAP_ERROR_INVALID_USAGE, "recap_annotate_pop");
    gr->annotations_unknown = true;
  } else if (gr->depth == 0 || gr->scope_streams[gr->depth - 1] != j) {
    expect(s, RECAP_ERROR_INVALID_USAGE, "recap_annotate_pop");
  } else {
    expect(s, RECAP_SUCCESS, "recap_annotate_pop");
    gr->depth--;
  }
}

/* ---- the graphed callable --------------------------------------------------------------------- */

enum { CALLABLE_OUT = 1024 };

static recap_status_t fuzz_forward(void *ctx, recap_stream_t stream, int training,
                                   const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  outputs[0].bytes = CALLABLE_OUT;
  recap_status_t s = recap_malloc(&outputs[0].data, CALLABLE_OUT, stream);
  if (s != RECAP_SUCCESS) return s;
  const void *args[2] = {inputs[0].data, outputs[0].data};
  recap__fake_launch_kernel_args(stream, "fuzz_forward", args, 2);
  return RECAP_SUCCESS;
}

#ifdef RECAP_CALLABLE_DESC_INIT
static recap_status_t fuzz_backward(void *ctx, recap_stream_t stream, const recap_buffer_t *inputs,
                                    const recap_buffer_t *outputs,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
  if (!inputs || !outputs || !inputs[0].data || outputs[0].bytes != CALLABLE_OUT)
    return recap_set_last_error(RECAP_ERROR_INVALID_ARGUMENT,
                                "fuzz_backward: the forward's inputs and outputs are missing");
#else
static recap_status_t fuzz_backward(void *ctx, recap_stream_t stream,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
#endif
  size_t bytes = *(const size_t *)ctx;
  grad_inputs[0].bytes = bytes;
  recap_status_t s = recap_malloc(&grad_inputs[0].data, bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  const void *args[2] = {grad_outputs[0].data, grad_inputs[0].data};
  recap__fake_launch_kernel_args(stream, "fuzz_backward", args, 2);
  return RECAP_SUCCESS;
}

static size_t callable_input_bytes;

/* What the callable holds: the statistics less what the model knows of. */
static void measure_callable(void) {
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &stats) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
  int64_t blocks = 0, bytes = 0;
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p) blocks++, bytes += (int64_t)st.slots[i].usable;
  st.callable_blocks = stats.allocation[RECAP_STAT_ALL].current - blocks;
  st.callable_bytes = stats.allocated_bytes[RECAP_STAT_ALL].current - bytes;
}

static void op_graphed(void) {
  uint8_t what = byte();
  int i = byte() % SLOTS, j = pick_stream();
  /* The callable's calls run while no capture is under way: graphed_create captures itself,
   * and what it does beside another program capture is not documented. */
  if (any_capture()) return;
  recap_status_t s;
  if (!st.callable) {
    slot_t *sl = &st.slots[i];
    if (!sl->p || sl->size < 16) return;
    callable_input_bytes = sl->size;
    recap_buffer_t sample = {sl->p, sl->size};
    const int requires_grad[1] = {1};
#ifdef RECAP_CALLABLE_DESC_INIT
    recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
#else
    recap_callable_desc_t d = {0};
#endif
    d.forward = fuzz_forward;
    d.backward = fuzz_backward;
    d.ctx = &callable_input_bytes;
    d.input_count = 1;
    d.sample_inputs = &sample;
    d.requires_grad = requires_grad;
    d.output_count = 1;
    recap_graphed_options_t o = RECAP_GRAPHED_OPTIONS_INIT;
    o.warmup_iters = what % 3;
    o.mode = (recap_capture_mode_t)((what >> 2) % 3);
    call_begins();
    s = recap_graphed_create(&st.callable, &d, 1, &o);
    call_ends();
    TRACE("recap_graphed_create(input slot %d, %d warm-ups, mode %d) -> %s", i, o.warmup_iters,
          (int)o.mode, recap_status_name(s));
    if (st.fired || st.memory_cap) {
      /* A fault in the warm-ups or the captures: any of their statuses, nothing made. */
      check_last(s, "recap_graphed_create");
    } else {
      expect(s, RECAP_SUCCESS, "recap_graphed_create");
    }
    if (s == RECAP_SUCCESS) {
      sl->pinned = true;
      st.callable_input = i;
      st.callable_forward_ran = false;
    } else {
      st.callable = NULL;
    }
    measure_callable();
    return;
  }
  const recap_buffer_t *out = NULL;
  switch (what % 4) {
    case 0: {
      call_begins();
      s = recap_graphed_destroy(st.callable);
      call_ends();
      TRACE("recap_graphed_destroy() -> %s", recap_status_name(s));
      expect(s, RECAP_SUCCESS, "recap_graphed_destroy");
      st.callable = NULL;
      st.slots[st.callable_input].pinned = false;
      write_tag(&st.slots[st.callable_input]);
      measure_callable();
      if (st.callable_blocks || st.callable_bytes)
        die("memory left once the graphed callable was destroyed", s);
      return;
    }
    case 1:
    case 2: {
      /* The static input itself, or another block: of the same size it is copied, else
       * refused. */
      const slot_t *in = st.slots[i].p ? &st.slots[i] : &st.slots[st.callable_input];
      recap_buffer_t input = {in->p, in->size};
      int training = (what >> 3) & 1;
      call_begins();
      s = recap_graphed_forward(st.callable, training, &input, st.streams[j], &out);
      call_ends();
      TRACE("recap_graphed_forward(stream %d, training %d, %zu bytes) -> %s", j, training, in->size,
            recap_status_name(s));
      /* docs/guarantees.md refuses an input of another size than the sample in either mode;
       * recap/graphed.h says the other mode calls the forward eagerly and is silent on sizes.
       * The model follows the guarantee. */
      if (in->size != callable_input_bytes)
        expect(s, RECAP_ERROR_INVALID_ARGUMENT, "recap_graphed_forward");
      else if (st.memory_cap && s == RECAP_ERROR_OUT_OF_MEMORY)
        check_last(s, "recap_graphed_forward");
      else
        expect_or_fault(s, RECAP_SUCCESS, "recap_graphed_forward");
      if (s == RECAP_SUCCESS) {
        if (!out || !out[0].data || out[0].bytes != CALLABLE_OUT)
          die("recap_graphed_forward handed back no output of the forward's size", s);
        st.callable_forward_ran = true;
        st.callable_last_eager = !training; /* captured in training mode (the default) */
      }
      measure_callable();
      return;
    }
    default: {
      recap_buffer_t grad = {NULL, CALLABLE_OUT};
      void *g = NULL;
      /* The gradient of the output: a block of the output's size. */
      if (recap_malloc(&g, CALLABLE_OUT, st.streams[j]) != RECAP_SUCCESS) return;
      grad.data = g;
      call_begins();
      s = recap_graphed_backward(st.callable, &grad, st.streams[j], &out);
      call_ends();
      TRACE("recap_graphed_backward(stream %d) -> %s", j, recap_status_name(s));
      if (!st.callable_forward_ran)
        expect(s, RECAP_ERROR_INVALID_USAGE, "recap_graphed_backward");
      else if (st.memory_cap && s == RECAP_ERROR_OUT_OF_MEMORY)
        check_last(s, "recap_graphed_backward");
      else
        expect_or_fault(s, RECAP_SUCCESS, "recap_graphed_backward");
      if (s == RECAP_SUCCESS && (!out || !out[0].data || out[0].bytes != callable_input_bytes))
        die("recap_graphed_backward handed back no gradient of the input's size", s);
      if (recap_free(g) != RECAP_SUCCESS) die("recap_free of a gradient failed", 0);
      measure_callable();
      return;
    }
  }
}

/* ---- the program ------------------------------------------------------------------------------ */

static void read_options(void) {
  uint64_t v[3];
  const char *names[3] = {"small_size", "large_threshold", "large_segment"};
  for (int i = 0; i < 3; i++)
    if (recap_option_get(names[i], &v[i]) != RECAP_SUCCESS) die("recap_option_get failed", 0);
  sizes.small = v[0];
  sizes.large = v[1];
  sizes.segment = v[2];
}

static void parse_known(void) {
  const char *env = getenv("RECAP_FUZZ_KNOWN");
  known = 0;
  if (!env) return;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", env);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    if (!strcmp(t, "1"))
      known |= KNOWN_1;
    else if (!strcmp(t, "4"))
      known |= KNOWN_4;
    else if (!strcmp(t, "5"))
      known |= KNOWN_5;
    else if (!strcmp(t, "rng"))
      known |= KNOWN_RNG;
    else {
      fprintf(stderr, "fuzz_recap: RECAP_FUZZ_KNOWN: unknown defect \"%s\" (1, 4, 5, rng)\n", t);
      abort();
    }
  }
}

/* Destroy and free everything; then nothing may be left. */
static void release_everything(void) {
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) arm((recap__fake_fault_t)k, 0);
  st.op_index = -1;
  if (st.callable) {
    if (recap_graphed_destroy(st.callable) != RECAP_SUCCESS) die("graphed_destroy failed", 0);
    st.callable = NULL;
    st.slots[st.callable_input].pinned = false;
    write_tag(&st.slots[st.callable_input]);
    st.callable_blocks = st.callable_bytes = 0;
  }
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].h) {
      recap_status_t s = recap_graph_destroy(st.graphs[g].h);
      expect(s, RECAP_SUCCESS, "recap_graph_destroy at the end");
      memset(&st.graphs[g], 0, sizeof st.graphs[g]);
    }
  for (int k = 0; k < GENS; k++)
    if (st.gens[k].alive) {
      expect(recap_generator_destroy(st.gens[k].h), RECAP_SUCCESS, "recap_generator_destroy");
      st.gens[k].alive = false;
    }
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p) {
      check_tag(&st.slots[i]);
      expect(recap_free(st.slots[i].p), RECAP_SUCCESS, "recap_free at the end");
      st.slots[i].p = NULL;
    }
  for (int j = 0; j < STREAMS; j++)
    if (st.streams[j]) recap__fake_stream_complete(st.streams[j]);
  expect(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache at the end");
  check_invariants();
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &stats) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
  recap__fake_counters_t c = recap__fake_now();
  if (stats.allocation[RECAP_STAT_ALL].current || stats.reserved_bytes[RECAP_STAT_ALL].current ||
      stats.active_bytes[RECAP_STAT_ALL].current || c.bytes_in_use[0] || c.live_graphs ||
      c.live_execs) {
    fprintf(stderr,
            "fuzz_recap: left: %lld blocks, %lld reserved, %lld active bytes; the fake: %zu "
            "bytes, %lld graphs, %lld executables\n",
            (long long)stats.allocation[RECAP_STAT_ALL].current,
            (long long)stats.reserved_bytes[RECAP_STAT_ALL].current,
            (long long)stats.active_bytes[RECAP_STAT_ALL].current, c.bytes_in_use[0],
            (long long)c.live_graphs, (long long)c.live_execs);
    die("something was left after everything was released", 0);
  }
  /* No capture left on any stream. Events are not counted: the allocator keeps the events it
   * made for reuse until the process ends (docs/guarantees.md, "Leaks"). */
  for (int j = 0; j < STREAMS; j++) {
    int capturing = 1;
    if (st.streams[j] &&
        (recap_stream_is_capturing(st.streams[j], &capturing) != RECAP_SUCCESS || capturing))
      die("a stream still captures after everything was released", 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  recap_test_reset(NULL);
  recap_clear_last_error();
  memset(&st, 0, sizeof st);
  tracing = getenv("RECAP_FUZZ_TRACE") != NULL;
  parse_known();
  recap_log_set(tracing ? NULL : fuzz_quiet, NULL);
  recap_annotations_enable(1);
  st.data = data;
  st.size = size;
  for (int j = 0; j < STREAMS - 1; j++) st.streams[j] = recap__fake_stream_new();
  for (int j = 0; j < STREAMS; j++) st.owner[j] = -1;
  for (int k = 0; k < SHARED; k++) st.shared[k] = recap_pool_handle();
  recap_status_t scaled = fuzz_scale_down(data, size);
  if (scaled != RECAP_SUCCESS) die("the scaled-down options were refused", scaled);
  if (size > 0) st.at = 1;
  read_options();

  static void (*const ops[])(
      void) = {op_malloc,       op_malloc,        op_free,        op_record_stream, op_complete,
               op_graph_create, op_capture_begin, op_capture_end, op_scope_begin,   op_scope_end,
               op_replay,       op_reset,         op_invalidate,  op_join,          op_kernel,
               op_liveness,     op_generator,     op_draw,        op_annotate,      op_graphed,
               op_empty_cache,  op_option,        op_fault,       op_free,          op_access};
  for (st.op_index = 0; st.at < st.size && st.op_index < MAX_OPS; st.op_index++) {
    st.prev_plain_free = st.last_was_plain_free;
    st.last_was_plain_free = false;
    /* Opcode bytes 0xF0 and above are the recapture's operations, so that the seeds written
     * before them keep their meaning. */
    uint8_t op = byte();
    if (op >= 0xF8)
      op_update_policy();
    else if (op >= 0xF0)
      op_recapture_begin();
    else
      ops[op % (sizeof ops / sizeof ops[0])]();
    check_invariants();
  }
  release_everything();
  recap_annotations_enable(-1);
  recap_liveness_debug_enable(-1);
  recap_log_set(NULL, NULL);
  return 0;
}
