/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_patch.c — the CUDA seam's patch plans (rebinding the addresses a graph's executable
 * holds, node by node, with cudaGraphExec{Kernel,Memcpy,Memset}NodeSetParams) and executable
 * updates (cudaGraphExecUpdate).
 *
 * A plan is built on the same walk as graph_reads (cuda_inspect.c), so that its sites are
 * exactly the reads the input-liveness checks see. For each top-level node that holds a site it
 * keeps what setting the node needs: a kernel's parameters with a private copy of its arguments
 * (driver.h, recap__kernel_args_t), a copy's cudaMemcpy3DParms, a memset's cudaMemsetParams.
 * A patch writes the new words into those and sets the node in the executable with one call;
 * nothing else is read from CUDA.
 *
 * The values come from the current template (the plan's graph), but the node handles given to
 * the cudaGraphExec*NodeSetParams calls are those of the graph the executable was instantiated
 * from (the plan's origin), at the same index: CUDA refuses an updated executable the nodes of
 * the graph it was updated from (cudaErrorInvalidValue) and keeps accepting its first graph's,
 * for its whole life (measured on CUDA 13, driver 580). Both graphs must outlive the plan.
 */
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/cuda_error.h"
#include "device/cuda_inspect.h"
#include "device/device.h"
#include "device/driver.h"

/* ---- plans ------------------------------------------------------------------------------ */

/* What setting one node needs, with the plan's current values. */
typedef struct plan_node {
  size_t index;              /* in graph_nodes' order */
  cudaGraphNode_t node;      /* the template's: read at creation, written by a sync */
  cudaGraphNode_t exec_node; /* origin's at the same index: what the executable's sets name */
  enum cudaGraphNodeType type;
  recap__kernel_args_t *kernel;  /* kernels */
  struct cudaMemcpy3DParms copy; /* copies */
  struct cudaMemsetParams set;   /* memsets */
  bool dirty;                    /* patched since the last sync */
} plan_node_t;

struct recap__patch_plan {
  cudaGraph_t graph;
  recap__graph_read_t *sites;
  size_t site_count;
  size_t *site_node; /* per site: its node in nodes[], or SIZE_MAX when nested */
  plan_node_t *nodes;
  size_t node_count, node_cap;
};

static const char *exec_call(enum cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeMemcpy: return "cudaGraphExecMemcpyNodeSetParams";
    case cudaGraphNodeTypeMemset: return "cudaGraphExecMemsetNodeSetParams";
    default: return "cuGraphExecKernelNodeSetParams";
  }
}

static const char *template_call(enum cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeMemcpy: return "cudaGraphMemcpyNodeSetParams";
    case cudaGraphNodeTypeMemset: return "cudaGraphMemsetNodeSetParams";
    default: return "cuGraphKernelNodeSetParams";
  }
}

void recap__cuda_patch_plan_destroy(recap__patch_plan_t plan) {
  if (!plan) return;
  for (size_t i = 0; i < plan->node_count; i++) recap__kernel_args_free(plan->nodes[i].kernel);
  recap__host_free(plan->nodes);
  recap__host_free(plan->site_node);
  recap__host_free(plan->sites);
  recap__host_free(plan);
}

/* The walk's visitor: keep what setting a top-level node with sites needs. */
static recap_status_t plan_visit(void *ctx, recap__cuda_read_visit_t *visit,
                                 const recap__graph_read_t *reads) {
  (void)reads;
  recap__patch_plan_t plan = ctx;
  recap__kernel_args_t *kernel = visit->kernel;
  enum cudaGraphNodeType type = (enum cudaGraphNodeType)visit->type;
  bool patchable = type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
                   type == cudaGraphNodeTypeMemset;
  /* A child graph's sites are nested: they get no entry, and patching them is refused. Every
   * kernel node with a copy of its arguments gets one, for graph parameters. */
  bool wanted = type == cudaGraphNodeTypeKernel ? kernel != NULL : visit->count > 0;
  if (!patchable || !wanted) {
    recap__kernel_args_free(kernel);
    return RECAP_SUCCESS;
  }
  if (plan->node_count == plan->node_cap) {
    size_t cap = plan->node_cap ? plan->node_cap * 2 : 16;
    plan_node_t *grown = recap__host_realloc(plan->nodes, cap * sizeof *grown);
    if (!grown) {
      recap__kernel_args_free(kernel);
      return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory");
    }
    plan->nodes = grown;
    plan->node_cap = cap;
  }
  plan_node_t *pn = &plan->nodes[plan->node_count];
  memset(pn, 0, sizeof *pn);
  pn->index = visit->index;
  pn->node = (cudaGraphNode_t)visit->node;
  pn->type = type;
  pn->kernel = kernel;
  plan->node_count++; /* owns kernel from here, whatever follows */
  if (type == cudaGraphNodeTypeMemcpy)
    CUDA_TRY_F(cudaGraphMemcpyNodeGetParams(pn->node, &pn->copy),
               "cudaGraphMemcpyNodeGetParams(node %zu)", pn->index);
  else if (type == cudaGraphNodeTypeMemset)
    CUDA_TRY_F(cudaGraphMemsetNodeGetParams(pn->node, &pn->set),
               "cudaGraphMemsetNodeGetParams(node %zu)", pn->index);
  return RECAP_SUCCESS;
}

