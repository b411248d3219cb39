/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * liveness.c — input-liveness checks (recap/liveness.h): which blocks of recap's allocator a
 * graph reads from outside its pool, recorded at capture end and checked before every replay.
 *
 * At capture end (a graph hook's `captured`), the device seam lists every pointer-like value
 * the template's nodes read: each kernel's argument words (the layout from the driver), each
 * copy's ends and each memset's destination. One batch lookup in the allocator turns them into
 * blocks; blocks of the graph's own pool are dropped, the rest are kept once each, sorted by
 * address, with their generation. Before every replay (the hook's `before_replay`) one batch
 * call checks them all under one allocator lock: an exact-address hash lookup per block. Only
 * when one is dead does the slow path run: a second pass to say which, the names, the sites.
 *
 * After a rebind (src/rebind/, through the graph's events `exec_patching` and `exec_patched`)
 * the blocks are found again from the sites as the rebind leaves them: replays then watch the
 * new buffers.
 *
 * A graph embedded in another capture (a replay there, src/graph/embed.c) hands a copy of its
 * checks to the outer capture, which checks them at each of its replays and hands them on when
 * it is embedded in turn (the hooks' embed_begin).
 *
 * A graph captured without the option gets no hook, so its replays pay nothing.
 */
#define _GNU_SOURCE /* dladdr, to name allocation sites */

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "core/text.h"
#include "debug/liveness_internal.h"
#include "graph/graph_internal.h"
#include "recap/liveness.h"

typedef struct liveness {
  recap__block_watch_t *watch;    /* what replays check, sorted by address */
  recap_liveness_input_t *inputs; /* the same blocks, described; kernel names owned */
  size_t count;
  struct liveness *next; /* the list a rebind under way would leave (hook_exec_patching) */
} liveness_t;

/* ------------------------------------------------------------------------------------------
 * Debug switch (allocation sites)
 * ---------------------------------------------------------------------------------------- */

void recap_liveness_debug_enable(int enabled) { recap__alloc_sites_enable(enabled); }

int recap_liveness_debug_enabled(void) { return recap__alloc_sites_enabled(); }

/* ------------------------------------------------------------------------------------------
 * Capture end: find the inputs
 * ---------------------------------------------------------------------------------------- */

/* One block found among the reads, before duplicates are merged. */
typedef struct candidate {
  recap__block_ref_t ref;
  size_t node;
  recap__read_kind_t kind;
} candidate_t;

static int compare_candidates(const void *x, const void *y) {
  const candidate_t *a = x, *b = y;
  uintptr_t pa = (uintptr_t)a->ref.base, pb = (uintptr_t)b->ref.base;
  if (pa != pb) return (pa > pb) - (pa < pb);
  return (a->node > b->node) - (a->node < b->node);
}

static const char *type_of_read(recap__read_kind_t kind) {
  switch (kind) {
    case RECAP__READ_KERNEL_ARG: return recap__node_type_name(RECAP_NODE_KERNEL);
    case RECAP__READ_COPY_SRC:
    case RECAP__READ_COPY_DST: return recap__node_type_name(RECAP_NODE_MEMCPY);
    case RECAP__READ_MEMSET_DST: return recap__node_type_name(RECAP_NODE_MEMSET);
  }
  return recap__node_type_name(RECAP_NODE_OTHER);
}

static void liveness_clear(liveness_t *l) {
  for (size_t i = 0; i < l->count; i++)
    recap__host_free((void *)(uintptr_t)l->inputs[i].kernel_name);
  recap__host_free(l->inputs);
  recap__host_free(l->watch);
  l->inputs = NULL;
  l->watch = NULL;
  l->count = 0;
}

/* Node types and kernel names, from the inspection of the template. A debug aid for the
 * messages: when the driver cannot name kernels, the inputs keep the kinds of their reads. */
static void name_inputs(liveness_t *l, recap_cuda_graph_t template_graph) {
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  if (recap__device()->graph_inspect(template_graph, &info) == RECAP_SUCCESS) {
    for (size_t i = 0; i < l->count; i++) {
      recap_liveness_input_t *in = &l->inputs[i];
      if (in->node >= info.node_count) continue;
      in->node_type = recap__node_type_name(info.nodes[in->node].type);
      const char *name = info.nodes[in->node].kernel_name;
      if (name) in->kernel_name = recap__copy_string(name);
    }
  } else {
    RECAP__DEBUG("input liveness: the nodes could not be named (%s)", recap_last_error());
  }
  recap__graph_info_clear(&info);
  recap__error_restore(&saved);
}

/* The inputs among n reads of the template's nodes (graph_reads' list). */
static recap_status_t scan_reads(liveness_t *l, recap_graph_t graph,
                                 recap_cuda_graph_t template_graph,
                                 const recap__graph_read_t *reads, size_t n) {
  recap_status_t s = RECAP_SUCCESS;
  const void **ptrs = recap__host_malloc((n ? n : 1) * sizeof *ptrs);
  recap__block_ref_t *refs = recap__host_malloc((n ? n : 1) * sizeof *refs);
  bool *found = recap__host_malloc((n ? n : 1) * sizeof *found);
  candidate_t *cands = recap__host_malloc((n ? n : 1) * sizeof *cands);
  if (!ptrs || !refs || !found || !cands) {
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "input liveness: out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) ptrs[i] = reads[i].ptr;
  recap__alloc_find_many(ptrs, n, refs, found);

  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    /* The graph's own pool: its intermediates, and outputs of graphs that share the pool; and
     * the pools of graphs it embedded: their intermediates (the embedded graphs' own checks
     * cover their inputs). */
    if (!found[i] || recap__pool_id_equal(refs[i].pool, graph->pool) ||
        recap__graph_embeds_pool(graph, refs[i].pool))
      continue;
    cands[m++] = (candidate_t){refs[i], reads[i].node, reads[i].kind};
  }
  qsort(cands, m, sizeof *cands, compare_candidates);

  size_t blocks = 0;
  for (size_t i = 0; i < m; i++)
    if (i == 0 || cands[i].ref.base != cands[i - 1].ref.base) blocks++;
  if (blocks) {
    l->watch = recap__host_calloc(blocks, sizeof *l->watch);
    l->inputs = recap__host_calloc(blocks, sizeof *l->inputs);
    if (!l->watch || !l->inputs) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "input liveness: out of host memory");
      goto done;
    }
  }
  for (size_t i = 0; i < m; i++) {
    const candidate_t *c = &cands[i];
    if (i > 0 && c->ref.base == cands[i - 1].ref.base) {
      /* Another read of the same block: count its node once. */
      if (c->node != cands[i - 1].node) l->inputs[l->count - 1].reader_count++;
      continue;
    }
    l->watch[l->count] = (recap__block_watch_t){c->ref.base, c->ref.generation};
    l->inputs[l->count] = (recap_liveness_input_t){
        .size = sizeof(recap_liveness_input_t),
        .base = c->ref.base,
        .bytes = c->ref.size,
        .generation = c->ref.generation,
        .node = c->node,
        .reader_count = 1,
        .node_type = type_of_read(c->kind),
        .kernel_name = NULL,
        .alloc_site = c->ref.alloc_site,
        .freed_before_capture_end = !c->ref.allocated,
    };
    l->count++;
  }
  if (l->count) name_inputs(l, template_graph);

done:
  recap__host_free(ptrs);
  recap__host_free(refs);
  recap__host_free(found);
  recap__host_free(cands);
  if (s != RECAP_SUCCESS) liveness_clear(l);
  return s;
}

static recap_status_t scan(liveness_t *l, recap_graph_t graph, recap_cuda_graph_t template_graph) {
  recap__graph_read_t *reads = NULL;
  size_t n = 0;
  RECAP__CHECK(recap__device()->graph_reads(template_graph, &reads, &n));
  recap_status_t s = scan_reads(l, graph, template_graph, reads, n);
  recap__host_free(reads);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Replay: check
 * ---------------------------------------------------------------------------------------- */

/* " (in symbol+0x1c, libfoo.so)" for a code address, when the dynamic linker can say. */
static void describe_site(char *out, size_t size, void *site) {
  Dl_info info;
  memset(&info, 0, sizeof info);
  if (site && dladdr(site, &info) && (info.dli_sname || info.dli_fname)) {
    const char *file = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    file = file ? file + 1 : info.dli_fname;
    if (info.dli_sname)
      snprintf(out, size, " (%s+0x%" PRIxPTR ", %s)", info.dli_sname,
               (uintptr_t)site - (uintptr_t)info.dli_saddr, file ? file : "?");
    else
      snprintf(out, size, " (%s+0x%" PRIxPTR ")", file,
               (uintptr_t)site - (uintptr_t)info.dli_fbase);
  } else {
    out[0] = '\0';
  }
}

/* One dead input, as a line of the report. */
static int describe_dead(char *out, size_t size, const recap_liveness_input_t *in) {
  recap__block_ref_t now;
  bool reused = recap__alloc_find(in->base, &now) && now.allocated && now.base == in->base;
  const char *fate = in->freed_before_capture_end ? "freed before the capture ended"
                     : reused                     ? "freed and handed out again"
                                                  : "freed";
  char reader[320];
  if (in->kernel_name)
    snprintf(reader, sizeof reader, "node %zu (kernel %.240s)", in->node, in->kernel_name);
  else
    snprintf(reader, sizeof reader, "node %zu (%s)", in->node, in->node_type);
  int n = snprintf(out, size, "\n  %p (%zu bytes) read by %s%s: %s", in->base, in->bytes, reader,
                   in->reader_count > 1 ? " and others" : "", fate);
  if (n < 0 || (size_t)n >= size) return n;
  recap__free_record_t freed;
  bool have_free = recap__alloc_free_record(in->base, in->generation, &freed);
  void *alloc_site = in->alloc_site ? in->alloc_site : have_free ? freed.alloc_site : NULL;
  if (alloc_site || have_free) {
    char where[256] = "";
    describe_site(where, sizeof where, alloc_site);
    int k = alloc_site
                ? snprintf(out + n, size - (size_t)n, "; allocated at %p%s", alloc_site, where)
                : 0;
    if (k > 0) n += k;
    if (have_free && freed.free_site && (size_t)n < size) {
      describe_site(where, sizeof where, freed.free_site);
      k = snprintf(out + n, size - (size_t)n, "; freed at %p%s", freed.free_site, where);
      if (k > 0) n += k;
    }
  }
  return n;
}

static recap_status_t report_dead(const liveness_t *l, const char *function) {
  bool *dead = recap__host_calloc(l->count, sizeof *dead);
  if (!dead)
    return recap__error(RECAP_ERROR_DEAD_INPUT,
                        "%s: an input of the graph was freed (no host memory to say which)",
                        function);
  size_t dead_count = recap__alloc_count_dead(l->watch, l->count, dead);
  if (dead_count == 0) { /* brought back to life in between (another thread allocated) */
    recap__host_free(dead);
    return RECAP_SUCCESS;
  }
  /* The message holds what fits; every dead input also goes to the log when it does not. */
  char message[3600];
  int used = snprintf(message, sizeof message,
                      "%s: %zu of the graph's %zu external input%s %s freed since the capture; "
                      "replaying would read freed memory. Keep every buffer the graph reads "
                      "alive as long as the graph is replayed:",
                      function, dead_count, l->count, l->count == 1 ? "" : "s",
                      dead_count == 1 ? "was" : "were");
  size_t listed = 0;
  bool truncated = false;
  char line[1024];
  for (size_t i = 0; i < l->count; i++) {
    if (!dead[i]) continue;
    int n = describe_dead(line, sizeof line, &l->inputs[i]);
    if (n < 0) continue;
    if (!truncated && used >= 0 && (size_t)used + (size_t)n + 96 < sizeof message) {
      memcpy(message + used, line, (size_t)n + 1);
      used += n;
      listed++;
    } else {
      truncated = true;
    }
  }
  if (truncated) {
    snprintf(message + used, sizeof message - (size_t)used,
             "\n  ... and %zu more (the whole list went to the log; recap_graph_liveness_inputs "
             "has every input)",
             dead_count - listed);
    recap__log(RECAP_LOG_LEVEL_ERROR, "%s: every dead input of the graph:", function);
    for (size_t i = 0; i < l->count; i++)
      if (dead[i] && describe_dead(line, sizeof line, &l->inputs[i]) > 0)
        recap__log(RECAP_LOG_LEVEL_ERROR, "%s", line + 1);
  }
  recap__host_free(dead);
  if (!recap__alloc_sites_enabled())
    return recap__error(RECAP_ERROR_DEAD_INPUT,
                        "%s\n(set RECAP_LIVENESS_DEBUG=1 to see where each block was allocated "
                        "and freed)",
                        message);
  return recap__error(RECAP_ERROR_DEAD_INPUT, "%s", message);
}

static recap_status_t check(const liveness_t *l, const char *function) {
  if (l->count == 0 || recap__alloc_count_dead(l->watch, l->count, NULL) == 0) return RECAP_SUCCESS;
  return report_dead(l, function);
}

/* ------------------------------------------------------------------------------------------
 * Hooks, attach, and the public accessors
 * ---------------------------------------------------------------------------------------- */

static recap_status_t hook_before_replay(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  (void)graph;
  (void)stream;
  return check(ctx, "recap_graph_replay");
}

static recap_status_t hook_captured(void *ctx, recap_graph_t graph, recap__captured_t *captured) {
  liveness_t *l = ctx;
  liveness_clear(l);
  return scan(l, graph, captured->template_graph);
}

static void drop_next(liveness_t *l) {
  if (!l->next) return;
  liveness_clear(l->next);
  recap__host_free(l->next);
  l->next = NULL;
}

/* Whether [base, base + size) meets one of the ranges. */
static bool meets(const void *base, size_t size, const recap__patch_range_t *to, size_t moves) {
  uintptr_t b = (uintptr_t)base, e = b + size;
  for (size_t j = 0; j < moves; j++) {
    uintptr_t tb = (uintptr_t)to[j].base, te = tb + to[j].size;
    if (b < te && tb < e) return true;
  }
  return false;
}

/* A rebind is about to move sites (rebind.c): the blocks the graph will read are found anew
 * from the sites as they will be, so that replays watch the new buffers and no longer an old one
 * that no site points into. A block watched already, that the rebind does not move sites into,
 * keeps the generation it had (freed and handed out again since the capture, it stays dead); a
 * block the rebind moves sites into is watched from now on, as it is now. Staged in l->next
 * until exec_patched. */
static recap_status_t hook_exec_patching(void *ctx, recap_graph_t graph,
                                         const recap__graph_read_t *sites, size_t count,
                                         const recap__patch_range_t *to, size_t moves) {
  liveness_t *l = ctx;
  drop_next(l);
  liveness_t *next = recap__host_calloc(1, sizeof *next);
  if (!next) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "input liveness: out of host memory");
  recap_status_t s = scan_reads(next, graph, graph->template_graph, sites, count);
  if (s != RECAP_SUCCESS) {
    recap__host_free(next);
    return s;
  }
  for (size_t i = 0, j = 0; i < next->count; i++) {
    while (j < l->count && (uintptr_t)l->watch[j].base < (uintptr_t)next->watch[i].base) j++;
    if (j < l->count && l->watch[j].base == next->watch[i].base &&
        !meets(next->inputs[i].base, next->inputs[i].bytes, to, moves)) {
      next->watch[i].generation = l->watch[j].generation;
      next->inputs[i].generation = l->inputs[j].generation;
      next->inputs[i].freed_before_capture_end = l->inputs[j].freed_before_capture_end;
    }
  }
  l->next = next;
  return RECAP_SUCCESS;
}

static void hook_exec_patched(void *ctx, recap_graph_t graph, bool applied) {
  (void)graph;
  liveness_t *l = ctx;
  if (!applied || !l->next) {
    drop_next(l);
    return;
  }
  liveness_t *next = l->next;
  l->next = NULL;
  liveness_clear(l);
  l->watch = next->watch;
  l->inputs = next->inputs;
  l->count = next->count;
  recap__host_free(next);
}

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  drop_next(ctx);
  liveness_clear(ctx);
  recap__host_free(ctx);
}

/* ------------------------------------------------------------------------------------------
 * Embedding: the outer graph checks the embedded graphs' inputs
 * ---------------------------------------------------------------------------------------- */

/* What an outer capture checks at each of its replays for the graphs it embedded (and those
 * they embedded): a copy of each one's checks as they stood at the embedding, which is what
 * the child node (a copy of the template) reads. Attached to the outer capture through the
 * hooks, released with what it captured. */
typedef struct embedded_checks {
  liveness_t *v;
  size_t count, capacity;
} embedded_checks_t;

static const char embedded_function[] = "recap_graph_replay (a graph embedded in this one)";

static recap_status_t embedded_before_replay(void *ctx, recap_graph_t graph,
                                             recap_stream_t stream) {
  (void)graph;
  (void)stream;
  const embedded_checks_t *e = ctx;
  for (size_t i = 0; i < e->count; i++) RECAP__CHECK(check(&e->v[i], embedded_function));
  return RECAP_SUCCESS;
}

/* Drop the newest `n` copies of e. */
static void embedded_pop(embedded_checks_t *e, size_t n) {
  while (n-- && e->count) liveness_clear(&e->v[--e->count]);
}

static void embedded_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  embedded_checks_t *e = ctx;
  embedded_pop(e, e->count);
  recap__host_free(e->v);
  recap__host_free(e);
}

