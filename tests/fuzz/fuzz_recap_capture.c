/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_capture.c — fuzz_recap's capture operations: graph creation, capture begin and
 * end in the three modes, recaptures and their update policy, capture scopes, and the
 * annotation scopes opened inside a capture.
 */
#include "fuzz_recap.h"

/* ---- graphs ----------------------------------------------------------------------------------- */

void op_graph_create(void) {
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
  gr->embedded = 0;
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

void op_capture_begin(void) {
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

void op_capture_end(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t s = graph_call(g, recap_graph_capture_end, "recap_graph_capture_end");
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
void op_recapture_begin(void) {
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
void op_update_policy(void) {
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

void op_scope_begin(void) {
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

void op_scope_end(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t s = graph_call(g, recap_capture_scope_end, "recap_capture_scope_end");
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

/* ---- annotations ------------------------------------------------------------------------------ */

void op_annotate(void) {
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
