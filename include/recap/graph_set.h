/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graph_set.h — one step function, many sizes: a set of graphs over sizes (buckets),
 * captured largest first into one shared pool, chosen per call, captured up front, on first use
 * or in the background while calls run eagerly, within a memory budget, with idle eviction.
 *
 *     static recap_status_t step(size_t size, recap_stream_t stream, void *user_data) {
 *       // enqueue the work for `size` rows on `stream` (kernels, cuBLAS, recap_malloc...)
 *     }
 *     recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
 *     o.rule = RECAP_SIZES_POWERS_OF_TWO;  o.rule_max = 512;      // 1, 2, 4, ..., 512
 *     o.capture = RECAP_SET_CAPTURE_BACKGROUND;
 *     recap_graph_set_t set;
 *     recap_graph_set_create(&set, step, &model, &o);
 *     for (;;) {
 *       size_t padded;  int graphed;
 *       recap_graph_set_run(set, n, stream, &padded, &graphed);    // pad inputs to `padded`
 *     }
 *     recap_graph_set_destroy(set);
 *
 * The step is the caller's function: for a size it enqueues on the stream it is given the work
 * of one call, reading and writing buffers sized for the largest size (the caller's, through
 * user_data), and may allocate temporaries with recap_malloc on that stream (freed before it
 * returns; they come from the set's pool while it is captured). recap calls it to capture a
 * size and to run a size eagerly. The same step may run at once on two threads with two
 * streams (the caller's eager call and the background capture): a library handle it uses must
 * follow the stream it is given (one cuBLAS handle per stream, say). It returns RECAP_SUCCESS or
 * a failure status (set recap_set_last_error to say why); a failure during a capture marks that
 * size failed (with the status and message) and the set keeps its other sizes.
 *
 * Sizes are positive and distinct. A call for n runs the smallest size >= n that the set holds
 * (its "bucket", returned in *padded: the caller pads its inputs to it); an n above the largest
 * size runs the step eagerly with n itself (*padded = n), or is refused, as options.overflow
 * says. A bucket whose graph is not ready (not yet captured, capturing in the background,
 * evicted, left eager by the budget, failed) runs the step eagerly with the bucket's size: the
 * call never waits for a capture, and its results are those the graph would give.
 *
 * Memory: every member is captured into one pool (options.capture_options.pool, or one the set
 * makes), largest first by default, so smaller sizes reuse the memory the largest one's
 * temporaries took. Replays of the set's graphs on one stream are then correct; replaying two
 * members of one set at once on different streams is not (they share memory). The budget
 * (options.budget_bytes) bounds the pool's reserved bytes plus the members' executables
 * (recap/memory.h's exec_bytes): sizes are captured in priority order while they fit, and a
 * size that would not fit is left eager, its reason recorded (recap_graph_set_member).
 *
 * Threads: one set is used from one thread at a time (any thread, one after another); different
 * sets from different threads at once. A background capture runs on a helper thread of the set,
 * with its own stream and thread-local capture mode; it never touches the caller's stream, and
 * the caller may keep calling recap_graph_set_run meanwhile. recap_graph_set_destroy cancels and
 * joins it.
 *
 * With graphs disabled (RECAP_DISABLE_GRAPHS=1) nothing is captured: every call runs the step
 * eagerly with its bucket's size.
 *
 * docs/graph_sets.md gives the whole contract.
 */
#ifndef RECAP_GRAPH_SET_H
#define RECAP_GRAPH_SET_H

#include "core.h"
#include "alloc.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct recap_graph_set *recap_graph_set_t;

/* The caller's step: enqueue the work for `size` on `stream`. See above. */
typedef recap_status_t (*recap_step_fn)(size_t size, recap_stream_t stream, void *user_data);

/* How the set's sizes are given, when options.sizes is NULL. */
typedef enum recap_sizes_rule {
  RECAP_SIZES_LIST = 0,          /* options.sizes / options.size_count (the default) */
  RECAP_SIZES_POWERS_OF_TWO = 1, /* 1, 2, 4, ... up to rule_max (rule_max itself included) */
  RECAP_SIZES_MULTIPLES = 2      /* rule_step, 2 rule_step, ... up to rule_max (included) */
} recap_sizes_rule_t;

/* When the members are captured. */
typedef enum recap_set_capture {
  /* In recap_graph_set_create, on the caller's thread, every size in priority order (create
   * returns once all are captured, failed, or left eager by the budget). Every capture of a set
   * runs on a stream of the set's own (the caller's streams are never made to capture). */
  RECAP_SET_CAPTURE_UPFRONT = 0,
  /* A size is captured by the first recap_graph_set_run that needs it, on the caller's thread
   * (that call captures, then replays on the caller's stream). */
  RECAP_SET_CAPTURE_LAZY = 1,
  /* In the background: create starts a helper thread that captures every size in priority
   * order on a stream of its own; calls run eagerly until their bucket's graph is ready. */
  RECAP_SET_CAPTURE_BACKGROUND = 2
} recap_set_capture_t;

/* The order in which sizes are captured, and so which ones a budget keeps. Largest first gives
 * the most sharing of the pool's memory. */
typedef enum recap_set_priority {
  RECAP_SET_LARGEST_FIRST = 0,
  RECAP_SET_SMALLEST_FIRST = 1,
  RECAP_SET_AS_LISTED = 2 /* the order of options.sizes */
} recap_set_priority_t;

/* A call for n above the largest size. */
typedef enum recap_set_overflow {
  RECAP_SET_OVERFLOW_EAGER = 0, /* run the step eagerly with n */
  RECAP_SET_OVERFLOW_REFUSE = 1 /* RECAP_ERROR_INVALID_ARGUMENT, nothing enqueued */
} recap_set_overflow_t;

typedef struct recap_graph_set_options {
  size_t size; /* sizeof(recap_graph_set_options_t), set by the INIT macro */
  /* The sizes: a list (copied at create; NULL with the rules below)... */
  const size_t *sizes;
  size_t size_count;
  /* ...or a rule (with sizes NULL). */
  recap_sizes_rule_t rule;
  size_t rule_step;
  size_t rule_max;
  recap_set_capture_t capture;   /* default UPFRONT */
  recap_set_priority_t priority; /* default LARGEST_FIRST */
  recap_set_overflow_t overflow; /* default EAGER */
  /* Bytes the set's pool (reserved) and its members' executables may hold together; 0: no
   * limit. */
  uint64_t budget_bytes;
  /* A member not replayed for this many seconds is evicted by the next call that looks (every
   * recap_graph_set_run does, and recap_graph_set_evict_idle); 0: never. */
  double evict_idle_seconds;
  /* The options of each member's capture: pool ({0,0}: the set makes one and releases it at
   * destroy), mode (forced to THREAD_LOCAL in the background), check_input_liveness, rebind,
   * regions. Its budget_bytes must be 0 (the set's budget governs). */
  recap_capture_options_t capture_options;
  /* BACKGROUND: the share of wall time the helper thread may spend capturing, in (0, 1]; after
   * a capture that took t seconds it waits t * (1 / share - 1) before the next one. The
   * helper's captures slow the caller's eager calls while they run (docs/graph_sets.md gives
   * the measure), so a lower share keeps those calls closer to their speed alone, and a higher
   * one fills the set sooner. 0 (the default): 0.2. */
  double background_share;
} recap_graph_set_options_t;

#define RECAP_GRAPH_SET_OPTIONS_INIT                                                               \
  {                                                                                                \
    sizeof(recap_graph_set_options_t), NULL, 0, RECAP_SIZES_LIST, 0, 0, RECAP_SET_CAPTURE_UPFRONT, \
        RECAP_SET_LARGEST_FIRST, RECAP_SET_OVERFLOW_EAGER, 0, 0.0, RECAP_CAPTURE_OPTIONS_INIT, 0.0 \
  }

/* Make a set. Bad options are RECAP_ERROR_INVALID_ARGUMENT with a message that names the field:
 * no sizes (an empty list, or a rule that gives none), a zero size, a duplicate size, a rule
 * with rule_step or rule_max 0, both a list and a rule, an unknown enum value, a budget in
 * capture_options, a bad options size. step NULL likewise. UPFRONT captures before returning:
 * members that fail are recorded, and create still succeeds (read recap_graph_set_member);
 * only a failure of the set itself (no device, out of host memory, the helper thread) fails
 * create, leaving *set NULL. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_set_create(recap_graph_set_t *set, recap_step_fn step, void *user_data,
                       const recap_graph_set_options_t *options);
/* Cancel a background capture and join its thread, destroy every member graph, and release the
 * set's reference to its pool (its memory goes back on recap_empty_cache once no graph holds
 * it). Waits for nothing on the caller's streams: replays already enqueued stay valid (the
 * executables go after the device finishes them, as recap_graph_destroy's do). NULL: no-op. */
RECAP_API recap_status_t recap_graph_set_destroy(recap_graph_set_t set);

/* Run the work for n on stream: replay the bucket's graph if it is ready, else run the step
 * eagerly (capturing it first under LAZY). *padded (may be NULL) gets the size that ran, and
 * *graphed (may be NULL) 1 when a graph replayed. n = 0 is RECAP_ERROR_INVALID_ARGUMENT. The
 * step's failure in an eager run is returned as is (its message kept). A capture made by the
 * call (LAZY, or an evicted UPFRONT size) that fails is returned too, with the member's message,
 * and nothing runs: the member is FAILED and later calls run it eagerly; one the budget leaves
 * eager (OVER_BUDGET) runs eagerly at once. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_run(recap_graph_set_t set, size_t n,
                                                             recap_stream_t stream, size_t *padded,
                                                             int *graphed);

/* The bucket n would run (the smallest size >= n; n itself above the largest), without running
 * anything. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_bucket(recap_graph_set_t set, size_t n,
                                                                size_t *bucket);

/* Background capture: wait until no capture is pending or under way (returns at once in the
 * other modes); cancel the captures not yet started (the one under way finishes), after which
 * those sizes run eagerly until recap_graph_set_capture is called for them.
 *
 * The helper's captures are captures under way in the process: while one runs, the calls that
 * refuse to run during any capture (recap_empty_cache, recap/alloc.h; recap_pool_sleep,
 * recap_pool_wake, recap_sleep, recap_wake, recap_pinned_reserve, recap/sleep.h) answer
 * RECAP_ERROR_INVALID_USAGE, nothing changed. Before them, recap_graph_set_wait (every queued
 * size captured), or recap_graph_set_cancel then recap_graph_set_wait (only the capture under way
 * finishes, at most one capture's time); after either the helper begins no capture until a
 * recap_graph_set_run queues an evicted size again. docs/graph_sets.md, "Calls refused while the
 * helper captures". */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_wait(recap_graph_set_t set);
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_cancel(recap_graph_set_t set);
/* Capture one size now on the caller's thread (size 0: every size not ready, in priority
 * order), as UPFRONT does; a size the set does not hold is RECAP_ERROR_NOT_FOUND. Refused
 * (RECAP_ERROR_BUSY) while a background capture is pending or under way. Every size is tried;
 * the first that failed or went over budget gives the status and message returned (its record
 * is in recap_graph_set_member). With graphs disabled this does nothing. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_capture(recap_graph_set_t set,
                                                                 size_t size);

/* Evict one member (its executable and graph destroyed, its pool memory left to the other
 * members and later captures), or every member idle for at least idle_seconds. An evicted
 * member is captured again when next used (LAZY, or BACKGROUND: queued for the helper; UPFRONT
 * sizes recapture as LAZY ones do). Evicting a member that is not READY is
 * RECAP_ERROR_INVALID_USAGE naming its state. *evicted (may be NULL) gets how many went. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_evict(recap_graph_set_t set, size_t size);
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_evict_idle(recap_graph_set_t set,
                                                                    double idle_seconds,
                                                                    size_t *evicted);

/* The state of one member. */
typedef enum recap_member_state {
  RECAP_MEMBER_PENDING = 0,     /* not captured yet (LAZY before first use; BACKGROUND queued) */
  RECAP_MEMBER_CAPTURING = 1,   /* being captured in the background */
  RECAP_MEMBER_READY = 2,       /* captured: calls replay it */
  RECAP_MEMBER_FAILED = 3,      /* its step or capture failed: status and message say why */
  RECAP_MEMBER_OVER_BUDGET = 4, /* left eager: capturing it would exceed the budget */
  RECAP_MEMBER_EVICTED = 5,     /* evicted; captured again when used */
  RECAP_MEMBER_CANCELLED = 6,   /* its background capture was cancelled */
  RECAP_MEMBER_EAGER = 7        /* graphs are disabled (RECAP_DISABLE_GRAPHS=1) */
} recap_member_state_t;

typedef struct recap_graph_set_member {
  size_t size;   /* sizeof(recap_graph_set_member_t), set by RECAP_GRAPH_SET_MEMBER_INIT */
  size_t bucket; /* the member's size */
  recap_member_state_t state;
  recap_status_t status;  /* FAILED, OVER_BUDGET: the status; else RECAP_SUCCESS */
  char message[256];      /* FAILED, OVER_BUDGET: why (the step's or recap's last error) */
  recap_graph_t graph;    /* READY: the member's graph, lent (inspect, rebind, update); else NULL */
  uint64_t replays;       /* calls that replayed it */
  uint64_t eager_runs;    /* calls for this bucket that ran eagerly */
  uint64_t captures;      /* captures of it that succeeded (more than 1 after evictions) */
  double capture_seconds; /* the latest capture's time, instantiation included */
  int64_t exec_bytes;     /* READY: its executable's bytes (recap/memory.h) */
  size_t nodes;           /* READY: its node count */
} recap_graph_set_member_t;

#define RECAP_GRAPH_SET_MEMBER_INIT                                                               \
  {                                                                                               \
    sizeof(recap_graph_set_member_t), 0, RECAP_MEMBER_PENDING, RECAP_SUCCESS, {0}, NULL, 0, 0, 0, \
        0.0, 0, 0                                                                                 \
  }

/* The set's sizes in ascending order: *count gets how many; sizes (may be NULL) gets up to
 * capacity of them. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_sizes(recap_graph_set_t set, size_t *sizes,
                                                               size_t capacity, size_t *count);
/* The member of size `size` (RECAP_ERROR_NOT_FOUND if the set has no such size). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_member(recap_graph_set_t set, size_t size,
                                                                recap_graph_set_member_t *info);

typedef struct recap_graph_set_info {
  size_t size; /* sizeof(recap_graph_set_info_t), set by RECAP_GRAPH_SET_INFO_INIT */
  size_t members;
  size_t ready, pending, capturing, failed, over_budget, evicted, cancelled;
  recap_pool_id_t pool;
  int64_t pool_reserved_bytes; /* the pool's reserved bytes now */
  int64_t exec_bytes;          /* the ready members' executables, summed */
  uint64_t budget_bytes;
  uint64_t replays, eager_runs, overflow_runs, evictions;
  double first_ready_seconds; /* from create to the first member ready (0: none yet) */
  double all_ready_seconds;   /* from create to no member pending or capturing (0: not yet) */
} recap_graph_set_info_t;

#define RECAP_GRAPH_SET_INFO_INIT \
  { sizeof(recap_graph_set_info_t), 0, 0, 0, 0, 0, 0, 0, 0, {0, 0}, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0 }

RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_info(recap_graph_set_t set,
                                                              recap_graph_set_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPH_SET_H */
