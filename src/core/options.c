/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * options.c — the option registry: defaults, RECAP_ALLOC_CONF, and values set from code.
 *
 * The environment is read lazily, at the first use, so a program may set RECAP_ALLOC_CONF with
 * setenv() before its first recap call. Values set from code win over the environment: they are
 * applied on top of it. Parsing is all or nothing, and the options are checked together so no
 * combination the allocator cannot honour gets in.
 */
#include "core/options.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"

enum {
#define RECAP_X_INDEX(name, kind, def, text) OPT_##name,
  RECAP_OPTION_MAP(RECAP_X_INDEX)
#undef RECAP_X_INDEX
      OPT_COUNT
};

static const char *const option_names[OPT_COUNT] = {
#define RECAP_X_NAME(name, kind, def, text) #name,
    RECAP_OPTION_MAP(RECAP_X_NAME)
#undef RECAP_X_NAME
};

/* "min_block_size, small_size, ...": the names for messages, from the same map. */
static const char option_list[] =
#define RECAP_X_LIST(name, kind, def, text) ", " #name
    RECAP_OPTION_MAP(RECAP_X_LIST)
#undef RECAP_X_LIST
    ;
#define OPTION_LIST (option_list + 2) /* without the leading ", " */

static const uint64_t option_defaults[OPT_COUNT] = {
#define RECAP_X_DEF(name, kind, def, text) (uint64_t)(def),
    RECAP_OPTION_MAP(RECAP_X_DEF)
#undef RECAP_X_DEF
};

/* What an option's value is written as (the registry's kind column). */
typedef enum { KIND_BYTES, KIND_BOOL } option_kind_t;

static const option_kind_t option_kinds[OPT_COUNT] = {
#define RECAP_X_KIND(name, kind, def, text) KIND_##kind,
    RECAP_OPTION_MAP(RECAP_X_KIND)
#undef RECAP_X_KIND
};

/* What each kind accepts, for the message about a value that is not of it. */
static const char *const kind_accepts[] = {
    [KIND_BYTES] = "a byte count (a number, optionally with K, M or G, KiB, MiB or GiB)",
    [KIND_BOOL] = "a boolean (true or false in any case, or 1 or 0)",
};

static pthread_mutex_t options_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t values[OPT_COUNT];
static bool from_code[OPT_COUNT]; /* set by the program: the environment does not override */
static bool env_read;
static recap_status_t env_status; /* the verdict on RECAP_ALLOC_CONF, kept until reset */
static char env_message[512];
static char env_value[512]; /* the bad RECAP_ALLOC_CONF, for the warning */
static _Atomic bool env_warning_due;
/* Bumped under the lock at every change; read without it by the allocator's cache. */
static _Atomic uint64_t version_counter;
static _Atomic bool env_good;

/* What recap__options_version reads: the counter while the environment is good, else 0. One
 * word, so that the allocator's hot path pays one load; set under the lock after every change
 * of either. */
_Atomic uint64_t recap__options_stamp;

static void publish_locked(void) {
  atomic_store_explicit(&recap__options_stamp,
                        atomic_load(&env_good) ? atomic_load(&version_counter) : 0,
                        memory_order_release);
}

static void changed_locked(void) {
  atomic_fetch_add(&version_counter, 1);
  publish_locked();
}

static int find_option(const char *name, size_t len) {
  for (int i = 0; i < OPT_COUNT; i++)
    if (strlen(option_names[i]) == len && strncmp(option_names[i], name, len) == 0) return i;
  return -1;
}

