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
  bool cached; /* the node holds a site, or is a kernel node (graph parameters) */
  bool dirty;  /* patched since the last sync */
  recap_node_type_t type;
  const void **args; /* kernels: every argument word (recap's host seam) */
  size_t arg_count;
  uint32_t narrow;            /* kernels: the 4-byte parameters (fake_state.h) */
  unsigned grid[3], block[3]; /* kernels: the launch shape (all zero: 1s) */
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

/* Keep in c what setting node n needs (once); false when out of host memory. */
static bool plan_cache(plan_node_t *c, const fake_node_t *n) {
  if (c->cached) return true;
  c->cached = true;
  c->type = n->type;
  c->src = n->src;
  c->dst = n->dst;
  c->narrow = n->narrow;
  memcpy(c->grid, n->grid, sizeof c->grid);
  memcpy(c->block, n->block, sizeof c->block);
  if (n->arg_count) {
    c->args = recap__host_malloc(n->arg_count * sizeof *c->args);
    if (!c->args) return false;
    memcpy(c->args, n->args, n->arg_count * sizeof *c->args);
    c->arg_count = n->arg_count;
  }
  return true;
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
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    if (n->type != RECAP_NODE_KERNEL) continue;
    if (!plan_cache(&plan->nodes[i], n)) goto fail;
  }
  for (size_t k = 0; k < plan->site_count; k++) {
    size_t node = plan->sites[k].node;
    if (!plan_cache(&plan->nodes[node], &g->nodes.v[node])) goto fail;
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
  memcpy(x->grid, c->grid, sizeof x->grid);
  memcpy(x->block, c->block, sizeof x->block);
  if (x->device_updatable) x->host_set = true; /* the executable needs an upload again */
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

static recap_status_t exec_check(fake_failure_t *f, recap__patch_plan_t plan, const fake_exec_t *x,
                                 recap_cuda_graph_exec_t exec, size_t first);
static recap_status_t node_check(fake_failure_t *f, recap__patch_plan_t plan, const fake_exec_t *x,
                                 size_t node);

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
  size_t first = plan->sites[patches[0].site].node;
  if (exec_check(f, plan, x, exec, first) != RECAP_SUCCESS) return f->status;
  for (size_t i = 0; i < count; i++) {
    size_t node = plan->sites[patches[i].site].node;
    if (node_check(f, plan, x, node) != RECAP_SUCCESS) return f->status;
  }
  return RECAP_SUCCESS;
}

/* CUDA's rule: the node handles of a set are those of the graph the executable was
 * instantiated from, whatever it was updated from since, and that graph must be alive. */
static recap_status_t exec_check(fake_failure_t *f, recap__patch_plan_t plan, const fake_exec_t *x,
                                 recap_cuda_graph_exec_t exec, size_t first) {
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
  return RECAP_SUCCESS;
}

/* The executable's node must be the plan's node's counterpart. */
static recap_status_t node_check(fake_failure_t *f, recap__patch_plan_t plan, const fake_exec_t *x,
                                 size_t node) {
  const plan_node_t *c = &plan->nodes[node];
  const fake_node_t *n = node < x->nodes.count ? &x->nodes.v[node] : NULL;
  if (!n || n->type != c->type || n->arg_count != c->arg_count)
    return recap__fake_note(f, RECAP_ERROR_CUDA,
                            "%s(node %zu): invalid argument (cudaErrorInvalidValue): the "
                            "executable's node does not match the plan's",
                            exec_call(c->type), node);
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
      if (x && count) x->changes++;
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

/* ---- graph parameters ------------------------------------------------------------------- */

size_t recap__fake_param_size(uint32_t narrow, size_t k) {
  return k < 32 && (narrow >> k & 1u) ? 4 : 8;
}

/* The plan's kernel node at index node, or NULL with INVALID_ARGUMENT noted in f. */
static plan_node_t *kernel_at(fake_failure_t *f, recap__patch_plan_t plan, size_t node) {
  plan_node_t *c = node < plan->node_count ? &plan->nodes[node] : NULL;
  if (c && c->cached && c->type == RECAP_NODE_KERNEL) return c;
  recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT, "node %zu is %s", node,
                   c ? "not a kernel node"
                     : "no kernel node of the graph's top level whose arguments the driver "
                       "describes (nodes inside child graphs and conditional bodies are not "
                       "patchable)");
  return NULL;
}

