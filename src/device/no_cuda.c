/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * no_cuda.c — what stands in the CUDA seam's place in a build without CUDA (RECAP_CUDA=OFF, the
 * default where CMake finds no CUDA toolkit): a table named "none" whose every operation fails
 * with RECAP_ERROR_NO_DEVICE, the status a machine without a driver gets, and a message naming
 * the build option. Such a build compiles with a plain C compiler and runs the CPU suite, whose
 * tests install the fake device over this table; a program using it is told at its first device
 * call that this recap cannot reach a GPU, and how to build one that can.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "device/device.h"

static recap_status_t no_cuda(void) {
  return recap__error(RECAP_ERROR_NO_DEVICE,
                      "this recap was built without CUDA (RECAP_CUDA=OFF, or no CUDA toolkit "
                      "was found at configure time), so it has no device backend; to use a GPU, "
                      "install the CUDA toolkit and build recap with -DRECAP_CUDA=ON");
}

/* One operation of the table: every parameter is named for the table's signature and none is
 * read, since the answer is the same whatever they hold. */
#if defined(__GNUC__)
#  pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#define NO_CUDA_OP(op, ...) \
  static recap_status_t none_##op(__VA_ARGS__) { return no_cuda(); }

NO_CUDA_OP(device_count, int *count)
NO_CUDA_OP(get_device, int *device)
NO_CUDA_OP(set_device, int device)
NO_CUDA_OP(device_synchronize, void)
NO_CUDA_OP(raw_malloc, void **ptr, size_t size)
NO_CUDA_OP(raw_free, void *ptr)
NO_CUDA_OP(mem_get_info, size_t *free_bytes, size_t *total_bytes)
NO_CUDA_OP(event_create, recap__event_t *event)
NO_CUDA_OP(event_destroy, recap__event_t event)
NO_CUDA_OP(event_record, recap__event_t event, recap_stream_t stream)
NO_CUDA_OP(event_query, recap__event_t event, bool *done)
NO_CUDA_OP(event_synchronize, recap__event_t event)
NO_CUDA_OP(stream_wait_event, recap_stream_t stream, recap__event_t event)
NO_CUDA_OP(stream_create, recap_stream_t *stream)
NO_CUDA_OP(stream_blocking, recap_stream_t stream, bool *blocking)
NO_CUDA_OP(stream_destroy, recap_stream_t stream)
NO_CUDA_OP(stream_synchronize, recap_stream_t stream)
NO_CUDA_OP(memcpy_async, void *dst, const void *src, size_t bytes, recap_stream_t stream)
NO_CUDA_OP(stream_capture_info, recap_stream_t stream, recap__capture_status_t *status,
           uint64_t *capture_id)
NO_CUDA_OP(exchange_capture_mode, recap__capture_mode_t *mode)
NO_CUDA_OP(stream_begin_capture, recap_stream_t stream, recap__capture_mode_t mode)
NO_CUDA_OP(stream_end_capture, recap_stream_t stream, recap_cuda_graph_t *graph)
NO_CUDA_OP(graph_instantiate, recap_cuda_graph_exec_t *exec, recap_cuda_graph_t graph)
NO_CUDA_OP(graph_launch, recap_cuda_graph_exec_t exec, recap_stream_t stream)
NO_CUDA_OP(graph_destroy, recap_cuda_graph_t graph)
NO_CUDA_OP(graph_exec_destroy, recap_cuda_graph_exec_t exec)
NO_CUDA_OP(graph_node_count, recap_cuda_graph_t graph, size_t *count)
NO_CUDA_OP(graph_debug_dot, recap_cuda_graph_t graph, const char *path)
NO_CUDA_OP(graph_inspect, recap_cuda_graph_t graph, recap_graph_info_t *info)
NO_CUDA_OP(capture_nodes, recap_stream_t stream, recap_cuda_graph_t *graph,
           recap__graph_node_t **nodes, size_t *count)
NO_CUDA_OP(graph_nodes, recap_cuda_graph_t graph, recap__graph_node_t **nodes, size_t *count)
NO_CUDA_OP(graph_reads_check, void)
NO_CUDA_OP(graph_reads, recap_cuda_graph_t graph, recap__graph_read_t **reads, size_t *count)
NO_CUDA_OP(patch_plan_create, recap_cuda_graph_t graph, recap_cuda_graph_t origin,
           recap__patch_plan_t *plan, const recap__graph_read_t **sites, size_t *count)
