/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_internal.h — the graph set (recap/graph_set.h) as its files share it: the set, its
 * members, and the functions each file offers the others.
 *
 * set_sizes.c turns the options into the sorted size list and the capture order; set_capture.c
 * captures one member (budget, timing, failure records); graph_set.c is the public surface;
 * set_background.c runs the helper thread; set_params.c the parameters the members share.
 *
 * Locking: `lock` guards every member's state and counters and the set's counters, because the
 * helper thread changes them while the caller's thread reads them. Neither thread holds it
 * during a capture, a step or a replay. The helper thread never destroys a READY member's
 * graph: only the caller's thread does (run, evict, evict_idle, destroy), so a graph taken
 * under the lock stays alive while the caller replays it outside.
 */
#ifndef RECAP_SET_INTERNAL_H
#define RECAP_SET_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "recap/graph_set.h"
#include "recap/params.h"

enum { RECAP__SET_MAGIC = 0x72677374 /* "rgst" */ };

/* The most members a set holds: a rule such as multiples of 1 up to 10^9 is refused rather
 * than given a billion members. */
enum { RECAP__SET_MAX_MEMBERS = 65536 };

/* options.background_share 0: the helper captures a fifth of the time. On the H200 a helper
 * capturing without pause cost an eager cuBLAS loop on another thread a third of its speed
 * (bench/bench_sets, table (b)); at a fifth it costs a small part of that, and 32 sizes are
 * still graphed in tens of milliseconds. */
#define RECAP__SET_DEFAULT_SHARE 0.2

/* A value recap_graph_set_param_set gave a parameter: its members' steps get it. */
typedef struct recap__set_param {
  char *name;
  recap_param_type_t type;
  uint64_t bits;
} recap__set_param_t;

typedef struct recap__member {
  size_t bucket;
  recap_member_state_t state;
  recap_status_t status;
  char message[256];
  recap_graph_t graph; /* READY only */
  uint64_t replays, eager_runs, captures;
  double capture_seconds;
  int64_t exec_bytes; /* READY only */
  size_t nodes;       /* READY only */
  double last_used;   /* recap__set_now() of its capture or latest replay */
} recap__member_t;

struct recap_graph_set {
  uint32_t magic; /* RECAP__SET_MAGIC while the set is live */
  recap_step_fn step;
  void *user_data;
  recap_graph_set_options_t options;       /* options.sizes NULL: members holds them */
  recap_capture_options_t capture_options; /* with the set's pool, budget 0 */
  size_t count;
  recap__member_t *members; /* ascending sizes */
  size_t *order;            /* capture order: indices into members */
  int device;               /* the device current at create */
  bool disabled;            /* graphs disabled: every member EAGER */
  bool holds_pool;          /* the set holds a reference to capture_options.pool */
  recap_stream_t stream;    /* the set's own stream, where its captures run */
  pthread_mutex_t lock;
  pthread_cond_t changed; /* the helper's queue or a capture's state changed */
  /* Background (under lock): the helper thread, whether it must stop, whether it captures. */
  bool thread_started, stop, busy;
  pthread_t thread;
  double created;                /* recap__set_now() at create */
  double first_ready, all_ready; /* seconds from create; 0: not yet */
  double last_idle_scan;         /* recap__set_now() of run()'s latest idle scan */
  uint64_t replays, eager_runs, overflow_runs, evictions;
  recap__set_param_t *params; /* under lock: set_params.c */
  size_t param_count, param_cap;
};

/* CLOCK_MONOTONIC in seconds. */
double recap__set_now(void);

/* ---- set_sizes.c ---- */
/* Check *options (copied by the caller, sizes still the caller's) and make the ascending size
 * list and the capture order (index arrays of *count entries, from recap__host_malloc).
 * RECAP_ERROR_INVALID_ARGUMENT naming the field, or out of host memory. */
recap_status_t recap__set_sizes_make(const recap_graph_set_options_t *options, size_t **sizes,
                                     size_t **order, size_t *count);
/* The index of the member of size `size`, or set->count. */
size_t recap__set_find(const recap_graph_set_t set, size_t size);
/* The index of the smallest member >= n, or set->count when n is above the largest. */
size_t recap__set_bucket(const recap_graph_set_t set, size_t n);

/* ---- set_capture.c ---- */
/* Capture member i on the calling thread, on the set's stream, in mode, within the budget;
 * the member's state (READY, FAILED, OVER_BUDGET) and record are set under the lock. The
 * member must be claimed by the caller (no other thread captures it). Returns RECAP_SUCCESS
 * when READY, else the member's status, with its message as the thread's last error. */
recap_status_t recap__set_capture(recap_graph_set_t set, size_t i, recap_capture_mode_t mode);
/* The executables of the READY members, summed (lock held). */
int64_t recap__set_exec_sum(const recap_graph_set_t set);
/* The set's pool's reserved bytes now (0 before its first segment). */
int64_t recap__set_pool_reserved(const recap_graph_set_t set);
/* Update first_ready / all_ready after a state change (lock held). */
void recap__set_note_progress(recap_graph_set_t set);
/* Destroy member i's graph and mark it EVICTED (lock held, caller's thread, member READY). */
void recap__set_evict_member(recap_graph_set_t set, size_t i);

/* ---- set_params.c ---- */
/* Run the step for size on stream, with the values recap_graph_set_param_set gave in place of
 * those the step passes to recap_param_on_stream (on this thread, for this call). */
recap_status_t recap__set_step(recap_graph_set_t set, size_t size, recap_stream_t stream);
/* Free the values (destroy). */
void recap__set_params_free(recap_graph_set_t set);

/* ---- set_background.c ---- */
/* Start the helper thread (create, BACKGROUND mode, members PENDING). */
recap_status_t recap__set_background_start(recap_graph_set_t set);
/* Cancel what is queued, let the capture under way finish, and join the thread. */
void recap__set_background_stop(recap_graph_set_t set);
/* Wake the helper: a member was queued (lock held). */
void recap__set_background_kick(recap_graph_set_t set);

#endif /* RECAP_SET_INTERNAL_H */
