/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json_read.h — a small JSON reader: text to a tree of values.
 *
 * The memory page (src/alloc/memory_page.c) draws a snapshot given as text, whether the library
 * just wrote it or a program read it from a file, so recap reads back the JSON it writes. The
 * reader takes RFC 8259 JSON whole (strings with every escape, surrogate pairs joined into
 * UTF-8; numbers; nesting up to RECAP__JSON_MAX_DEPTH, so a hostile text cannot exhaust the
 * stack) and keeps integers exact to 64 bits, as the snapshot's byte counts need.
 */
#ifndef RECAP_CORE_JSON_READ_H
#define RECAP_CORE_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recap.h"

enum { RECAP__JSON_MAX_DEPTH = 64 };

typedef enum recap__jv_kind {
  RECAP__JV_NULL,
  RECAP__JV_BOOL,
  RECAP__JV_NUMBER,
  RECAP__JV_STRING,
  RECAP__JV_ARRAY,
  RECAP__JV_OBJECT
} recap__jv_kind_t;

typedef struct recap__jv {
  recap__jv_kind_t kind;
  char *key;               /* a member of an object: its name (NUL-terminated); else NULL */
  bool boolean;            /* RECAP__JV_BOOL */
  double number;           /* RECAP__JV_NUMBER, always */
  bool integer;            /* the number is an integer that fits int64_t or uint64_t ... */
  bool negative;           /* ... with this sign ... */
  uint64_t magnitude;      /* ... and this magnitude */
  char *string;            /* RECAP__JV_STRING: NUL-terminated UTF-8 (a \u0000 inside is refused) */
  struct recap__jv *items; /* RECAP__JV_ARRAY elements, RECAP__JV_OBJECT members, in order */
  size_t count;
} recap__jv_t;

/* Parse text into *out (free with recap__jv_free). A text that is not JSON is
 * RECAP_ERROR_INVALID_ARGUMENT with a message that starts with who ("recap_memory_html_from_json:
 * snapshot_json"), then says at which line and column and what was expected; out of host memory
 * RECAP_ERROR_OUT_OF_MEMORY. */
recap_status_t recap__jv_parse(const char *text, const char *who, recap__jv_t **out);
void recap__jv_free(recap__jv_t *v);

/* The member of an object named key, or NULL (also when v is NULL or not an object). */
const recap__jv_t *recap__jv_get(const recap__jv_t *v, const char *key);
/* v as a 64-bit integer, when it is an integer number that fits. */
bool recap__jv_int(const recap__jv_t *v, int64_t *out);
bool recap__jv_uint(const recap__jv_t *v, uint64_t *out);
/* v's text when it is a string, else NULL. */
const char *recap__jv_string(const recap__jv_t *v);

#endif /* RECAP_CORE_JSON_READ_H */
