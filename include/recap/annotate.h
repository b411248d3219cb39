/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/annotate.h — labels for the nodes of a captured graph ("which of my code is this
 * node?").
 *
 *     recap_annotations_enable(1);                  // or RECAP_ANNOTATIONS=1
 *     recap_graph_capture_begin(g, NULL, s);        // g created with RECAP_GRAPH_KEEP
 *     recap_annotate_push("forward", s);
 *       recap_annotate_push("attention", s);
 *       launch_attention(s);                        // these nodes: "attention",
 *       recap_annotate_pop(s);                      //   path "forward/attention"
 *     launch_mlp(s);                                // these nodes: "forward"
 *     recap_annotate_pop(s);
 *     recap_graph_capture_end(g);
 *     recap_graph_inspect(g, &info);                // info->nodes[i].annotation, annotation_path
 *
 * A push on a stream that captures into a recap graph opens a scope of that capture: every
 * node the capture records until the matching pop, on that stream and on side streams joined
 * to the capture, gets the scope's label. Scopes nest; a node gets the innermost scope's label,
 * and the path of every enclosing label ("outer/inner"). Labels show in recap_graph_inspect,
 * its JSON, recap_graph_debug_dump and tools/recap-graph's pages.
 *
 * Outside a capture into a recap graph, or with annotations disabled, push and pop do nothing
 * and return RECAP_SUCCESS. Annotations are disabled by default (as PyTorch's are): each push
 * and pop during a capture lists the nodes captured so far, so a library that annotates every
 * layer would make long captures quadratic for users who never look at the labels. See
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

/* Open a scope labelled `label` (copied) on the capture stream belongs to. Errors:
 * RECAP_ERROR_INVALID_ARGUMENT for a NULL or empty label or one longer than
 * RECAP_ANNOTATION_MAX_LENGTH (checked even when nothing is recorded, so that a bad label is
 * found without a capture); RECAP_ERROR_INVALID_USAGE past RECAP_ANNOTATION_MAX_DEPTH open
 * scopes. On a stream whose capture was invalidated it does nothing (capture_end reports the
 * invalidation). Thread safe: streams of one capture may push and pop from several threads. */
RECAP_NODISCARD RECAP_API recap_status_t recap_annotate_push(const char *label,
                                                             recap_stream_t stream);

/* Close the innermost scope. It must have been pushed on the same stream: a pop with no scope
 * open, or on another stream than the innermost scope's, is RECAP_ERROR_INVALID_USAGE and
 * changes nothing. Scopes still open when the capture ends are closed then, with a warning. */
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
