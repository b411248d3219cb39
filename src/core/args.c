/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * args.c — the shared argument checks (core/args.h): live handles and versioned option structs.
 */
#include "core/args.h"

#include <string.h>

#include "core/error.h"

recap_status_t recap__handle_check(const void *handle, uint32_t found_magic, uint32_t magic,
                                   const char *function, const char *param, const char *kind,
                                   const char *maker) {
  if (!handle) return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, param);
  if (found_magic != magic)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: %p is not a live %s (destroyed, or not made by %s)", function, handle,
                        kind, maker);
  return RECAP_SUCCESS;
}

recap_status_t recap__options_copy(void *dst, size_t library_size, const void *src,
                                   size_t first_size, const char *function, const char *field,
                                   const char *type, const char *init) {
  if (!src) return RECAP_SUCCESS;
  size_t size;
  memcpy(&size, src, sizeof size); /* every option struct begins with its size */
  if (size < first_size || size > library_size)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: %s is %zu, but a %s is %zu to %zu bytes (from its first version to "
                        "this library's); start the options from %s",
                        function, field, size, type, first_size, library_size, init);
  memcpy(dst, src, size);
  /* The struct's size field says what the library's copy holds from now on. */
  memcpy(dst, &library_size, sizeof library_size);
  return RECAP_SUCCESS;
}

recap_status_t recap__output_size_check(size_t size, size_t library_size, size_t first_size,
                                        const char *function, const char *field, const char *type,
                                        const char *init) {
  if (size >= first_size && size <= library_size) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                      "%s: %s is %zu, but a %s is %zu to %zu bytes (from its first version to "
                      "this library's); start it from %s",
                      function, field, size, type, first_size, library_size, init);
}
