/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params_source.h — values that take the place of those a step passes to recap_param_on_stream,
 * for the modules that call a user's step themselves (graph sets: the values set with
 * recap_graph_set_param_set), on the calling thread only (params.c).
 */
#ifndef RECAP_REBIND_PARAMS_SOURCE_H
#define RECAP_REBIND_PARAMS_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "recap/params.h"

/* Whether the source holds a value for name of type; *bits (the low 4 or 8 bytes) gets it. */
typedef bool (*recap__param_source_fn)(void *ctx, const char *name, recap_param_type_t type,
                                       uint64_t *bits);

typedef struct recap__param_source {
  recap__param_source_fn fn; /* NULL: none */
  void *ctx;
} recap__param_source_t;

/* Install source for the calling thread, *previous getting the one it replaces (put it back
 * with a second call once the step returned: steps may nest). */
void recap__params_source_swap(const recap__param_source_t *source,
                               recap__param_source_t *previous);

/* A type's name ("float", ...) and width in bytes (4 or 8). */
const char *recap__param_type_name(recap_param_type_t type);
uint32_t recap__param_type_bytes(recap_param_type_t type);

#endif /* RECAP_REBIND_PARAMS_SOURCE_H */