/* origin's nodes, in graph_nodes order, when origin can stand for graph in the executable's
 * sets: the same node count and the same type at every index (else INVALID_ARGUMENT). */
static recap_status_t origin_nodes(cudaGraph_t graph, cudaGraph_t origin,
                                   recap__graph_node_t **out) {
  *out = NULL;
  recap__graph_node_t *gn = NULL, *on = NULL;
  size_t gc = 0, oc = 0;
  recap_status_t st = recap__cuda_graph_nodes((recap_cuda_graph_t)graph, &gn, &gc);
  if (st == RECAP_SUCCESS) st = recap__cuda_graph_nodes((recap_cuda_graph_t)origin, &on, &oc);
  if (st == RECAP_SUCCESS && gc != oc)
    st = RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                         "patch plan: origin %p has %zu nodes and graph %p has %zu; origin must "
                         "be the graph the executable was instantiated from, and graph a graph "
                         "it was updated from",
                         (void *)origin, oc, (void *)graph, gc);
  for (size_t i = 0; st == RECAP_SUCCESS && i < gc; i++) {
    enum cudaGraphNodeType gt, ot;
    cudaError_t err = cudaGraphNodeGetType((cudaGraphNode_t)gn[i], &gt);
    if (err == cudaSuccess) err = cudaGraphNodeGetType((cudaGraphNode_t)on[i], &ot);
    if (err != cudaSuccess)
      st = recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGraphNodeGetType(node %zu)", i);
    else if (gt != ot)
      st = RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "patch plan: node %zu of origin %p and of graph %p differ in type (%d "
                           "and %d); origin must be the graph the executable was instantiated "
                           "from, and graph a graph it was updated from",
                           i, (void *)origin, (void *)graph, (int)ot, (int)gt);
  }
  recap__host_free(gn);
  if (st != RECAP_SUCCESS) {
    recap__host_free(on);
    return st;
  }
  *out = on;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_create(recap_cuda_graph_t graph, recap_cuda_graph_t origin,
                                             recap__patch_plan_t *plan,
                                             const recap__graph_read_t **sites, size_t *count) {
  RECAP__ARG(plan && sites && count, "patch plan: an out-parameter is NULL");
  *plan = NULL;
  *sites = NULL;
  *count = 0;
  RECAP__ARG(graph != NULL, "patch plan: graph is NULL");
  if (origin == graph) origin = NULL;
  /* Reading kernels' argument layouts needs a recent driver; say so before walking. */
  RECAP__CHECK(recap__cuda_graph_reads_check());
  recap__graph_node_t *onodes = NULL;
  if (origin) RECAP__CHECK(origin_nodes((cudaGraph_t)graph, (cudaGraph_t)origin, &onodes));
  recap__patch_plan_t p = recap__host_calloc(1, sizeof *p);
  if (!p) {
    recap__host_free(onodes);
    return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory");
  }
  p->graph = (cudaGraph_t)graph;
  recap_status_t st =
      recap__cuda_walk_reads(graph, "rebinding", plan_visit, p, &p->sites, &p->site_count);
  if (st == RECAP_SUCCESS && p->site_count) {
    p->site_node = recap__host_malloc(p->site_count * sizeof *p->site_node);
    if (!p->site_node)
      st = RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory");
  }
  if (st != RECAP_SUCCESS) {
    recap__host_free(onodes);
    recap__cuda_patch_plan_destroy(p);
    return st;
  }
  /* The executable's sets name origin's node at the same index (checked: same count, types). */
  for (size_t i = 0; i < p->node_count; i++)
    p->nodes[i].exec_node = onodes ? (cudaGraphNode_t)onodes[p->nodes[i].index] : p->nodes[i].node;
  recap__host_free(onodes);
  /* Sites and nodes are both in node order: match them in one pass. */
  size_t n = 0;
  for (size_t k = 0; k < p->site_count; k++) {
    const recap__graph_read_t *site = &p->sites[k];
    while (n < p->node_count && p->nodes[n].index < site->node) n++;
    bool found = n < p->node_count && p->nodes[n].index == site->node && !site->nested;
    p->site_node[k] = found ? n : SIZE_MAX;
  }
  *plan = p;
  *sites = p->sites;
  *count = p->site_count;
  return RECAP_SUCCESS;
}

