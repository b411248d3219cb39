/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2.c — a libFuzzer target for the second half of recap's calls: sleep and wake,
 * pinned reservations, VMM segments with frees in their middle, rebind and recapture with a
 * changing topology, conditional regions (a capture invalidated while one is open included),
 * graph sets, the fake's NCCL and device faults, two in a row. Each call is checked against a
 * shadow model of what docs/sleep.md, allocator.md, rebind.md, update.md, regions.md,
 * graph_sets.md and nccl.md promise.
 *
 * Every run has expandable_segments on (all segments are VMM), a fake device of 256 MiB with a
 * 64 KiB granularity, one stream that captures (GLOBAL mode) and one that does not. The model
 * knows every live block (address, size, pool, the byte pattern written into it and whether its
 * pool's sleep discarded it), each graph's state, the sites its kernels point at, the regions
 * open in the capture, each pool's sleep state and the pinned buffers kept for OFFLOAD. After
 * every call:
 *  - the status is one the documentation allows (a fault that fired in the call allows any
 *    failure but RECAP_ERROR_INTERNAL; the model then reads back what the call left);
 *  - recap_memory_check passes; the statistics count exactly the live blocks, and reserved
 *    bytes are at least the allocated ones;
 *  - "a sleep or wake never half-happens": the fake's mapped VMM bytes equal the reserved bytes
 *    less what the asleep pools give back (never fewer: an awake pool is wholly mapped);
 *  - every live block of an awake pool keeps its address and its pattern, unless its pool
 *    slept with DISCARD since it was written;
 *  - after recap_empty_cache with no capture and no fault, the default pool reserves no chunk
 *    that lies wholly in free memory (docs/allocator.md, "Expandable segments"), and the kept
 *    pinned buffers are gone.
 * At the end everything is woken, destroyed and freed and the fake must hold nothing.
 *
 * Known defects can be tolerated one by one with RECAP_FUZZ_KNOWN (a list of names):
 *   pinned_null         recap_pinned_reserve when the only kept buffers are unreserved and small;
 *   rebind_recapture    a recapture of a rebind graph with another node count refused;
 *   region_invalidated  a capture invalidated while a region is open can never end;
 *   sleep_double_fault  a sleep whose roll-back map fails, a wake whose undo cannot unmap;
 *   vmm_interior        recap_empty_cache releases only a VMM segment's free tail.
 * A tolerated defect is avoided (the input that finds it is skipped) or let through, as the
 * FUZZ_KNOWN_* bit's comment says. RECAP_FUZZ_TRACE=1 prints every call and its status.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "fuzz_util.h"
#include "recap.h"
#include "reset.h"

/* The sites each move of the latest recap_graph_rebind changed. */
static size_t patched[16];

enum {
  SLOTS = 24,
  GRAPHS = 3,
  POOLS = 48, /* every pool a run makes: the default pool, the graphs', the sets' */
  SITES = 16,
  MAX_OPS = 200,
  MAX_KEPT = 8,
  DEPTH = 4
};

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GRANULE (64 * KiB)
#define DEVICE_BYTES (256 * MiB)

enum { FRESH, CAPTURING, CAPTURED };

/* The known defects (RECAP_FUZZ_KNOWN). */
enum {
  FUZZ_KNOWN_PINNED_NULL = 1,        /* (a) skip the reserve that would write through NULL */
  FUZZ_KNOWN_REBIND_RECAPTURE = 2,   /* (b) accept INVALID_ARGUMENT at such a recapture's end */
  FUZZ_KNOWN_REGION_INVALIDATED = 4, /* (c) invalidate no capture while a region is open */
  FUZZ_KNOWN_SLEEP_DOUBLE_FAULT = 8, /* (d) arm no second fault behind a sleep's or wake's */
  FUZZ_KNOWN_VMM_INTERIOR = 16       /* (e) skip the interior-chunk check of empty_cache */
};

typedef struct slot {
  unsigned char *p;
  size_t usable;
  int pool;        /* index into st.pools */
  uint8_t pattern; /* every byte of the block */
  bool known;      /* the pattern holds (not discarded since it was written) */
  bool side;       /* allocated by op_vmm_interior, on the second stream */
} slot_t;

typedef struct pool {
  recap_pool_id_t id;
  int state;      /* a recap_pool_state_t, as the model has it */
  bool holds_buf; /* asleep OFFLOADED with a pinned copy */
  bool residue;   /* a wake failed and its undo could not unmap: a chunk may stay mapped */
} pool_t;

typedef struct level {
  int kind, branches, branch;
} level_t;

typedef struct graph {
  recap_graph_t h;
  int state, pool;
  bool rebind, recapturing, invalid;
  const void *sites[SITES]; /* default-pool addresses its kernels hold */
  size_t site_size[SITES];
  int nsites, saved_nsites;
  const void *saved_sites[SITES];
  size_t saved_size[SITES];
  bool saved_rebind;
  level_t levels[DEPTH];
  int depth;
} graph_t;

static struct {
  const uint8_t *data;
  size_t size, at;
  recap_stream_t cap, other;
  slot_t slots[SLOTS];
  graph_t graphs[GRAPHS];
  pool_t pools[POOLS];
  int npools;
  recap_nccl_comm_t comm;
  /* Pinned buffers kept for OFFLOAD sleeps (docs/sleep.md), as the model has them. */
  size_t kept[MAX_KEPT];
  bool kept_reserved[MAX_KEPT];
  int nkept;
  bool pinned_unknown; /* a call the model cannot follow touched them */
  bool keep_pinned;
  bool device_used; /* recap has used the device (recap_sleep then sleeps its default pool) */
  uint64_t fault_at[RECAP__FAKE_FAULT_KINDS];
  uint64_t fired;
  int op_index;
} st;

static bool tracing;
static unsigned known;

#define TRACE(...)                             \
  do {                                         \
    if (tracing) {                             \
      fprintf(stderr, "  %3d: ", st.op_index); \
      fprintf(stderr, __VA_ARGS__);            \
      fputc('\n', stderr);                     \
    }                                          \
  } while (0)

static void die(const char *what, recap_status_t status) {
  fprintf(stderr, "fuzz_part2: operation %d: %s (status %s, last error: %s)\n", st.op_index, what,
          recap_status_name(status), recap_last_error());
  abort();
}

static uint8_t byte(void) { return st.at < st.size ? st.data[st.at++] : 0; }

/* ---- faults and statuses ------------------------------------------------------------------- */

static void arm(recap__fake_fault_t kind, uint64_t n) {
  recap__fake_fail_nth(kind, n);
  st.fault_at[kind] = n ? recap__fake_now().calls[kind] + n : 0;
}

static void disarm_all(void) {
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (st.fault_at[k]) arm((recap__fake_fault_t)k, 0);
}

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

/* Checks the status of a call: `allowed`, or any failure when a fault fired in it. Returns
 * whether a fault explains a failure (the model must then read back what the call left). */
static bool status(recap_status_t s, recap_status_t allowed, const char *call) {
  TRACE("%s: %s", call, recap_status_name(s));
  /* INTERNAL is a bug in recap, but for NCCL's own failures (system, internal, remote), which
   * src/device/nccl.c maps to it: the fake's injected collective failure is ncclSystemError. */
  if (s == RECAP_ERROR_INTERNAL && !fired(RECAP__FAKE_FAULT_NCCL_COLLECTIVE)) die(call, s);
  if (s != RECAP_SUCCESS) {
    if (!recap_last_error()[0]) die("a failed call left recap_last_error() empty", s);
    if (recap_last_status() != s) die("recap_last_status() differs from the status", s);
  }
  if (s == allowed) return false;
  if (st.fired && s != RECAP_SUCCESS) return true;
  fprintf(stderr, "fuzz_part2: %s returned %s, the model expects %s\n", call, recap_status_name(s),
          recap_status_name(allowed));
  die("a status the documentation does not allow here", s);
  return false;
}

/* ---- the model ----------------------------------------------------------------------------- */

static int capturing_graph(void) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) return g;
  return -1;
}

