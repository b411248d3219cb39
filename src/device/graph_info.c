/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_info.c — releasing what a seam's graph_inspect filled into a recap_graph_info_t.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "device/device.h"

void recap__graph_info_clear(recap_graph_info_t *info) {
  if (!info) return;
  if (info->nodes) {
    for (size_t i = 0; i < info->node_count; i++) {
      recap_graph_node_t *n = &info->nodes[i];
      /* The strings are the info's own copies; const only keeps users from writing them. */
      recap__host_free((void *)(uintptr_t)n->kernel_name);
      recap__host_free((void *)(uintptr_t)n->annotation);
      recap__host_free((void *)(uintptr_t)n->annotation_path);
      recap__host_free(n->dependencies);
      recap__host_free(n->dependents);
    }
    recap__host_free(info->nodes);
  }
  memset(info, 0, sizeof *info);
}
