/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * error.h — recording failures: the thread's last error, check macros, and logging.
 *
 * A failing path calls recap__error(status, fmt, ...) once, where the failure is understood,
 * and returns what it returns. Callers further up pass the status on without overwriting the
 * message, so the user sees the innermost, most specific cause.
 */
#ifndef RECAP_ERROR_H
#define RECAP_ERROR_H

#include "recap/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#  define RECAP__PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#  define RECAP__PRINTF(fmt_index, first_arg)
#endif

/* Set the calling thread's last error to status and the formatted message; returns status. */
recap_status_t recap__error(recap_status_t status, const char *fmt, ...) RECAP__PRINTF(2, 3);

/* As recap__error, and the message ends with " [file:line]", the place in recap that found the
 * failure. */
#define RECAP__ERROR_AT(status, ...) recap__error_at((status), __FILE__, __LINE__, __VA_ARGS__)
recap_status_t recap__error_at(recap_status_t status, const char *file, int line, const char *fmt,
                               ...) RECAP__PRINTF(4, 5);

/* A byte count as recap's messages (and the memory page) write it: "1.50 MiB", "512 bytes". */
void recap__format_bytes(char *out, size_t cap, uint64_t bytes);

/* Propagate a failing status from a callee that has already recorded its message. */
#define RECAP__CHECK(expr)                            \
  do {                                                \
    recap_status_t recap__s_ = (expr);                \
    if (recap__s_ != RECAP_SUCCESS) return recap__s_; \
  } while (0)

/* Same, but jump to a cleanup label with the status kept in `var`. */
#define RECAP__CHECK_GOTO(expr, var, label) \
  do {                                      \
    (var) = (expr);                         \
    if ((var) != RECAP_SUCCESS) goto label; \
  } while (0)

/* Argument checks at the public surface. */
#define RECAP__ARG(cond, ...)                                                    \
  do {                                                                           \
    if (!(cond)) return recap__error(RECAP_ERROR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

/* Cleanup on an error path may call functions that set the last error themselves; save the
 * original first and restore it at the end, so the user sees the cause, not the cleanup. */
typedef struct recap__saved_error {
  recap_status_t status;
  char message[4096]; /* as long as the last error itself */
} recap__saved_error_t;
void recap__error_save(recap__saved_error_t *saved);
/* Restores the saved error and returns its status. */
recap_status_t recap__error_restore(const recap__saved_error_t *saved);

/* Logging through the user's callback (stderr by default), filtered by level. */
void recap__log(recap_log_level_t level, const char *fmt, ...) RECAP__PRINTF(2, 3);
#define RECAP__WARN(...) recap__log(RECAP_LOG_LEVEL_WARN, __VA_ARGS__)
#define RECAP__INFO(...) recap__log(RECAP_LOG_LEVEL_INFO, __VA_ARGS__)
#define RECAP__DEBUG(...) recap__log(RECAP_LOG_LEVEL_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* RECAP_ERROR_H */