static bool asleep(int pool) { return st.pools[pool].state != RECAP_POOL_AWAKE; }

static int add_pool(recap_pool_id_t id) {
  for (int i = 0; i < st.npools; i++)
    if (st.pools[i].id.a == id.a && st.pools[i].id.b == id.b) return i;
  if (st.npools == POOLS) return -1;
  st.pools[st.npools].id = id;
  return st.npools++;
}

static void write_pattern(slot_t *s, uint8_t pattern) {
  s->pattern = pattern;
  memset(s->p, pattern, s->usable);
  s->known = true;
}

/* The pool's real state, which a failure must leave whole (docs/sleep.md, "Failures"). */
static int read_state(int pool) {
  recap_pool_state_t state = RECAP_POOL_AWAKE;
  recap_status_t s = recap_pool_state(st.pools[pool].id, &state);
  if (s == RECAP_ERROR_NOT_FOUND) return RECAP_POOL_AWAKE;
  if (s != RECAP_SUCCESS) die("recap_pool_state failed", s);
  return (int)state;
}

static void check_contents(void) {
  for (int i = 0; i < SLOTS; i++) {
    slot_t *s = &st.slots[i];
    if (!s->p || !s->known || asleep(s->pool)) continue;
    /* Every byte of the first and last 256, and one in each 4 KiB page between: a lost page
     * shows, at a fraction of the cost of reading every byte after every call. */
    for (size_t k = 0; k < s->usable; k = k < 256 || k + 256 >= s->usable ? k + 1 : k + 4096)
      if (s->p[k] != s->pattern) {
        fprintf(stderr, "fuzz_part2: slot %d (%p, %zu bytes, pool %d): byte %zu is %#x, not %#x\n",
                i, (void *)s->p, s->usable, s->pool, k, s->p[k], s->pattern);
        die("a live block lost its contents", RECAP_SUCCESS);
      }
  }
}

/* The mapped bytes: every awake pool wholly mapped, no asleep pool mapped. */
static void check_mapped(const recap_memory_stats_t *stats) {
  int64_t sleeping = 0;
  bool residue = false;
  for (int i = 0; i < st.npools; i++) {
    recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
    recap_status_t s = recap_pool_memory(st.pools[i].id, &m);
    if (s == RECAP_ERROR_NOT_FOUND) continue;
    if (s != RECAP_SUCCESS) die("recap_pool_memory failed", s);
    if (m.state != st.pools[i].state) {
      fprintf(stderr, "fuzz_part2: pool %d is %s, the model has it %s\n", i,
              recap_pool_state_name((recap_pool_state_t)m.state),
              recap_pool_state_name((recap_pool_state_t)st.pools[i].state));
      die("a pool's state differs from the model's", RECAP_SUCCESS);
    }
    sleeping += m.sleeping_bytes;
    residue |= st.pools[i].residue;
  }
  /* Mappings a failed growth could not undo belong to no pool: they wait in the device's list
   * for recap_empty_cache (docs/allocator.md, "Expandable segments"). */
  int64_t stuck = 0;
  const recap__device_state_t *d = recap__alloc.devices[0];
  for (size_t k = 0; d && k < d->stuck_count; k++)
    if (d->stuck_ranges[k].kind == RECAP__STUCK_MAPPING) stuck += (int64_t)d->stuck_ranges[k].size;
  int64_t mapped = (int64_t)recap__fake_now().vmm_bytes_mapped - stuck;
  int64_t expected = stats->reserved_bytes[RECAP_STAT_ALL].current - sleeping;
  if (mapped < expected || (mapped != expected && !residue)) {
    fprintf(stderr, "fuzz_part2: %lld bytes mapped; reserved less sleeping: %lld\n",
            (long long)mapped, (long long)expected);
    die("a pool is neither fully awake nor fully asleep", RECAP_SUCCESS);
  }
}

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
  if (stats.allocation[RECAP_STAT_ALL].current != blocks ||
      stats.allocated_bytes[RECAP_STAT_ALL].current != bytes) {
    fprintf(stderr, "fuzz_part2: %lld blocks of %lld bytes counted, the model holds %lld of %lld\n",
            (long long)stats.allocation[RECAP_STAT_ALL].current,
            (long long)stats.allocated_bytes[RECAP_STAT_ALL].current, (long long)blocks,
            (long long)bytes);
    die("the statistics disagree with the blocks held", RECAP_SUCCESS);
  }
  if (stats.reserved_bytes[RECAP_STAT_ALL].current < bytes)
    die("fewer reserved bytes than allocated ones", RECAP_SUCCESS);
  check_mapped(&stats);
  check_contents();
}

/* ---- pinned buffers (docs/sleep.md, "The cost of OFFLOAD") ------------------------------------ */

static void kept_remove(int i) {
  st.kept[i] = st.kept[st.nkept - 1];
  st.kept_reserved[i] = st.kept_reserved[st.nkept - 1];
  st.nkept--;
}

static void kept_free_unreserved(void) {
  for (int i = st.nkept - 1; i >= 0; i--)
    if (!st.kept_reserved[i]) kept_remove(i);
}

static int kept_smallest(size_t bytes, bool unreserved_only) {
  int best = -1;
  for (int i = 0; i < st.nkept; i++)
    if (st.kept[i] >= bytes && !(unreserved_only && st.kept_reserved[i]) &&
        (best < 0 || st.kept[i] < st.kept[best]))
      best = i;
  return best;
}

/* With the option at 0, the buffers it kept go at the next sleep, wake or empty_cache. */
static void option_off_frees(void) {
  if (!st.keep_pinned) kept_free_unreserved();
}

static void check_pinned(void) {
  if (st.pinned_unknown) return;
  int64_t held = st.nkept;
  for (int i = 0; i < st.npools; i++) held += st.pools[i].holds_buf;
  if (recap__fake_now().pinned_live != held) {
    fprintf(stderr, "fuzz_part2: %lld pinned buffers live, the model has %lld\n",
            (long long)recap__fake_now().pinned_live, (long long)held);
    die("the pinned buffers differ from docs/sleep.md's account", RECAP_SUCCESS);
  }
}

/* ---- allocations ------------------------------------------------------------------------------ */

static size_t pick_size(void) {
  uint8_t kind = byte();
  size_t v = (size_t)byte() << 8 | byte();
  switch (kind % 4) {
    case 0: return 1 + v % (4 * KiB);
    case 1: return 1 + v % (64 * KiB);
    case 2: return 1 + (size_t)v * 16 % (512 * KiB);
    default: return 1 + (size_t)v * 64 % (3 * MiB);
  }
}