recap_status_t recap__fake_op_patch_plan_find(recap__patch_plan_t plan,
                                              const recap__arg_pattern_t *patterns, size_t count,
                                              recap__arg_site_t **found, size_t *found_count) {
  RECAP__ARG(plan && found && found_count, "patch find: an argument is NULL");
  *found = NULL;
  *found_count = 0;
  size_t n = 0, cap = 0;
  recap__arg_site_t *v = NULL;
  for (size_t i = 0; i < plan->node_count; i++) {
    const plan_node_t *c = &plan->nodes[i];
    if (!c->cached || c->type != RECAP_NODE_KERNEL) continue;
    for (size_t k = 0; k < c->arg_count; k++) {
      size_t size = recap__fake_param_size(c->narrow, k);
      uint64_t word = (uint64_t)(uintptr_t)c->args[k];
      for (size_t at = 0; at < size; at += 4)
        for (size_t p = 0; p < count; p++) {
          uint32_t width = patterns[p].size;
          if (at % width != 0 || at + width > size) continue;
          if (memcmp((const unsigned char *)&word + at, &patterns[p].bits, width) != 0) continue;
          if (n == cap) {
            cap = cap ? cap * 2 : 16;
            recap__arg_site_t *grown = recap__host_realloc(v, cap * sizeof *grown);
            if (!grown) {
              recap__host_free(v);
              return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "patch find: out of host memory");
            }
            v = grown;
          }
          v[n++] = (recap__arg_site_t){.node = i,
                                       .param = (uint32_t)k,
                                       .offset = 8 * k + at,
                                       .size = width,
                                       .param_size = size,
                                       .param_offset = 8 * k,
                                       .pattern = p};
        }
    }
  }
  *found = v;
  *found_count = n;
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_op_patch_plan_arg(recap__patch_plan_t plan, size_t node, uint32_t param,
                                             recap__arg_site_t *site) {
  RECAP__ARG(plan && site, "patch arg: an argument is NULL");
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  plan_node_t *c = kernel_at(&f, plan, node);
  if (c && param >= c->arg_count) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "node %zu's kernel has %zu parameters; there is no parameter %u", node,
                     c->arg_count, (unsigned)param);
  } else if (c) {
    size_t size = recap__fake_param_size(c->narrow, param);
    *site = (recap__arg_site_t){.node = node,
                                .param = param,
                                .offset = 8 * (size_t)param,
                                .size = (uint32_t)size,
                                .param_size = size,
                                .param_offset = 8 * (size_t)param};
  }
  return recap__fake_unlock_and_report(&f);
}

/* Write w into the words of c (size bytes at an offset inside one parameter); with old, keep
 * the word it changes first. */
static void word_write(plan_node_t *c, const recap__arg_write_t *w, uint64_t *old) {
  size_t k = w->offset / 8;
  uint64_t word = (uint64_t)(uintptr_t)c->args[k];
  if (old) *old = word;
  memcpy((unsigned char *)&word + w->offset % 8, &w->bits, w->size);
  c->args[k] = (const void *)(uintptr_t)word;
}

