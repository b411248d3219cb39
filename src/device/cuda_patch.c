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
 * nothing else is read from CUDA. The node handles given to the SetParams calls are the
 * template's, so the template must outlive the plan and the executable's patches.
 */
#include <cuda_runtime_api.h>
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
  size_t index; /* in graph_nodes' order */
  cudaGraphNode_t node;
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
  /* A child graph's sites are nested: they get no entry, and patching them is refused. */
  if (visit->count == 0 || !patchable || (type == cudaGraphNodeTypeKernel && !kernel)) {
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

recap_status_t recap__cuda_patch_plan_create(recap_cuda_graph_t graph, recap__patch_plan_t *plan,
                                             const recap__graph_read_t **sites, size_t *count) {
  RECAP__ARG(plan && sites && count, "patch plan: an out-parameter is NULL");
  *plan = NULL;
  *sites = NULL;
  *count = 0;
  RECAP__ARG(graph != NULL, "patch plan: graph is NULL");
  /* Reading kernels' argument layouts needs a recent driver; say so before walking. */
  RECAP__CHECK(recap__cuda_graph_reads_check());
  recap__patch_plan_t p = recap__host_calloc(1, sizeof *p);
  if (!p) return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory");
  p->graph = (cudaGraph_t)graph;
  recap_status_t st =
      recap__cuda_walk_reads(graph, "rebinding", plan_visit, p, &p->sites, &p->site_count);
  if (st == RECAP_SUCCESS && p->site_count) {
    p->site_node = recap__host_malloc(p->site_count * sizeof *p->site_node);
    if (!p->site_node)
      st = RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "patch plan: out of host memory");
  }
  if (st != RECAP_SUCCESS) {
    recap__cuda_patch_plan_destroy(p);
    return st;
  }
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
      CUDA_TRY_F(cudaGraphExecMemcpyNodeSetParams(exec, pn->node, &pn->copy),
                 "cudaGraphExecMemcpyNodeSetParams(executable %p, node %zu)", (void *)exec,
                 pn->index);
      return RECAP_SUCCESS;
    case cudaGraphNodeTypeMemset:
      CUDA_TRY_F(cudaGraphExecMemsetNodeSetParams(exec, pn->node, &pn->set),
                 "cudaGraphExecMemsetNodeSetParams(executable %p, node %zu)", (void *)exec,
                 pn->index);
      return RECAP_SUCCESS;
    default:
      return recap__driver_kernel_args_set_exec((recap_cuda_graph_exec_t)exec,
                                                (recap__cu_graph_node_t)pn->node, pn->kernel);
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
