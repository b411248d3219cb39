/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_patch.c — the CPU fake device's patch plans and executable updates, modelled on CUDA's
 * cudaGraphExec*NodeSetParams and cudaGraphExecUpdate: an executable holds its own copy of its
 * graph's nodes, a plan caches the values of the nodes holding a site and writes a node's whole
 * values at once (as a SetParams call does), a template changes only when the plan is synced,
 * and an update is refused when the topology or a node's type changed. As on CUDA, an
 * executable accepts patches only through the nodes of the graph it was instantiated from (a
 * plan's origin), updated or not. Fault injection on every step (fake.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "fake/fake_state.h"

/* What the plan knows of one node of its graph: for a node that holds a site, the values a
 * SetParams call writes (the plan's current ones), and whether the template lags behind. */
typedef struct plan_node {
  bool cached; /* the node holds a site */
  bool dirty;  /* patched since the last sync */
  recap_node_type_t type;
  const void **args; /* kernels: every argument word (recap's host seam) */
  size_t arg_count;
  const void *src, *dst;
} plan_node_t;

struct recap__patch_plan {
  recap_cuda_graph_t graph; /* the template, found again by handle and id for a sync */
  uint64_t graph_id;
  recap_cuda_graph_t origin; /* whose nodes the patches name, found again at each patch */
  uint64_t origin_id;
  recap__graph_read_t *sites;
  size_t site_count;
  plan_node_t *nodes; /* one per node of the graph */
  size_t node_count;
};

static const char *exec_call(recap_node_type_t type) {
  switch (type) {
    case RECAP_NODE_MEMCPY: return "cudaGraphExecMemcpyNodeSetParams";
    case RECAP_NODE_MEMSET: return "cudaGraphExecMemsetNodeSetParams";
    default: return "cudaGraphExecKernelNodeSetParams";
  }
}

static const char *template_call(recap_node_type_t type) {
  switch (type) {
    case RECAP_NODE_MEMCPY: return "cudaGraphMemcpyNodeSetParams";
    case RECAP_NODE_MEMSET: return "cudaGraphMemsetNodeSetParams";
    default: return "cudaGraphKernelNodeSetParams";
  }
}

static void plan_free(recap__patch_plan_t plan) {
  if (!plan) return;
  for (size_t i = 0; i < plan->node_count; i++) recap__host_free(plan->nodes[i].args);
  recap__host_free(plan->nodes);
  recap__host_free(plan->sites);
  recap__host_free(plan);
}

/* The plan of g naming o's nodes, or NULL when out of host memory. */
static recap__patch_plan_t plan_build(fake_graph_t *g, fake_graph_t *o) {
  recap__patch_plan_t plan = recap__host_calloc(1, sizeof *plan);
  if (!plan) return NULL;
  plan->graph = (recap_cuda_graph_t)g;
  plan->graph_id = g->id;
  plan->origin = (recap_cuda_graph_t)o;
  plan->origin_id = o->id;
  if (!recap__fake_nodes_reads(&g->nodes, &plan->sites, &plan->site_count)) goto fail;
  if (g->nodes.count) {
    plan->nodes = recap__host_calloc(g->nodes.count, sizeof *plan->nodes);
    if (!plan->nodes) goto fail;
    plan->node_count = g->nodes.count;
  }
  for (size_t k = 0; k < plan->site_count; k++) {
    plan_node_t *c = &plan->nodes[plan->sites[k].node];
    if (c->cached) continue;
    const fake_node_t *n = &g->nodes.v[plan->sites[k].node];
    c->cached = true;
    c->type = n->type;
    c->src = n->src;
    c->dst = n->dst;
    if (n->arg_count) {
      c->args = recap__host_malloc(n->arg_count * sizeof *c->args);
      if (!c->args) goto fail;
      memcpy(c->args, n->args, n->arg_count * sizeof *c->args);
      c->arg_count = n->arg_count;
    }
  }
  return plan;
fail:
  plan_free(plan);
  return NULL;
}

/* Why origin's nodes cannot stand for graph's (note it in f), or RECAP_SUCCESS. */
static recap_status_t origin_check(fake_failure_t *f, const fake_graph_t *g,
                                   const fake_graph_t *o) {
  if (o->nodes.count != g->nodes.count)
    return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                            "patch plan: origin %p has %zu nodes and graph %p has %zu; origin "
                            "must be the graph the executable was instantiated from, and graph "
                            "a graph it was updated from",
                            (const void *)o, o->nodes.count, (const void *)g, g->nodes.count);
  for (size_t i = 0; i < g->nodes.count; i++)
    if (o->nodes.v[i].type != g->nodes.v[i].type)
      return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                              "patch plan: node %zu of origin %p and of graph %p differ in type; "
                              "origin must be the graph the executable was instantiated from, "
                              "and graph a graph it was updated from",
                              i, (const void *)o, (const void *)g);
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_op_patch_plan_create(recap_cuda_graph_t graph, recap_cuda_graph_t origin,
                                                recap__patch_plan_t *plan,
                                                const recap__graph_read_t **sites, size_t *count) {
  RECAP__ARG(plan && sites && count, "patch plan: an out-parameter is NULL");
  *plan = NULL;
  *sites = NULL;
  *count = 0;
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_PATCH_PLAN, "patch plan", "patch plan creation");
  fake_graph_t *g = recap__fake_graph_find(graph);
  fake_graph_t *o = origin ? recap__fake_graph_find(origin) : g;
  if (!g) {
    recap__fake_note_bad_graph(&f, "patch plan", (const void *)graph, "graph");
  } else if (!o) {
    recap__fake_note_bad_graph(&f, "patch plan", (const void *)origin, "graph");
  } else if (origin_check(&f, g, o) != RECAP_SUCCESS) {
    /* noted */
  } else if (!(*plan = plan_build(g, o))) {
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory in the fake");
  } else {
    *sites = (*plan)->sites;
    *count = (*plan)->site_count;
  }
  return recap__fake_unlock_and_report(&f);
}

