/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_sets.c — fuzz_part2's graph sets (docs/graph_sets.md): a set built, run and
 * destroyed.
 */
#include "fuzz_part2.h"

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

void op_graph_set(void) {
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
