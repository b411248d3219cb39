/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regions_info.h — a recap_graph_info_t with regions, written by hand in the layout
 * recap_graph_inspect gives (recap/inspect.h), for the tests of the JSON and of the viewer:
 *
 *     #0 prologue ─> #1 WHILE ─> #2 SWITCH (3 cases) ─> #3 epilogue     (#0..#2 in scope "step")
 *     while body of #1:  #4 step ─> #5 IF_ELSE ─> #6 condition          (#4, #5 in "step/solve")
 *       if of #5:        #7 then_kernel
 *       else of #5:      #8 memcpy of 4 KiB
 *     case 0 of #2:      #9 case0_a ─> #10 case0_b
 *     case 1 of #2:      (empty)
 *     case 2 of #2:      #11 memset of 256 B
 *
 * 12 nodes, 6 edges. The struct points at static storage: do not free it.
 */
#ifndef RECAP_TEST_REGIONS_INFO_H
#define RECAP_TEST_REGIONS_INFO_H

#include <stdint.h>

#include "recap.h"

enum { REGIONS_INFO_NODES = 12, REGIONS_INFO_EDGES = 6 };

static inline void regions_info_link(recap_graph_node_t *n, size_t *deps, size_t dep_count,
                                     size_t *dependents, size_t dependent_count) {
  n->dependencies = deps;
  n->dependency_count = dep_count;
  n->dependents = dependents;
  n->dependent_count = dependent_count;
}

static inline recap_graph_info_t regions_info(void) {
  static size_t d1[] = {0}, d2[] = {1}, d3[] = {2}, d5[] = {4}, d6[] = {5}, d10[] = {9};
  static size_t s0[] = {1}, s1[] = {2}, s2[] = {3}, s4[] = {5}, s5[] = {6}, s9[] = {10};
  static recap_graph_node_t nodes[REGIONS_INFO_NODES];
  for (size_t i = 0; i < REGIONS_INFO_NODES; i++)
    nodes[i] = (recap_graph_node_t){.type = RECAP_NODE_KERNEL, .parent = SIZE_MAX};
  nodes[0].kernel_name = "_Z8prologuePf";
  nodes[1].type = RECAP_NODE_CONDITIONAL;
  nodes[1].region_kind = RECAP_REGION_WHILE;
  nodes[1].branches = 1;
  nodes[2].type = RECAP_NODE_CONDITIONAL;
  nodes[2].region_kind = RECAP_REGION_SWITCH;
  nodes[2].branches = 3;
  nodes[3].kernel_name = "epilogue";
  for (size_t i = 0; i < 3; i++) nodes[i].annotation = nodes[i].annotation_path = "step";
  nodes[4].kernel_name = "_Z4stepPfi";
  nodes[5].type = RECAP_NODE_CONDITIONAL;
  nodes[5].region_kind = RECAP_REGION_IF_ELSE;
  nodes[5].branches = 2;
  for (size_t i = 4; i <= 5; i++) {
    nodes[i].annotation = "solve";
    nodes[i].annotation_path = "step/solve";
  }
  nodes[6].kernel_name = "condition";
  for (size_t i = 4; i <= 6; i++) nodes[i].parent = 1;
  nodes[7].kernel_name = "then_kernel";
  nodes[7].parent = 5;
  nodes[8].type = RECAP_NODE_MEMCPY;
  nodes[8].bytes = 4096;
  nodes[8].parent = 5;
  nodes[8].branch = 1;
  nodes[9].kernel_name = "case0_a";
  nodes[10].kernel_name = "case0_b";
  nodes[11].type = RECAP_NODE_MEMSET;
  nodes[11].bytes = 256;
  nodes[11].branch = 2;
  for (size_t i = 9; i <= 11; i++) nodes[i].parent = 2;
  for (size_t i = 0; i < REGIONS_INFO_NODES; i++)
    if (nodes[i].type == RECAP_NODE_KERNEL)
      for (int d = 0; d < 3; d++) nodes[i].grid[d] = nodes[i].block[d] = 1;
  regions_info_link(&nodes[0], NULL, 0, s0, 1);
  regions_info_link(&nodes[1], d1, 1, s1, 1);
  regions_info_link(&nodes[2], d2, 1, s2, 1);
  regions_info_link(&nodes[3], d3, 1, NULL, 0);
  regions_info_link(&nodes[4], NULL, 0, s4, 1);
  regions_info_link(&nodes[5], d5, 1, s5, 1);
  regions_info_link(&nodes[6], d6, 1, NULL, 0);
  regions_info_link(&nodes[9], NULL, 0, s9, 1);
  regions_info_link(&nodes[10], d10, 1, NULL, 0);
  return (recap_graph_info_t){.node_count = REGIONS_INFO_NODES,
                              .nodes = nodes,
                              .edge_count = REGIONS_INFO_EDGES};
}

#endif /* RECAP_TEST_REGIONS_INFO_H */
