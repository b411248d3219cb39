/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap.h — what the files of the fuzz_recap target share: its limits, the model's state
 * (every slot, graph, generator and stream as the model has it), tracing, and the functions
 * one file defines and another calls. The target's documentation is at the top of fuzz_recap.c.
 */
#ifndef RECAP_FUZZ_RECAP_H
#define RECAP_FUZZ_RECAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "fuzz_util.h"
#include "recap.h"
#include "reset.h"

enum {
  STREAMS = 5, /* four of the program's, and recap's side stream once a scope hands it out */
  SLOTS = 32,
  GRAPHS = 4,
  GENS = 2,
  SHARED = 2, /* pool handles several graphs may share */
  MAX_OPS = 256,
  MAX_INPUTS = 16,
  MAX_DEPTH = 8
};

enum { FRESH, CAPTURING, CAPTURED };

typedef struct slot {
  char *p;
  size_t size, usable;
  int stream;
  uint64_t serial;   /* the allocation's number: a block handed out again gets a new one */
  uint64_t pool;     /* 0: the default pool; else the capture's pool key (see graph_t) */
  bool used_on;      /* recap_record_stream was called on it */
  uint64_t split_at; /* max_split_size when it was allocated */
  bool pinned;       /* the graphed callable's static input: not freed while it lives */
} slot_t;

typedef struct graph {
  recap_graph_t h;
  bool keep;
  bool instantiated; /* an executable exists for sure (KEEP graphs: after an instantiation) */
  int state, stream, mode;
  int shared;         /* -1: a private pool; else which of the shared handles */
  uint64_t pool_key;  /* 100 + shared index, or 1000 + a number of its own per capture */
  bool invalid;       /* the capture was invalidated for sure */
  bool maybe_invalid; /* a call may have invalidated it (the docs say which calls may) */
  bool scope;         /* opened by recap_capture_scope_begin */
  bool liveness;
  unsigned gens;           /* generators used by the capture, then held by the graph */
  uint64_t consumed[GENS]; /* offset each replay advances them by */
  bool consumed_unknown;   /* a library kernel drew (its increment is not documented) */
  uint64_t inputs[MAX_INPUTS];
  int input_count;
  bool inputs_unknown; /* an input was freed or more were read than the model keeps */
  int depth;           /* annotation scopes open */
  int scope_streams[MAX_DEPTH];
  bool annotations_unknown;
  /* Whether recap_graph_pool names the pool of a failed capture (recap/graph.h: from a failed
   * end until a reset or another capture): POOL_NONE, POOL_NAMED, or POOL_UNKNOWN after a
   * failed begin, which names one only if the stream had begun capturing. */
  int failed_pool;
  /* A recapture runs (recap/update.h): the capture it replaces waits in st.saved[g], back when
   * the recapture fails; the route holds a second pool reference meanwhile. */
  bool recapturing;
  uint64_t recaptures; /* recaptures that succeeded since the create or the last reset */
  /* Shared pools the capture holds a reference to through graphs replayed into it, which
   * embeds them (docs/graphs.md, "Inside another capture"): bit k for st.shared[k], each once. */
  unsigned embedded;
} graph_t;

enum { POOL_NONE, POOL_NAMED, POOL_UNKNOWN };

typedef struct gen {
  recap_generator_t h;
  bool alive;
  uint64_t offset;
  bool offset_known;
} gen_t;