/* Write into pn's values the patches p[0..np) (all of pn's node), or, with undo, the values
 * their sites hold in the plan (which a patch changes only once every node was set). */
static void values_write(recap__patch_plan_t plan, plan_node_t *pn, const recap__patch_t *p,
                         size_t np, bool undo) {
  for (size_t i = 0; i < np; i++) {
    const recap__graph_read_t *site = &plan->sites[p[i].site];
    const void *value = undo ? site->ptr : p[i].value;
    switch (site->kind) {
      case RECAP__READ_KERNEL_ARG:
        recap__kernel_args_write(pn->kernel, site->offset, (uint64_t)(uintptr_t)value);
        break;
      case RECAP__READ_COPY_SRC: pn->copy.srcPtr.ptr = (void *)(uintptr_t)value; break;
      case RECAP__READ_COPY_DST: pn->copy.dstPtr.ptr = (void *)(uintptr_t)value; break;
      case RECAP__READ_MEMSET_DST: pn->set.dst = (void *)(uintptr_t)value; break;
    }
  }
}

/* Set pn's node in exec to the plan's values: one call. */
static recap_status_t exec_set(cudaGraphExec_t exec, const plan_node_t *pn) {
  switch (pn->type) {
    case cudaGraphNodeTypeMemcpy:
      CUDA_TRY_F(cudaGraphExecMemcpyNodeSetParams(exec, pn->exec_node, &pn->copy),
                 "cudaGraphExecMemcpyNodeSetParams(executable %p, node %zu)", (void *)exec,
                 pn->index);
      return RECAP_SUCCESS;
    case cudaGraphNodeTypeMemset:
      CUDA_TRY_F(cudaGraphExecMemsetNodeSetParams(exec, pn->exec_node, &pn->set),
                 "cudaGraphExecMemsetNodeSetParams(executable %p, node %zu)", (void *)exec,
                 pn->index);
      return RECAP_SUCCESS;
    default:
      return recap__driver_kernel_args_set_exec((recap_cuda_graph_exec_t)exec,
                                                (recap__cu_graph_node_t)pn->exec_node, pn->kernel);
  }
}

/* The same in the template. */
static recap_status_t template_set(const plan_node_t *pn) {
  switch (pn->type) {
    case cudaGraphNodeTypeMemcpy:
      CUDA_TRY_F(cudaGraphMemcpyNodeSetParams(pn->node, &pn->copy),
                 "cudaGraphMemcpyNodeSetParams(node %zu)", pn->index);
      return RECAP_SUCCESS;
    case cudaGraphNodeTypeMemset:
      CUDA_TRY_F(cudaGraphMemsetNodeSetParams(pn->node, &pn->set),
                 "cudaGraphMemsetNodeSetParams(node %zu)", pn->index);
      return RECAP_SUCCESS;
    default:
      return recap__driver_kernel_args_set_graph((recap__cu_graph_node_t)pn->node, pn->kernel);
  }
}

/* The end of the run of patches from k on that touch the same node. */
static size_t group_end(recap__patch_plan_t plan, const recap__patch_t *patches, size_t count,
                        size_t k) {
  size_t node = plan->site_node[patches[k].site];
  size_t end = k + 1;
  while (end < count && plan->site_node[patches[end].site] == node) end++;
  return end;
}

