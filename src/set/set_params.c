/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_params.c — parameters the members of a graph set share (recap_graph_set_param_set).
 *
 * Each member is a graph of its own, so a parameter is one per member: the step declares it
 * with recap_param_on_stream on the stream it is given, and every member's capture makes its own.
 * The set keeps the value last set for each name. It reaches the members three ways: the READY
 * ones are patched now (recap_param_set); a step the set calls afterwards, whether it captures a
 * member (LAZY, BACKGROUND, after an eviction) or runs eagerly, gets the value in place of the
 * one it passes (the set installs itself as the calling thread's parameter source around the
 * step). So a value set once holds for every size, graphed or eager, and a later capture cannot
 * bring back the step's initial value.
 */
#include <inttypes.h>
#include <string.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "core/text.h"
#include "rebind/params_source.h"
#include "set/set_internal.h"

/* The value kept for name, or NULL (lock held). */
static recap__set_param_t *kept(recap_graph_set_t set, const char *name) {
  for (size_t i = 0; i < set->param_count; i++)
    if (strcmp(set->params[i].name, name) == 0) return &set->params[i];
  return NULL;
}

static bool source_value(void *ctx, const char *name, recap_param_type_t type, uint64_t *bits) {
  recap_graph_set_t set = ctx;
  pthread_mutex_lock(&set->lock);
  const recap__set_param_t *p = kept(set, name);
  bool found = p && p->type == type;
  if (found) *bits = p->bits;
  pthread_mutex_unlock(&set->lock);
  return found;
}

recap_status_t recap__set_step(recap_graph_set_t set, size_t size, recap_stream_t stream) {
  recap__param_source_t mine = {source_value, set}, previous;
  recap__params_source_swap(&mine, &previous);
  recap_status_t s = set->step(size, stream, set->user_data);
  recap__params_source_swap(&previous, &mine);
  return s;
}

void recap__set_params_free(recap_graph_set_t set) {
  for (size_t i = 0; i < set->param_count; i++) recap__host_free(set->params[i].name);
  recap__host_free(set->params);
  set->params = NULL;
  set->param_count = set->param_cap = 0;
}

/* One member to set: its graph, then its parameter and the value it held. */
typedef struct member_param {
  size_t bucket;
  recap_graph_t graph;
  recap_param_t param;
  uint64_t before;
} member_param_t;

/* Put back the values the first n members held (a later member's set failed). */
static void set_back(const member_param_t *done, size_t n, const char *fn) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  for (size_t k = 0; k < n; k++)
    if (recap_param_set(done[k].param, &done[k].before) != RECAP_SUCCESS)
      RECAP__WARN("%s: size %zu keeps the new value: setting the old one back failed (%s)", fn,
                  done[k].bucket, recap_last_error());
  recap__error_restore(&cause);
}

/* Which of the n members of todo declared name in the capture they hold, each with its value,
 * kept at the front; *m gets how many. INVALID_ARGUMENT for one that declared another type. */
static recap_status_t members_declaring(member_param_t *todo, size_t n, const char *name,
                                        recap_param_type_t type, size_t *m, const char *fn) {
  *m = 0;
  for (size_t k = 0; k < n; k++) {
    recap_param_t p;
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (recap_graph_param_find(todo[k].graph, name, &p) != RECAP_SUCCESS) {
      recap__error_restore(&saved); /* a member whose step did not declare it */
      continue;
    }
    recap_param_info_t info = RECAP_PARAM_INFO_INIT;
    RECAP__CHECK(recap_param_info(p, &info));
    if (info.type != type)
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: size %zu declared \"%s\" as %s, and type is %s; declare it with "
                          "one type in every size",
                          fn, todo[k].bucket, name, recap__param_type_name(info.type),
                          recap__param_type_name(type));
    if (!info.sites) continue; /* declared by an earlier capture only */
    todo[*m] = todo[k];
    todo[*m].param = p;
    todo[(*m)++].before = info.bits;
  }
  return RECAP_SUCCESS;
}

