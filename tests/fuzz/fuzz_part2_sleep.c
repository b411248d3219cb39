/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_sleep.c — fuzz_part2's sleep and wake of pools (docs/sleep.md), one or all, the
 * pinned reservations for OFFLOAD and the option that keeps pinned buffers.
 */
#include "fuzz_part2.h"

/* ---- sleep and wake ----------------------------------------------------------------------- */

/* After a call that may have failed half-way: the pool's state must be whole (check_mapped
 * says so after the call), and the model takes it. */
void resync(int pool, int was) {
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

void slept(int pool, int mode) {
  st.pools[pool].holds_buf = mode == RECAP_SLEEP_OFFLOAD && holds_copy(pool);
  st.pools[pool].state =
      mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
  if (mode == RECAP_SLEEP_DISCARD)
    for (int i = 0; i < SLOTS; i++)
      if (st.slots[i].p && st.slots[i].pool == pool) st.slots[i].known = false;
}

/* Is the pool known to recap? A pool of a graph that went, or whose capture failed, may be. */
int pool_known(int pool) {
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  return pool == 0 || recap_pool_memory(st.pools[pool].id, &m) == RECAP_SUCCESS;
}

void sleep_pool(int pool, int mode) {
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
    if (st.pools[pool].state != RECAP_POOL_AWAKE) {
      slept(pool, mode);
      /* A failed sleep wakes the pool back; when that wake fails too and its undo cannot
       * unmap, the pool stays asleep with a chunk of it mapped, as after recap_pool_wake. */
      if (fired(RECAP__FAKE_FAULT_VMM_UNMAP)) st.pools[pool].residue = true;
    }
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

void wake_pool(int pool) {
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

void op_sleep(void) {
  uint8_t what = byte();
  int pool = pick_pool();
  if (what & 1)
    wake_pool(pool);
  else
    sleep_pool(pool, (what >> 1) & 1);
  check_pinned();
}

/* recap_sleep / recap_wake: every pool. */
void op_sleep_all(void) {
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
    /* A wake whose undo could not unmap may leave a chunk of that pool mapped, as with
     * recap_pool_wake (wake_pool); so may the wake that rolls back a failed recap_sleep. */
    if (r != RECAP_SUCCESS && now != RECAP_POOL_AWAKE && fired(RECAP__FAKE_FAULT_VMM_UNMAP))
      st.pools[i].residue = true;
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

void op_pinned_reserve(void) {
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

void op_option(void) {
  uint8_t v = byte() & 1;
  recap_status_t r = recap_option_set("offload_keep_pinned", v ? "1" : "0");
  status(r, RECAP_SUCCESS, "recap_option_set(offload_keep_pinned)");
  st.keep_pinned = v;
}