/* Defined below the functions it names, which attach it. */
static const recap__graph_hooks_t embedded_hooks;

static recap_status_t embed_oom(void) {
  return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                      "recap_graph_replay: out of host memory to embed the graph's input-liveness "
                      "checks into the capture");
}

/* Append to outer's copies (attached now if it has none) a copy of each of `n` checks. */
static recap_status_t embedded_append(recap_graph_t outer, const liveness_t *from, size_t n) {
  embedded_checks_t *e = recap__graph_hook_ctx(outer, &embedded_hooks);
  bool attached = false;
  if (!e) {
    e = recap__host_calloc(1, sizeof *e);
    if (!e) return embed_oom();
    recap_status_t s = recap__graph_add_hook(outer, &embedded_hooks, e);
    if (s != RECAP_SUCCESS) {
      recap__host_free(e);
      return s;
    }
    attached = true;
  }
  size_t start = e->count;
  recap_status_t s = RECAP_SUCCESS;
  if (e->capacity - e->count < n) {
    size_t capacity = e->count + n + 4;
    liveness_t *grown = recap__host_realloc(e->v, capacity * sizeof *grown);
    if (!grown) s = embed_oom();
    if (grown) {
      e->v = grown;
      e->capacity = capacity;
    }
  }
  for (size_t i = 0; s == RECAP_SUCCESS && i < n; i++) {
    liveness_t *to = &e->v[e->count];
    *to = (liveness_t){.count = from[i].count};
    if (from[i].count) {
      to->watch = recap__host_malloc(from[i].count * sizeof *to->watch);
      to->inputs = recap__host_malloc(from[i].count * sizeof *to->inputs);
    }
    e->count++;
    if (from[i].count && (!to->watch || !to->inputs)) {
      to->count = 0; /* no kernel names to free */
      s = embed_oom();
      break;
    }
    memcpy(to->watch, from[i].watch, from[i].count * sizeof *to->watch);
    memcpy(to->inputs, from[i].inputs, from[i].count * sizeof *to->inputs);
    for (size_t j = 0; j < to->count; j++) {
      const char *name = from[i].inputs[j].kernel_name;
      /* A name that cannot be copied leaves the input described by its node type. */
      to->inputs[j].kernel_name = name ? recap__copy_string(name) : NULL;
    }
  }
  if (s != RECAP_SUCCESS) {
    embedded_pop(e, e->count - start);
    if (attached) {
      recap__graph_remove_hook(outer, &embedded_hooks, e);
      embedded_release(e, outer);
    }
  }
  return s;
}

