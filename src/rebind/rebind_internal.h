/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind_internal.h — the rebind state a graph captured with options.rebind carries, shared by
 * sites.c (declared buffers, the sites of a graph indexed by the address they hold, the hooks
 * that build that index at capture end) and rebind.c (the rebind itself, which moves sites and
 * re-sorts the index).
 */
#ifndef RECAP_REBIND_INTERNAL_H
#define RECAP_REBIND_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "graph/graph_internal.h"
#include "recap/rebind.h"

/* [base, end): a declared buffer, or a move's range. */
typedef struct span {
  uintptr_t base, end;
} span_t;

typedef struct spans {
  span_t *v; /* sorted by base, disjoint */
  size_t count, capacity;
} spans_t;

/* One entry of the value index. */
typedef struct entry {
  uintptr_t value;
  size_t site;
} entry_t;

typedef struct rebind {
  recap_rebind_mode_t mode;
  spans_t declared; /* the buffers declared during the capture that built the plan */
  /* What the capture under way declares, and its mode: they become the graph's at `captured`,
   * so that a recapture that fails leaves the previous ones. */
  pthread_mutex_t lock; /* declarations may come from the threads working on the capture */
  spans_t pending;
  recap_rebind_mode_t pending_mode;

  recap__patch_plan_t plan;
  const recap__graph_read_t *sites; /* owned by the plan; ptr fields kept current by it */
  size_t site_count;
  entry_t *index;              /* site_count pairs, sorted by (value, site) */
  entry_t *scratch;            /* site_count pairs: the re-sort after a rebind */
  recap__patch_t *patches;     /* site_count patches: the most one batch can make */
  recap__graph_read_t *staged; /* site_count reads: the sites as a rebind would leave them, for
                                  the modules' exec_patching hooks (allocated on first need) */
  recap_graph_info_t *names;   /* the template's nodes, read for messages only, lazily */

  /* Graph parameters (params.c). The parameters this capture declares, in order (under lock
   * while the capture runs), and once it is captured: where each one's sites lie in `writes`
   * (every site of every parameter, grouped by parameter, each group in node order, bits the
   * parameter's value), scratch space for a batch, and which sites of the rebind index hold a
   * parameter's value or a value set by recap_graph_kernel_arg_set (pinned: a rebind never
   * moves them; their index entries hold UINTPTR_MAX, after every address). */
  struct param_decl *params;
  size_t param_count, param_cap;
  struct param_use *uses;
  size_t use_count;
  recap__arg_write_t *writes, *batch, *merged;
  size_t write_count;
  bool *pinned;
  /* The capture applies its parameters on the GPU (params_device.c, which sets this at capture
   * end and owns it): a set stages the value there instead of patching the executable. */
  struct params_device *device;
} rebind_t;

/* A parameter as one capture declared it: its initial value and its placeholder belong to
 * that capture, so that a recapture that fails leaves the held capture's own. */
typedef struct param_decl {
  struct recap_param *param;
  uint64_t bits, placeholder;
} param_decl_t;

/* Where one parameter's sites lie in rebind_t.writes (uses[i] is params[i]'s). */
typedef struct param_use {
  struct recap_param *param;
  size_t first, count;
  uint64_t placeholder;
} param_use_t;

/* What params.c adds to a capture's end, on the plan `next` of the new template (sites.c's
 * `captured` hook, before the index is built): find the placeholders of the parameters the
 * capture declared (a parameter found nowhere, or ambiguously, fails the capture naming it),
 * write every parameter's value and the graph's recorded argument and shape sets into the plan
 * (not into an executable), and mark the pinned sites. Fills next's parameter fields; on failure
 * what it allocated is freed. */
recap_status_t recap__params_captured(recap_graph_t graph, rebind_t *next);
/* recap_graph_inspect read the template into info (sites.c's `inspect` hook): give each
 * kernel node the parameters it takes ("name = value") and what was set on it alone
 * (recap/inspect.h, params and set_alone). */
recap_status_t recap__params_inspect(recap_graph_t graph, rebind_t *r, recap_graph_info_t *info);
/* Free the parameter fields of r that belong to its plan (not `declared`). */
void recap__params_plan_free(rebind_t *r);
/* The rebind state of graph for patching its executable outside a rebind: a captured graph,
 * not being recaptured, patchable (rebind on, options.patchable, or a parameter declared);
 * INVALID_USAGE naming fn otherwise. */
recap_status_t recap__rebind_patchable_state(recap_graph_t graph, const char *fn, rebind_t **r);
/* Attach the rebind hooks for patching only (mode OFF: rebinds refused) to a graph whose
 * capture is under way, unless they are attached already. */
recap_status_t recap__rebind_attach_patchable(recap_graph_t graph);
/* The rebind state of the capture under way, or NULL. */
rebind_t *recap__rebind_of(recap_graph_t graph);
/* Sort r's index again after sites were pinned (their entries set to UINTPTR_MAX). */
void recap__rebind_resort(rebind_t *r);
/* The conditional nodes (regions on the device path) of the template, bodies' own included;
 * 0 when the driver cannot say. For messages. */
size_t recap__rebind_region_count(rebind_t *r, recap_graph_t graph);
/* "kernel axpy" for node `node` of the template, or "" when the driver cannot say; for
 * messages. */
const char *recap__rebind_kernel_name(rebind_t *r, recap_graph_t graph, size_t node);

/* For capture.c, where the capture options turn rebinding on: attach the rebind hooks with mode
 * (AUTO or DECLARED) to a graph whose capture just began. Attaching to a graph that has them
 * already (a recapture) sets the mode and forgets the declarations of the previous capture. */
recap_status_t recap__rebind_attach(recap_graph_t graph, recap_rebind_mode_t mode);

/* The first span whose end is above p (the one holding p, if any); the span holding p, or
 * NULL. */
size_t recap__rebind_spans_find(const spans_t *s, uintptr_t p);
const span_t *recap__rebind_declared_at(const spans_t *s, uintptr_t p);

/* The first index entry whose value is at least p. */
size_t recap__rebind_lower_bound(const rebind_t *r, uintptr_t p);

/* The sites of index entries [lo, hi), for a message: the first few, and how many more. */
void recap__rebind_describe_sites(char *out, size_t size, rebind_t *r, recap_graph_t graph,
                                  size_t lo, size_t hi);

/* The graph's rebind state, once its capture has ended (RECAP_ERROR_INVALID_USAGE naming fn
 * otherwise, or when the graph was captured with rebind OFF). */
recap_status_t recap__rebind_captured_state(recap_graph_t graph, const char *fn, rebind_t **r);

/* The range [old, old + *size) of a move or a query; size 0 takes the declared buffer or recap's
 * allocation holding old, from old to its end. what names it in messages. */
recap_status_t recap__rebind_resolve_range(const rebind_t *r, const char *fn, const char *what,
                                           const void *old, size_t *size, span_t *range);

#endif /* RECAP_REBIND_INTERNAL_H */
