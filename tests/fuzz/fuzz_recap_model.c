/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_model.c — fuzz_recap's model and its checks: the run's state, failing with a
 * message, the armed faults, the status checks, the model's bookkeeping of captures and
 * blocks, and the invariants checked after every operation.
 */
#include "fuzz_recap.h"

struct fuzz_recap_state st;
bool tracing;
unsigned known;

void die(const char *what, recap_status_t status) {
  fprintf(stderr, "fuzz_recap: operation %d: %s (status %s, last status %s, last error: %s)\n",
          st.op_index, what, recap_status_name(status), recap_status_name(recap_last_status()),
          recap_last_error());
  abort();
}

/* A violation of a known defect: noted and tolerated when RECAP_FUZZ_KNOWN names it. */
void known_defect(unsigned bit, const char *what, recap_status_t status) {
  if (known & bit) {
    if (!(st.tolerated & bit))
      TRACE("known defect tolerated (RECAP_FUZZ_KNOWN): %s (%s)", what, recap_status_name(status));
    st.tolerated |= bit;
    return;
  }
  die(what, status);
}

/* ---- faults ---------------------------------------------------------------------------------- */

_Static_assert(RECAP__FAKE_FAULT_KINDS <= 64, "st.fired holds one bit per fault kind");

/* After every call: which armed faults fired during it (call_begins, in fuzz_recap.h, clears
 * the set before it). */
void call_ends(void) { fuzz_note_fired(st.fault_at, &st.fired); }

/* An event that could not be made or recorded makes the allocator wait for the stream instead,
 * and waiting for a capturing stream invalidates its capture (docs/guarantees.md, "Device
 * failures"): after such a call every capture under way may be invalidated. */
void events_may_have_waited(void) {
  if (!fired(RECAP__FAKE_FAULT_EVENT_CREATE) && !fired(RECAP__FAKE_FAULT_EVENT_RECORD)) return;
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) st.graphs[g].maybe_invalid = true;
}

/* ---- the status checks ------------------------------------------------------------------------ */

/* The last status and message after a failed call (docs/guarantees.md, "Arguments"). */
void check_last(recap_status_t s, const char *call) {
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

void expect(recap_status_t s, recap_status_t allowed, const char *call) {
  check_last(s, call);
  if (s != allowed) {
    fprintf(stderr, "fuzz_recap: %s returned %s, the model expects %s\n", call,
            recap_status_name(s), recap_status_name(allowed));
    die("a status the documentation does not allow here", s);
  }
}

/* s is allowed if it is `allowed`, or the status of a fault that fired in the call. */
void expect_or_fault(recap_status_t s, recap_status_t allowed, const char *call) {
  bool oom = fired(RECAP__FAKE_FAULT_RAW_MALLOC) && s == RECAP_ERROR_OUT_OF_MEMORY;
  bool cuda = (st.fired & ~(1u << RECAP__FAKE_FAULT_RAW_MALLOC)) && s == RECAP_ERROR_CUDA;
  if (oom || cuda)
    check_last(s, call);
  else
    expect(s, allowed, call);
}

/* ---- the model's bookkeeping ------------------------------------------------------------------ */

/* A graph's capture ended (successfully or not) or was abandoned: its streams are free again,
 * and on failure it is fresh, with no pool reference, generator or scope left. */
void capture_over(int g, bool succeeded) {
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

void graph_fresh(int g) {
  capture_over(g, false);
  st.graphs[g].recaptures = 0; /* a reset zeroes the update counters */
}

/* The invariants after every call. */
void check_invariants(void) {
  recap_memory_stats_t stats = fuzz_checked_stats(die);
  int64_t blocks = 0, bytes = 0;
  FUZZ_COUNT_HELD(st.slots, SLOTS, blocks, bytes);
  blocks += st.callable_blocks;
  bytes += st.callable_bytes;
  fuzz_expect_held("fuzz_recap", &stats, blocks, bytes, die);
  /* Active bytes also count freed blocks still waiting for the events of record_stream; when
   * the allocator looks at those events again is not documented, so only the bound holds. */
  if (stats.active_bytes[RECAP_STAT_ALL].current < bytes)
    die("fewer active bytes than allocated ones", RECAP_SUCCESS);
  /* The shared pools' references: one per graph capturing or captured into it (recap/alloc.h),
   * and one per capture that embedded a graph of the pool (the capture a recapture replaces
   * keeps its own until the recapture ends). */
  for (int k = 0; k < SHARED; k++) {
    int refs = 0, routed = 0;
    for (int g = 0; g < GRAPHS; g++) {
      const graph_t *gr = &st.graphs[g];
      if (!gr->h || gr->state == FRESH) continue;
      refs += (gr->embedded >> k & 1u) + (gr->recapturing && (st.saved[g].embedded >> k & 1u));
      if (gr->shared == k) {
        refs += 1 + gr->recapturing;
        routed += gr->state == CAPTURING;
      }
    }
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    recap_status_t s = recap_pool_memory(st.shared[k], &info);
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

void check_no_overlap(int self) {
  const slot_t *n = &st.slots[self];
  for (int i = 0; i < SLOTS; i++) {
    const slot_t *o = &st.slots[i];
    if (i == self || !o->p) continue;
    if (fuzz_overlap(n->p, n->usable, o->p, o->usable))
      die("two live blocks overlap", RECAP_SUCCESS);
  }
}

void write_tag(const slot_t *s) {
  if (s->size >= 16) {
    memcpy(s->p, &s->serial, 8);
    memcpy(s->p + s->size - 8, &s->serial, 8);
  }
}

void check_tag(const slot_t *s) {
  /* The graphed callable's static input takes the contents of every other input its forward
   * is given (recap/graphed.h): not the program's to check while the callable lives. */
  if (s->size < 16 || s->pinned) return;
  uint64_t a, b;
  memcpy(&a, s->p, 8);
  memcpy(&b, s->p + s->size - 8, 8);
  if (a != s->serial || b != s->serial) die("a live block's contents were overwritten", 0);
}
