/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay_timing — the host time of recap_graph_replay of a captured graph, against the CPU fake
 * device with a launch that does nothing: recap's own cost per replay, with no driver and no
 * fake executable run under it. It shows what the update policy adds to a replay outside its
 * measurements: the default policy's check puts its launch in front of executables of more than
 * 128 nodes, and a replay then pays a call and a flag outside a check (about 2 ns: compare
 * `replay_timing` with `replay_timing 200000 20 200 off`, or with 128 nodes).
 *
 * After a warm-up, `rounds` rounds of `replays` replays each (default 20 x 200000), timed with
 * clock_gettime(CLOCK_MONOTONIC); it prints the median and the minimum of the rounds' ns per
 * replay. A program, not a test: timings depend on the machine. Usage:
 * replay_timing [replays-per-round [rounds [nodes [on|off]]]] (nodes: 200 by default; `off`
 * sets auto_check_nodes to -1, the plain launch of graphs the check leaves alone).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "recap.h"
#include "reset.h"
#include "timing_util.h"

static void check(recap_status_t s, const char *what) {
  if (s == RECAP_SUCCESS) return;
  fprintf(stderr, "replay_timing: %s: %s\n", what, recap_last_error());
  exit(1);
}

/* The launch of a GPU that takes no time: what is left is recap's. */
static volatile uint64_t launched;
static recap_status_t launch_nothing(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  (void)exec;
  (void)stream;
  launched++;
  return RECAP_SUCCESS;
}

static double replays_ns(recap_graph_t g, recap_stream_t s, long replays) {
  uint64_t t0 = now_ns();
  for (long i = 0; i < replays; i++) check(recap_graph_replay(g, s), "recap_graph_replay");
  return (double)(now_ns() - t0) / (double)replays;
}

int main(int argc, char **argv) {
  long replays = argc > 1 ? atol(argv[1]) : 200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  int nodes = argc > 3 ? atoi(argv[3]) : 200;
  bool off = argc > 4 && strcmp(argv[4], "off") == 0;
  if (replays <= 0 || rounds <= 0 || rounds > 1000 || nodes <= 0) {
    fprintf(stderr,
            "usage: replay_timing [replays-per-round [rounds (1 to 1000) [nodes [on|off]]]]\n");
    return 2;
  }
  recap_test_reset(NULL);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  check(recap_graph_create(&g, 0), "recap_graph_create");
  if (off) {
    recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
    p.auto_check_nodes = -1;
    check(recap_graph_update_policy_set(g, &p), "recap_graph_update_policy_set");
  }
  check(recap_graph_capture_begin(g, NULL, s), "recap_graph_capture_begin");
  for (int i = 0; i < nodes; i++) recap__fake_stream_enqueue(s);
  check(recap_graph_capture_end(g), "recap_graph_capture_end");
  /* The policy's baseline: replays on the fake as it is, until their times are read. */
  for (int i = 0; i < 16; i++) {
    check(recap_graph_replay(g, s), "recap_graph_replay");
    recap__fake_stream_complete(s);
  }
  recap__device_ops_t ops = *recap__device();
  ops.graph_launch = launch_nothing;
  recap__device_install(&ops);
  (void)replays_ns(g, s, replays); /* warm-up */
  double *ns = malloc((size_t)rounds * sizeof *ns);
  if (!ns) return 1;
  for (int r = 0; r < rounds; r++) ns[r] = replays_ns(g, s, replays);
  qsort(ns, (size_t)rounds, sizeof *ns, compare_double);
  printf("replay of %d nodes, check %s: median %.2f ns, min %.2f ns per replay (%d x %ld)\n", nodes,
         off ? "off" : "default", ns[rounds / 2], ns[0], rounds, replays);
  free(ns);
  check(recap_graph_destroy(g), "recap_graph_destroy");
  return 0;
}