recap_status_t recap__fake_op_patch_plan_write(recap__patch_plan_t plan,
                                               recap_cuda_graph_exec_t exec,
                                               const recap__arg_write_t *writes, size_t count) {
  RECAP__ARG(plan, "patch write: plan is NULL");
  RECAP__ARG(writes || count == 0, "patch write: writes is NULL and count is %zu", count);
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t *x = recap__fake_exec_find(exec);
  if (exec && !x)
    recap__fake_note_bad_graph(&f, "patch write", (const void *)exec, "executable graph");
  for (size_t i = 0; f.status == RECAP_SUCCESS && i < count; i++) {
    plan_node_t *c = kernel_at(&f, plan, writes[i].node);
    if (!c) break;
    size_t k = writes[i].offset / 8;
    if (i > 0 && writes[i].node < writes[i - 1].node)
      recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                       "patch write: writes[%zu].node (%zu) comes before writes[%zu].node (%zu); "
                       "sort the writes by node",
                       i, writes[i].node, i - 1, writes[i - 1].node);
    else if (k >= c->arg_count || writes[i].size == 0 ||
             writes[i].offset % 8 + writes[i].size > recap__fake_param_size(c->narrow, k))
      recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                       "patch write: writes[%zu]: %u bytes at offset %zu are not inside one "
                       "parameter of node %zu's kernel",
                       i, (unsigned)writes[i].size, writes[i].offset, writes[i].node);
    else if (x && i == 0)
      exec_check(&f, plan, x, exec, writes[0].node);
    if (f.status == RECAP_SUCCESS && x) node_check(&f, plan, x, writes[i].node);
  }
  uint64_t *old =
      f.status == RECAP_SUCCESS && count ? recap__host_malloc(count * sizeof *old) : NULL;
  if (f.status == RECAP_SUCCESS && count && !old)
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY, "patch write: out of host memory in the fake");
  for (size_t k = 0; f.status == RECAP_SUCCESS && k < count;) {
    size_t end = k + 1;
    while (end < count && writes[end].node == writes[k].node) end++;
    plan_node_t *c = &plan->nodes[writes[k].node];
    for (size_t i = k; i < end; i++) word_write(c, &writes[i], &old[i]);
    if (x && recap__fake_count_call(RECAP__FAKE_FAULT_PATCH)) {
      /* All or nothing: the plan's words back, last first, and the nodes set so far too. */
      size_t undone = 0;
      for (size_t i = end; i-- > 0;) {
        plan_node_t *back = &plan->nodes[writes[i].node];
        back->args[writes[i].offset / 8] = (const void *)(uintptr_t)old[i];
        bool node_start = i == 0 || writes[i - 1].node != writes[i].node;
        if (node_start && i < k) {
          node_write(&x->nodes.v[writes[i].node], back, plan->sites, NULL, 0);
          recap__fake.exec_patches++;
          undone++;
        }
      }
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "cudaGraphExecKernelNodeSetParams(node %zu): unknown error "
                       "(cudaErrorUnknown): fault injected by the fake device into patch call "
                       "%llu; the %zu nodes set before it were set back",
                       writes[k].node,
                       (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_PATCH], undone);
      break;
    }
    if (x) {
      node_write(&x->nodes.v[writes[k].node], c, plan->sites, NULL, 0);
      recap__fake.exec_patches++;
    }
    c->dirty = true;
    k = end;
  }
  if (x && count && f.status == RECAP_SUCCESS) x->changes++;
  recap__host_free(old);
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_patch_plan_shape(recap__patch_plan_t plan, size_t node,
                                               recap__kernel_shape_t *shape, int *max_threads) {
  RECAP__ARG(plan && shape, "patch shape: an argument is NULL");
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  plan_node_t *c = kernel_at(&f, plan, node);
  if (c) {
    for (int d = 0; d < 3; d++) {
      shape->grid[d] = c->grid[0] ? c->grid[d] : 1;
      shape->block[d] = c->block[0] ? c->block[d] : 1;
    }
    if (max_threads) *max_threads = 1024; /* the fake's kernels take any block CUDA allows */
  }
  return recap__fake_unlock_and_report(&f);
}

/* The template's node becomes device-updatable (its copies in executables instantiated from
 * it later are too); its handle is the node's own. */
