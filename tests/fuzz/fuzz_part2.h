/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2.h — what the files of the fuzz_part2 target share: its limits, the known defects,
 * the model's state (every slot, pool and graph as the model has it), tracing, and the functions
 * one file defines and another calls. The target's documentation is at the top of fuzz_part2.c.
 */
#ifndef RECAP_FUZZ_PART2_H
#define RECAP_FUZZ_PART2_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "fuzz_util.h"
#include "recap.h"
#include "reset.h"

enum {
  SLOTS = 24,
  GRAPHS = 3,
  POOLS = 48, /* every pool a run makes: the default pool, the graphs', the sets' */
  SITES = 16,
  MAX_OPS = 200,
  MAX_KEPT = 8,
  DEPTH = 4
};

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GRANULE (64 * KiB)
#define DEVICE_BYTES (256 * MiB)

enum { FRESH, CAPTURING, CAPTURED };

/* The known defects (RECAP_FUZZ_KNOWN). */
enum {
  FUZZ_KNOWN_PINNED_NULL = 1,        /* (a) skip the reserve that would write through NULL */
  FUZZ_KNOWN_REBIND_RECAPTURE = 2,   /* (b) accept INVALID_ARGUMENT at such a recapture's end */
  FUZZ_KNOWN_REGION_INVALIDATED = 4, /* (c) invalidate no capture while a region is open */
  FUZZ_KNOWN_SLEEP_DOUBLE_FAULT = 8, /* (d) arm no second fault behind a sleep's or wake's */
  FUZZ_KNOWN_VMM_INTERIOR = 16       /* (e) skip the interior-chunk check of empty_cache */
};

typedef struct slot {
  unsigned char *p;
  size_t usable;
  int pool;        /* index into st.pools */
  uint8_t pattern; /* every byte of the block */
  bool known;      /* the pattern holds (not discarded since it was written) */
  bool side;       /* allocated by op_vmm_interior, on the second stream */
} slot_t;

typedef struct pool {
  recap_pool_id_t id;
  int state;      /* a recap_pool_state_t, as the model has it */
  bool holds_buf; /* asleep OFFLOADED with a pinned copy */
  bool residue;   /* a wake failed and its undo could not unmap: a chunk may stay mapped */
} pool_t;

typedef struct level {
  int kind, branches, branch;
} level_t;

typedef struct graph {
  recap_graph_t h;
  int state, pool;
  bool rebind, recapturing, invalid;
  const void *sites[SITES]; /* default-pool addresses its kernels hold */
  size_t site_size[SITES];
  int nsites, saved_nsites;
  const void *saved_sites[SITES];
  size_t saved_size[SITES];
  bool saved_rebind;
  level_t levels[DEPTH];
  int depth;
} graph_t;

struct fuzz_part2_state {
  const uint8_t *data;
  size_t size, at;
  recap_stream_t cap, other;
  slot_t slots[SLOTS];
  graph_t graphs[GRAPHS];
  pool_t pools[POOLS];
  int npools;
  recap_nccl_comm_t comm;
  /* Pinned buffers kept for OFFLOAD sleeps (docs/sleep.md), as the model has them. */
  size_t kept[MAX_KEPT];
  bool kept_reserved[MAX_KEPT];
  int nkept;
  bool pinned_unknown; /* a call the model cannot follow touched them */
  bool keep_pinned;
  bool device_used; /* recap has used the device (recap_sleep then sleeps its default pool) */
  uint64_t fault_at[RECAP__FAKE_FAULT_KINDS];
  uint64_t fired;
  int op_index;
};
extern struct fuzz_part2_state st;

extern bool tracing;
extern unsigned known;

/* Helpers called for nearly every input byte and every call: defined here so that each file
 * inlines them. */
static inline uint8_t byte(void) { return st.at < st.size ? st.data[st.at++] : 0; }
static inline void call_begins(void) { st.fired = 0; }
static inline bool fired(recap__fake_fault_t kind) { return st.fired & (1ull << kind); }
static inline bool asleep(int pool) { return st.pools[pool].state != RECAP_POOL_AWAKE; }
static inline int pick_pool(void) { return byte() % st.npools; }

/* fuzz_part2_model.c */
void die(const char *what, recap_status_t status);
void arm(recap__fake_fault_t kind, uint64_t n);
void disarm_all(void);
void call_ends(void);
bool status(recap_status_t s, recap_status_t allowed, const char *call);
int capturing_graph(void);
int add_pool(recap_pool_id_t id);
void write_pattern(slot_t *s, uint8_t pattern);
int read_state(int pool);
void check_invariants(void);
void kept_remove(int i);
void kept_free_unreserved(void);
int kept_smallest(size_t bytes, bool unreserved_only);
void option_off_frees(void);
void check_pinned(void);

/* fuzz_part2_alloc.c */
void op_malloc(void);
void op_free(void);
void op_empty_cache(void);
void op_vmm_interior(void);

/* fuzz_part2_sleep.c */
void resync(int pool, int was);
void slept(int pool, int mode);
int pool_known(int pool);
void sleep_pool(int pool, int mode);
void wake_pool(int pool);
void op_sleep(void);
void op_sleep_all(void);
void op_pinned_reserve(void);
void op_option(void);

/* fuzz_part2_faults.c */
void op_fault(void);
void op_double_fault(void);

/* fuzz_part2_graphs.c */
void op_graph(void);
void op_capture_end(void);
void op_invalidate(void);
void op_kernel(void);
void op_replay(void);
void op_rebind(void);
void op_region(void);
void op_nccl(void);

/* fuzz_part2_sets.c */
void op_graph_set(void);

#endif