static void op_malloc(void) {
  int i = byte() % SLOTS;
  size_t size = pick_size();
  uint8_t pattern = byte();
  slot_t *s = &st.slots[i];
  if (s->p) return;
  int g = capturing_graph();
  int pool = g >= 0 ? st.graphs[g].pool : 0;
  recap_status_t allowed = RECAP_SUCCESS;
  if (asleep(pool)) allowed = RECAP_ERROR_POOL_ASLEEP;
  if (g >= 0 && st.graphs[g].invalid) allowed = -1; /* see below */
  void *p = NULL;
  call_begins();
  recap_status_t r = recap_malloc(&p, size, st.cap);
  call_ends();
  if (allowed == (recap_status_t)-1) {
    /* An invalidated capture's routing may still serve it or refuse: the docs leave it open. */
    TRACE("recap_malloc(%zu) in an invalidated capture: %s", size, recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL) die("recap_malloc", r);
  } else if (r == RECAP_ERROR_OUT_OF_MEMORY && allowed == RECAP_SUCCESS) {
    TRACE("recap_malloc(%zu): out of memory", size); /* the device is 256 MiB */
  } else {
    status(r, allowed, "recap_malloc");
  }
  if (r != RECAP_SUCCESS) {
    if (p) die("a failed recap_malloc set *ptr", r);
    return;
  }
  st.device_used = true;
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info failed", RECAP_SUCCESS);
  s->p = p;
  s->usable = info.bytes;
  s->pool = add_pool(info.pool);
  if (s->pool < 0) die("too many pools", RECAP_SUCCESS);
  if (s->pool != pool && !(g >= 0 && st.graphs[g].invalid))
    die("a block came from another pool than the route's", RECAP_SUCCESS);
  for (int k = 0; k < SLOTS; k++)
    if (k != i && st.slots[k].p && fuzz_overlap(st.slots[k].p, st.slots[k].usable, s->p, s->usable))
      die("two live blocks overlap", RECAP_SUCCESS);
  write_pattern(s, pattern);
  TRACE("  slot %d = %p (%zu bytes, pool %d)", i, p, s->usable, s->pool);
}

static void op_free(void) {
  int i = byte() % SLOTS;
  slot_t *s = &st.slots[i];
  if (!s->p) return;
  call_begins();
  recap_status_t r = recap_free(s->p);
  call_ends();
  status(r, RECAP_SUCCESS, "recap_free"); /* allowed while the pool sleeps too */
  memset(s, 0, sizeof *s);
}

static void op_empty_cache(void) {
  recap__fake_stream_complete(st.cap);
  recap__fake_stream_complete(st.other);
  bool capture = capturing_graph() >= 0;
  call_begins();
  recap_status_t r = recap_empty_cache();
  call_ends();
  status(r, capture ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_empty_cache");
  if (capture) return;
  if (st.fired) {
    st.pinned_unknown = true;
    return;
  }
  /* Every kept buffer is freed; those an asleep pool holds are not kept. */
  st.nkept = 0;
  bool offloaded = false;
  for (int i = 0; i < st.npools; i++) offloaded |= st.pools[i].holds_buf;
  if (!offloaded) st.pinned_unknown = false;
  check_pinned();
}

/* Blocks of a VMM segment freed in its middle (docs/allocator.md, "Expandable segments"): a
 * fresh large-class segment on the second stream, grown one chunk per block (sizes of whole
 * 64 KiB granules, above small_size, so each growth maps exactly its block), some blocks freed
 * with a live one after them, recap_empty_cache, then an allocation again. The chunks lying
 * wholly in free memory go back: the pool reserves at most what it did before plus the live
 * blocks. */
static void op_vmm_interior(void) {
  uint8_t n = 2 + byte() % 5, keep = byte(), grow = byte();
  if (capturing_graph() >= 0 || asleep(0)) return;
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (st.fault_at[k]) return; /* a fault would change the chunks */
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p && st.slots[i].side) return; /* the segment is not fresh */
  int free_slots[8], nfree = 0;
  for (int i = 0; i < SLOTS && nfree < n; i++)
    if (!st.slots[i].p) free_slots[nfree++] = i;
  if (nfree < n) return;
  recap__fake_stream_complete(st.cap);
  recap__fake_stream_complete(st.other);
  status(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache (before the segment)");
  st.nkept = 0;
  recap_pool_memory_t before = RECAP_POOL_MEMORY_INIT, after = RECAP_POOL_MEMORY_INIT;
  if (recap_pool_memory(st.pools[0].id, &before) != RECAP_SUCCESS) die("recap_pool_memory", 0);
  size_t base = (st.data[0] & 1) ? 0 : MiB; /* above small_size: 16 KiB scaled, else 1 MiB */
  for (int k = 0; k < n; k++) {
    slot_t *s = &st.slots[free_slots[k]];
    size_t size = base + GRANULE * (1 + (grow >> k) % 4);
    void *p = NULL;
    recap_status_t r = recap_malloc(&p, size, st.other);
    if (r == RECAP_ERROR_OUT_OF_MEMORY) return;
    status(r, RECAP_SUCCESS, "recap_malloc (the segment)");
    recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
    if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info", r);
    s->p = p;
    s->usable = info.bytes;
    s->pool = 0;
    s->side = true;
    write_pattern(s, (uint8_t)(grow + k));
    TRACE("  slot %d = %p (%zu bytes, the segment's block %d)", free_slots[k], p, s->usable, k);
  }
  /* Free the blocks whose bit is clear, but the last one: the frees lie in the middle. */
  int64_t live = 0;
  for (int k = 0; k < n; k++) {
    slot_t *s = &st.slots[free_slots[k]];
    if (k < n - 1 && !((keep >> k) & 1)) {
      status(recap_free(s->p), RECAP_SUCCESS, "recap_free (the segment)");
      memset(s, 0, sizeof *s);
    } else {
      live += (int64_t)s->usable;
    }
  }
  recap__fake_stream_complete(st.other);
  status(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache (the segment)");
  if (recap_pool_memory(st.pools[0].id, &after) != RECAP_SUCCESS) die("recap_pool_memory", 0);
  if (after.reserved_bytes > before.reserved_bytes + live) {
    if (known & FUZZ_KNOWN_VMM_INTERIOR) {
      TRACE("known defect tolerated (vmm_interior): free chunks in a segment's middle stay");
    } else {
      fprintf(stderr,
              "fuzz_part2: the default pool reserves %lld bytes after recap_empty_cache; %lld "
              "before the segment, whose live blocks hold %lld\n",
              (long long)after.reserved_bytes, (long long)before.reserved_bytes, (long long)live);
      die("recap_empty_cache kept a chunk lying wholly in free memory (defect e)", 0);
    }
  }
  check_invariants(); /* the live blocks kept their addresses and contents */
  /* Allocate again, in the hole or past it. */
  for (int i = 0; i < SLOTS; i++)
    if (!st.slots[i].p) {
      void *p = NULL;
      recap_status_t r = recap_malloc(&p, base + GRANULE, st.other);
      status(r, RECAP_SUCCESS, "recap_malloc (after the segment's trim)");
      recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
      if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info", r);
      st.slots[i] = (slot_t){.p = p, .usable = info.bytes, .pool = 0, .side = true};
      write_pattern(&st.slots[i], grow);
      break;
    }
}

/* ---- sleep and wake ----------------------------------------------------------------------- */

static int pick_pool(void) { return byte() % st.npools; }

/* After a call that may have failed half-way: the pool's state must be whole (check_mapped
 * says so after the call), and the model takes it. */
static void resync(int pool, int was) {
  int now = read_state(pool);
  if (now != was) TRACE("  pool %d is %s now", pool, recap_pool_state_name(now));
  st.pools[pool].state = now;
  if (now == RECAP_POOL_AWAKE) st.pools[pool].holds_buf = false;
  st.pinned_unknown = true;
}

/* Whether an asleep pool holds a pinned copy (its offloaded bytes). */
static bool holds_copy(int pool) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  return recap_pool_memory(st.pools[pool].id, &m) == RECAP_SUCCESS && m.offloaded_bytes > 0;
}

static void slept(int pool, int mode) {
  st.pools[pool].holds_buf = mode == RECAP_SLEEP_OFFLOAD && holds_copy(pool);
  st.pools[pool].state =
      mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
  if (mode == RECAP_SLEEP_DISCARD)
    for (int i = 0; i < SLOTS; i++)
      if (st.slots[i].p && st.slots[i].pool == pool) st.slots[i].known = false;
}

/* Is the pool known to recap? A pool of a graph that went, or whose capture failed, may be. */
static int pool_known(int pool) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  return pool == 0 || recap_pool_memory(st.pools[pool].id, &m) == RECAP_SUCCESS;
}

