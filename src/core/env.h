/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * env.h — every RECAP_* environment variable recap reads, in one table, and the one way to read
 * them, set them from code, and warn about a bad value. docs/environment.md documents the same
 * table for users; a variable added here goes there too.
 *
 * Flags and levels are read here: lazily, at their first use, so a program may setenv() before
 * it, and cached. A value set from code (recap__env_set) wins over the environment. A bad value
 * is warned about once, through the log, and the default is used. Text variables (a list of
 * entries) are parsed by their one reader, which caches what it parsed and warns about a bad
 * value with the same recap__env_warn.
 *
 * The warning is an inline function, so it runs in the reader's file: env.c itself calls
 * nothing (the log, in error.c, reads RECAP_LOG through it).
 */
#ifndef RECAP_CORE_ENV_H
#define RECAP_CORE_ENV_H

#include <stdatomic.h>

#include "core/error.h"
#include "recap/core.h"

/* X(id, type, default value, default as text, what is accepted, meaning). The variable is
 * RECAP_<id>. */
#define RECAP__ENV_MAP(X)                                                                     \
  X(LOG, LEVEL, RECAP_LOG_LEVEL_WARN, "warn", "none, error, warn, info or debug (any case)",  \
    "how much recap logs; recap_log_level_set() overrides it")                                \
  X(ALLOC_CONF, TEXT, 0, "(none)",                                                            \
    "key:value entries separated by commas, values in bytes with an optional K, M, G, KiB, "  \
    "MiB or GiB, booleans (expandable_segments, offload_keep_pinned) true or false in any "   \
    "case, or 1 or 0 (docs/allocator.md lists the keys)",                                     \
    "the allocator's options; recap_option_set() and recap_options_parse() override entries") \
  X(DISABLE_GRAPHS, FLAG, 0, "0", "0 or 1",                                                   \
    "1: nothing is captured, capture scopes and graphed callables run their work eagerly; "   \
    "recap_graphs_enable() overrides")                                                        \
  X(ANNOTATIONS, FLAG, 0, "0", "0 or 1",                                                      \
    "1: annotation scopes label the nodes of captures; recap_annotations_enable() overrides") \
  X(LIVENESS_DEBUG, FLAG, 0, "0", "0 or 1",                                                   \
    "1: record where blocks are allocated and freed, for the dead-input messages; "           \
    "recap_liveness_debug_enable() overrides")                                                \
  X(FAIL, TEXT, 0, "(none)",                                                                  \
    "kind:n entries separated by commas, n >= 1, kinds malloc, event, event_record, "         \
    "capture_begin, capture_end, instantiate, launch, upload, stream_wait_event",             \
    "Debug builds only: the nth CUDA call of each kind fails, as CUDA would report it")       \
  X(NCCL_LIBRARY, TEXT, 0, "(none)", "a path to libnccl.so.2 (or a name the loader finds)",   \
    "the NCCL library recap loads at its first NCCL call; unset: libnccl.so.2 through the "   \
    "dynamic loader's search path")

typedef enum recap__env {
#define RECAP_X_ENV_ID(id, type, def, def_text, accepted, meaning) RECAP__ENV_##id,
  RECAP__ENV_MAP(RECAP_X_ENV_ID)
#undef RECAP_X_ENV_ID
      RECAP__ENV_COUNT
} recap__env_t;

typedef enum recap__env_type {
  RECAP__ENV_FLAG,  /* "0" or "1": 0 or 1 */
  RECAP__ENV_LEVEL, /* a log level's name: its recap_log_level_t */
  RECAP__ENV_TEXT   /* parsed by its reader */
} recap__env_type_t;

typedef struct recap__env_info {
  const char *name; /* "RECAP_LOG" */
  recap__env_type_t type;
  int default_value; /* flags and levels */
  const char *default_text;
  const char *accepted;
  const char *meaning;
} recap__env_info_t;

extern const recap__env_info_t recap__env_table[RECAP__ENV_COUNT];

/* The names of the log levels, by recap_log_level_t, as RECAP_LOG takes them. */
extern const char *const recap__env_level_names[RECAP_LOG_LEVEL_DEBUG + 1];

/* The value in use of each flag and level: the one set from code, else the environment's;
 * -1 until resolved. Read through recap__env_int. */
extern _Atomic int recap__env_values[RECAP__ENV_COUNT];

/* Resolve var from the environment (the slow path of recap__env_int). When this call finds a
 * bad value and its result is the one kept, *bad is the value, for the warning; else NULL. */
int recap__env_resolve(recap__env_t var, const char **bad);

/* Set a flag or level from code: value >= 0 wins over the environment; -1 follows the
 * environment again, read afresh at the next use. */
void recap__env_set(recap__env_t var, int value);

/* A text variable's value, NULL when it is unset or empty. */
const char *recap__env_text(recap__env_t var);

/* The one warning about a bad value:
 *   RECAP_X="value" is not valid (detail): accepted: <the table's>; used instead: <instead>
 * detail may be NULL. */
static inline void recap__env_warn(recap__env_t var, const char *value, const char *detail,
                                   const char *instead) {
  const recap__env_info_t *e = &recap__env_table[var];
  recap__log(RECAP_LOG_LEVEL_WARN, "%s=\"%s\" is not valid%s%s%s: accepted: %s; used instead: %s",
             e->name, value, detail ? " (" : "", detail ? detail : "", detail ? ")" : "",
             e->accepted, instead);
}

/* A flag's or level's value in use (one relaxed load once resolved). */
static inline int recap__env_int(recap__env_t var) {
  int v = atomic_load_explicit(&recap__env_values[var], memory_order_relaxed);
  if (v >= 0) return v;
  const char *bad = NULL;
  v = recap__env_resolve(var, &bad);
  /* Warned after the value is kept: the log reads RECAP_LOG through here. */
  if (bad) {
    const recap__env_info_t *e = &recap__env_table[var];
    recap__env_warn(var, bad, NULL, e->default_text);
  }
  return v;
}

#endif /* RECAP_CORE_ENV_H */