recap_status_t recap_graph_set_param_set(recap_graph_set_t set, const char *name,
                                         recap_param_type_t type, const void *value,
                                         size_t *members) {
  static const char fn[] = "recap_graph_set_param_set";
  RECAP__CHECK(
      RECAP__HANDLE_CHECK(set, RECAP__SET_MAGIC, fn, "set", "graph set", "recap_graph_set_create"));
  if (members) *members = 0;
  RECAP__ARG(name && name[0], "%s: name is NULL or empty", fn);
  RECAP__ARG(type >= RECAP_PARAM_INT32 && type <= RECAP_PARAM_DOUBLE,
             "%s: type %d is not a recap_param_type_t", fn, (int)type);
  RECAP__ARG(value != NULL, "%s: value is NULL", fn);
  uint64_t bits = 0;
  memcpy(&bits, value, recap__param_type_bytes(type));
  member_param_t *todo = recap__host_calloc(set->count, sizeof *todo);
  char *copy = recap__copy_string(name);
  if (!todo || !copy) {
    recap__host_free(todo);
    recap__host_free(copy);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }

  /* The value is kept first, under the lock that a capture's step reads it under: a capture
   * that begins from now on takes it, and one under way is refused here. The READY members'
   * graphs are taken under the same lock (only this thread destroys them). */
  recap_status_t s = RECAP_SUCCESS;
  size_t n = 0;
  bool added = false;
  uint64_t before = 0;
  pthread_mutex_lock(&set->lock);
  recap__set_param_t *p = kept(set, name);
  if (set->thread_started && set->busy) {
    s = recap__error(RECAP_ERROR_BUSY,
                     "%s: a background capture is under way; call recap_graph_set_wait first", fn);
  } else if (p && p->type != type) {
    s = recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                     "%s: \"%s\" was set as %s before and is now %s; a name keeps its type", fn,
                     name, recap__param_type_name(p->type), recap__param_type_name(type));
  } else if (!p && set->param_count == set->param_cap) {
    size_t cap = set->param_cap ? 2 * set->param_cap : 4;
    recap__set_param_t *grown = recap__host_realloc(set->params, cap * sizeof *grown);
    if (grown) {
      set->params = grown;
      set->param_cap = cap;
    } else {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
  }
  if (s == RECAP_SUCCESS) {
    if (!p) {
      p = &set->params[set->param_count++];
      *p = (recap__set_param_t){copy, type, bits};
      copy = NULL;
      added = true;
    }
    before = p->bits;
    p->bits = bits;
    for (size_t i = 0; i < set->count; i++)
      if (set->members[i].state == RECAP_MEMBER_READY)
        todo[n++] = (member_param_t){set->members[i].bucket, set->members[i].graph, NULL, 0};
  }
  pthread_mutex_unlock(&set->lock);
  recap__host_free(copy);
  if (s != RECAP_SUCCESS) {
    recap__host_free(todo);
    return s;
  }

  size_t m = 0;
  s = members_declaring(todo, n, name, type, &m, fn);
  /* All or nothing: a failure sets the members before it back, and the set its value. */
  for (size_t k = 0; s == RECAP_SUCCESS && k < m; k++) {
    if ((s = recap_param_set(todo[k].param, value)) == RECAP_SUCCESS) continue;
    recap__saved_error_t cause;
    recap__error_save(&cause);
    set_back(todo, k, fn);
    s = recap__error(s, "%s: size %zu: %s; the sizes set before it are set back", fn,
                     todo[k].bucket, cause.message);
  }
  recap__host_free(todo);
  if (s != RECAP_SUCCESS) {
    pthread_mutex_lock(&set->lock);
    p = kept(set, name);
    if (added) {
      recap__host_free(p->name);
      *p = set->params[--set->param_count];
    } else {
      p->bits = before;
    }
    pthread_mutex_unlock(&set->lock);
    return s;
  }
  if (members) *members = m;
  return RECAP_SUCCESS;
}