static void sleep_pool(int pool, int mode) {
  bool capture = capturing_graph() >= 0;
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  bool found = pool_known(pool);
  if (found) (void)recap_pool_memory(st.pools[pool].id, &m);
  recap_status_t allowed = RECAP_SUCCESS;
  if (!found)
    allowed = RECAP_ERROR_NOT_FOUND;
  else if (asleep(pool) || capture)
    allowed = RECAP_ERROR_INVALID_USAGE;
  call_begins();
  recap_status_t r = recap_pool_sleep(st.pools[pool].id, (recap_sleep_mode_t)mode);
  call_ends();
  char what[64];
  snprintf(what, sizeof what, "recap_pool_sleep(pool %d, %s)", pool, mode ? "OFFLOAD" : "DISCARD");
  if (status(r, allowed, what)) {
    resync(pool, RECAP_POOL_AWAKE);
    if (st.pools[pool].state != RECAP_POOL_AWAKE) slept(pool, mode);
    return;
  }
  if (r != RECAP_SUCCESS) return;
  option_off_frees();
  slept(pool, mode);
  if (mode == RECAP_SLEEP_OFFLOAD && m.allocated_bytes > 0) {
    int k = kept_smallest((size_t)m.allocated_bytes, false);
    if (k >= 0)
      kept_remove(k);
    else
      kept_free_unreserved();
    if (!st.pools[pool].holds_buf) die("an OFFLOAD sleep of blocks in use kept no copy", r);
  }
  if (mode == RECAP_SLEEP_OFFLOAD && m.allocated_bytes == 0) st.pinned_unknown = true;
}

static void wake_pool(int pool) {
  bool capture = capturing_graph() >= 0;
  int was = st.pools[pool].state;
  recap_status_t allowed = capture ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS;
  call_begins();
  recap_status_t r = recap_pool_wake(st.pools[pool].id);
  call_ends();
  char what[64];
  snprintf(what, sizeof what, "recap_pool_wake(pool %d)", pool);
  /* A pool recap does not know (never captured into, or its memory gone back) is awake: the
   * header lists no status for it, so NOT_FOUND and SUCCESS both pass. */
  if (r == RECAP_ERROR_NOT_FOUND && was == RECAP_POOL_AWAKE && !pool_known(pool))
    allowed = RECAP_ERROR_NOT_FOUND;
  /* An awake pool during a capture: the docs say both "refused" and "RECAP_SUCCESS, nothing
   * done"; either passes. */
  if (r == RECAP_SUCCESS && capture && was == RECAP_POOL_AWAKE) allowed = RECAP_SUCCESS;
  if (status(r, allowed, what)) {
    /* An undo that could not unmap may leave a chunk of this wake mapped. */
    if (fired(RECAP__FAKE_FAULT_VMM_UNMAP)) st.pools[pool].residue = true;
    resync(pool, was);
    return;
  }
  if (r != RECAP_SUCCESS || was == RECAP_POOL_AWAKE) return;
  st.pools[pool].residue = false;
  option_off_frees();
  /* The copy's buffer is kept by the option, or because freeing it failed (docs/sleep.md,
   * "Wake": the next recap_empty_cache frees it). */
  if (st.pools[pool].holds_buf && (st.keep_pinned || fired(RECAP__FAKE_FAULT_HOST_FREE_PINNED))) {
    if (st.nkept < MAX_KEPT) {
      st.kept[st.nkept] = 1; /* its size: at least the copy, which the model no longer needs */
      st.kept_reserved[st.nkept++] = false;
    }
    st.pinned_unknown = true; /* the kept buffer's size is not the model's */
  }
  st.pools[pool].holds_buf = false;
  st.pools[pool].state = RECAP_POOL_AWAKE;
  /* After OFFLOAD every block in use holds what it held; after DISCARD, undefined bytes: the
   * caller writes them again (docs/sleep.md, "Wake"). */
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p && st.slots[i].pool == pool && !st.slots[i].known)
      write_pattern(&st.slots[i], st.slots[i].pattern + 1);
}

static void op_sleep(void) {
  uint8_t what = byte();
  int pool = pick_pool();
  if (what & 1)
    wake_pool(pool);
  else
    sleep_pool(pool, (what >> 1) & 1);
  check_pinned();
}

/* recap_sleep / recap_wake: every pool. */
static void op_sleep_all(void) {
  uint8_t what = byte();
  bool capture = capturing_graph() >= 0;
  call_begins();
  recap_status_t r = (what & 1) ? recap_wake() : recap_sleep((recap_sleep_mode_t)((what >> 1) & 1));
  call_ends();
  recap_status_t allowed = capture ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS;
  /* recap_wake during a capture: each asleep pool's wake is refused; with none asleep the docs
   * leave the outcome open. */
  if ((what & 1) && capture && r == RECAP_SUCCESS) allowed = RECAP_SUCCESS;
  bool faulted = status(r, allowed, (what & 1) ? "recap_wake" : "recap_sleep");
  if (capture && !faulted) return;
  /* The model follows what each pool became: every pool whole, and after a success all of them
   * asleep (or awake). */
  for (int i = 0; i < st.npools; i++) {
    int was = st.pools[i].state;
    if (!pool_known(i) && i != 0) continue;
    int now = read_state(i);
    if (r == RECAP_SUCCESS && (what & 1) && now != RECAP_POOL_AWAKE)
      die("recap_wake succeeded and left a pool asleep", r);
    if (r == RECAP_SUCCESS && (what & 1)) st.pools[i].residue = false;
    if (r == RECAP_SUCCESS && !(what & 1) && now == RECAP_POOL_AWAKE && (i || st.device_used))
      die("recap_sleep succeeded and left a pool awake", r);
    /* A failed recap_sleep wakes the pools it put to sleep: after DISCARD their blocks hold
     * undefined bytes, which the caller writes again. */
    bool discarded = r != RECAP_SUCCESS && !(what & 1) && !((what >> 1) & 1);
    if (discarded && now == RECAP_POOL_AWAKE && was == RECAP_POOL_AWAKE)
      for (int k = 0; k < SLOTS; k++)
        if (st.slots[k].p && st.slots[k].pool == i) write_pattern(&st.slots[k], 0xd5);
    if (now == was) continue;
    if (now == RECAP_POOL_AWAKE) {
      st.pools[i].state = now;
      st.pools[i].holds_buf = false;
      for (int k = 0; k < SLOTS; k++)
        if (st.slots[k].p && st.slots[k].pool == i && !st.slots[k].known)
          write_pattern(&st.slots[k], st.slots[k].pattern + 1);
    } else {
      slept(i, now == RECAP_POOL_ASLEEP_OFFLOADED);
    }
  }
  st.pinned_unknown = true;
}

