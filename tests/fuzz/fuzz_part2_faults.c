/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_faults.c — fuzz_part2's injected device faults: one fault armed on any kind of
 * the fake's calls, and two in a row behind one sleep or wake.
 */
#include "fuzz_part2.h"

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

void op_fault(void) {
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
void op_double_fault(void) {
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