static recap_status_t apply_check(recap__patch_plan_t plan, const recap__patch_t *patches,
                                  size_t count) {
  for (size_t i = 0; i < count; i++) {
    size_t site = patches[i].site;
    if (site >= plan->site_count)
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                             "patch: patches[%zu].site is %zu, but the plan has %zu sites", i, site,
                             plan->site_count);
    if (i > 0 && site <= patches[i - 1].site)
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                             "patch: patches[%zu].site (%zu) does not come after "
                             "patches[%zu].site (%zu); sort the patches by site, each site once",
                             i, site, i - 1, patches[i - 1].site);
    if (plan->site_node[site] == SIZE_MAX)
      return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                             "patch: site %zu lies inside a child graph of node %zu, which "
                             "cannot be patched",
                             site, plan->sites[site].node);
  }
  return RECAP_SUCCESS;
}

/* After a failed set of node `failed`: set the nodes of patches[0..done) back to the plan's
 * values in exec, and give the failure with the node index and what was set back. */
static recap_status_t roll_back(recap__patch_plan_t plan, cudaGraphExec_t exec,
                                const recap__patch_t *patches, size_t count, size_t done,
                                const plan_node_t *failed) {
  recap__saved_error_t cause;
  recap__error_save(&cause);
  size_t undone = 0, stuck = SIZE_MAX;
  for (size_t k = 0; k < done;) {
    size_t end = group_end(plan, patches, count, k);
    plan_node_t *pn = &plan->nodes[plan->site_node[patches[k].site]];
    values_write(plan, pn, patches + k, end - k, true);
    if (exec_set(exec, pn) == RECAP_SUCCESS) {
      undone++;
    } else if (stuck == SIZE_MAX) {
      stuck = pn->index;
      RECAP__WARN("patch: setting node %zu back after the failure at node %zu failed too: %s",
                  pn->index, failed->index, recap_last_error());
    }
    k = end;
  }
  char tail[160];
  if (stuck == SIZE_MAX)
    snprintf(tail, sizeof tail, "the %zu nodes set before it were set back", undone);
  else
    snprintf(tail, sizeof tail,
             "setting back the nodes set before it failed at node %zu (see the log): the "
             "executable holds a mix of old and new addresses",
             stuck);
  return recap__error(cause.status, "patch: %s of node %zu failed: %s; %s", exec_call(failed->type),
                      failed->index, cause.message, tail);
}

recap_status_t recap__cuda_patch_plan_apply(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                            const recap__patch_t *patches, size_t count) {
  RECAP__ARG(plan, "patch: plan is NULL");
  RECAP__ARG(patches || count == 0, "patch: patches is NULL and count is %zu", count);
  RECAP__CHECK(apply_check(plan, patches, count));
  cudaGraphExec_t x = (cudaGraphExec_t)exec;
  for (size_t k = 0; k < count;) {
    size_t end = group_end(plan, patches, count, k);
    plan_node_t *pn = &plan->nodes[plan->site_node[patches[k].site]];
    values_write(plan, pn, patches + k, end - k, false);
    if (x && exec_set(x, pn) != RECAP_SUCCESS) {
      values_write(plan, pn, patches + k, end - k, true);
      return roll_back(plan, x, patches, count, k, pn);
    }
    k = end;
  }
  /* Every node is set: the plan takes the new values. */
  for (size_t i = 0; i < count; i++) {
    plan->sites[patches[i].site].ptr = patches[i].value;
    plan->nodes[plan->site_node[patches[i].site]].dirty = true;
  }
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_sync(recap__patch_plan_t plan) {
  RECAP__ARG(plan, "patch sync: plan is NULL");
  for (size_t i = 0; i < plan->node_count; i++) {
    plan_node_t *pn = &plan->nodes[i];
    if (!pn->dirty) continue;
    if (template_set(pn) != RECAP_SUCCESS) {
      recap__saved_error_t cause;
      recap__error_save(&cause);
      return recap__error(cause.status,
                          "patch sync: %s of node %zu failed: %s; it and the nodes after it stay "
                          "to be synced",
                          template_call(pn->type), pn->index, cause.message);
    }
    pn->dirty = false;
  }
  return RECAP_SUCCESS;
}

/* ---- graph parameters ------------------------------------------------------------------- */

/* The plan's entry of the node at `index` (graph_nodes order), or NULL. */
static plan_node_t *node_at(recap__patch_plan_t plan, size_t index) {
  size_t lo = 0, hi = plan->node_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (plan->nodes[mid].index < index)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < plan->node_count && plan->nodes[lo].index == index ? &plan->nodes[lo] : NULL;
}

/* The kernel entry of node `index`, or INVALID_ARGUMENT saying why there is none. */
static recap_status_t kernel_at(recap__patch_plan_t plan, size_t index, plan_node_t **out) {
  plan_node_t *pn = node_at(plan, index);
  *out = pn;
  if (pn && pn->type == cudaGraphNodeTypeKernel && pn->kernel) return RECAP_SUCCESS;
  return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "node %zu is %s", index,
                         pn ? "not a kernel node"
                            : "no kernel node of the graph's top level whose arguments the "
                              "driver describes (nodes inside child graphs and conditional "
                              "bodies are not patchable)");
}