static void op_pinned_reserve(void) {
  size_t bytes = (size_t)byte() * 4 * KiB;
  bool capture = capturing_graph() >= 0;
  if (!capture && bytes && (known & FUZZ_KNOWN_PINNED_NULL)) {
    /* Defect (a): the only kept buffers unreserved and smaller than asked (or the model cannot
     * tell) write through a NULL list. */
    bool risky = st.pinned_unknown;
    if (st.nkept && kept_smallest(bytes, true) < 0) {
      risky = true;
      for (int i = 0; i < st.nkept; i++) risky &= !st.kept_reserved[i];
    }
    if (risky) {
      TRACE("known defect avoided (pinned_null): recap_pinned_reserve(%zu) skipped", bytes);
      return;
    }
  }
  call_begins();
  recap_status_t r = recap_pinned_reserve(bytes);
  call_ends();
  /* bytes 0 "does nothing": during a capture too. */
  if (status(r, capture && bytes ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS,
             "recap_pinned_reserve")) {
    st.pinned_unknown = true;
    return;
  }
  if (r != RECAP_SUCCESS || bytes == 0) return;
  int k = kept_smallest(bytes, true);
  if (k >= 0) {
    st.kept_reserved[k] = true;
  } else {
    kept_free_unreserved();
    if (st.nkept == MAX_KEPT) {
      st.pinned_unknown = true;
      return;
    }
    st.kept[st.nkept] = bytes;
    st.kept_reserved[st.nkept++] = true;
  }
  check_pinned();
}

static void op_option(void) {
  uint8_t v = byte() & 1;
  recap_status_t r = recap_option_set("offload_keep_pinned", v ? "1" : "0");
  status(r, RECAP_SUCCESS, "recap_option_set(offload_keep_pinned)");
  st.keep_pinned = v;
}

/* ---- faults --------------------------------------------------------------------------------- */

static const recap__fake_fault_t fault_kinds[] = {
    RECAP__FAKE_FAULT_VMM_MAP,          RECAP__FAKE_FAULT_VMM_UNMAP,
    RECAP__FAKE_FAULT_VMM_CREATE,       RECAP__FAKE_FAULT_VMM_RELEASE,
    RECAP__FAKE_FAULT_VMM_SET_ACCESS,   RECAP__FAKE_FAULT_HOST_ALLOC_PINNED,
    RECAP__FAKE_FAULT_HOST_FREE_PINNED, RECAP__FAKE_FAULT_LAUNCH,
    RECAP__FAKE_FAULT_INSTANTIATE,      RECAP__FAKE_FAULT_CAPTURE_END,
    RECAP__FAKE_FAULT_EXEC_UPDATE,      RECAP__FAKE_FAULT_PATCH,
    RECAP__FAKE_FAULT_COND_NODE,        RECAP__FAKE_FAULT_COND_HANDLE,
    RECAP__FAKE_FAULT_CAPTURE_PAUSE,    RECAP__FAKE_FAULT_NCCL_COLLECTIVE,
    RECAP__FAKE_FAULT_VMM_RESERVE};

static void op_fault(void) {
  uint8_t k = byte();
  uint8_t n = byte() % 6;
  recap__fake_fault_t kind = fault_kinds[k % (sizeof fault_kinds / sizeof fault_kinds[0])];
  /* Defect (d) needs an unmap fault beside a map or access fault: with it tolerated, the two
   * are never armed together. */
  bool unmap = kind == RECAP__FAKE_FAULT_VMM_UNMAP;
  bool map = kind == RECAP__FAKE_FAULT_VMM_MAP || kind == RECAP__FAKE_FAULT_VMM_SET_ACCESS;
  if ((known & FUZZ_KNOWN_SLEEP_DOUBLE_FAULT) && n &&
      ((unmap && (st.fault_at[RECAP__FAKE_FAULT_VMM_MAP] ||
                  st.fault_at[RECAP__FAKE_FAULT_VMM_SET_ACCESS])) ||
       (map && st.fault_at[RECAP__FAKE_FAULT_VMM_UNMAP]))) {
    TRACE("known defect avoided (sleep_double_fault): no unmap fault beside a map fault");
    return;
  }
  TRACE("fault: call %u of kind %d fails", n, (int)kind);
  arm(kind, n);
}

/* Two faults in a row behind one sleep or wake, then the retry once faults stop: a sleep whose
 * nth unmap fails and whose roll-back map fails too, or a wake whose nth map (or access) fails
 * and whose undo cannot unmap. "A failure at any step leaves the pool fully asleep or fully
 * awake" (docs/sleep.md); the next call must then succeed. */
static void op_double_fault(void) {
  uint8_t what = byte();
  int pool = pick_pool();
  uint64_t n = 1 + byte() % 3;
  if (capturing_graph() >= 0) return;
  bool wake = asleep(pool);
  bool second = !(known & FUZZ_KNOWN_SLEEP_DOUBLE_FAULT);
  if (!second) {
    TRACE("known defect avoided (sleep_double_fault): one fault only");
    disarm_all(); /* a fault armed before would be the second */
  }
  if (!wake) {
    arm(RECAP__FAKE_FAULT_VMM_UNMAP, n);
    if (second) arm(RECAP__FAKE_FAULT_VMM_MAP, 1 + (what >> 2) % 2);
    sleep_pool(pool, (what >> 1) & 1);
  } else {
    arm((what & 1) ? RECAP__FAKE_FAULT_VMM_SET_ACCESS : RECAP__FAKE_FAULT_VMM_MAP, n);
    if (second) arm(RECAP__FAKE_FAULT_VMM_UNMAP, 1 + (what >> 2) % 2);
    wake_pool(pool);
  }
  disarm_all();
  check_invariants();
  /* Faults stopped: the next call reaches the state the failed one aimed at. */
  if (wake && asleep(pool)) {
    call_begins();
    recap_status_t r = recap_pool_wake(st.pools[pool].id);
    call_ends();
    status(r, RECAP_SUCCESS, "recap_pool_wake (the retry)");
    if (r == RECAP_SUCCESS) st.pools[pool].residue = false;
    resync(pool, st.pools[pool].state);
    for (int i = 0; i < SLOTS; i++)
      if (st.slots[i].p && st.slots[i].pool == pool && !st.slots[i].known)
        write_pattern(&st.slots[i], st.slots[i].pattern + 1);
  } else if (!wake && !asleep(pool) && pool_known(pool)) {
    call_begins();
    recap_status_t r = recap_pool_sleep(st.pools[pool].id, RECAP_SLEEP_OFFLOAD);
    call_ends();
    status(r, RECAP_SUCCESS, "recap_pool_sleep (the retry)");
    slept(pool, RECAP_SLEEP_OFFLOAD);
    st.pinned_unknown = true;
  }
}

/* ---- graphs: capture, recapture, rebind, regions, NCCL ------------------------------------------ */

