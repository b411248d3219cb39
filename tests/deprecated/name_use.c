/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * name_use.c — compiled, never run, by check.cmake: with OLD_NAME defined it calls a name that
 * RECAP_DEPRECATED marks (recap_graph_set_update_policy), which must draw a warning naming its
 * replacement; without it, it calls the replacement and must compile cleanly under the same
 * flags.
 */
#include "recap.h"

recap_status_t set_policy(recap_graph_t graph);

recap_status_t set_policy(recap_graph_t graph) {
#ifdef OLD_NAME
  return recap_graph_set_update_policy(graph, NULL);
#else
  return recap_graph_update_policy_set(graph, NULL);
#endif
}