/* outer's capture embeds a graph whose replays check its inputs (its own, or those of graphs it
 * embedded): outer's replays check them too. A refused embedding takes the copies back (they
 * are the newest: the hooks are undone newest first). */
static recap_status_t hook_embed_begin(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                       recap_stream_t stream) {
  (void)graph;
  (void)stream;
  return embedded_append(outer, ctx, 1);
}

static recap_status_t embedded_embed_begin(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                           recap_stream_t stream) {
  (void)graph;
  (void)stream;
  const embedded_checks_t *e = ctx;
  return embedded_append(outer, e->v, e->count);
}

static void embed_undo(recap_graph_t outer, size_t n) {
  embedded_checks_t *e = recap__graph_hook_ctx(outer, &embedded_hooks);
  if (e) embedded_pop(e, n);
}

static recap_status_t hook_embed_end(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                     recap_stream_t stream, bool added) {
  (void)ctx;
  (void)graph;
  (void)stream;
  if (!added) embed_undo(outer, 1);
  return RECAP_SUCCESS;
}

static recap_status_t embedded_embed_end(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                         recap_stream_t stream, bool added) {
  (void)graph;
  (void)stream;
  if (!added) embed_undo(outer, ((const embedded_checks_t *)ctx)->count);
  return RECAP_SUCCESS;
}