static void graph_failed(int g) {
  graph_t *gr = &st.graphs[g];
  if (gr->recapturing) {
    gr->state = CAPTURED;
    gr->nsites = gr->saved_nsites;
    memcpy(gr->sites, gr->saved_sites, sizeof gr->sites);
    memcpy(gr->site_size, gr->saved_size, sizeof gr->site_size);
    gr->rebind = gr->saved_rebind;
  } else {
    gr->state = FRESH;
  }
  gr->recapturing = gr->invalid = false;
  gr->depth = 0;
}

/* After a capture call that failed by an injected fault: the capture goes on if the stream
 * still captures (a refused conditional node leaves it where it was), else it failed. */
static void capture_fault(int g) {
  int capturing = 0;
  if (recap_stream_is_capturing(st.cap, &capturing) != RECAP_SUCCESS) die("is_capturing", 0);
  if (!capturing) graph_failed(g);
}

static void op_graph(void) {
  int g = byte() % GRAPHS;
  uint8_t what = byte();
  graph_t *gr = &st.graphs[g];
  if (!gr->h) {
    if (st.npools == POOLS) return;
    int pool = add_pool(recap_pool_handle());
    recap_status_t r = recap_graph_create(&gr->h, 0);
    status(r, RECAP_SUCCESS, "recap_graph_create");
    if (r != RECAP_SUCCESS) return;
    gr->pool = pool;
    gr->state = FRESH;
    return;
  }
  if (what % 4 == 0 && gr->state != CAPTURING) {
    recap_status_t r = recap_graph_destroy(gr->h);
    status(r, RECAP_SUCCESS, "recap_graph_destroy");
    memset(gr, 0, sizeof *gr);
    return;
  }
  if (gr->state == CAPTURING) return;
  /* Begin a capture (fresh) or a recapture (captured), with or without rebind. */
  bool capture = capturing_graph() >= 0;
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = st.pools[gr->pool].id;
  o.rebind = (what >> 2) & 1 ? RECAP_REBIND_AUTO : RECAP_REBIND_OFF;
  recap_status_t allowed = RECAP_SUCCESS;
  if (asleep(gr->pool)) allowed = RECAP_ERROR_POOL_ASLEEP;
  if (capture) allowed = RECAP_ERROR_INVALID_USAGE; /* the stream captures already */
  bool recapture = gr->state == CAPTURED;
  call_begins();
  recap_status_t r = recapture ? recap_graph_recapture_begin(gr->h, (what & 8) ? &o : NULL, st.cap)
                               : recap_graph_capture_begin(gr->h, &o, st.cap);
  call_ends();
  /* An asleep pool while the stream captures: either refusal passes. */
  if (capture && asleep(gr->pool) && r == RECAP_ERROR_POOL_ASLEEP) allowed = r;
  if (status(r, allowed, recapture ? "recap_graph_recapture_begin" : "recap_graph_capture_begin"))
    return;
  if (r != RECAP_SUCCESS) return;
  if (recapture) {
    gr->saved_nsites = gr->nsites;
    memcpy(gr->saved_sites, gr->sites, sizeof gr->sites);
    memcpy(gr->saved_size, gr->site_size, sizeof gr->site_size);
    gr->saved_rebind = gr->rebind;
    gr->recapturing = true;
    if (what & 8) gr->rebind = o.rebind == RECAP_REBIND_AUTO;
  } else {
    gr->rebind = o.rebind == RECAP_REBIND_AUTO;
  }
  gr->nsites = 0;
  gr->state = CAPTURING;
  gr->invalid = false;
  gr->depth = 0;
}

static void op_capture_end(void) {
  int g = capturing_graph();
  if (g < 0) return;
  graph_t *gr = &st.graphs[g];
  recap_status_t allowed = RECAP_SUCCESS;
  if (gr->invalid)
    allowed = RECAP_ERROR_CAPTURE_INVALIDATED;
  else if (gr->depth > 0)
    allowed = RECAP_ERROR_INVALID_USAGE; /* a region is open */
  call_begins();
  recap_status_t r = recap_graph_capture_end(gr->h);
  call_ends();
  if (r == RECAP_SUCCESS) st.device_used = true;
  if (r == RECAP_ERROR_INVALID_ARGUMENT && gr->recapturing && gr->rebind && allowed == 0 &&
      (known & FUZZ_KNOWN_REBIND_RECAPTURE)) {
    TRACE("known defect tolerated (rebind_recapture): %s", recap_last_error());
    graph_failed(g);
    return;
  }
  if (r == RECAP_ERROR_INVALID_USAGE && gr->invalid && gr->depth > 0)
    die("capture_end of a capture invalidated with a region open does not end it (defect c)", r);
  if (status(r, allowed,
             gr->recapturing ? "recap_graph_capture_end (a recapture)"
                             : "recap_graph_capture_end")) {
    capture_fault(g);
    return;
  }
  if (r == RECAP_SUCCESS) {
    gr->state = CAPTURED;
    gr->recapturing = false;
  } else if (r == RECAP_ERROR_CAPTURE_INVALIDATED) {
    graph_failed(g);
  }
}

static void op_invalidate(void) {
  int g = capturing_graph();
  if (g < 0) return;
  if (st.graphs[g].depth > 0 && (known & FUZZ_KNOWN_REGION_INVALIDATED)) {
    TRACE("known defect avoided (region_invalidated): no invalidation with a region open");
    return;
  }
  TRACE("the fake invalidates the capture of graph %d (%d regions open)", g, st.graphs[g].depth);
  recap__fake_capture_invalidate(st.cap);
  st.graphs[g].invalid = true;
}

/* A kernel that reads up to two blocks: in a capture its arguments are sites to rebind. */
static void op_kernel(void) {
  int a = byte() % SLOTS, b = byte() % SLOTS;
  const void *args[2];
  size_t n = 0;
  int g = capturing_graph();
  int picks[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    slot_t *s = &st.slots[picks[k]];
    if (!s->p || asleep(s->pool)) continue;
    args[n++] = s->p;
    if (g >= 0 && !st.graphs[g].invalid && s->pool == 0 && st.graphs[g].nsites < SITES) {
      st.graphs[g].sites[st.graphs[g].nsites] = s->p;
      st.graphs[g].site_size[st.graphs[g].nsites++] = s->usable;
    }
  }
  TRACE("a kernel reading %zu blocks", n);
  recap__fake_launch_kernel_args(st.cap, "fuzz_read", args, n);
}

static void op_replay(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t allowed = RECAP_SUCCESS;
  if (gr->state != CAPTURED)
    allowed = RECAP_ERROR_INVALID_USAGE;
  else if (asleep(gr->pool) || asleep(0))
    allowed = RECAP_ERROR_POOL_ASLEEP;
  recap_stream_t s = (byte() & 1) ? st.other : st.cap;
  if (gr->state == CAPTURED && capturing_graph() >= 0 && s == st.cap) return; /* a child graph */
  call_begins();
  recap_status_t r = recap_graph_replay(gr->h, s);
  call_ends();
  if (r == RECAP_ERROR_POOL_ASLEEP && allowed == RECAP_SUCCESS) die("replay refused asleep", r);
  status(r, allowed, "recap_graph_replay");
}

/* Rebind a site of a default-pool block to another live default-pool block, outside memory the
 * graph uses (docs/rebind.md). */