/* A byte count with an optional binary unit: "512", "2MiB", "20M", "1GB". */
static bool parse_size(const char *text, size_t len, uint64_t *out) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, text, len);
  buf[len] = '\0';
  if (!isdigit((unsigned char)buf[0])) return false;
  errno = 0;
  char *end;
  unsigned long long number = strtoull(buf, &end, 10);
  if (errno) return false;
  uint64_t scale = 1;
  if (*end) {
    static const struct {
      const char *suffix;
      uint64_t scale;
    } units[] = {{"K", 1ull << 10}, {"KB", 1ull << 10}, {"KiB", 1ull << 10},
                 {"M", 1ull << 20}, {"MB", 1ull << 20}, {"MiB", 1ull << 20},
                 {"G", 1ull << 30}, {"GB", 1ull << 30}, {"GiB", 1ull << 30}};
    scale = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcasecmp(end, units[i].suffix) == 0) scale = units[i].scale;
    if (!scale) return false;
  }
  if (number > UINT64_MAX / scale) return false;
  *out = number * scale;
  return true;
}

/* A boolean: true or false in any case (PyTorch's configuration writes True and False), or 1
 * or 0. */
static bool parse_bool(const char *text, size_t len, uint64_t *out) {
  if ((len == 4 && strncasecmp(text, "true", 4) == 0) || (len == 1 && text[0] == '1')) {
    *out = 1;
    return true;
  }
  if ((len == 5 && strncasecmp(text, "false", 5) == 0) || (len == 1 && text[0] == '0')) {
    *out = 0;
    return true;
  }
  return false;
}

