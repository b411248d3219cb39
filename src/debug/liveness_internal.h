/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * liveness_internal.h — what the capture entry point (src/capture/capture.c, where the capture
 * options turn the modules on) calls of the input-liveness checks (liveness.c).
 */
#ifndef RECAP_LIVENESS_INTERNAL_H
#define RECAP_LIVENESS_INTERNAL_H

#include "recap/core.h"
#include "recap/graph.h"

/* The probe says before a capture begins whether the device can read what graphs read; attach
 * adds the checks' hooks to a graph whose capture just began. */
recap_status_t recap__liveness_probe(void);
recap_status_t recap__liveness_attach(recap_graph_t graph);

#endif /* RECAP_LIVENESS_INTERNAL_H */