static void op_rebind(void) {
  int g = byte() % GRAPHS;
  int site = byte(), to = byte() % SLOTS;
  graph_t *gr = &st.graphs[g];
  slot_t *t = &st.slots[to];
  if (!gr->h || gr->state == CAPTURING || !t->p || t->pool != 0) return;
  if (gr->state == FRESH || !gr->rebind || !gr->nsites) {
    recap_rebind_t rb = {sizeof(recap_rebind_t), t->p, t->p, t->usable};
    call_begins();
    recap_status_t r = recap_graph_rebind(gr->h, &rb, 1, patched);
    call_ends();
    recap_status_t allowed = gr->state == CAPTURED && gr->rebind ? RECAP_ERROR_INVALID_ARGUMENT
                                                                 : RECAP_ERROR_INVALID_USAGE;
    if (r == RECAP_ERROR_INVALID_ARGUMENT && allowed == RECAP_ERROR_INVALID_USAGE &&
        gr->state == CAPTURED)
      allowed = r; /* rebind OFF: which of the two the graph reports first is not documented */
    status(r, allowed, "recap_graph_rebind");
    return;
  }
  int k = site % gr->nsites;
  const void *old = gr->sites[k];
  size_t size = gr->site_size[k];
  if (t->usable < size) return;
  /* The new range may overlap memory the graph uses: then INVALID_ARGUMENT is allowed too. */
  bool overlaps = false;
  for (int i = 0; i < gr->nsites; i++)
    overlaps |= fuzz_overlap(gr->sites[i], gr->site_size[i], t->p, size);
  recap_rebind_t rb = {sizeof(recap_rebind_t), old, t->p, size};
  call_begins();
  recap_status_t r = recap_graph_rebind(gr->h, &rb, 1, patched);
  call_ends();
  if (overlaps && r == RECAP_ERROR_INVALID_ARGUMENT) {
    status(r, r, "recap_graph_rebind (an overlap)");
    return;
  }
  if (status(r, RECAP_SUCCESS, "recap_graph_rebind")) return;
  if (patched[0] == 0) die("a rebind of a site patched nothing", r);
  for (int i = 0; i < gr->nsites; i++)
    if (gr->sites[i] == old) gr->sites[i] = t->p;
}

static recap_status_t cond_region(int g, uint8_t what) {
  graph_t *gr = &st.graphs[g];
  recap_cond_t cond;
  int kind = what % 4;
  unsigned initial = kind == RECAP_REGION_WHILE ? 0 : (what >> 2) & 3;
  call_begins();
  recap_status_t r = recap_cond_create(&cond, initial, st.cap);
  call_ends();
  if (gr->invalid) {
    TRACE("recap_cond_create in an invalidated capture: %s", recap_status_name(r));
    if (r == RECAP_ERROR_CAPTURE_INVALIDATED) graph_failed(g);
    return r;
  }
  if (status(r, RECAP_SUCCESS, "recap_cond_create")) {
    capture_fault(g);
    return r;
  }
  if (r != RECAP_SUCCESS || (what & 0x80)) return r; /* a condition no region uses */
  unsigned branches = kind == RECAP_REGION_SWITCH ? 1 + (what >> 4) % 3 : (what >> 4) & 1 ? 0 : 0;
  if (kind == RECAP_REGION_IF_ELSE && ((what >> 4) & 1)) branches = 2;
  if (kind == RECAP_REGION_WHILE || kind == RECAP_REGION_IF) branches = (what >> 4) & 1;
  recap_status_t allowed = gr->depth >= DEPTH ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS;
  if (gr->depth >= DEPTH) return r;
  call_begins();
  r = recap_region_begin((recap_region_kind_t)kind, cond, branches, st.cap);
  call_ends();
  if (status(r, allowed, "recap_region_begin")) {
    capture_fault(g);
    return r;
  }
  if (r != RECAP_SUCCESS) return r;
  level_t *l = &gr->levels[gr->depth++];
  l->kind = kind;
  l->branches = branches ? (int)branches : (kind == RECAP_REGION_IF_ELSE ? 2 : 1);
  l->branch = 0;
  return r;
}

static void op_region(void) {
  uint8_t what = byte();
  int g = capturing_graph();
  if (g < 0) {
    recap_cond_t cond;
    recap_status_t r = recap_cond_create(&cond, 1, st.cap);
    status(r, RECAP_ERROR_INVALID_USAGE, "recap_cond_create (not capturing)");
    r = recap_region_end(st.cap);
    status(r, RECAP_ERROR_INVALID_USAGE, "recap_region_end (not capturing)");
    return;
  }
  graph_t *gr = &st.graphs[g];
  if (!(what & 0x40)) {
    cond_region(g, what);
    return;
  }
  /* Close the innermost region, or go to its next branch. */
  bool next = (what & 1) && gr->depth > 0 &&
              gr->levels[gr->depth - 1].branch + 1 < gr->levels[gr->depth - 1].branches;
  call_begins();
  recap_status_t r = next ? recap_region_next_branch(st.cap) : recap_region_end(st.cap);
  call_ends();
  const char *call = next ? "recap_region_next_branch" : "recap_region_end";
  if (gr->invalid) {
    /* The capture is over for CUDA: the call abandons it (CAPTURE_INVALIDATED, the graph fresh
     * again), or, with no region open, says so; capture_end then fails cleanly. */
    TRACE("%s in an invalidated capture: %s", call, recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL || r == RECAP_SUCCESS) die(call, r);
    if (r == RECAP_ERROR_CAPTURE_INVALIDATED)
      graph_failed(g);
    else if (r == RECAP_ERROR_INVALID_USAGE && gr->depth > 0 &&
             !(known & FUZZ_KNOWN_REGION_INVALIDATED))
      die("a region of an invalidated capture refused to close as not capturing (defect c)", r);
    return;
  }
  if (status(r, gr->depth > 0 ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE, call)) {
    capture_fault(g);
    return;
  }
  if (r != RECAP_SUCCESS) return;
  if (next)
    gr->levels[gr->depth - 1].branch++;
  else
    gr->depth--;
}

static void op_nccl(void) {
  int i = byte() % SLOTS;
  uint8_t what = byte();
  slot_t *s = &st.slots[i];
  int g = capturing_graph();
  if (!s->p || asleep(s->pool)) return;
  /* A captured collective runs at every replay: only on a block of the graph's own pool. */
  if (g >= 0 && s->pool != st.graphs[g].pool) return;
  recap_status_t allowed = RECAP_SUCCESS;
  if (g >= 0 && st.graphs[g].depth > 0) allowed = RECAP_ERROR_INVALID_USAGE; /* a region body */
  size_t count = s->usable < 64 ? s->usable : 64;
  call_begins();
  recap_status_t r =
      (what & 1)
          ? recap_nccl_broadcast(s->p, s->p, count, RECAP_NCCL_UINT8, 0, st.comm, st.cap)
          : recap_nccl_all_reduce(s->p, s->p, count, RECAP_NCCL_UINT8,
                                  (what & 2) ? RECAP_NCCL_MAX : RECAP_NCCL_SUM, st.comm, st.cap);
  call_ends();
  if (g >= 0 && st.graphs[g].invalid) {
    TRACE("a collective in an invalidated capture: %s", recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL) die("a collective", r);
    return;
  }
  status(r, allowed, "recap_nccl collective");
  /* One rank: a sum, a max and a broadcast leave the bytes as they were. */
}

