/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * error.c — status names, the thread-local last error, the version, and logging.
 */
#include "core/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"

/* ---- version ---------------------------------------------------------------------------- */

#define RECAP__STR2(x) #x
#define RECAP__STR(x) RECAP__STR2(x)

unsigned recap_version(void) { return RECAP_VERSION_HEX; }

const char *recap_version_string(void) {
  return RECAP__STR(RECAP_VERSION_MAJOR) "." RECAP__STR(RECAP_VERSION_MINOR) "." RECAP__STR(
      RECAP_VERSION_PATCH);
}

/* ---- status names ----------------------------------------------------------------------- */

const char *recap_status_name(recap_status_t status) {
  switch (status) {
#define RECAP_X_NAME(name, value, text) \
  case RECAP_##name: return "RECAP_" #name;
    RECAP_STATUS_MAP(RECAP_X_NAME)
#undef RECAP_X_NAME
  }
  return "RECAP_UNKNOWN_STATUS";
}

const char *recap_status_string(recap_status_t status) {
  switch (status) {
#define RECAP_X_TEXT(name, value, text) \
  case RECAP_##name: return text;
    RECAP_STATUS_MAP(RECAP_X_TEXT)
#undef RECAP_X_TEXT
  }
  return "unknown status";
}

/* ---- last error ------------------------------------------------------------------------- */

/* Long enough for an out-of-memory report or a list of a few dead graph inputs. */
enum { RECAP__ERROR_CAPACITY = 4096 };

static _Thread_local char last_message[RECAP__ERROR_CAPACITY];
static _Thread_local recap_status_t last_status_value;

static recap_status_t set_error_v(recap_status_t status, const char *where, const char *fmt,
                                  va_list ap) {
  int n = vsnprintf(last_message, sizeof last_message, fmt, ap);
  if (where && n >= 0 && (size_t)n < sizeof last_message)
    snprintf(last_message + n, sizeof last_message - (size_t)n, " [%s]", where);
  last_status_value = status;
  RECAP__DEBUG("%s: %s", recap_status_name(status), last_message);
  return status;
}

recap_status_t recap__error(recap_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error_v(status, NULL, fmt, ap);
  va_end(ap);
  return status;
}

recap_status_t recap__error_at(recap_status_t status, const char *file, int line, const char *fmt,
                               ...) {
  char where[256];
  const char *base = strrchr(file, '/');
  snprintf(where, sizeof where, "%s:%d", base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  set_error_v(status, where, fmt, ap);
  va_end(ap);
  return status;
}

const char *recap_last_error(void) { return last_message; }
recap_status_t recap_last_status(void) { return last_status_value; }

_Static_assert(sizeof(((recap__saved_error_t *)0)->message) == RECAP__ERROR_CAPACITY,
               "a saved error holds the whole last error");

/* A copy of a terminated message into a buffer of RECAP__ERROR_CAPACITY bytes;
 * strlen and memcpy, since the best-effort paths save and restore on every call. */
static void copy_message(char *to, const char *from) {
  size_t n = strnlen(from, RECAP__ERROR_CAPACITY - 1);
  memcpy(to, from, n);
  to[n] = '\0';
}

void recap__error_save(recap__saved_error_t *saved) {
  saved->status = last_status_value;
  copy_message(saved->message, last_message);
}

recap_status_t recap__error_restore(const recap__saved_error_t *saved) {
  copy_message(last_message, saved->message);
  last_status_value = saved->status;
  return saved->status;
}

recap_status_t recap_set_last_error(recap_status_t status, const char *format, ...) {
  bool known = false;
  switch (status) {
#define RECAP_X_KNOWN(name, value, text) \
  case RECAP_##name: known = true; break;
    RECAP_STATUS_MAP(RECAP_X_KNOWN)
#undef RECAP_X_KNOWN
  }
  if (!known || status == RECAP_SUCCESS)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "recap_set_last_error: status %d is not a failure code of "
                        "RECAP_STATUS_MAP (RECAP_SUCCESS is not one)",
                        (int)status);
  RECAP__ARG(format != NULL, "recap_set_last_error: format is NULL");
  va_list ap;
  va_start(ap, format);
  set_error_v(status, NULL, format, ap);
  va_end(ap);
  return status;
}

void recap_clear_last_error(void) {
  last_message[0] = '\0';
  last_status_value = RECAP_SUCCESS;
}

/* ---- logging ---------------------------------------------------------------------------- */

/* The callback under a lock; the level is RECAP_LOG's slot of the environment table
 * (core/env.h), which recap_log_level_set overrides. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static recap_log_fn log_fn;
static void *log_user;

void recap_log_set(recap_log_fn fn, void *user_data) {
  pthread_mutex_lock(&log_lock);
  log_fn = fn;
  log_user = user_data;
  pthread_mutex_unlock(&log_lock);
}

void recap_log_level_set(recap_log_level_t level) { recap__env_set(RECAP__ENV_LOG, (int)level); }

recap_log_level_t recap_log_level_get(void) {
  return (recap_log_level_t)recap__env_int(RECAP__ENV_LOG);
}

/* The names of 0.1, deprecated (recap/core.h). */
void recap_log_set_level(recap_log_level_t level) { recap_log_level_set(level); }
recap_log_level_t recap_log_get_level(void) { return recap_log_level_get(); }

void recap__log(recap_log_level_t level, const char *fmt, ...) {
  if ((int)level > (int)recap_log_level_get()) return;
  char message[RECAP__ERROR_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  recap_log_fn fn = log_fn;
  void *user = log_user;
  pthread_mutex_unlock(&log_lock);
  if (fn)
    fn(level, message, user);
  else
    fprintf(stderr, "recap %s: %s\n", recap__env_level_names[level], message);
}

void recap__format_bytes(char *out, size_t cap, uint64_t bytes) {
  if (bytes >= (1ull << 30))
    snprintf(out, cap, "%.2f GiB", (double)bytes / (double)(1ull << 30));
  else if (bytes >= (1ull << 20))
    snprintf(out, cap, "%.2f MiB", (double)bytes / (double)(1ull << 20));
  else if (bytes >= (1ull << 10))
    snprintf(out, cap, "%.2f KiB", (double)bytes / (double)(1ull << 10));
  else
    snprintf(out, cap, "%" PRIu64 " bytes", bytes);
}
