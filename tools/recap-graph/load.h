/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * load.h — reading recap's inspection JSON (recap_graph_info_json) into the viewer's model.
 */
#ifndef RECAP_GRAPH_LOAD_H
#define RECAP_GRAPH_LOAD_H

#include <stddef.h>

#include "recap_view.h"

/* Read and check the JSON at path ("-": standard input) into g, finished (recap_view_finish).
 * On failure returns -1 with a message in err and leaves g empty. A mismatch the picture can
 * live with (a wrong "edge_count") is a warning on standard error, prefixed with program. */
int recap_graph_load(const char *path, const char *program, recap_view_graph_t *g, char *err,
                     size_t err_size);

#endif /* RECAP_GRAPH_LOAD_H */
