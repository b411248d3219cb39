/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/core.h — what every part of recap shares: the version, the export and attribute
 * macros, the status codes and the thread's last error, logging, the stream type. Every header
 * includes it. See docs/api.md.
 */
#ifndef RECAP_CORE_H
#define RECAP_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version --------------------------------------------------------------------------------- */

#define RECAP_VERSION_MAJOR 0
#define RECAP_VERSION_MINOR 2
#define RECAP_VERSION_PATCH 0
#define RECAP_VERSION_HEX \
  ((RECAP_VERSION_MAJOR << 16) | (RECAP_VERSION_MINOR << 8) | RECAP_VERSION_PATCH)

/* ---- Export macro (define RECAP_STATIC to link the static library) --------------------------- */

#if defined(_WIN32) && !defined(RECAP_STATIC)
#  ifdef RECAP_BUILDING
#    define RECAP_API __declspec(dllexport)
#  else
#    define RECAP_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define RECAP_API __attribute__((visibility("default")))
#else
#  define RECAP_API
#endif

/* RECAP_NODISCARD: the compiler warns when a call drops the status (all but the release
 * functions). To drop one on purpose, assign it to a variable: (void) does not silence GCC. */

#if (defined(__cplusplus) && __cplusplus >= 201703L) || \
    (defined(_MSVC_LANG) && _MSVC_LANG >= 201703L) ||   \
    (!defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L)
#  define RECAP_NODISCARD [[nodiscard]]
#elif defined(__GNUC__)
#  define RECAP_NODISCARD __attribute__((warn_unused_result))
#else
#  define RECAP_NODISCARD
#endif

/* RECAP_DEPRECATED(hint): the compiler warns at each use of a name kept for one more release,
 * with hint naming its replacement. C++ gets the standard attribute: a GNU attribute before
 * RECAP_NODISCARD's [[nodiscard]] would make clang++ apply that one to the return type. */
#if defined(__cplusplus) && __cplusplus >= 201402L
#  define RECAP_DEPRECATED(hint) [[deprecated(hint)]]
#elif defined(__GNUC__)
#  define RECAP_DEPRECATED(hint) __attribute__((deprecated(hint)))
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L
#  define RECAP_DEPRECATED(hint) [[deprecated(hint)]]
#else
#  define RECAP_DEPRECATED(hint)
#endif

/* RECAP_PRINTF_2_3: the compiler checks a printf format in parameter 2 against the rest. */
#if defined(__GNUC__)
#  define RECAP_PRINTF_2_3 __attribute__((format(printf, 2, 3)))
#else
#  define RECAP_PRINTF_2_3
#endif

/* The library's version as RECAP_VERSION_HEX of the built library, and as "major.minor.patch". */
RECAP_API unsigned recap_version(void);
RECAP_API const char *recap_version_string(void);

/* ---- Status codes: every fallible call returns one; RECAP_SUCCESS is 0 ----------------------- */

#define RECAP_STATUS_MAP(X)                                                                        \
  X(SUCCESS, 0, "success")                                                                         \
  X(ERROR_INVALID_ARGUMENT, 1, "an argument is invalid (NULL, out of range, or a foreign handle)") \
  X(ERROR_INVALID_USAGE, 2, "the call is not allowed in the current state")                        \
  X(ERROR_OUT_OF_MEMORY, 3, "the device is out of memory")                                         \
  X(ERROR_NO_DEVICE, 4, "no usable CUDA device or driver was found")                               \
  X(ERROR_CUDA, 5, "a CUDA call failed")                                                           \
  X(ERROR_CAPTURE_INVALIDATED, 6, "the stream capture was invalidated by an illegal call")         \
  X(ERROR_INVALID_VALUE, 7, "an option or environment variable has an invalid value")              \
  X(ERROR_NOT_FOUND, 8, "the object was not found")                                                \
  X(ERROR_BUSY, 9, "the object is still in use")                                                   \
  X(ERROR_DEAD_INPUT, 10, "a graph input was freed before replay")                                 \
  X(ERROR_NOT_SUPPORTED, 11, "the operation is not supported by this driver or build")             \
  X(ERROR_IO, 12, "a file could not be written or read")                                           \
  X(ERROR_INTERNAL, 13, "an internal invariant was broken (a bug in recap)")                       \
  X(ERROR_POOL_ASLEEP, 14, "the memory pool is asleep (wake it first)")

typedef enum recap_status {
#define RECAP_X_ENUM(name, value, text) RECAP_##name = value,
  RECAP_STATUS_MAP(RECAP_X_ENUM)
#undef RECAP_X_ENUM
} recap_status_t;

/* "RECAP_ERROR_OUT_OF_MEMORY" for RECAP_ERROR_OUT_OF_MEMORY; "RECAP_UNKNOWN_STATUS" otherwise. */
RECAP_API const char *recap_status_name(recap_status_t status);
/* The one-line meaning of a status; never NULL. */
RECAP_API const char *recap_status_string(recap_status_t status);

/* The calling thread's last failure, in detail; valid until its next recap call. "" when the
 * thread has seen no failure since recap_clear_last_error(). */
RECAP_API const char *recap_last_error(void);
/* The status that goes with recap_last_error(). */
RECAP_NODISCARD RECAP_API recap_status_t recap_last_status(void);
RECAP_API void recap_clear_last_error(void);
/* Set the calling thread's last error, as if recap had failed (message cut at 4095 bytes), and
 * return status, to pass on. A status that is not a failure code: RECAP_ERROR_INVALID_ARGUMENT. */
RECAP_NODISCARD RECAP_API recap_status_t recap_set_last_error(recap_status_t status,
                                                              const char *format,
                                                              ...) RECAP_PRINTF_2_3;

/* ---- Logging: to a callback (stderr by default), at a level from RECAP_LOG (default warn) ---- */

typedef enum recap_log_level {
  RECAP_LOG_LEVEL_NONE = 0,
  RECAP_LOG_LEVEL_ERROR = 1,
  RECAP_LOG_LEVEL_WARN = 2,
  RECAP_LOG_LEVEL_INFO = 3,
  RECAP_LOG_LEVEL_DEBUG = 4
} recap_log_level_t;

typedef void (*recap_log_fn)(recap_log_level_t level, const char *message, void *user_data);

/* Replace the log callback; NULL restores the stderr logger. Thread safe. */
RECAP_API void recap_log_set(recap_log_fn fn, void *user_data);
RECAP_API void recap_log_level_set(recap_log_level_t level);
RECAP_API recap_log_level_t recap_log_level_get(void);
RECAP_DEPRECATED("use recap_log_level_set")
RECAP_API void recap_log_set_level(recap_log_level_t level);
RECAP_DEPRECATED("use recap_log_level_get")
RECAP_API recap_log_level_t recap_log_get_level(void);

/* ---- Streams and devices --------------------------------------------------------------------- */

/* CUDA's cudaStream_t / CUstream, without a cast. NULL is the legacy default stream. */
typedef struct CUstream_st *recap_stream_t;

/* Number of CUDA devices. No driver or no device: RECAP_ERROR_NO_DEVICE, saying why. */
RECAP_NODISCARD RECAP_API recap_status_t recap_device_count(int *count);

/* The device backend, a static string: "cuda", or "none" in a recap built with RECAP_CUDA=OFF,
 * where every call that needs a device is RECAP_ERROR_NO_DEVICE. */
RECAP_API const char *recap_device_backend(void);

/* Free a string recap allocated and handed over (JSON, the memory page); NULL does nothing. */
RECAP_API void recap_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_CORE_H */
