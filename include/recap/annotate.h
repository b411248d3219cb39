/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/annotate.h — labels for the nodes of a captured graph ("which of my code is this
 * node?"), shown by recap_graph_inspect, its JSON and tools/recap-graph; off by default. See
 * docs/debug.md.
 */
#ifndef RECAP_ANNOTATE_H
#define RECAP_ANNOTATE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest label, in bytes without the terminating NUL, and the deepest nesting. */
#define RECAP_ANNOTATION_MAX_LENGTH 256
#define RECAP_ANNOTATION_MAX_DEPTH 64

/* Open a scope labelled `label` (copied) on the capture stream belongs to. INVALID_ARGUMENT:
 * label NULL, empty or longer than RECAP_ANNOTATION_MAX_LENGTH (checked even outside a capture);
 * INVALID_USAGE past RECAP_ANNOTATION_MAX_DEPTH scopes. Thread safe. */
RECAP_NODISCARD RECAP_API recap_status_t recap_annotate_push(const char *label,
                                                             recap_stream_t stream);

/* Close the innermost scope, pushed on the same stream (else RECAP_ERROR_INVALID_USAGE, nothing
 * changed). Scopes open at capture end are closed then, with a warning. */
RECAP_NODISCARD RECAP_API recap_status_t recap_annotate_pop(recap_stream_t stream);

/* 1 to record annotations, 0 not to, -1 to follow the environment again (RECAP_ANNOTATIONS=1
 * records; unset or 0 does not). Code overrides the environment. Change it between captures:
 * a scope pushed while disabled is not there to pop once enabled. */
RECAP_API void recap_annotations_enable(int enabled);
/* 1 when annotations are recorded now. */
RECAP_API int recap_annotations_enabled(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_ANNOTATE_H */
