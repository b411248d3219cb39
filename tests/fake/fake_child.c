/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_child.c — the CPU fake device's child graph nodes: capture_add_child adds to a capture a
 * node holding a deep copy of a graph, as cudaGraphAddNode of a cudaGraphNodeTypeGraph node
 * clones it, after the stream's last node; the stream's later work follows it. A launch runs
 * the copy's nodes where the node stands (fake_cond.c), what they read counts as the node's,
 * nested (fake_inspect.c), and an executable holds a copy of its own (fake_capture.c). CUDA's
 * rule that a child graph holds no conditional node and no memory node is enforced; so is its
 * refusal to copy a graph with device-updatable kernel nodes.
 */
#include <string.h>

#include "fake/fake_state.h"

/* The first node of nodes, at any depth, that a child graph may not hold; NULL if none. */
static const fake_node_t *forbidden_node(const fake_nodes_t *nodes) {
  for (size_t i = 0; i < nodes->count; i++) {
    const fake_node_t *n = &nodes->v[i];
    if (n->type == RECAP_NODE_CONDITIONAL || n->type == RECAP_NODE_MEM_ALLOC ||
        n->type == RECAP_NODE_MEM_FREE || n->device_updatable)
      return n;
    if (n->child) {
      const fake_node_t *inner = forbidden_node(&n->child->nodes);
      if (inner) return inner;
    }
  }
  return NULL;
}

static const char *forbidden_text(const fake_node_t *n) {
  if (n->device_updatable) return "a device-updatable kernel node";
  switch (n->type) {
    case RECAP_NODE_CONDITIONAL: return "a conditional node";
    case RECAP_NODE_MEM_ALLOC: return "a memory allocation node";
    default: return "a memory free node";
  }
}

static recap_status_t note_no_memory(fake_failure_t *f, const fake_stream_t *s) {
  return recap__fake_note(f, RECAP_ERROR_CUDA,
                          "cudaGraphAddNode: out of memory (cudaErrorMemoryAllocation): no host "
                          "memory for a child graph node of capture %llu",
                          (unsigned long long)s->capture->id);
}

/* Give the node just appended for s (its tail, a child graph node) a copy of nodes to run;
 * false, the failure noted in f, when out of host memory. */
static bool child_attach(fake_failure_t *f, fake_stream_t *s, const fake_nodes_t *nodes) {
  fake_graph_t *copy = recap__fake_graph_new();
  if (!copy || !recap__fake_nodes_copy(&copy->nodes, nodes)) {
    if (copy) recap__fake_graph_free(copy);
    note_no_memory(f, s);
    return false;
  }
  s->capture->graph->nodes.v[s->tail - 1].child = copy;
  return true;
}

recap_status_t recap__fake_op_capture_add_child(recap_stream_t stream, recap_cuda_graph_t graph) {
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_CAPTURE_CHILD, "cudaGraphAddNode", "child graph node");
  fake_stream_t *s = recap__fake_stream_of(stream);
  fake_graph_t *g = recap__fake_graph_find(graph);
  const fake_node_t *bad = g ? forbidden_node(&g->nodes) : NULL;
  if (!s) {
    recap__fake_note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphAddNode", (const void *)graph, "graph");
  } else if (!s->capture || s->capture->invalidated) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "capture_add_child (stream %p): the stream takes part in no active "
                     "capture%s",
                     (void *)stream, s->capture ? " (it is invalidated)" : "");
  } else if (bad) {
    recap__fake_note(&f, RECAP_ERROR_NOT_SUPPORTED,
                     "cudaGraphAddNode(child graph %p): the graph holds %s, which CUDA does not "
                     "allow inside a child graph node",
                     (void *)graph, forbidden_text(bad));
  } else if (recap__fake_graph_capturing(g)) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_USAGE,
                     "cudaGraphAddNode(child graph %p): the graph is being captured into",
                     (void *)graph);
  } else if (!recap__fake_capture_append(s, RECAP_NODE_GRAPH, NULL)) {
    note_no_memory(&f, s);
  } else if (!child_attach(&f, s, &g->nodes)) {
    /* Take the node out again: the capture is as it was. */
    fake_nodes_t *nodes = &s->capture->graph->nodes;
    s->tail = nodes->v[nodes->count - 1].dep;
    nodes->count--;
  }
  return recap__fake_unlock_and_report(&f);
}