typedef struct found_list {
  recap__arg_site_t *v;
  size_t count, cap;
} found_list_t;

static bool found_push(found_list_t *l, recap__arg_site_t site) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    recap__arg_site_t *grown = recap__host_realloc(l->v, cap * sizeof *grown);
    if (!grown) return false;
    l->v = grown;
    l->cap = cap;
  }
  l->v[l->count++] = site;
  return true;
}

recap_status_t recap__cuda_patch_plan_find(recap__patch_plan_t plan,
                                           const recap__arg_pattern_t *patterns, size_t count,
                                           recap__arg_site_t **found, size_t *found_count) {
  RECAP__ARG(plan && found && found_count, "patch find: an argument is NULL");
  RECAP__ARG(patterns || count == 0, "patch find: patterns is NULL");
  *found = NULL;
  *found_count = 0;
  found_list_t l = {0};
  for (size_t n = 0; n < plan->node_count; n++) {
    const plan_node_t *pn = &plan->nodes[n];
    if (pn->type != cudaGraphNodeTypeKernel || !pn->kernel) continue;
    size_t params = recap__kernel_args_param_count(pn->kernel);
    for (size_t i = 0; i < params; i++) {
      size_t offset = 0, size = 0;
      (void)recap__kernel_args_param(pn->kernel, i, &offset, &size);
      for (size_t at = offset; at < offset + size; at += 4) {
        for (size_t k = 0; k < count; k++) {
          uint32_t width = patterns[k].size;
          if ((at - offset) % width != 0 || at + width > offset + size) continue;
          uint64_t bits = 0;
          if (!recap__kernel_args_read(pn->kernel, at, &bits, width) ||
              memcmp(&bits, &patterns[k].bits, width) != 0)
            continue;
          recap__arg_site_t site = {.node = pn->index,
                                    .param = (uint32_t)i,
                                    .offset = at,
                                    .size = width,
                                    .param_size = size,
                                    .param_offset = offset,
                                    .pattern = k};
          if (!found_push(&l, site)) {
            recap__host_free(l.v);
            return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch find: out of host memory");
          }
        }
      }
    }
  }
  *found = l.v;
  *found_count = l.count;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_arg(recap__patch_plan_t plan, size_t node, uint32_t param,
                                          recap__arg_site_t *site) {
  RECAP__ARG(plan && site, "patch arg: an argument is NULL");
  plan_node_t *pn;
  RECAP__CHECK(kernel_at(plan, node, &pn));
  size_t offset = 0, size = 0;
  if (!recap__kernel_args_param(pn->kernel, param, &offset, &size))
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "node %zu's kernel has %zu parameters; there is no parameter %" PRIu32,
                           node, recap__kernel_args_param_count(pn->kernel), param);
  *site = (recap__arg_site_t){.node = node,
                              .param = param,
                              .offset = offset,
                              .size = (uint32_t)size,
                              .param_size = size,
                              .param_offset = offset};
  return RECAP_SUCCESS;
}

/* Write writes[0..n) (one node's) into pn's copy; with old, keep what they replace there first
 * (old[i] gets writes[i]'s previous bytes). */
static void args_write(plan_node_t *pn, const recap__arg_write_t *w, size_t n, uint64_t *old) {
  for (size_t i = 0; i < n; i++) {
    if (old) {
      old[i] = 0;
      (void)recap__kernel_args_read(pn->kernel, w[i].offset, &old[i], w[i].size);
    }
    (void)recap__kernel_args_write_bytes(pn->kernel, w[i].offset, &w[i].bits, w[i].size);
  }
}