static const recap__graph_hooks_t embedded_hooks = {
    .name = "embedded graphs' input-liveness checks",
    .embed_begin = embedded_embed_begin,
    .embed_end = embedded_embed_end,
    .before_replay = embedded_before_replay,
    .release = embedded_release,
};

static const recap__graph_hooks_t liveness_hooks = {
    .name = "input-liveness checks (check_input_liveness)",
    .embed_begin = hook_embed_begin,
    .embed_end = hook_embed_end,
    .before_replay = hook_before_replay,
    .release = hook_release,
    .captured = hook_captured,
    .exec_patching = hook_exec_patching,
    .exec_patched = hook_exec_patched,
};

recap_status_t recap__liveness_probe(void) {
  recap_status_t s = recap__device()->graph_reads_check();
  if (s == RECAP_SUCCESS) return s;
  recap__saved_error_t cause; /* recap__error writes over the thread's last error */
  recap__error_save(&cause);
  return recap__error(s,
                      "recap_graph_capture_begin: check_input_liveness needs to read kernels' "
                      "argument layouts from the driver, which this one cannot give: %s",
                      cause.message);
}

recap_status_t recap__liveness_attach(recap_graph_t graph) {
  liveness_t *l = recap__host_calloc(1, sizeof *l);
  if (!l) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "input liveness: out of host memory");
  recap_status_t s = recap__graph_add_hook(graph, &liveness_hooks, l);
  if (s != RECAP_SUCCESS) recap__host_free(l);
  return s;
}

