/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * view_fixture.h — a graph shaped like a training step, captured on the CPU fake device, for the
 * viewer's tests, its headless-browser check and its screenshot.
 */
#ifndef RECAP_TEST_VIEW_FIXTURE_H
#define RECAP_TEST_VIEW_FIXTURE_H

#include "recap.h"
#include "recap_view.h"

/* Reset the fake and capture the fixture into *graph (RECAP_GRAPH_KEEP, input liveness on):
 * annotation scopes step/{data, forward/layerN, loss, backward/layerN, metrics}, mangled
 * template kernel names, memsets, and per-layer side streams (weight gradient and Adam) beside
 * the main chain. The weights stay allocated until view_fixture_release. */
recap_status_t view_fixture_capture(recap_graph_t *graph);
/* Free the fixture's buffers and destroy the graph. */
recap_status_t view_fixture_release(recap_graph_t graph);

/* The viewer's model of the fixture: recap_graph_inspect, recap_view_from_info, the liveness
 * inputs attached, the graph's pool; and, with plausible, the grid and block sizes and memset
 * sizes such a step would have (the fake reports 1x1x1 and 0 bytes). 0 on success. */
int view_fixture_model(recap_graph_t graph, int plausible, recap_view_graph_t *view, char *err,
                       size_t err_size);

#endif /* RECAP_TEST_VIEW_FIXTURE_H */
