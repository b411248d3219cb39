/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * args.h — the argument checks every public entry point shares: live handles and versioned
 * option structs. One rule each, and one message shape each, for every object and struct.
 */
#ifndef RECAP_CORE_ARGS_H
#define RECAP_CORE_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "recap/core.h"

/* ---- handles ------------------------------------------------------------------------------
 * A public handle points at a struct whose `magic` field holds the type's magic number while the
 * object is alive and 0 once it is destroyed. The check catches NULL, destroyed and foreign
 * handles (best effort: memory freed and reused cannot be told apart; ASan catches that in
 * tests). The messages read "<function>: <param> is NULL" and "<function>: <address> is not a
 * live <kind> (destroyed, or not made by <maker>)". */
recap_status_t recap__handle_check(const void *handle, uint32_t found_magic, uint32_t magic,
                                   const char *function, const char *param, const char *kind,
                                   const char *maker);
#define RECAP__HANDLE_CHECK(handle, magic_number, function, param, kind, maker)              \
  recap__handle_check((handle), (handle) ? (handle)->magic : 0u, (magic_number), (function), \
                      (param), (kind), (maker))

/* ---- versioned option structs --------------------------------------------------------------
 * The public option structs begin with `size_t size`, which their _INIT macro sets to the
 * struct's size in the caller's headers; the struct grows only at its end. The rule (stated for
 * users in recap/graph.h): a size from the first version's struct to the library's is copied,
 * and fields past it keep their defaults; a smaller or larger size is
 * RECAP_ERROR_INVALID_ARGUMENT, with a message naming the function, the struct and its _INIT
 * macro. *dst holds the defaults on entry; src NULL leaves them. field names the size in the
 * message ("options->size"). */
recap_status_t recap__options_copy(void *dst, size_t library_size, const void *src,
                                   size_t first_size, const char *function, const char *field,
                                   const char *type, const char *init);
/* type: the struct's typedef name; first_last: the last field of its first version. */
#define RECAP__OPTIONS_COPY(dst, src, type, first_last, function, init)                         \
  recap__options_copy((dst), sizeof(type), (src),                                               \
                      offsetof(type, first_last) + sizeof(((type *)0)->first_last), (function), \
                      "options->size", #type, (init))
/* The same rule for an options struct embedded as the member `member` (a string literal) of
 * another, after the outer struct passed its own check: src points at the caller's member, and
 * the message names options-><member>.size. */
#define RECAP__EMBEDDED_OPTIONS_COPY(dst, src, type, first_last, function, member, init)        \
  recap__options_copy((dst), sizeof(type), (src),                                               \
                      offsetof(type, first_last) + sizeof(((type *)0)->first_last), (function), \
                      "options->" member ".size", #type, (init))

/* ---- versioned output structs --------------------------------------------------------------
 * The public structs recap fills for the caller begin with `size_t size` too, set by their _INIT
 * macro. The same bounds hold: a size from the first version's struct to the library's, else
 * RECAP_ERROR_INVALID_ARGUMENT naming the function, the field ("info->size"), the struct and its
 * _INIT macro. recap then writes the struct's first `size` bytes, `size` itself unchanged. */
recap_status_t recap__output_size_check(size_t size, size_t library_size, size_t first_size,
                                        const char *function, const char *field, const char *type,
                                        const char *init);
#define RECAP__OUTPUT_SIZE_CHECK(out, type, first_last, function, field, init)           \
  recap__output_size_check((out)->size, sizeof(type),                                    \
                           offsetof(type, first_last) + sizeof(((type *)0)->first_last), \
                           (function), (field), #type, (init))

#endif /* RECAP_CORE_ARGS_H */