/* The graph's checks, once its capture has ended. */
static recap_status_t captured_state(recap_graph_t graph, const char *function, liveness_t **l) {
  RECAP__CHECK(recap__graph_check(graph, function));
  *l = recap__graph_hook_ctx(graph, &liveness_hooks);
  if (!*l || graph->state != RECAP__GRAPH_CAPTURED)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: the graph holds no capture made with check_input_liveness (set it "
                        "in recap_capture_options_t, and call this after capture_end)",
                        function);
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_liveness_inputs(recap_graph_t graph, recap_liveness_input_t *inputs,
                                           size_t capacity, size_t *count) {
  static const char fn[] = "recap_graph_liveness_inputs";
  RECAP__ARG(count != NULL, "%s: count is NULL", fn);
  RECAP__ARG(inputs != NULL || capacity == 0,
             "%s: inputs is NULL and capacity is %zu (pass capacity 0 to ask only for the count)",
             fn, capacity);
  *count = 0;
  liveness_t *l;
  RECAP__CHECK(captured_state(graph, fn, &l));
  size_t n = l->count < capacity ? l->count : capacity;
  for (size_t i = 0; i < n; i++)
    RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(&inputs[i], recap_liveness_input_t,
                                          freed_before_capture_end, fn, "inputs[i].size",
                                          "RECAP_LIVENESS_INPUT_INIT"));
  for (size_t i = 0; i < n; i++) {
    size_t size = inputs[i].size;
    recap_liveness_input_t in = l->inputs[i];
    in.size = size;
    memcpy(&inputs[i], &in, size);
  }
  *count = l->count;
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_check_inputs(recap_graph_t graph) {
  liveness_t *l;
  RECAP__CHECK(captured_state(graph, "recap_graph_check_inputs", &l));
  return check(l, "recap_graph_check_inputs");
}
