/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_replay.c — fuzz_recap's operations on captured graphs and the streams beside
 * them: replay, reset, invalidation, joined side streams, kernels that read blocks, input
 * liveness, and the accessors and inspection calls.
 */
#include "fuzz_recap.h"

/* Whether a capture under way other than graph `outer`'s draws from a generator of `gens`. */
static bool gens_of_another_capture(unsigned gens, int outer) {
  for (int g = 0; g < GRAPHS; g++)
    if (g != outer && st.graphs[g].h && st.graphs[g].state == CAPTURING &&
        (st.graphs[g].gens & gens))
      return true;
  return false;
}

static bool graph_inputs_dead(const graph_t *gr) {
  for (int k = 0; k < gr->input_count; k++)
    if (!slot_alive(gr->inputs[k])) return true;
  return false;
}

void op_replay(void) {
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
  /* Inside another capture the graph is embedded (docs/graphs.md, "Inside another capture"):
   * refused when a generator it draws from is used by a capture under way other than the
   * capturing one, then for a graph without a template (not KEEP); nothing launches or
   * instantiates, and the liveness checks move to the capturing graph (checked at its
   * replays). The child node and the offset shifts around it can fail. */
  bool embedding = st.owner[j] >= 0;
  bool dead = !embedding && gr->liveness && graph_inputs_dead(gr);
  bool inside = embedding && gens_of_another_capture(gr->gens, st.owner[j]);
  bool no_template = embedding && !inside && !gr->keep;
  bool fault = embedding ? fired(RECAP__FAKE_FAULT_CAPTURE_CHILD) || fired(RECAP__FAKE_FAULT_LAUNCH)
                         : fired(RECAP__FAKE_FAULT_LAUNCH) ||
                               (!gr->instantiated && fired(RECAP__FAKE_FAULT_INSTANTIATE));
  if (gr->inputs_unknown && gr->liveness && (s == RECAP_SUCCESS || s == RECAP_ERROR_DEAD_INPUT))
    check_last(s, "recap_graph_replay");
  else if (fault && s == RECAP_ERROR_CUDA)
    check_last(s, "recap_graph_replay");
  else if (st.owner[j] >= 0 && s == RECAP_ERROR_CAPTURE_INVALIDATED &&
           (st.graphs[st.owner[j]].invalid || st.graphs[st.owner[j]].maybe_invalid))
    check_last(s, "recap_graph_replay"); /* launched into a capture that was invalidated */
  else
    expect(s,
           dead          ? RECAP_ERROR_DEAD_INPUT
           : inside      ? RECAP_ERROR_INVALID_USAGE
           : no_template ? RECAP_ERROR_NOT_SUPPORTED
                         : RECAP_SUCCESS,
           "recap_graph_replay");
  if (s == RECAP_SUCCESS && !embedding) gr->instantiated = true;
  if (s == RECAP_SUCCESS && embedding) {
    /* The capturing graph holds the graph's pool and what it embedded, draws what it draws at
     * each replay, and checks its inputs (the model keeps them as unknown). */
    graph_t *outer = &st.graphs[st.owner[j]];
    outer->embedded |= (gr->shared >= 0 ? 1u << gr->shared : 0u) | gr->embedded;
    outer->gens |= gr->gens;
    for (int k = 0; k < GENS; k++) outer->consumed[k] += gr->consumed[k];
    outer->consumed_unknown |= gr->consumed_unknown;
    if (gr->liveness) outer->liveness = outer->inputs_unknown = true;
    if (gr->input_count || gr->inputs_unknown) outer->inputs_unknown = true;
    return; /* nothing ran: no generator advanced */
  }
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

void op_reset(void) {
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

void op_invalidate(void) {
  int j = pick_stream();
  int g = st.owner[j];
  if (g < 0) return;
  TRACE("the capture of stream %d (graph %d) is invalidated", j, g);
  recap__fake_capture_invalidate(st.streams[j]);
  st.graphs[g].invalid = true;
}

void op_join(void) {
  int side = byte() % (STREAMS - 1), g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h || gr->state != CAPTURING || st.owner[side] >= 0) return;
  bool ok = recap__fake_capture_join(st.streams[side], st.streams[gr->stream]);
  TRACE("stream %d joins the capture of graph %d -> %s", side, g, ok ? "joined" : "refused");
  if (ok) st.owner[side] = g;
}

/* A kernel that reads up to two blocks (what input liveness records). */
void op_kernel(void) {
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

void op_liveness(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t s = graph_call(g, recap_graph_check_inputs, "recap_graph_check_inputs");
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
void op_access(void) {
  int g = byte() % GRAPHS, j = pick_stream();
  uint8_t what = byte();
  graph_t *gr = &st.graphs[g];
  recap_status_t s;
  bool captured = gr->state == CAPTURED;
  /* All but the stream and memory queries (5 and 6) need the graph. */
  if (what % 8 != 5 && what % 8 != 6 && !gr->h) return;
  switch (what % 8) {
    case 0: {
      size_t n = 0;
      s = recap_graph_node_count(gr->h, &n);
      TRACE("recap_graph_node_count(graph %d) -> %s, %zu", g, recap_status_name(s), n);
      expect(s, captured ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE, "recap_graph_node_count");
      return;
    }
    case 1: {
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
      s = graph_call(g, recap_graph_instantiate, "recap_graph_instantiate");
      expect_or_fault(s, captured && gr->keep ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE,
                      "recap_graph_instantiate");
      if (s == RECAP_SUCCESS) gr->instantiated = true;
      return;
    case 4: {
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