/* Put back, in reverse, what args_write replaced. */
static void args_restore(plan_node_t *pn, const recap__arg_write_t *w, size_t n,
                         const uint64_t *old) {
  for (size_t i = n; i-- > 0;)
    (void)recap__kernel_args_write_bytes(pn->kernel, w[i].offset, &old[i], w[i].size);
}

static recap_status_t write_check(recap__patch_plan_t plan, const recap__arg_write_t *w,
                                  size_t count) {
  for (size_t i = 0; i < count; i++) {
    plan_node_t *pn;
    if (kernel_at(plan, w[i].node, &pn) != RECAP_SUCCESS) {
      recap__saved_error_t cause;
      recap__error_save(&cause);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "patch write: writes[%zu]: %s", i,
                          cause.message);
    }
    if (i > 0 && w[i].node < w[i - 1].node)
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                             "patch write: writes[%zu].node (%zu) comes before writes[%zu].node "
                             "(%zu); sort the writes by node",
                             i, w[i].node, i - 1, w[i - 1].node);
    bool inside = false;
    size_t params = recap__kernel_args_param_count(pn->kernel);
    for (size_t k = 0; k < params && !inside; k++) {
      size_t offset = 0, size = 0;
      (void)recap__kernel_args_param(pn->kernel, k, &offset, &size);
      inside =
          w[i].offset >= offset && w[i].size <= size && w[i].offset - offset <= size - w[i].size;
    }
    if (!inside || w[i].size == 0 || w[i].size > 8)
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                             "patch write: writes[%zu]: %" PRIu32
                             " bytes at offset %zu are not "
                             "inside one parameter of node %zu's kernel",
                             i, w[i].size, w[i].offset, w[i].node);
  }
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_write(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                            const recap__arg_write_t *writes, size_t count) {
  RECAP__ARG(plan, "patch write: plan is NULL");
  RECAP__ARG(writes || count == 0, "patch write: writes is NULL and count is %zu", count);
  RECAP__CHECK(write_check(plan, writes, count));
  uint64_t small[32], *old = count <= 32 ? small : recap__host_malloc(count * sizeof *old);
  if (!old) return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch write: out of host memory");
  cudaGraphExec_t x = (cudaGraphExec_t)exec;
  recap_status_t st = RECAP_SUCCESS;
  size_t k = 0;
  while (k < count) {
    size_t end = k + 1;
    while (end < count && writes[end].node == writes[k].node) end++;
    plan_node_t *pn = node_at(plan, writes[k].node);
    args_write(pn, writes + k, end - k, old + k);
    if (x && exec_set(x, pn) != RECAP_SUCCESS) {
      recap__saved_error_t cause;
      recap__error_save(&cause);
      args_restore(pn, writes + k, end - k, old + k);
      /* Set the nodes written before it back, last first. */
      size_t undone = 0, stuck = SIZE_MAX;
      for (size_t j = k; j > 0;) {
        size_t first = j - 1;
        while (first > 0 && writes[first - 1].node == writes[j - 1].node) first--;
        plan_node_t *back = node_at(plan, writes[first].node);
        args_restore(back, writes + first, j - first, old + first);
        if (exec_set(x, back) == RECAP_SUCCESS)
          undone++;
        else if (stuck == SIZE_MAX)
          stuck = back->index;
        j = first;
      }
      if (stuck == SIZE_MAX)
        st = recap__error(cause.status,
                          "patch write: cuGraphExecKernelNodeSetParams of node %zu failed: %s; "
                          "the %zu nodes set before it were set back",
                          pn->index, cause.message, undone);
      else
        st = recap__error(cause.status,
                          "patch write: cuGraphExecKernelNodeSetParams of node %zu failed: %s; "
                          "setting back node %zu failed too: the executable holds a mix of old "
                          "and new values",
                          pn->index, cause.message, stuck);
      break;
    }
    k = end;
  }
  if (st == RECAP_SUCCESS)
    for (size_t i = 0; i < count; i++) node_at(plan, writes[i].node)->dirty = true;
  if (old != small) recap__host_free(old);
  return st;
}