void recap__fake_op_patch_plan_destroy(recap__patch_plan_t plan) { plan_free(plan); }

/* Write into node x the plan's values c with the patches p[0..np) (all of that node) on top:
 * one SetParams call writes a node's whole parameters. */
static void node_write(fake_node_t *x, const plan_node_t *c, const recap__graph_read_t *sites,
                       const recap__patch_t *p, size_t np) {
  if (c->arg_count) memcpy(x->args, c->args, c->arg_count * sizeof *x->args);
  x->src = c->src;
  x->dst = c->dst;
  for (size_t i = 0; i < np; i++) {
    const recap__graph_read_t *site = &sites[p[i].site];
    switch (site->kind) {
      case RECAP__READ_KERNEL_ARG: x->args[site->param] = p[i].value; break;
      case RECAP__READ_COPY_SRC: x->src = p[i].value; break;
      case RECAP__READ_COPY_DST:
      case RECAP__READ_MEMSET_DST: x->dst = p[i].value; break;
    }
  }
}

/* The same on the plan's own values. */
static void plan_write(plan_node_t *c, recap__graph_read_t *sites, const recap__patch_t *p,
                       size_t np) {
  for (size_t i = 0; i < np; i++) {
    recap__graph_read_t *site = &sites[p[i].site];
    switch (site->kind) {
      case RECAP__READ_KERNEL_ARG: c->args[site->param] = p[i].value; break;
      case RECAP__READ_COPY_SRC: c->src = p[i].value; break;
      case RECAP__READ_COPY_DST:
      case RECAP__READ_MEMSET_DST: c->dst = p[i].value; break;
    }
    site->ptr = p[i].value;
  }
  c->dirty = true;
}

