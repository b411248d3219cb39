/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture_internal.h — what the capture module (capture.c: the public entry points of captures,
 * where the capture options turn the feature modules on; scope.c: the capture scope) offers
 * the modules above it and the tests.
 */
#ifndef RECAP_CAPTURE_INTERNAL_H
#define RECAP_CAPTURE_INTERNAL_H

#include "recap/core.h"
#include "recap/graph.h"

/* The side stream of the current device that capture scopes use when given none (graphed
 * callables capture on it too). */
recap_status_t recap__side_stream(recap_stream_t *stream);
/* Forget the side streams (tests, after the fake device was reset). */
void recap__side_streams_forget(void);

/* A capture scope is open on graph (recap_capture_scope_begin): close it, because its capture
 * ended through recap_graph_capture_end (capture.c), so that recap_capture_scope_end does not
 * end a later capture of the graph. Nothing when no scope is open. */
void recap__scope_capture_ended(recap_graph_t graph);

#endif /* RECAP_CAPTURE_INTERNAL_H */