recap_status_t recap__cuda_patch_plan_shape(recap__patch_plan_t plan, size_t node,
                                            recap__kernel_shape_t *shape, int *max_threads) {
  RECAP__ARG(plan && shape, "patch shape: an argument is NULL");
  plan_node_t *pn;
  RECAP__CHECK(kernel_at(plan, node, &pn));
  recap__kernel_args_shape(pn->kernel, shape->grid, shape->block);
  if (max_threads) RECAP__CHECK(recap__kernel_args_max_threads(pn->kernel, max_threads));
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_set_shape(recap__patch_plan_t plan,
                                                recap_cuda_graph_exec_t exec, size_t node,
                                                const recap__kernel_shape_t *shape) {
  RECAP__ARG(plan && shape, "patch shape: an argument is NULL");
  plan_node_t *pn;
  RECAP__CHECK(kernel_at(plan, node, &pn));
  recap__kernel_shape_t before;
  recap__kernel_args_shape(pn->kernel, before.grid, before.block);
  recap__kernel_args_set_shape(pn->kernel, shape->grid, shape->block);
  recap_status_t st = exec ? exec_set((cudaGraphExec_t)exec, pn) : RECAP_SUCCESS;
  if (st != RECAP_SUCCESS) {
    recap__kernel_args_set_shape(pn->kernel, before.grid, before.block);
    return st;
  }
  pn->dirty = true;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_device_node(recap__patch_plan_t plan, size_t node,
                                                  uint64_t *handle) {
  RECAP__ARG(plan && handle, "patch device node: an argument is NULL");
  *handle = 0;
  plan_node_t *pn;
  RECAP__CHECK(kernel_at(plan, node, &pn));
  /* Set on the template's node, then read back: the handle is what the attribute reads once
   * the node is device-updatable. */
  cudaLaunchAttributeValue value;
  memset(&value, 0, sizeof value);
  value.deviceUpdatableKernelNode.deviceUpdatable = 1;
  cudaError_t err =
      cudaGraphKernelNodeSetAttribute(pn->node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                      &value);
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaGraphKernelNodeSetAttribute(node %zu, "
                            "cudaLaunchAttributeDeviceUpdatableKernelNode, 1)",
                            node);
  memset(&value, 0, sizeof value);
  err = cudaGraphKernelNodeGetAttribute(pn->node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                        &value);
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaGraphKernelNodeGetAttribute(node %zu, "
                            "cudaLaunchAttributeDeviceUpdatableKernelNode)",
                            node);
  if (!value.deviceUpdatableKernelNode.devNode)
    return RECAP__ERROR_AT(RECAP_ERROR_CUDA,
                           "cudaGraphKernelNodeGetAttribute(node %zu): the driver made the node "
                           "device-updatable but gave no device handle for it",
                           node);
  *handle = (uint64_t)(uintptr_t)value.deviceUpdatableKernelNode.devNode;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_patch_plan_precede_only(recap__patch_plan_t plan, size_t node,
                                                   const size_t *targets, size_t count) {
  RECAP__ARG(plan && (targets || count == 0), "patch precede only: an argument is NULL");
  plan_node_t *pn;
  RECAP__CHECK(kernel_at(plan, node, &pn));
  cudaGraphNode_t *before = NULL, *after = NULL;
  size_t n = 0;
  CUDA_TRY_F(cudaGraphNodeGetDependentNodes(pn->node, NULL, NULL, &n),
             "cudaGraphNodeGetDependentNodes(node %zu, NULL) to count them", node);
  size_t cap = n > count ? n : count;
  recap_status_t s = RECAP_SUCCESS;
  cudaGraphEdgeData *data = NULL;
  if (cap) {
    before = recap__host_calloc(cap, sizeof *before);
    after = recap__host_calloc(cap, sizeof *after);
    data = recap__host_calloc(cap, sizeof *data);
    if (!before || !after || !data)
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "patch precede only: out of host memory");
  }
  for (size_t i = 0; i < cap && s == RECAP_SUCCESS; i++) before[i] = pn->node;
  for (size_t i = 0; i < count && s == RECAP_SUCCESS; i++) {
    plan_node_t *t;
    s = kernel_at(plan, targets[i], &t);
    if (s == RECAP_SUCCESS) after[i] = t->node;
  }
  /* The targets are checked before the graph changes; a failure after that is the driver's. */
  cudaGraphNode_t *dependents = NULL;
  if (s == RECAP_SUCCESS && n) {
    dependents = recap__host_calloc(n, sizeof *dependents);
    if (!dependents)
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "patch precede only: out of host memory");
  }
  cudaError_t err = cudaSuccess;
  const char *call = NULL;
  if (s == RECAP_SUCCESS && n) {
    call = "cudaGraphNodeGetDependentNodes";
    err = cudaGraphNodeGetDependentNodes(pn->node, dependents, data, &n);
    if (err == cudaSuccess) {
      call = "cudaGraphRemoveDependencies";
      err = cudaGraphRemoveDependencies(plan->graph, before, dependents, data, n);
    }
  }
  if (s == RECAP_SUCCESS && err == cudaSuccess && count) {
    call = "cudaGraphAddDependencies";
    err = cudaGraphAddDependencies(plan->graph, before, after, NULL, count);
  }
  if (s == RECAP_SUCCESS && err != cudaSuccess)
    s = recap__cuda_fail((int)err, __FILE__, __LINE__, "%s(node %zu, %zu dependents, %zu targets)",
                         call, node, n, count);
  recap__host_free(dependents);
  recap__host_free(before);
  recap__host_free(after);
  recap__host_free(data);
  return s;
}

/* ---- updates ---------------------------------------------------------------------------- */

static recap_update_reason_t reason_of(enum cudaGraphExecUpdateResult result) {
  switch (result) {
    case cudaGraphExecUpdateErrorTopologyChanged: return RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
    case cudaGraphExecUpdateErrorNodeTypeChanged: return RECAP_UPDATE_REASON_NODE_TYPE_CHANGED;
    case cudaGraphExecUpdateErrorFunctionChanged: return RECAP_UPDATE_REASON_FUNCTION_CHANGED;
    case cudaGraphExecUpdateErrorParametersChanged: return RECAP_UPDATE_REASON_PARAMETERS_CHANGED;
    case cudaGraphExecUpdateErrorNotSupported: return RECAP_UPDATE_REASON_NOT_SUPPORTED;
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange:
      return RECAP_UPDATE_REASON_UNSUPPORTED_FUNCTION_CHANGE;
    case cudaGraphExecUpdateErrorAttributesChanged: return RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED;
    default: return RECAP_UPDATE_REASON_REFUSED_OTHER;
  }
}

/* The index of node in graph's node list (graph_nodes order), or SIZE_MAX. */
static size_t node_index(cudaGraph_t graph, cudaGraphNode_t node) {
  if (!node) return SIZE_MAX;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap__graph_node_t *nodes = NULL;
  size_t n = 0, index = SIZE_MAX;
  if (recap__cuda_graph_nodes((recap_cuda_graph_t)graph, &nodes, &n) == RECAP_SUCCESS) {
    for (size_t i = 0; i < n; i++)
      if ((cudaGraphNode_t)nodes[i] == node) {
        index = i;
        break;
      }
  }
  recap__host_free(nodes);
  /* The node is a detail of the refusal: a failure to list the nodes leaves no trace. */
  (void)recap__error_restore(&saved);
  return index;
}

recap_status_t recap__cuda_graph_exec_update(recap_cuda_graph_exec_t exec, recap_cuda_graph_t graph,
                                             recap_update_reason_t *refused, size_t *node) {
  RECAP__ARG(refused && node, "cudaGraphExecUpdate: an out-parameter is NULL");
  *refused = RECAP_UPDATE_REASON_NONE;
  *node = SIZE_MAX;
  RECAP__ARG(exec && graph, "cudaGraphExecUpdate: exec and graph must not be NULL");
  cudaGraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  cudaError_t err = cudaGraphExecUpdate((cudaGraphExec_t)exec, (cudaGraph_t)graph, &info);
  if (err == cudaSuccess) return RECAP_SUCCESS;
  if (err != cudaErrorGraphExecUpdateFailure)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaGraphExecUpdate(executable %p, graph %p)", (void *)exec,
                            (void *)graph);
  /* Refused: the executable is unchanged, and a refusal is an answer, not a failure. */
  (void)cudaGetLastError();
  *refused = reason_of(info.result);
  *node = node_index((cudaGraph_t)graph, info.errorNode);
  return RECAP_SUCCESS;
}
