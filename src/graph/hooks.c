/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hooks.c — the hooks through which the modules above the graph core attach to a graph
 * (hooks.h): attaching, finding a module's context again, raising each event, releasing.
 */
#include <pthread.h>

#include "core/error.h"
#include "core/host.h"
#include "graph/graph_internal.h"

/* Hooks attach during a capture, possibly from several threads working on its streams. */
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned events_of(const recap__graph_hooks_t *hooks) {
  unsigned events = 0;
  if (hooks->before_replay || hooks->launch || hooks->replay_failed || hooks->replay_done)
    events |= RECAP__GRAPH_EVENTS_REPLAY;
  if (hooks->exec_patching) events |= RECAP__GRAPH_EVENTS_EXEC_PATCHING;
  return events;
}

/* The set's events and launchers, from its entries. */
static void summarize(recap__graph_hook_set_t *set) {
  set->events = 0;
  set->launcher = set->exec_launcher = 0;
  for (size_t i = 0; i < set->count; i++) {
    set->events |= events_of(set->entries[i].hooks);
    if (set->entries[i].hooks->launch) set->launcher = i + 1;
    if (set->entries[i].hooks->launch_exec) set->exec_launcher = i + 1;
  }
}

static recap_status_t add_to(recap__graph_hook_set_t *set, const recap__graph_hooks_t *hooks,
                             void *ctx) {
  if ((hooks->launch && set->launcher) || (hooks->launch_exec && set->exec_launcher))
    return recap__error(RECAP_ERROR_INTERNAL, "graph hooks: a second hook supplies a launch");
  if (set->count == set->capacity) {
    size_t capacity = set->capacity ? set->capacity * 2 : 4;
    recap__graph_hook_entry_t *grown = recap__host_realloc(set->entries, capacity * sizeof *grown);
    if (!grown) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "graph hooks: out of host memory");
    set->entries = grown;
    set->capacity = capacity;
  }
  set->entries[set->count].hooks = hooks;
  set->entries[set->count].ctx = ctx;
  set->count++;
  summarize(set);
  return RECAP_SUCCESS;
}

static void *ctx_in(const recap__graph_hook_set_t *set, const recap__graph_hooks_t *hooks) {
  for (size_t i = 0; i < set->count; i++)
    if (set->entries[i].hooks == hooks) return set->entries[i].ctx;
  return NULL;
}

recap_status_t recap__graph_add_hook(recap_graph_t g, const recap__graph_hooks_t *hooks,
                                     void *ctx) {
  pthread_mutex_lock(&hook_lock);
  recap_status_t s =
      g->state != RECAP__GRAPH_CAPTURING
          ? recap__error(RECAP_ERROR_INVALID_USAGE, "graph hooks attach only during a capture")
          : add_to(&g->hooks, hooks, ctx);
  pthread_mutex_unlock(&hook_lock);
  return s;
}

void recap__graph_remove_hook(recap_graph_t g, const recap__graph_hooks_t *hooks, void *ctx) {
  pthread_mutex_lock(&hook_lock);
  recap__graph_hook_set_t *set = &g->hooks;
  for (size_t i = 0; i < set->count; i++) {
    if (set->entries[i].hooks != hooks || set->entries[i].ctx != ctx) continue;
    for (size_t j = i + 1; j < set->count; j++) set->entries[j - 1] = set->entries[j];
    set->count--;
    summarize(set);
    break;
  }
  pthread_mutex_unlock(&hook_lock);
}

void *recap__graph_hook_ctx(recap_graph_t g, const recap__graph_hooks_t *hooks) {
  pthread_mutex_lock(&hook_lock);
  void *ctx = ctx_in(&g->hooks, hooks);
  pthread_mutex_unlock(&hook_lock);
  return ctx;
}

recap_status_t recap__graph_attach(recap_graph_t g, const recap__graph_hooks_t *hooks, void *ctx) {
  return add_to(&g->attached, hooks, ctx);
}

void *recap__graph_attached_ctx(recap_graph_t g, const recap__graph_hooks_t *hooks) {
  return ctx_in(&g->attached, hooks);
}

void recap__graph_reattach(recap_graph_t g, void *ctx, const recap__graph_hooks_t *hooks) {
  for (size_t i = 0; i < g->attached.count; i++)
    if (g->attached.entries[i].ctx == ctx) g->attached.entries[i].hooks = hooks;
  summarize(&g->attached);
}

/* ------------------------------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------------------------- */

