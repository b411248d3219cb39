/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json.h — a small JSON writer into a growable string.
 *
 * recap writes JSON (allocator snapshots, graph inspection) but never parses it, so a writer
 * that tracks commas and escapes strings is all the library needs. Out of host memory the
 * writer remembers the failure and recap__json_finish reports it once.
 */
#ifndef RECAP_CORE_JSON_H
#define RECAP_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "recap/core.h"

typedef struct recap__json {
  recap__strbuf_t text;
  bool need_comma; /* the next value in the current container needs a separator */
  int depth;
} recap__json_t;

void recap__json_init(recap__json_t *j);
void recap__json_object_begin(recap__json_t *j);
void recap__json_object_end(recap__json_t *j);
void recap__json_array_begin(recap__json_t *j);
void recap__json_array_end(recap__json_t *j);
/* A key inside an object; the value follows with one of the calls below. */
void recap__json_key(recap__json_t *j, const char *key);
void recap__json_string(recap__json_t *j, const char *s);
void recap__json_int(recap__json_t *j, int64_t v);
void recap__json_uint(recap__json_t *j, uint64_t v);
void recap__json_bool(recap__json_t *j, bool v);
void recap__json_null(recap__json_t *j);
/* A pointer as a "0x..." string, so that JSON readers with 53-bit numbers keep it exact. */
void recap__json_pointer(recap__json_t *j, const void *p);

/* Hand the text to *out (free with recap_string_free / free) or fail with
 * RECAP_ERROR_OUT_OF_MEMORY; either way the writer is left empty. */
recap_status_t recap__json_finish(recap__json_t *j, char **out);
/* Drop the text (on an error path). */
void recap__json_discard(recap__json_t *j);

#endif /* RECAP_CORE_JSON_H */