/* The checks of patch_plan_apply before anything is set; RECAP_SUCCESS when it may go on. */
static recap_status_t apply_check(fake_failure_t *f, recap__patch_plan_t plan, const fake_exec_t *x,
                                  recap_cuda_graph_exec_t exec, const recap__patch_t *patches,
                                  size_t count) {
  if (exec && !x)
    return recap__fake_note_bad_graph(f, "patch", (const void *)exec, "executable graph");
  for (size_t i = 0; i < count; i++) {
    size_t site = patches[i].site;
    if (site >= plan->site_count)
      return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                              "patch: patches[%zu].site is %zu, but the plan has %zu sites", i,
                              site, plan->site_count);
    if (i > 0 && site <= patches[i - 1].site)
      return recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT,
                              "patch: patches[%zu].site (%zu) does not come after "
                              "patches[%zu].site (%zu); sort the patches by site, each site once",
                              i, site, i - 1, patches[i - 1].site);
    if (plan->sites[site].nested)
      return recap__fake_note(f, RECAP_ERROR_NOT_SUPPORTED,
                              "patch: site %zu lies inside a child graph or a conditional "
                              "body of node %zu, which cannot be patched",
                              site, plan->sites[site].node);
  }
  if (!x || count == 0) return RECAP_SUCCESS; /* no set call, nothing CUDA could refuse */
  /* CUDA's rule: the node handles of a set are those of the graph the executable was
   * instantiated from, whatever it was updated from since, and that graph must be alive. */
  size_t first = plan->sites[patches[0].site].node;
  const char *call = exec_call(plan->nodes[first].type);
  if (x->origin_id != plan->origin_id)
    return recap__fake_note(
        f, RECAP_ERROR_CUDA,
        "%s(node %zu): invalid argument (cudaErrorInvalidValue): executable %p was not "
        "instantiated from graph %p, whose nodes the patch plan names; make the plan with the "
        "graph the executable was instantiated from as its origin",
        call, first, (void *)exec, (void *)plan->origin);
  const fake_graph_t *o = recap__fake_graph_find(plan->origin);
  if (!o || o->id != plan->origin_id)
    return recap__fake_note(
        f, RECAP_ERROR_CUDA,
        "%s(node %zu): invalid argument (cudaErrorInvalidValue): graph %p, which executable %p "
        "was instantiated from and whose nodes the patch plan names, was destroyed; keep it "
        "alive as long as the executable is patched",
        call, first, (void *)plan->origin, (void *)exec);
  for (size_t i = 0; i < count; i++) {
    size_t node = plan->sites[patches[i].site].node;
    const fake_node_t *n = &x->nodes.v[node];
    const plan_node_t *c = &plan->nodes[node];
    if (n->type != c->type || n->arg_count != c->arg_count)
      return recap__fake_note(f, RECAP_ERROR_CUDA,
                              "%s(node %zu): invalid argument (cudaErrorInvalidValue): the "
                              "executable's node does not match the plan's",
                              exec_call(c->type), node);
  }
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_op_patch_plan_apply(recap__patch_plan_t plan,
                                               recap_cuda_graph_exec_t exec,
                                               const recap__patch_t *patches, size_t count) {
  RECAP__ARG(plan, "patch: plan is NULL");
  RECAP__ARG(patches || count == 0, "patch: patches is NULL and count is %zu", count);
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t *x = recap__fake_exec_find(exec);
  if (apply_check(&f, plan, x, exec, patches, count) == RECAP_SUCCESS) {
    /* One set per node touched, in site order (sites are sorted by node). */
    size_t set = 0; /* patches already written, node by node */
    while (x && set < count) {
      size_t node = plan->sites[patches[set].site].node;
      size_t end = set + 1;
      while (end < count && plan->sites[patches[end].site].node == node) end++;
      const plan_node_t *c = &plan->nodes[node];
      if (recap__fake_count_call(RECAP__FAKE_FAULT_PATCH)) {
        /* All or nothing: the nodes set so far get the plan's values back. */
        size_t undone = 0;
        for (size_t k = 0; k < set; undone++) {
          size_t back = plan->sites[patches[k].site].node;
          node_write(&x->nodes.v[back], &plan->nodes[back], plan->sites, NULL, 0);
          recap__fake.exec_patches++;
          while (k < set && plan->sites[patches[k].site].node == back) k++;
        }
        recap__fake_note(&f, RECAP_ERROR_CUDA,
                         "%s(node %zu): unknown error (cudaErrorUnknown): fault injected by the "
                         "fake device into patch call %llu; the %zu nodes set before it were set "
                         "back",
                         exec_call(c->type), node,
                         (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_PATCH], undone);
        break;
      }
      node_write(&x->nodes.v[node], c, plan->sites, patches + set, end - set);
      recap__fake.exec_patches++;
      set = end;
    }
    if (f.status == RECAP_SUCCESS) {
      for (size_t k = 0; k < count;) {
        size_t node = plan->sites[patches[k].site].node;
        size_t end = k + 1;
        while (end < count && plan->sites[patches[end].site].node == node) end++;
        plan_write(&plan->nodes[node], plan->sites, patches + k, end - k);
        k = end;
      }
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_patch_plan_sync(recap__patch_plan_t plan) {
  RECAP__ARG(plan, "patch sync: plan is NULL");
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(plan->graph);
  if (!g || g->id != plan->graph_id) {
    recap__fake_note_bad_graph(&f, "patch sync", (const void *)plan->graph, "graph");
  } else {
    for (size_t i = 0; i < plan->node_count; i++) {
      plan_node_t *c = &plan->nodes[i];
      if (!c->dirty) continue;
      if (recap__fake_count_call(RECAP__FAKE_FAULT_PATCH_SYNC)) {
        recap__fake_note(&f, RECAP_ERROR_CUDA,
                         "%s(node %zu): unknown error (cudaErrorUnknown): fault injected by the "
                         "fake device into patch sync call %llu; the node stays to be synced",
                         template_call(c->type), i,
                         (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_PATCH_SYNC]);
        break;
      }
      node_write(&g->nodes.v[i], c, plan->sites, NULL, 0);
      recap__fake.template_patches++;
      c->dirty = false;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- updates ---------------------------------------------------------------------------- */

void recap__fake_refuse_next_update(recap_update_reason_t reason, size_t node) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.refuse_armed = reason != RECAP_UPDATE_REASON_NONE;
  recap__fake.refuse_reason = reason;
  recap__fake.refuse_node = node;
  pthread_mutex_unlock(&recap__fake.lock);
}

void recap__fake_updated_slowdown(double factor) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.updated_slowdown = factor;
  pthread_mutex_unlock(&recap__fake.lock);
}

/* Why x cannot take g's nodes, as the driver would say (NONE: it can); *node the node. */
static recap_update_reason_t update_refusal(const fake_exec_t *x, const fake_graph_t *g,
                                            size_t *node) {
  *node = SIZE_MAX;
  if (x->nodes.count != g->nodes.count) return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
  for (size_t i = 0; i < g->nodes.count; i++)
    if (x->nodes.v[i].dep != g->nodes.v[i].dep) {
      *node = i;
      return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
    }
  for (size_t i = 0; i < g->nodes.count; i++)
    if (x->nodes.v[i].type != g->nodes.v[i].type) {
      *node = i;
      return RECAP_UPDATE_REASON_NODE_TYPE_CHANGED;
    }
  return recap__fake_cond_update_refusal(&x->nodes, &g->nodes, node);
}

recap_status_t recap__fake_op_graph_exec_update(recap_cuda_graph_exec_t exec,
                                                recap_cuda_graph_t graph,
                                                recap_update_reason_t *refused, size_t *node) {
  RECAP__ARG(refused && node, "cudaGraphExecUpdate: an out-parameter is NULL");
  *refused = RECAP_UPDATE_REASON_NONE;
  *node = SIZE_MAX;
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_EXEC_UPDATE, "cudaGraphExecUpdate",
                       "executable update");
  fake_exec_t *x = recap__fake_exec_find(exec);
  fake_graph_t *g = recap__fake_graph_find(graph);
  fake_nodes_t copy;
  if (!x) {
    recap__fake_note_bad_graph(&f, "cudaGraphExecUpdate", (const void *)exec, "executable graph");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphExecUpdate", (const void *)graph, "graph");
  } else if (recap__fake.refuse_armed) {
    recap__fake.refuse_armed = false;
    *refused = recap__fake.refuse_reason;
    *node = recap__fake.refuse_node;
    recap__fake.update_refusals++;
  } else if ((*refused = update_refusal(x, g, node)) != RECAP_UPDATE_REASON_NONE) {
    recap__fake.update_refusals++;
  } else if (!recap__fake_nodes_copy(&copy, &g->nodes)) {
    recap__fake_note(
        &f, RECAP_ERROR_CUDA,
        "cudaGraphExecUpdate: out of memory (cudaErrorMemoryAllocation): no host memory for the "
        "fake executable's nodes; the executable is unchanged");
  } else {
    /* Kernel names and functions may change, as CUDA allows for ordinary kernels. Its patch
     * handles stay those of the graph it was instantiated from (origin_id unchanged). */
    recap__fake_nodes_free(&x->nodes);
    x->nodes = copy;
    x->updated = true;
    recap__fake.exec_updates++;
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- test accessors --------------------------------------------------------------------- */

static bool node_arg(const fake_nodes_t *nodes, size_t node, size_t arg, const void **value) {
  if (node >= nodes->count || arg >= nodes->v[node].arg_count) return false;
  *value = nodes->v[node].args[arg];
  return true;
}

bool recap__fake_exec_arg(recap_cuda_graph_exec_t exec, size_t node, size_t arg,
                          const void **value) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t *x = recap__fake_exec_find(exec);
  bool ok = x && value && node_arg(&x->nodes, node, arg, value);
  pthread_mutex_unlock(&recap__fake.lock);
  return ok;
}

bool recap__fake_graph_arg(recap_cuda_graph_t graph, size_t node, size_t arg, const void **value) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_graph_t *g = recap__fake_graph_find(graph);
  bool ok = g && value && node_arg(&g->nodes, node, arg, value);
  pthread_mutex_unlock(&recap__fake.lock);
  return ok;
}