NO_CUDA_OP(patch_plan_apply, recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
           const recap__patch_t *patches, size_t count)
NO_CUDA_OP(patch_plan_sync, recap__patch_plan_t plan)
NO_CUDA_OP(patch_plan_find, recap__patch_plan_t plan, const recap__arg_pattern_t *patterns,
           size_t count, recap__arg_site_t **found, size_t *found_count)
NO_CUDA_OP(patch_plan_arg, recap__patch_plan_t plan, size_t node, uint32_t param,
           recap__arg_site_t *site)
NO_CUDA_OP(patch_plan_write, recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
           const recap__arg_write_t *writes, size_t count)
NO_CUDA_OP(patch_plan_shape, recap__patch_plan_t plan, size_t node, recap__kernel_shape_t *shape,
           int *max_threads)
NO_CUDA_OP(patch_plan_set_shape, recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
           size_t node, const recap__kernel_shape_t *shape)
NO_CUDA_OP(params_device_supported, bool *supported)
NO_CUDA_OP(patch_plan_device_node, recap__patch_plan_t plan, size_t node, uint64_t *handle)
NO_CUDA_OP(patch_plan_precede_only, recap__patch_plan_t plan, size_t node, const size_t *targets,
           size_t count)
NO_CUDA_OP(params_apply_launch, recap_stream_t stream, struct recap__applier_table *table)
NO_CUDA_OP(params_source_launch, recap_stream_t stream, struct recap__source_table *table)
NO_CUDA_OP(graph_exec_update, recap_cuda_graph_exec_t exec, recap_cuda_graph_t graph,
           recap_update_reason_t *refused, size_t *node)
NO_CUDA_OP(event_elapsed, recap__event_t start, recap__event_t end, float *ms)
NO_CUDA_OP(rng_write_state, recap_stream_t stream, uint64_t *state, uint64_t seed, uint64_t offset)
NO_CUDA_OP(rng_launch, const struct recap__rng_launch *launch)
NO_CUDA_OP(rng_advance, recap_stream_t stream, uint64_t *state, uint64_t step)
NO_CUDA_OP(cond_supported, bool *supported)
NO_CUDA_OP(capture_pause, recap_stream_t stream, recap_cuda_graph_t *graph,
           recap__graph_node_t **deps, size_t *count)
NO_CUDA_OP(capture_to_graph, recap_stream_t stream, recap_cuda_graph_t graph,
           const recap__graph_node_t *deps, size_t count, recap__capture_mode_t mode)
NO_CUDA_OP(cond_handle_create, recap_cuda_graph_t graph, unsigned initial, bool assign_default,
           uint64_t *handle)
NO_CUDA_OP(cond_node_add, recap_cuda_graph_t graph, const recap__graph_node_t *deps, size_t count,
           recap__cond_kind_t kind, uint64_t handle, unsigned branches, recap__graph_node_t *node,
           recap_cuda_graph_t *bodies)
NO_CUDA_OP(cond_launch, const struct recap__cond_launch *launch)
NO_CUDA_OP(graph_add_empty, recap_cuda_graph_t graph)
NO_CUDA_OP(capture_add_child, recap_stream_t stream, recap_cuda_graph_t graph)
NO_CUDA_OP(vmm_granularity, size_t *minimum, size_t *recommended)
NO_CUDA_OP(vmm_reserve, void **ptr, size_t size)
NO_CUDA_OP(vmm_release_range, void *ptr, size_t size)
NO_CUDA_OP(vmm_create, recap__vmm_handle_t *handle, size_t size)
NO_CUDA_OP(vmm_release, recap__vmm_handle_t handle)
NO_CUDA_OP(vmm_map, void *ptr, size_t size, recap__vmm_handle_t handle)
NO_CUDA_OP(vmm_unmap, void *ptr, size_t size)
NO_CUDA_OP(vmm_set_access, void *ptr, size_t size)
NO_CUDA_OP(host_alloc_pinned, void **ptr, size_t size)