recap_status_t recap__fake_op_patch_plan_device_node(recap__patch_plan_t plan, size_t node,
                                                     uint64_t *handle) {
  RECAP__ARG(plan && handle, "patch device node: an argument is NULL");
  *handle = 0;
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_PATCH, "cudaGraphKernelNodeSetAttribute",
                       "device-updatable kernel node");
  fake_graph_t *g = recap__fake_graph_find(plan->graph);
  if (kernel_at(&f, plan, node)) {
    if (!g || node >= g->nodes.count) {
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "cudaGraphKernelNodeSetAttribute: invalid resource handle "
                       "(cudaErrorInvalidResourceHandle): the plan's graph is gone");
    } else {
      g->nodes.v[node].device_updatable = true;
      *handle = g->nodes.v[node].handle;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* Node precedes exactly the targets: a node that waited for it alone waits for nothing, and a
 * target that waits for another node waits for it too (`after`; a fake node has room for two). */
recap_status_t recap__fake_op_patch_plan_precede_only(recap__patch_plan_t plan, size_t node,
                                                      const size_t *targets, size_t count) {
  RECAP__ARG(plan && (targets || count == 0), "patch precede only: an argument is NULL");
  RECAP__FAKE_OP_BEGIN(f, RECAP__FAKE_FAULT_PATCH, "cudaGraphAddDependencies",
                       "the applier's edges");
  fake_graph_t *g = recap__fake_graph_find(plan->graph);
  bool ok = kernel_at(&f, plan, node) != NULL;
  for (size_t i = 0; ok && i < count; i++) ok = kernel_at(&f, plan, targets[i]) != NULL;
  if (ok && (!g || node >= g->nodes.count)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphNodeGetDependentNodes: invalid resource handle "
                     "(cudaErrorInvalidResourceHandle): the plan's graph is gone");
    ok = false;
  }
  for (size_t i = 0; ok && i < count; i++)
    for (size_t j = 0; j < i; j++)
      if (targets[i] == targets[j] || targets[i] == node) {
        recap__fake_note(&f, RECAP_ERROR_CUDA,
                         "cudaGraphAddDependencies: invalid value (cudaErrorInvalidValue): an "
                         "edge to node %zu twice",
                         targets[i]);
        ok = false;
        break;
      }
  if (ok) {
    fake_nodes_t *nodes = &g->nodes;
    for (size_t j = 0; j < nodes->count; j++) {
      if (nodes->v[j].dep == node + 1) nodes->v[j].dep = 0;
      if (nodes->v[j].after == node + 1) nodes->v[j].after = 0;
    }
    for (size_t i = 0; i < count; i++) {
      fake_node_t *t = &nodes->v[targets[i]];
      if (t->dep == 0)
        t->dep = node + 1;
      else
        t->after = node + 1;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_patch_plan_set_shape(recap__patch_plan_t plan,
                                                   recap_cuda_graph_exec_t exec, size_t node,
                                                   const recap__kernel_shape_t *shape) {
  RECAP__ARG(plan && shape, "patch shape: an argument is NULL");
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t *x = recap__fake_exec_find(exec);
  plan_node_t *c = kernel_at(&f, plan, node);
  if (exec && !x)
    recap__fake_note_bad_graph(&f, "patch shape", (const void *)exec, "executable graph");
  else if (c && x && exec_check(&f, plan, x, exec, node) == RECAP_SUCCESS &&
           node_check(&f, plan, x, node) == RECAP_SUCCESS &&
           recap__fake_count_call(RECAP__FAKE_FAULT_PATCH))
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphExecKernelNodeSetParams(node %zu): unknown error "
                     "(cudaErrorUnknown): fault injected by the fake device into patch call "
                     "%llu; the node is unchanged",
                     node, (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_PATCH]);
  if (c && f.status == RECAP_SUCCESS) {
    memcpy(c->grid, shape->grid, sizeof c->grid);
    memcpy(c->block, shape->block, sizeof c->block);
    c->dirty = true;
    if (x) {
      node_write(&x->nodes.v[node], c, plan->sites, NULL, 0);
      recap__fake.exec_patches++;
      x->changes++;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

bool recap__fake_exec_shape(recap_cuda_graph_exec_t exec, size_t node, unsigned grid[3],
                            unsigned block[3]) {
  pthread_mutex_lock(&recap__fake.lock);
  fake_exec_t *x = recap__fake_exec_find(exec);
  bool ok = x && node < x->nodes.count && x->nodes.v[node].type == RECAP_NODE_KERNEL;
  if (ok)
    for (int d = 0; d < 3; d++) {
      grid[d] = x->nodes.v[node].grid[0] ? x->nodes.v[node].grid[d] : 1;
      block[d] = x->nodes.v[node].block[0] ? x->nodes.v[node].block[d] : 1;
    }
  pthread_mutex_unlock(&recap__fake.lock);
  return ok;
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

void recap__fake_changed_slowdown(uint64_t changes, double factor) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.changed_after = changes;
  recap__fake.changed_slowdown = factor;
  pthread_mutex_unlock(&recap__fake.lock);
}

/* Why x cannot take g's nodes, as the driver would say (NONE: it can); *node the node. */
static recap_update_reason_t update_refusal(const fake_exec_t *x, const fake_graph_t *g,
                                            size_t *node) {
  *node = SIZE_MAX;
  if (x->nodes.count != g->nodes.count) return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
  for (size_t i = 0; i < g->nodes.count; i++)
    if (x->nodes.v[i].dep != g->nodes.v[i].dep || x->nodes.v[i].after != g->nodes.v[i].after) {
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

static bool graph_device_nodes(const fake_graph_t *g) {
  for (size_t i = 0; i < g->nodes.count; i++)
    if (g->nodes.v[i].device_updatable) return true;
  return false;
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
  bool host_set;
  if (!x) {
    recap__fake_note_bad_graph(&f, "cudaGraphExecUpdate", (const void *)exec, "executable graph");
  } else if (!g) {
    recap__fake_note_bad_graph(&f, "cudaGraphExecUpdate", (const void *)graph, "graph");
  } else if (recap__fake_exec_device_nodes(x, &host_set) || graph_device_nodes(g)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaGraphExecUpdate: invalid value (cudaErrorInvalidValue): the %s holds "
                     "device-updatable kernel nodes, which no update may touch",
                     graph_device_nodes(g) ? "graph" : "executable");
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
    x->changes++;
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