/* Walk the hooks of `set` whose table handles `event`, each entry as h (an empty set's entries
 * may be NULL, to which not even 0 may be added). */
#define EACH_HOOK(set, event, h)                                                       \
  for (const recap__graph_hook_entry_t *h = (set)->entries,                            \
                                       *h##_end = (set)->count ? h + (set)->count : h; \
       h != h##_end; h++)                                                              \
    if (h->hooks->event)

void recap__graph_hooks_capture_ended(recap_graph_t g, bool succeeded) {
  EACH_HOOK(&g->hooks, capture_ended, h) h->hooks->capture_ended(h->ctx, g, succeeded);
}

bool recap__graph_hooks_capture_paused(recap_graph_t g) {
  EACH_HOOK(&g->hooks, capture_paused, h) if (h->hooks->capture_paused(h->ctx, g)) return true;
  return false;
}

recap_cuda_graph_t recap__graph_hooks_capture_abandoned(recap_graph_t g, recap_cuda_graph_t ended) {
  EACH_HOOK(&g->hooks, capture_abandoned, h) ended = h->hooks->capture_abandoned(h->ctx, g, ended);
  return ended;
}

bool recap__graph_hooks_own_graphs(recap_graph_t g, size_t *nodes, int64_t *exec_bytes) {
  bool own = false;
  *nodes = 0;
  *exec_bytes = 0;
  EACH_HOOK(&g->hooks, own_graphs, h) own |= h->hooks->own_graphs(h->ctx, g, nodes, exec_bytes);
  return own;
}

void recap__graph_hooks_graph_reset(recap_graph_t g) {
  EACH_HOOK(&g->attached, graph_reset, h) h->hooks->graph_reset(h->ctx, g);
}

bool recap__graph_hooks_recapture_abandoned(recap_graph_t g) {
  EACH_HOOK(&g->attached, recapture_abandoned, h) {
    h->hooks->recapture_abandoned(h->ctx, g);
    return true;
  }
  return false;
}

void recap__graph_hooks_instantiated(recap_graph_t g) {
  EACH_HOOK(&g->attached, instantiated, h) h->hooks->instantiated(h->ctx, g);
}

recap_status_t recap__graph_hooks_captured(recap_graph_t g, recap__captured_t *captured) {
  EACH_HOOK(&g->hooks, captured, h) RECAP__CHECK(h->hooks->captured(h->ctx, g, captured));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_template_read(recap_graph_t g) {
  EACH_HOOK(&g->hooks, template_read, h) RECAP__CHECK(h->hooks->template_read(h->ctx, g));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_instantiated_afresh(recap_graph_t g,
                                                      recap_cuda_graph_t template_graph) {
  EACH_HOOK(&g->hooks, instantiated_afresh, h)
  RECAP__CHECK(h->hooks->instantiated_afresh(h->ctx, g, template_graph));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_inspect(recap_graph_t g, recap_graph_info_t *info) {
  EACH_HOOK(&g->hooks, inspect, h) RECAP__CHECK(h->hooks->inspect(h->ctx, g, info));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_dump(recap_graph_t g, const char *path) {
  EACH_HOOK(&g->hooks, dump, h) RECAP__CHECK(h->hooks->dump(h->ctx, g, path));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_nested_capture_begin(recap_graph_t g, unsigned depth) {
  EACH_HOOK(&g->hooks, nested_capture_begin, h)
  RECAP__CHECK(h->hooks->nested_capture_begin(h->ctx, g, depth));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_nested_capture_end(recap_graph_t g, recap_stream_t stream,
                                                     unsigned depth) {
  EACH_HOOK(&g->hooks, nested_capture_end, h)
  RECAP__CHECK(h->hooks->nested_capture_end(h->ctx, g, stream, depth));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_exec_patching(recap_graph_t g, const recap__graph_read_t *sites,
                                                size_t count, const recap__patch_range_t *to,
                                                size_t moves, size_t *prepared) {
  recap_status_t s = RECAP_SUCCESS;
  for (*prepared = 0; *prepared < g->hooks.count; ++*prepared) {
    const recap__graph_hook_entry_t *h = &g->hooks.entries[*prepared];
    if (!h->hooks->exec_patching) continue;
    s = h->hooks->exec_patching(h->ctx, g, sites, count, to, moves);
    if (s != RECAP_SUCCESS) break;
  }
  return s;
}

void recap__graph_hooks_exec_patched(recap_graph_t g, size_t prepared, bool applied) {
  for (size_t i = 0; i < prepared; i++) {
    const recap__graph_hook_entry_t *h = &g->hooks.entries[i];
    if (h->hooks->exec_patching && h->hooks->exec_patched)
      h->hooks->exec_patched(h->ctx, g, applied);
  }
}

const recap__graph_hooks_t *recap__graph_hooks_unembeddable(recap_graph_t g,
                                                            const recap__graph_hooks_t *except) {
  for (size_t i = 0; i < g->hooks.count; i++) {
    const recap__graph_hooks_t *h = g->hooks.entries[i].hooks;
    if (h != except && (h->embed_refusal || ((h->before_replay || h->launch) && !h->embed_begin)))
      return h;
  }
  return NULL;
}

recap_status_t recap__graph_hooks_embed_refused(recap_graph_t g, recap_graph_t outer) {
  EACH_HOOK(&g->hooks, embed_refused, h) RECAP__CHECK(h->hooks->embed_refused(h->ctx, g, outer));
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_embed_begin(recap_graph_t g, recap_graph_t outer,
                                              recap_stream_t stream, size_t *prepared) {
  const recap__graph_hook_set_t *set = &g->hooks;
  for (*prepared = 0; *prepared < set->count; ++*prepared) {
    const recap__graph_hook_entry_t *h = &set->entries[*prepared];
    if (!h->hooks->embed_begin) continue;
    recap_status_t s = h->hooks->embed_begin(h->ctx, g, outer, stream);
    if (s != RECAP_SUCCESS) return s;
  }
  return RECAP_SUCCESS;
}

recap_status_t recap__graph_hooks_embed_end(recap_graph_t g, recap_graph_t outer,
                                            recap_stream_t stream, size_t prepared, bool added) {
  /* Newest first when undoing, as a failed replay is undone; in order when the node is in. */
  const recap__graph_hook_set_t *set = &g->hooks;
  recap_status_t first = RECAP_SUCCESS;
  for (size_t k = 0; k < prepared; k++) {
    const recap__graph_hook_entry_t *h = &set->entries[added ? k : prepared - 1 - k];
    if (!h->hooks->embed_end) continue;
    recap_status_t s = h->hooks->embed_end(h->ctx, g, outer, stream, added);
    if (first == RECAP_SUCCESS) first = s;
  }
  return first;
}

recap_status_t recap__graph_hooks_replay(recap_graph_t g, recap_stream_t stream) {
  /* The modules prepare the replay (random numbers: the generators' state is written and they
   * advance). Should a hook or the launch fail, the hooks that prepared undo it, so a failed
   * replay leaves the generators where they were. */
  const recap__graph_hook_set_t *set = &g->hooks;
  recap_status_t s = RECAP_SUCCESS;
  size_t prepared = 0;
  for (; prepared < set->count; prepared++) {
    const recap__graph_hook_entry_t *h = &set->entries[prepared];
    if (h->hooks->before_replay) s = h->hooks->before_replay(h->ctx, g, stream);
    if (s != RECAP_SUCCESS) break;
  }
  if (s == RECAP_SUCCESS) {
    const recap__graph_hook_entry_t *l = set->launcher ? &set->entries[set->launcher - 1] : NULL;
    s = l ? l->hooks->launch(l->ctx, g, stream) : recap__graph_launch_exec(g, stream);
  }
  if (s != RECAP_SUCCESS) {
    /* Undo, newest first, what the first `prepared` hooks' before_replay did. */
    for (size_t i = prepared; i-- > 0;)
      if (set->entries[i].hooks->replay_failed)
        set->entries[i].hooks->replay_failed(set->entries[i].ctx, g);
    return s;
  }
  EACH_HOOK(&g->hooks, replay_done, h) h->hooks->replay_done(h->ctx, g);
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Release
 * ---------------------------------------------------------------------------------------- */

static void release_set(recap_graph_t g, recap__graph_hook_set_t *set) {
  for (size_t i = 0; i < set->count; i++)
    if (set->entries[i].hooks->release) set->entries[i].hooks->release(set->entries[i].ctx, g);
  recap__host_free(set->entries);
  *set = (recap__graph_hook_set_t){0};
}

void recap__graph_hooks_release(recap_graph_t g) { release_set(g, &g->hooks); }

void recap__graph_hook_set_release(recap_graph_t g, recap__graph_hook_set_t *set) {
  release_set(g, set);
}

void recap__graph_hooks_release_attached(recap_graph_t g) { release_set(g, &g->attached); }