/* The seam promises that freeing NULL pinned memory does nothing, and nothing else can be
 * freed: no pinned memory was ever given out. */
static recap_status_t none_host_free_pinned(void *ptr) {
  return ptr == NULL ? RECAP_SUCCESS : no_cuda();
}

/* No plan was ever made, so there is none to destroy. */
static void none_patch_plan_destroy(recap__patch_plan_t plan) {}

/* Named as the CUDA implementation is, since it stands where that one would (device.c installs
 * it unless a test installs the fake). */
const recap__device_ops_t recap__cuda_ops = {
    .name = "none",
    .device_count = none_device_count,
    .get_device = none_get_device,
    .set_device = none_set_device,
    .device_synchronize = none_device_synchronize,
    .raw_malloc = none_raw_malloc,
    .raw_free = none_raw_free,
    .mem_get_info = none_mem_get_info,
    .event_create = none_event_create,
    .event_destroy = none_event_destroy,
    .event_record = none_event_record,
    .event_query = none_event_query,
    .event_synchronize = none_event_synchronize,
    .stream_wait_event = none_stream_wait_event,
    .stream_create = none_stream_create,
    .stream_blocking = none_stream_blocking,
    .stream_destroy = none_stream_destroy,
    .stream_synchronize = none_stream_synchronize,
    .memcpy_async = none_memcpy_async,
    .stream_capture_info = none_stream_capture_info,
    .exchange_capture_mode = none_exchange_capture_mode,
    .stream_capture_id = none_stream_capture_info,
    .stream_begin_capture = none_stream_begin_capture,
    .stream_end_capture = none_stream_end_capture,
    .graph_instantiate = none_graph_instantiate,
    .graph_launch = none_graph_launch,
    .graph_upload = none_graph_launch,
    .graph_destroy = none_graph_destroy,
    .graph_exec_destroy = none_graph_exec_destroy,
    .graph_node_count = none_graph_node_count,
    .graph_debug_dot = none_graph_debug_dot,
    .graph_inspect = none_graph_inspect,
    .capture_nodes = none_capture_nodes,
    .graph_nodes = none_graph_nodes,
    .graph_reads_check = none_graph_reads_check,
    .graph_reads = none_graph_reads,
    .patch_plan_create = none_patch_plan_create,
    .patch_plan_apply = none_patch_plan_apply,
    .patch_plan_sync = none_patch_plan_sync,
    .patch_plan_destroy = none_patch_plan_destroy,
    .patch_plan_find = none_patch_plan_find,
    .patch_plan_arg = none_patch_plan_arg,
    .patch_plan_write = none_patch_plan_write,
    .patch_plan_shape = none_patch_plan_shape,
    .patch_plan_set_shape = none_patch_plan_set_shape,
    .params_device_supported = none_params_device_supported,
    .patch_plan_device_node = none_patch_plan_device_node,
    .patch_plan_precede_only = none_patch_plan_precede_only,
    .params_apply_launch = none_params_apply_launch,
    .params_source_launch = none_params_source_launch,
    .graph_exec_update = none_graph_exec_update,
    .timing_event_create = none_event_create,
    .event_elapsed = none_event_elapsed,
    .rng_write_state = none_rng_write_state,
    .rng_launch = none_rng_launch,
    .rng_advance = none_rng_advance,
    .cond_supported = none_cond_supported,
    .capture_pause = none_capture_pause,
    .capture_to_graph = none_capture_to_graph,
    .cond_handle_create = none_cond_handle_create,
    .cond_node_add = none_cond_node_add,
    .cond_launch = none_cond_launch,
    .graph_add_empty = none_graph_add_empty,
    .capture_add_child = none_capture_add_child,
    .vmm_granularity = none_vmm_granularity,
    .vmm_reserve = none_vmm_reserve,
    .vmm_release_range = none_vmm_release_range,
    .vmm_create = none_vmm_create,
    .vmm_release = none_vmm_release,
    .vmm_map = none_vmm_map,
    .vmm_unmap = none_vmm_unmap,
    .vmm_set_access = none_vmm_set_access,
    .host_alloc_pinned = none_host_alloc_pinned,
    .host_free_pinned = none_host_free_pinned,
};