struct fuzz_recap_state {
  const uint8_t *data;
  size_t size, at;
  recap_stream_t streams[STREAMS];
  int owner[STREAMS]; /* the graph whose capture the stream takes part in, or -1 */
  slot_t slots[SLOTS];
  graph_t graphs[GRAPHS];
  graph_t saved[GRAPHS]; /* the capture a recapture replaces */
  gen_t gens[GENS];
  recap_pool_id_t shared[SHARED];
  uint64_t next_serial, next_pool_key;
  uint64_t max_split, memory_cap;
  /* Faults armed: the fake's call count at which each fires, 0 when none is armed. */
  uint64_t fault_at[RECAP__FAKE_FAULT_KINDS];
  uint64_t fired; /* kinds that fired during the current call, a bit each */
  /* The graphed callable. */
  recap_graphed_t callable;
  int callable_input; /* its static input's slot */
  bool callable_forward_ran, callable_last_eager;
  int64_t callable_blocks, callable_bytes; /* what it holds, measured after its calls */
  /* The previous operation, for the reuse check. */
  int last_free_slot_stream;
  size_t last_free_usable;
  bool last_was_plain_free; /* set by op_free, cleared before every other operation */
  bool prev_plain_free;     /* the flag as the previous operation left it */
  int op_index;
  unsigned tolerated; /* known defects met in this run */
};
extern struct fuzz_recap_state st;

extern bool tracing;
extern unsigned known; /* RECAP_FUZZ_KNOWN, as bits */
enum { KNOWN_1 = 1, KNOWN_4 = 2, KNOWN_5 = 4, KNOWN_RNG = 8 };

#define KiB ((size_t)1 << 10)

/* The size classes in force (fuzz_recap_alloc.c), read once the options are set. */
struct size_classes {
  size_t small, large, segment;
};
extern struct size_classes sizes;

/* fuzz_recap_model.c */
void die(const char *what, recap_status_t status);
void known_defect(unsigned bit, const char *what, recap_status_t status);
void call_ends(void);
void events_may_have_waited(void);
void check_last(recap_status_t s, const char *call);
void expect(recap_status_t s, recap_status_t allowed, const char *call);
void expect_or_fault(recap_status_t s, recap_status_t allowed, const char *call);
void capture_over(int g, bool succeeded);
void graph_fresh(int g);
void check_invariants(void);
void check_no_overlap(int self);
void write_tag(const slot_t *s);
void check_tag(const slot_t *s);

/* fuzz_recap_alloc.c */
void op_malloc(void);
void op_free(void);
void op_record_stream(void);
void op_complete(void);
void op_empty_cache(void);
void op_option(void);
void op_fault(void);

/* fuzz_recap_capture.c */
void op_graph_create(void);
void op_capture_begin(void);
void op_capture_end(void);
void op_recapture_begin(void);
void op_update_policy(void);
void op_scope_begin(void);
void op_scope_end(void);
void op_annotate(void);

/* fuzz_recap_replay.c */
void op_replay(void);
void op_reset(void);
void op_invalidate(void);
void op_join(void);
void op_kernel(void);
void op_liveness(void);
void op_access(void);

/* fuzz_recap_generators.c */
void op_generator(void);
void op_draw(void);

/* fuzz_recap_callable.c */
void op_graphed(void);

/* Helpers called for nearly every input byte and every call: defined here so that each file
 * inlines them. */

static inline uint8_t byte(void) { return st.at < st.size ? st.data[st.at++] : 0; }

/* Before every call: nothing fired yet. */
static inline void call_begins(void) { st.fired = 0; }

/* One call on graph g's handle between call_begins and call_ends, traced: the shape of most
 * graph operations. */
static inline recap_status_t graph_call(int g, recap_status_t (*call)(recap_graph_t),
                                        const char *name) {
  call_begins();
  recap_status_t s = call(st.graphs[g].h);
  call_ends();
  TRACE("%s(graph %d) -> %s", name, g, recap_status_name(s));
  return s;
}

static inline bool fired(recap__fake_fault_t kind) { return st.fired & (1ull << kind); }

static inline void arm(recap__fake_fault_t kind, uint64_t n) {
  recap__fake_fail_nth(kind, n);
  st.fault_at[kind] = n ? recap__fake_now().calls[kind] + n : 0;
}

static inline bool any_capture(void) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING) return true;
  return false;
}

static inline int pick_stream(void) {
  int n = st.streams[STREAMS - 1] ? STREAMS : STREAMS - 1;
  return byte() % n;
}

static inline bool slot_alive(uint64_t serial) {
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p && st.slots[i].serial == serial) return true;
  return false;
}

#endif