/* ---- graph sets ------------------------------------------------------------------------------ */

static recap_status_t set_step(size_t size, recap_stream_t stream, void *user_data) {
  (void)user_data;
  void *p = NULL;
  recap_status_t r = recap_malloc(&p, size * 512, stream);
  if (r != RECAP_SUCCESS) return r;
  const void *args[1] = {p};
  recap__fake_launch_kernel_args(stream, "fuzz_set_step", args, 1);
  return recap_free(p);
}

static void op_graph_set(void) {
  uint8_t what = byte();
  uint8_t runs = byte() % 6;
  if (capturing_graph() >= 0 || asleep(0)) return;
  size_t sizes[3] = {1 + (what & 3), 8 + ((what >> 2) & 7), 64};
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = sizes;
  o.size_count = 3;
  o.capture = (what & 0x20) ? RECAP_SET_CAPTURE_LAZY : RECAP_SET_CAPTURE_UPFRONT;
  o.overflow = (what & 0x40) ? RECAP_SET_OVERFLOW_REFUSE : RECAP_SET_OVERFLOW_EAGER;
  recap_graph_set_t set = NULL;
  call_begins();
  recap_status_t r = recap_graph_set_create(&set, set_step, NULL, &o);
  call_ends();
  if (status(r, RECAP_SUCCESS, "recap_graph_set_create") || r != RECAP_SUCCESS) {
    if (set) die("a failed recap_graph_set_create left a set", r);
    return;
  }
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  status(recap_graph_set_info(set, &info), RECAP_SUCCESS, "recap_graph_set_info");
  if (add_pool(info.pool) < 0) die("too many pools", RECAP_SUCCESS);
  for (int k = 0; k < runs; k++) {
    size_t n = 1 + byte() % 80;
    size_t padded = 0;
    int graphed = -1;
    call_begins();
    r = recap_graph_set_run(set, n, st.other, &padded, &graphed);
    call_ends();
    recap_status_t allowed = n > 64 && o.overflow == RECAP_SET_OVERFLOW_REFUSE
                                 ? RECAP_ERROR_INVALID_ARGUMENT
                                 : RECAP_SUCCESS;
    if (status(r, allowed, "recap_graph_set_run") || r != RECAP_SUCCESS) continue;
    size_t want = n <= sizes[0] ? sizes[0] : n <= sizes[1] ? sizes[1] : n <= 64 ? 64 : n;
    if (padded != want) die("recap_graph_set_run ran another bucket than the smallest >= n", r);
    if (graphed != 0 && graphed != 1) die("recap_graph_set_run: graphed not set", r);
  }
  recap__fake_stream_complete(st.other);
  status(recap_graph_set_destroy(set), RECAP_SUCCESS, "recap_graph_set_destroy");
}

/* ---- the run ----------------------------------------------------------------------------------- */

static void release_everything(void) {
  disarm_all();
  for (int g = 0; g < GRAPHS; g++) {
    graph_t *gr = &st.graphs[g];
    if (!gr->h) continue;
    if (gr->state == CAPTURING) {
      while (gr->depth > 0 && !gr->invalid && recap_region_end(st.cap) == RECAP_SUCCESS)
        gr->depth--;
      recap_status_t r = recap_graph_capture_end(gr->h);
      TRACE("the final capture_end: %s", recap_status_name(r));
      if (r == RECAP_ERROR_INVALID_USAGE && gr->invalid && gr->depth > 0)
        die("capture_end of a capture invalidated with a region open does not end it (defect c)",
            r);
      int capturing = 0;
      (void)recap_stream_is_capturing(st.cap, &capturing);
      if (capturing) die("a capture could not be ended (defect c, or another)", r);
    }
    status(recap_graph_destroy(gr->h), RECAP_SUCCESS, "recap_graph_destroy");
  }
  recap__fake_stream_complete(st.cap);
  recap__fake_stream_complete(st.other);
  status(recap_wake(), RECAP_SUCCESS, "recap_wake (the end)");
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p) status(recap_free(st.slots[i].p), RECAP_SUCCESS, "recap_free (the end)");
  status(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache (the end)");
  recap_memory_stats_t stats = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &stats) != RECAP_SUCCESS) die("recap_memory_stats", RECAP_SUCCESS);
  recap__fake_counters_t c = recap__fake_now();
  if (stats.allocation[RECAP_STAT_ALL].current || stats.reserved_bytes[RECAP_STAT_ALL].current ||
      c.bytes_in_use[0] || c.vmm_chunks_live || c.vmm_bytes_mapped || c.pinned_live ||
      c.live_graphs || c.live_execs) {
    fprintf(stderr,
            "fuzz_part2: at the end: %lld blocks, %lld reserved, %zu bytes in use, %lld chunks, "
            "%zu mapped, %lld pinned, %lld graphs, %lld executables\n",
            (long long)stats.allocation[RECAP_STAT_ALL].current,
            (long long)stats.reserved_bytes[RECAP_STAT_ALL].current, c.bytes_in_use[0],
            (long long)c.vmm_chunks_live, c.vmm_bytes_mapped, (long long)c.pinned_live,
            (long long)c.live_graphs, (long long)c.live_execs);
    die("something is left after everything was released", RECAP_SUCCESS);
  }
}

static void parse_known(void) {
  static const char *const names[] = {"pinned_null", "rebind_recapture", "region_invalidated",
                                      "sleep_double_fault", "vmm_interior"};
  known = 0;
  const char *env = getenv("RECAP_FUZZ_KNOWN");
  if (!env) return;
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (strstr(env, names[k])) known |= 1u << k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  recap__fake_config_t cfg = {0};
  cfg.memory_per_device = DEVICE_BYTES;
  cfg.vmm_granularity = GRANULE;
  recap_test_reset(&cfg);
  recap_clear_last_error();
  memset(&st, 0, sizeof st);
  tracing = getenv("RECAP_FUZZ_TRACE") != NULL;
  parse_known();
  recap_log_set(tracing ? NULL : fuzz_quiet, NULL);
  st.data = data;
  st.size = size;
  st.cap = recap__fake_stream_new();
  st.other = recap__fake_stream_new();
  recap_status_t r = fuzz_scale_down(data, size);
  if (r == RECAP_SUCCESS) r = recap_option_set("expandable_segments", "1");
  if (r != RECAP_SUCCESS) die("the options were refused", r);
  recap__nccl_comm_t comm;
  if (recap__fake_nccl_comms(1, &comm) != RECAP_SUCCESS) die("no fake communicator", r);
  st.comm = (recap_nccl_comm_t)comm;
  add_pool((recap_pool_id_t){0, 0});
  if (size > 0) st.at = 1;

  static void (*const ops[])(
      void) = {op_malloc, op_malloc,       op_free,        op_free,           op_empty_cache,
               op_sleep,  op_sleep,        op_sleep_all,   op_pinned_reserve, op_option,
               op_fault,  op_double_fault, op_graph,       op_capture_end,    op_invalidate,
               op_kernel, op_replay,       op_rebind,      op_region,         op_region,
               op_nccl,   op_graph_set,    op_vmm_interior};
  for (st.op_index = 0; st.at < st.size && st.op_index < MAX_OPS; st.op_index++) {
    uint8_t op = byte();
    ops[op % (sizeof ops / sizeof ops[0])]();
    check_invariants();
  }
  release_everything();
  recap_log_set(NULL, NULL);
  return 0;
}
