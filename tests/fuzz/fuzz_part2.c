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
 * FUZZ_KNOWN_* bit's comment in fuzz_part2.h says. RECAP_FUZZ_TRACE=1 prints every call and its
 * status.
 *
 * This file holds the operation table and the run; the model and its checks are in
 * fuzz_part2_model.c, each family of operations in a fuzz_part2_<family>.c of its own, and what
 * they share in fuzz_part2.h (tests/fuzz/README.md lists them).
 */
#include "fuzz_part2.h"

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
