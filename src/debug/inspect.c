/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect.c — what a kept graph template contains, as a struct and as JSON.
 *
 * The device seam reads the nodes and edges (kernel names come from the driver); this file
 * owns the public objects and the JSON emitter. One walk of the info feeds the JSON, which
 * tools/recap-graph turns into DOT and HTML.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/host.h"
#include "core/json.h"
#include "graph/graph_internal.h"

const char *recap_node_type_name(recap_node_type_t type) { return recap__node_type_name(type); }

recap_status_t recap_graph_inspect(recap_graph_t graph, recap_graph_info_t **info) {
  RECAP__ARG(info != NULL, "recap_graph_inspect: info is NULL");
  *info = NULL;
  RECAP__CHECK(recap__graph_check(graph, "recap_graph_inspect"));
  RECAP__CHECK(recap__graph_not_recapturing(graph, "recap_graph_inspect"));
  RECAP__CHECK(recap__graph_not_host_loop(graph, "recap_graph_inspect"));
  if (!(graph->flags & RECAP_GRAPH_KEEP) || !graph->template_graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_inspect: needs the kept template: create the graph with "
                        "RECAP_GRAPH_KEEP and inspect it after capture_end");
  /* The template holds what the layers changed in the executable only (rebinds) once synced. */
  RECAP__CHECK(recap__graph_hooks_template_read(graph));
  recap_graph_info_t *result = recap__host_calloc(1, sizeof *result);
  if (!result)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_inspect: out of host memory");
  result->size = sizeof *result;
  recap_status_t s = recap__device()->graph_inspect(graph->template_graph, result);
  /* The layers attached to the graph add what they know of its nodes (annotations: labels). */
  if (s == RECAP_SUCCESS) s = recap__graph_hooks_inspect(graph, result);
  if (s != RECAP_SUCCESS) {
    recap_graph_info_free(result);
    return s;
  }
  *info = result;
  return RECAP_SUCCESS;
}

void recap_graph_info_free(recap_graph_info_t *info) {
  if (!info) return;
  recap__graph_info_clear(info);
  recap__host_free(info);
}

static void write_dims(recap__json_t *j, const char *key, const unsigned dims[3]) {
  recap__json_key(j, key);
  recap__json_array_begin(j);
  for (int i = 0; i < 3; i++) recap__json_uint(j, dims[i]);
  recap__json_array_end(j);
}

static void write_indices(recap__json_t *j, const char *key, const size_t *items, size_t count) {
  recap__json_key(j, key);
  recap__json_array_begin(j);
  for (size_t i = 0; i < count; i++) recap__json_uint(j, items[i]);
  recap__json_array_end(j);
}

recap_status_t recap_graph_info_json(const recap_graph_info_t *info, char **json) {
  RECAP__ARG(info != NULL && json != NULL, "recap_graph_info_json: info and json must not be NULL");
  *json = NULL;
  recap__json_t j;
  recap__json_init(&j);
  recap__json_object_begin(&j);
  recap__json_key(&j, "nodes");
  recap__json_array_begin(&j);
  for (size_t i = 0; i < info->node_count; i++) {
    const recap_graph_node_t *n = &info->nodes[i];
    recap__json_object_begin(&j);
    recap__json_key(&j, "index");
    recap__json_uint(&j, i);
    recap__json_key(&j, "type");
    recap__json_string(&j, recap_node_type_name(n->type));
    recap__json_key(&j, "kernel_name");
    recap__json_string(&j, n->kernel_name);
    if (n->type == RECAP_NODE_KERNEL) {
      write_dims(&j, "grid", n->grid);
      write_dims(&j, "block", n->block);
      recap__json_key(&j, "shared_bytes");
      recap__json_uint(&j, n->shared_bytes);
    }
    recap__json_key(&j, "bytes");
    recap__json_uint(&j, n->bytes);
    recap__json_key(&j, "annotation");
    recap__json_string(&j, n->annotation);
    recap__json_key(&j, "annotation_path");
    recap__json_string(&j, n->annotation_path);
    recap__json_key(&j, "tools_id");
    if (n->has_tools_id) {
      /* As a string: ids above 2^53 would lose digits in JSON readers' doubles. */
      char id[24];
      snprintf(id, sizeof id, "%llu", (unsigned long long)n->tools_id);
      recap__json_string(&j, id);
    } else
      recap__json_null(&j);
    write_indices(&j, "dependencies", n->dependencies, n->dependency_count);
    write_indices(&j, "dependents", n->dependents, n->dependent_count);
    /* Where the node sits: a body of a conditional node (its index and which body), or the
     * graph itself (null); and, for a conditional node, what it does and how many bodies. */
    recap__json_key(&j, "parent");
    if (n->parent == SIZE_MAX)
      recap__json_null(&j);
    else
      recap__json_uint(&j, n->parent);
    recap__json_key(&j, "branch");
    recap__json_uint(&j, n->branch);
    recap__json_key(&j, "region_kind");
    if (n->type == RECAP_NODE_CONDITIONAL)
      recap__json_string(&j, recap_region_kind_name(n->region_kind));
    else
      recap__json_null(&j);
    recap__json_key(&j, "branches");
    recap__json_uint(&j, n->branches);
    /* Kernels: the graph parameters the node takes, "name = value" each, and what was set on
     * it alone (recap/params.h). */
    if (n->type == RECAP_NODE_KERNEL) {
      recap__json_key(&j, "graph_params");
      recap__json_array_begin(&j);
      for (size_t k = 0; k < n->graph_param_count; k++) recap__json_string(&j, n->graph_params[k]);
      recap__json_array_end(&j);
      recap__json_key(&j, "set_alone");
      recap__json_string(&j, n->set_alone);
    }
    recap__json_object_end(&j);
  }
  recap__json_array_end(&j);
  recap__json_key(&j, "edge_count");
  recap__json_uint(&j, info->edge_count);
  recap__json_key(&j, "tools_ids_available");
  recap__json_bool(&j, info->tools_ids_available != 0);
  recap__json_object_end(&j);
  return recap__json_finish(&j, json);
}
