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
 * This file holds the operation table and the run; the model and its checks are in
 * fuzz_recap_model.c, each family of operations in a fuzz_recap_<family>.c of its own, and what
 * they share in fuzz_recap.h (tests/fuzz/README.md lists them).
 *
 * Build: cmake --preset fuzz && cmake --build --preset fuzz; run:
 *   build-fuzz/tests/fuzz_recap -max_total_time=60 corpus-dir tests/fuzz/corpus_recap
 */
#include "fuzz_recap.h"

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
