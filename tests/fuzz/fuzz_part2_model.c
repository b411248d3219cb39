/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_model.c — fuzz_part2's model and its checks: failing with a message, the faults
 * armed and the statuses allowed, the model of blocks and pools, the invariants checked after
 * every call, and the account of the pinned buffers kept for OFFLOAD.
 */
#include "fuzz_part2.h"

struct fuzz_part2_state st;
bool tracing;
unsigned known;

void die(const char *what, recap_status_t status) {
  fprintf(stderr, "fuzz_part2: operation %d: %s (status %s, last error: %s)\n", st.op_index, what,
          recap_status_name(status), recap_last_error());
  abort();
}

/* ---- faults and statuses ------------------------------------------------------------------- */

void arm(recap__fake_fault_t kind, uint64_t n) {
  recap__fake_fail_nth(kind, n);
  st.fault_at[kind] = n ? recap__fake_now().calls[kind] + n : 0;
}

void disarm_all(void) {
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (st.fault_at[k]) arm((recap__fake_fault_t)k, 0);
}

void call_ends(void) { fuzz_note_fired(st.fault_at, &st.fired); }

/* Checks the status of a call: `allowed`, or any failure when a fault fired in it. Returns
 * whether a fault explains a failure (the model must then read back what the call left). */
bool status(recap_status_t s, recap_status_t allowed, const char *call) {
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

int capturing_graph(void) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) return g;
  return -1;
}

int add_pool(recap_pool_id_t id) {
  for (int i = 0; i < st.npools; i++)
    if (st.pools[i].id.a == id.a && st.pools[i].id.b == id.b) return i;
  if (st.npools == POOLS) return -1;
  st.pools[st.npools].id = id;
  return st.npools++;
}

void write_pattern(slot_t *s, uint8_t pattern) {
  s->pattern = pattern;
  memset(s->p, pattern, s->usable);
  s->known = true;
}

/* The pool's real state, which a failure must leave whole (docs/sleep.md, "Failures"). */
int read_state(int pool) {
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

void check_invariants(void) {
  recap_memory_stats_t stats = fuzz_checked_stats(die);
  int64_t blocks = 0, bytes = 0;
  FUZZ_COUNT_HELD(st.slots, SLOTS, blocks, bytes);
  fuzz_expect_held("fuzz_part2", &stats, blocks, bytes, die);
  if (stats.reserved_bytes[RECAP_STAT_ALL].current < bytes)
    die("fewer reserved bytes than allocated ones", RECAP_SUCCESS);
  check_mapped(&stats);
  check_contents();
}

/* ---- pinned buffers (docs/sleep.md, "The cost of OFFLOAD") ------------------------------------ */

void kept_remove(int i) {
  st.kept[i] = st.kept[st.nkept - 1];
  st.kept_reserved[i] = st.kept_reserved[st.nkept - 1];
  st.nkept--;
}

void kept_free_unreserved(void) {
  for (int i = st.nkept - 1; i >= 0; i--)
    if (!st.kept_reserved[i]) kept_remove(i);
}

int kept_smallest(size_t bytes, bool unreserved_only) {
  int best = -1;
  for (int i = 0; i < st.nkept; i++)
    if (st.kept[i] >= bytes && !(unreserved_only && st.kept_reserved[i]) &&
        (best < 0 || st.kept[i] < st.kept[best]))
      best = i;
  return best;
}

/* With the option at 0, the buffers it kept go at the next sleep, wake or empty_cache. */
void option_off_frees(void) {
  if (!st.keep_pinned) kept_free_unreserved();
}

void check_pinned(void) {
  if (st.pinned_unknown) return;
  int64_t held = st.nkept;
  for (int i = 0; i < st.npools; i++) held += st.pools[i].holds_buf;
  if (recap__fake_now().pinned_live != held) {
    fprintf(stderr, "fuzz_part2: %lld pinned buffers live, the model has %lld\n",
            (long long)recap__fake_now().pinned_live, (long long)held);
    die("the pinned buffers differ from docs/sleep.md's account", RECAP_SUCCESS);
  }
}