/* A value of option idx's kind. */
static bool parse_value(int idx, const char *text, size_t len, uint64_t *out) {
  return option_kinds[idx] == KIND_BOOL ? parse_bool(text, len, out) : parse_size(text, len, out);
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The rules that keep the size classes coherent, and booleans 0 or 1 (recap_option_set_u64 can
 * give any number). Returns a message, in buf when it names an option, or NULL. */
static const char *check_rules(const uint64_t *v, char *buf, size_t cap) {
  for (int i = 0; i < OPT_COUNT; i++)
    if (option_kinds[i] == KIND_BOOL && v[i] > 1) {
      snprintf(buf, cap, "%s must be 0 (off) or 1 (on)", option_names[i]);
      return buf;
    }
  if (!is_pow2(v[OPT_min_block_size])) return "min_block_size must be a power of two";
  if (v[OPT_small_size] == 0 || v[OPT_small_size] % v[OPT_min_block_size])
    return "small_size must be a positive multiple of min_block_size";
  if (v[OPT_small_segment] < v[OPT_small_size]) return "small_segment must be at least small_size";
  if (v[OPT_small_segment] % v[OPT_min_block_size])
    return "small_segment must be a multiple of min_block_size";
  if (v[OPT_large_threshold] <= v[OPT_small_size])
    return "large_threshold must be larger than small_size";
  if (v[OPT_large_segment] < v[OPT_large_threshold])
    return "large_segment must be at least large_threshold";
  if (v[OPT_large_segment] % v[OPT_min_block_size])
    return "large_segment must be a multiple of min_block_size";
  if (v[OPT_round_large] == 0 || v[OPT_round_large] % v[OPT_min_block_size])
    return "round_large must be a positive multiple of min_block_size";
  /* As in PyTorch: medium requests share large_segment segments, and a request below
   * max_split_size never takes a block of max_split_size or more, so a limit at or below
   * large_segment would give every medium request a fresh segment that nobody reuses. */
  if (v[OPT_max_split_size] && v[OPT_max_split_size] <= v[OPT_large_segment])
    return "max_split_size must be 0 (no limit) or larger than large_segment: medium requests "
           "share segments of large_segment bytes, which a smaller limit would forbid";
  return NULL;
}

/* Parse "key:value,key:value" into v (a copy the caller commits on success). Entries may be
 * separated by commas, and whitespace around keys and values is ignored. */
static recap_status_t parse_conf(const char *conf, const char *origin, uint64_t *v, bool *set) {
  const char *p = conf;
  while (*p) {
    while (*p == ',' || isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *entry = p;
    while (*p && *p != ',') p++;
    const char *entry_end = p;
    const char *colon = memchr(entry, ':', (size_t)(entry_end - entry));
    if (!colon)
      return recap__error(RECAP_ERROR_INVALID_VALUE,
                          "%s: entry '%.*s' is not of the form key:value", origin,
                          (int)(entry_end - entry), entry);
    const char *k = entry, *k_end = colon;
    while (k < k_end && isspace((unsigned char)*k)) k++;
    while (k_end > k && isspace((unsigned char)k_end[-1])) k_end--;
    const char *val = colon + 1, *val_end = entry_end;
    while (val < val_end && isspace((unsigned char)*val)) val++;
    while (val_end > val && isspace((unsigned char)val_end[-1])) val_end--;
    int idx = find_option(k, (size_t)(k_end - k));
    if (idx < 0)
      return recap__error(RECAP_ERROR_INVALID_VALUE, "%s: unknown option '%.*s' (known: %s)",
                          origin, (int)(k_end - k), k, OPTION_LIST);
    uint64_t number;
    if (!parse_value(idx, val, (size_t)(val_end - val), &number))
      return recap__error(RECAP_ERROR_INVALID_VALUE,
                          "%s: option %s has value '%.*s', which is not %s", origin,
                          option_names[idx], (int)(val_end - val), val,
                          kind_accepts[option_kinds[idx]]);
    v[idx] = number;
    if (set) set[idx] = true;
  }
  char rule[128];
  const char *broken = check_rules(v, rule, sizeof rule);
  if (broken) return recap__error(RECAP_ERROR_INVALID_VALUE, "%s: %s", origin, broken);
  return RECAP_SUCCESS;
}

/* Called with the lock held. */
static void read_env_locked(void) {
  if (env_read) return;
  env_read = true;
  env_status = RECAP_SUCCESS;
  changed_locked();
  const char *conf = recap__env_text(RECAP__ENV_ALLOC_CONF);
  if (!conf) {
    atomic_store(&env_good, true);
    publish_locked();
    return;
  }
  uint64_t v[OPT_COUNT];
  memcpy(v, values, sizeof v);
  recap_status_t s = parse_conf(conf, "RECAP_ALLOC_CONF", v, NULL);
  if (s != RECAP_SUCCESS) {
    env_status = s;
    snprintf(env_message, sizeof env_message, "%s", recap_last_error());
    snprintf(env_value, sizeof env_value, "%s", conf);
    atomic_store(&env_warning_due, true);
    return;
  }
  for (int i = 0; i < OPT_COUNT; i++)
    if (!from_code[i]) values[i] = v[i];
  atomic_store(&env_good, true);
  publish_locked();
}

/* The warning about a bad RECAP_ALLOC_CONF, once per reading of it. Called without the lock: a
 * log callback may call back into recap. */
static void warn_env(void) {
  if (!atomic_exchange(&env_warning_due, false)) return;
  static const char prefix[] = "RECAP_ALLOC_CONF: ";
  char value[sizeof env_value], detail[sizeof env_message];
  pthread_mutex_lock(&options_lock);
  memcpy(value, env_value, sizeof value);
  /* The parser's message, without the variable's name the warning begins with. */
  const char *cause = env_message;
  if (strncmp(cause, prefix, sizeof prefix - 1) == 0) cause += sizeof prefix - 1;
  snprintf(detail, sizeof detail, "%s", cause);
  pthread_mutex_unlock(&options_lock);
  recap__env_warn(RECAP__ENV_ALLOC_CONF, value, detail,
                  "no options: every allocation fails with RECAP_ERROR_INVALID_VALUE until "
                  "recap_options_reset()");
}

static void reset_locked(void) {
  memcpy(values, option_defaults, sizeof values);
  memset(from_code, 0, sizeof from_code);
  env_read = false;
  env_status = RECAP_SUCCESS;
  env_message[0] = '\0';
  atomic_store(&env_warning_due, false);
  atomic_store(&env_good, false);
  changed_locked();
}

static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static void load_defaults(void) { memcpy(values, option_defaults, sizeof values); }

void recap_options_reset(void) {
  pthread_once(&defaults_once, load_defaults);
  pthread_mutex_lock(&options_lock);
  reset_locked();
  pthread_mutex_unlock(&options_lock);
}

recap_status_t recap__options_get(recap__options_t *out) {
  pthread_once(&defaults_once, load_defaults);
  pthread_mutex_lock(&options_lock);
  read_env_locked();
  recap_status_t s = env_status;
  /* A bad environment stays an error until the program sets every option it names from code;
   * the simplest honest rule is: it stays an error until recap_options_reset(). */
  if (s == RECAP_SUCCESS) {
    uint64_t *dst = (uint64_t *)out;
    memcpy(dst, values, sizeof values);
  }
  pthread_mutex_unlock(&options_lock);
  warn_env();
  if (s != RECAP_SUCCESS) return recap__error(s, "%s", env_message);
  return RECAP_SUCCESS;
}

_Static_assert(sizeof(recap__options_t) == sizeof(uint64_t) * OPT_COUNT,
               "recap__options_t must mirror the registry");

static recap_status_t set_value(const char *name, const char *text, const uint64_t *number) {
  RECAP__ARG(name != NULL, "recap_option_set: name is NULL");
  pthread_once(&defaults_once, load_defaults);
  int idx = find_option(name, strlen(name));
  if (idx < 0)
    return recap__error(RECAP_ERROR_NOT_FOUND, "recap_option_set: unknown option '%s'", name);
  uint64_t parsed;
  if (number) {
    parsed = *number;
  } else {
    RECAP__ARG(text != NULL, "recap_option_set(%s): value is NULL", name);
    if (!parse_value(idx, text, strlen(text), &parsed))
      return recap__error(RECAP_ERROR_INVALID_VALUE,
                          "recap_option_set: option %s has value '%s', which is not %s", name, text,
                          kind_accepts[option_kinds[idx]]);
  }
  pthread_mutex_lock(&options_lock);
  read_env_locked();
  uint64_t v[OPT_COUNT];
  memcpy(v, values, sizeof v);
  v[idx] = parsed;
  char rule[128];
  const char *broken = check_rules(v, rule, sizeof rule);
  if (!broken) {
    memcpy(values, v, sizeof v);
    from_code[idx] = true;
    changed_locked();
  }
  pthread_mutex_unlock(&options_lock);
  warn_env();
  if (broken)
    return recap__error(RECAP_ERROR_INVALID_VALUE, "recap_option_set(%s=%llu): %s", name,
                        (unsigned long long)parsed, broken);
  return RECAP_SUCCESS;
}

recap_status_t recap_option_set(const char *name, const char *value) {
  return set_value(name, value, NULL);
}

recap_status_t recap_option_set_u64(const char *name, uint64_t value) {
  return set_value(name, NULL, &value);
}

recap_status_t recap_option_get(const char *name, uint64_t *value) {
  RECAP__ARG(name != NULL && value != NULL, "recap_option_get: name and value must not be NULL");
  int idx = find_option(name, strlen(name));
  if (idx < 0)
    return recap__error(RECAP_ERROR_NOT_FOUND, "recap_option_get: unknown option '%s'", name);
  recap__options_t o;
  RECAP__CHECK(recap__options_get(&o));
  *value = ((const uint64_t *)&o)[idx];
  return RECAP_SUCCESS;
}

recap_status_t recap_options_parse(const char *conf) {
  RECAP__ARG(conf != NULL, "recap_options_parse: conf is NULL");
  pthread_once(&defaults_once, load_defaults);
  pthread_mutex_lock(&options_lock);
  read_env_locked();
  uint64_t v[OPT_COUNT];
  bool set[OPT_COUNT] = {0};
  memcpy(v, values, sizeof v);
  recap_status_t s = parse_conf(conf, "recap_options_parse", v, set);
  if (s == RECAP_SUCCESS) {
    memcpy(values, v, sizeof v);
    for (int i = 0; i < OPT_COUNT; i++) from_code[i] = from_code[i] || set[i];
    changed_locked();
  }
  pthread_mutex_unlock(&options_lock);
  warn_env();
  return s;
}
