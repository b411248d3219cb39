/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * env.c — the table of recap's environment variables and their reader (core/env.h).
 */
#include "core/env.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const recap__env_info_t recap__env_table[RECAP__ENV_COUNT] = {
#define RECAP_X_ENV_INFO(id, type, def, def_text, accepted, meaning) \
  {"RECAP_" #id, RECAP__ENV_##type, (def), (def_text), (accepted), (meaning)},
    RECAP__ENV_MAP(RECAP_X_ENV_INFO)
#undef RECAP_X_ENV_INFO
};

const char *const recap__env_level_names[RECAP_LOG_LEVEL_DEBUG + 1] = {"none", "error", "warn",
                                                                       "info", "debug"};

_Atomic int recap__env_values[RECAP__ENV_COUNT] = {
#define RECAP_X_ENV_UNREAD(id, type, def, def_text, accepted, meaning) -1,
    RECAP__ENV_MAP(RECAP_X_ENV_UNREAD)
#undef RECAP_X_ENV_UNREAD
};

/* The value text stands for, or -1 when it is not one the variable accepts. */
static int parse(const recap__env_info_t *e, const char *text) {
  switch (e->type) {
    case RECAP__ENV_FLAG:
      if (strcmp(text, "0") == 0) return 0;
      if (strcmp(text, "1") == 0) return 1;
      return -1;
    case RECAP__ENV_LEVEL:
      for (int i = 0; i <= RECAP_LOG_LEVEL_DEBUG; i++)
        if (strcasecmp(text, recap__env_level_names[i]) == 0) return i;
      return -1;
    case RECAP__ENV_TEXT: break;
  }
  return -1;
}

int recap__env_resolve(recap__env_t var, const char **bad) {
  const recap__env_info_t *e = &recap__env_table[var];
  *bad = NULL;
  const char *text = getenv(e->name);
  int value = e->default_value;
  bool invalid = false;
  if (text && *text) {
    int parsed = parse(e, text);
    if (parsed >= 0)
      value = parsed;
    else
      invalid = true;
  }
  /* A value set from code in between, or another thread's reading, wins: one warning. */
  int expected = -1;
  if (!atomic_compare_exchange_strong(&recap__env_values[var], &expected, value)) return expected;
  if (invalid) *bad = text;
  return value;
}

void recap__env_set(recap__env_t var, int value) {
  atomic_store(&recap__env_values[var], value < 0 ? -1 : value);
}

const char *recap__env_text(recap__env_t var) {
  const char *text = getenv(recap__env_table[var].name);
  return text && *text ? text : NULL;
}
