/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/graph_set.h — one step function over many sizes: a graph per size (bucket), captured
 * largest first into one pool, up front, on first use or in the background, within a budget. A
 * call runs its bucket's graph, or the step eagerly while that graph is not ready: it never waits
 * for a capture. See docs/graph_sets.md.
 */
#ifndef RECAP_GRAPH_SET_H
#define RECAP_GRAPH_SET_H

#include "core.h"
#include "alloc.h"
#include "graph.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct recap_graph_set *recap_graph_set_t;

/* The caller's step: enqueue the work for `size` on `stream`. It may run on two threads at once
 * (an eager call, a background capture): a library handle it uses must follow the stream. */
typedef recap_status_t (*recap_step_fn)(size_t size, recap_stream_t stream, void *user_data);

/* How the set's sizes are given, when options.sizes is NULL. */
typedef enum recap_sizes_rule {
  RECAP_SIZES_LIST = 0,          /* options.sizes / options.size_count (the default) */
  RECAP_SIZES_POWERS_OF_TWO = 1, /* 1, 2, 4, ... up to rule_max (rule_max itself included) */
  RECAP_SIZES_MULTIPLES = 2      /* rule_step, 2 rule_step, ... up to rule_max (included) */
} recap_sizes_rule_t;

/* When the members are captured, on the set's streams: all in create (UPFRONT), each by its
 * first call (LAZY), or by a helper thread while calls run eagerly (BACKGROUND). */
typedef enum recap_set_capture {
  RECAP_SET_CAPTURE_UPFRONT = 0,
  RECAP_SET_CAPTURE_LAZY = 1,
  RECAP_SET_CAPTURE_BACKGROUND = 2
} recap_set_capture_t;

/* The order sizes are captured in, and so which a budget keeps (largest first shares most). */
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
  uint64_t budget_bytes;         /* the pool's reserved bytes and executables together; 0: none */
  double evict_idle_seconds;     /* evict members idle this long at the next call; 0: never */
  /* Each member's capture options ({0,0} pool: the set's own; budget_bytes must be 0). */
  recap_capture_options_t capture_options;
  double background_share; /* BACKGROUND: the helper's share of wall time, (0, 1]; 0: 0.2 */
} recap_graph_set_options_t;

#define RECAP_GRAPH_SET_OPTIONS_INIT                                                               \
  {                                                                                                \
    sizeof(recap_graph_set_options_t), NULL, 0, RECAP_SIZES_LIST, 0, 0, RECAP_SET_CAPTURE_UPFRONT, \
        RECAP_SET_LARGEST_FIRST, RECAP_SET_OVERFLOW_EAGER, 0, 0.0, RECAP_CAPTURE_OPTIONS_INIT, 0.0 \
  }

/* Make a set, used from one thread at a time. Bad options: INVALID_ARGUMENT naming the field.
 * Members that fail to capture are recorded (recap_graph_set_member), not a failure of create;
 * a failure leaves *set NULL. Never replay two members at once on different streams. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_set_create(recap_graph_set_t *set, recap_step_fn step, void *user_data,
                       const recap_graph_set_options_t *options);
/* Cancel and join a background capture, destroy the members, release the pool reference. Waits
 * for nothing on the caller's streams. NULL: no-op. */
RECAP_API recap_status_t recap_graph_set_destroy(recap_graph_set_t set);

/* Run n on stream: replay its bucket's graph if ready (LAZY: capture it first), else run the
 * step eagerly. *padded: the size that ran; *graphed: 1 when replayed (either may be NULL).
 * n = 0: INVALID_ARGUMENT. The step's or this call's capture's failure is returned. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_run(recap_graph_set_t set, size_t n,
                                                             recap_stream_t stream, size_t *padded,
                                                             int *graphed);

/* The bucket n would run (the smallest size >= n; n itself above the largest), without running
 * anything. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_bucket(recap_graph_set_t set, size_t n,
                                                                size_t *bucket);

/* Wait until no capture is pending or under way; cancel the captures not yet started. Call wait,
 * or cancel then wait, before calls refused during a capture (docs/graph_sets.md). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_wait(recap_graph_set_t set);
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_cancel(recap_graph_set_t set);
/* Capture one size (0: every size not ready) now, on the caller's thread. NOT_FOUND: no such
 * size; BUSY: a background capture pending; else the first failed size's status. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_capture(recap_graph_set_t set,
                                                                 size_t size);

/* Evict one member, or those idle for idle_seconds (*evicted, may be NULL: how many): its graph
 * goes, its pool memory stays; captured again when used. Not READY: INVALID_USAGE. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_evict(recap_graph_set_t set, size_t size);
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_evict_idle(recap_graph_set_t set,
                                                                    double idle_seconds,
                                                                    size_t *evicted);

/* ---- Parameters the members share (recap/params.h, docs/graph_sets.md) ---- */

/* Set the parameter `name` of `type` to *value (4 or 8 bytes, as type says) for the whole set.
 * The step declares it on the stream it is given (recap_param_on_stream), so each member's capture
 * holds a parameter of that name: every READY member whose capture declared it is set now, and
 * the set keeps the value, which every later step call gets in place of the one it passes (a
 * member captured later, LAZY, BACKGROUND or after an eviction, and every eager run). All or
 * nothing: a member's failure sets the members before it back and the set keeps its old value.
 * *members (may be NULL) gets how many members were set. INVALID_ARGUMENT: name NULL or empty,
 * type out of range, value NULL, another type than an earlier call or a member's declaration;
 * BUSY: a background capture under way (recap_graph_set_wait first). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_set_param_set(recap_graph_set_t set,
                                                                   const char *name,
                                                                   recap_param_type_t type,
                                                                   const void *value,
                                                                   size_t *members);

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
  int64_t exec_bytes;     /* READY: its executable's bytes (recap/memory.h; -1: not measured) */
  size_t nodes;           /* READY: its node count */
} recap_graph_set_member_t;

#define RECAP_GRAPH_SET_MEMBER_INIT                                                               \
  {                                                                                               \
    sizeof(recap_graph_set_member_t), 0, RECAP_MEMBER_PENDING, RECAP_SUCCESS, {0}, NULL, 0, 0, 0, \
        0.0, 0, 0                                                                                 \
  }

/* The sizes, ascending: *count gets how many, sizes (may be NULL) up to capacity of them. */
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
  int64_t exec_bytes;          /* the ready members' measured executables, summed */
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
