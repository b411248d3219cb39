/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/core.h — what every part of recap shares: the version, the export macro, the status
 * codes and the calling thread's last error, logging, and the stream type. Every header under
 * recap/ includes it, so each compiles on its own; programs usually include <recap.h>, which
 * brings all of them.
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

/* ------------------------------------------------------------------------------------------
 * Export macro. The library is built with hidden visibility; only RECAP_API symbols are
 * exported from the shared library. Define RECAP_STATIC when linking the static library on
 * platforms where that matters.
 * ---------------------------------------------------------------------------------------- */

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

/* ------------------------------------------------------------------------------------------
 * RECAP_NODISCARD: the compiler warns when a call drops the function's status. Every function
 * returning recap_status_t carries it except the release functions (recap_free,
 * recap_empty_cache, recap_pool_release, recap_graph_reset, the *_destroy functions). To drop a
 * status on purpose, assign it to a variable: a (void) cast does not silence GCC.
 * ---------------------------------------------------------------------------------------- */

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
 * with hint saying what replaces it (GCC and Clang; C23 and C++14 [[deprecated]] elsewhere;
 * nothing where neither exists). Build with -Wno-deprecated-declarations to silence it while
 * moving to the new names. */
#if defined(__GNUC__)
#  define RECAP_DEPRECATED(hint) __attribute__((deprecated(hint)))
#elif (defined(__cplusplus) && __cplusplus >= 201402L) || \
    (!defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L)
#  define RECAP_DEPRECATED(hint) [[deprecated(hint)]]
#else
#  define RECAP_DEPRECATED(hint)
#endif

/* RECAP_PRINTF_2_3: the compiler checks a printf-style format in parameter 2 against the
 * arguments from parameter 3 on (GCC and Clang). */
#if defined(__GNUC__)
#  define RECAP_PRINTF_2_3 __attribute__((format(printf, 2, 3)))
#else
#  define RECAP_PRINTF_2_3
#endif

/* The library's version as RECAP_VERSION_HEX of the built library, and as "major.minor.patch". */
RECAP_API unsigned recap_version(void);
RECAP_API const char *recap_version_string(void);

/* ------------------------------------------------------------------------------------------
 * Status codes. Every fallible call returns one; RECAP_SUCCESS is 0. The list is the single
 * source of the codes, their names and their one-line meanings.
 * ---------------------------------------------------------------------------------------- */

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

/* The detailed message of the calling thread's last failure: what was called, the CUDA error
 * name where one was involved, and where. Valid until the thread's next recap call. Returns ""
 * when the thread has seen no failure since recap_clear_last_error(). */
RECAP_API const char *recap_last_error(void);
/* The status that goes with recap_last_error(). */
RECAP_NODISCARD RECAP_API recap_status_t recap_last_status(void);
RECAP_API void recap_clear_last_error(void);
/* Set the calling thread's last error, as if recap had failed, for code that mixes recap with
 * calls of its own: recap_last_status() becomes status and recap_last_error() the printf-style
 * message (cut at 4095 bytes). Returns status, to pass on:
 *     if (err != cudaSuccess)
 *       return recap_set_last_error(RECAP_ERROR_CUDA, "my_kernel: %s", cudaGetErrorName(err));
 * status must be a failure code of RECAP_STATUS_MAP, else RECAP_ERROR_INVALID_ARGUMENT. */
RECAP_NODISCARD RECAP_API recap_status_t recap_set_last_error(recap_status_t status,
                                                              const char *format,
                                                              ...) RECAP_PRINTF_2_3;

/* ------------------------------------------------------------------------------------------
 * Logging. Messages go to a callback, stderr by default. The level starts from the RECAP_LOG
 * environment variable (none, error, warn, info, debug; default warn; docs/environment.md).
 * ---------------------------------------------------------------------------------------- */

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

/* The same type as CUDA's cudaStream_t and CUstream, so either converts without a cast.
 * NULL is the legacy default stream. */
typedef struct CUstream_st *recap_stream_t;

/* Number of CUDA devices. On a machine with no NVIDIA driver or no device this returns
 * RECAP_ERROR_NO_DEVICE and recap_last_error() says why; it never aborts. */
RECAP_NODISCARD RECAP_API recap_status_t recap_device_count(int *count);

/* A static string naming the device backend in use: "cuda", or "none" in a recap built without
 * CUDA (the CMake option RECAP_CUDA=OFF), where every call that needs a device returns
 * RECAP_ERROR_NO_DEVICE and recap_last_error() names the option. */
RECAP_API const char *recap_device_backend(void);

/* Free a string recap allocated and handed over (JSON, the memory page); NULL does nothing. */
RECAP_API void recap_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_CORE_H */
