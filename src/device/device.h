/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.h — the device seam: everything recap needs from CUDA, behind one table of functions.
 *
 * Only src/device/ calls CUDA. Two implementations stand behind this table: cuda.c (the CUDA
 * runtime, linked statically, and driver entry points fetched at run time, so nothing links
 * against libcuda; in a build without CUDA, no_cuda.c, whose every call fails with
 * RECAP_ERROR_NO_DEVICE) and the CPU fake (tests/fake/fake.h: host memory, simulated streams, events
 * and captures, and fault injection), which lets CI test everything above this layer without a
 * GPU. The fake is test code, built only for the tests, which install it with
 * recap__device_install.
 *
 * Every function returns a recap status; on failure it has already set the thread's last error
 * with the failing call, the CUDA error name and the place.
 */
#ifndef RECAP_DEVICE_H
#define RECAP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recap/core.h"
#include "recap/graph.h"
#include "recap/inspect.h"
#include "recap/update.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An event as the seam sees it: cudaEvent_t for CUDA, a fake event for the fake. */
typedef struct recap__event *recap__event_t;

/* CUDA's three stream capture modes, in the numbering of cudaStreamCaptureMode. */
typedef enum recap__capture_mode {
  RECAP__CAPTURE_MODE_GLOBAL = 0,
  RECAP__CAPTURE_MODE_THREAD_LOCAL = 1,
  RECAP__CAPTURE_MODE_RELAXED = 2
} recap__capture_mode_t;

/* CUDA's capture status of a stream, in the numbering of cudaStreamCaptureStatus. */
typedef enum recap__capture_status {
  RECAP__CAPTURE_NONE = 0,
  RECAP__CAPTURE_ACTIVE = 1,
  RECAP__CAPTURE_INVALIDATED = 2
} recap__capture_status_t;

struct recap__rng_launch;    /* rng_launch.h */
struct recap__cond_launch;   /* cond_launch.h */
struct recap__applier_table; /* applier_launch.h */
struct recap__source_table;  /* applier_launch.h */

/* CUDA's conditional node types, in the numbering of cudaGraphConditionalNodeType (an IF node
 * with two bodies is IF/ELSE). */
typedef enum recap__cond_kind {
  RECAP__COND_IF = 0,
  RECAP__COND_WHILE = 1,
  RECAP__COND_SWITCH = 2
} recap__cond_kind_t;

/* A node of a graph: cudaGraphNode_t / CUgraphNode for CUDA, an opaque id for the fake. */
typedef struct CUgraphNode_st *recap__graph_node_t;

/* What a node reads or writes that may be device memory of recap's allocator (input-liveness
 * checks): a word of a kernel's arguments, or an end of a copy or memset. */
typedef enum recap__read_kind {
  RECAP__READ_KERNEL_ARG = 0,
  RECAP__READ_COPY_SRC,
  RECAP__READ_COPY_DST,
  RECAP__READ_MEMSET_DST
} recap__read_kind_t;

typedef struct recap__graph_read {
  size_t node;     /* index in graph_nodes' order (a child graph's reads count as its node's) */
  const void *ptr; /* the value: a pointer, or any 8-byte argument word that might be one */
  recap__read_kind_t kind;
  size_t offset;  /* KERNEL_ARG: byte offset of the 8-byte word in the kernel's argument
                     buffer; COPY_SRC, COPY_DST, MEMSET_DST: 0 */
  uint32_t param; /* KERNEL_ARG: index of the kernel parameter that holds the word */
  bool nested;    /* the read is inside a child graph of `node` (not patchable) */
} recap__graph_read_t;

/* A graph's patch plan (patch_plan_create): its sites and, per node holding one, what setting
 * that node's parameters in an executable needs. */
typedef struct recap__patch_plan *recap__patch_plan_t;

/* One change of a patch: the plan's site `site` (an index into the plan's sites) gets `value`. */
typedef struct recap__patch {
  size_t site;
  const void *value;
} recap__patch_t;

/* Graph parameters: a value recap writes into kernel arguments, at places found by a bit
 * pattern (patch_plan_find) or named by node and parameter (patch_plan_arg). */
typedef struct recap__arg_pattern {
  uint64_t bits; /* the value, in the low `size` bytes */
  uint32_t size; /* 4 or 8 */
} recap__arg_pattern_t;

/* One place in the arguments of a top-level kernel node of a plan's graph. */
typedef struct recap__arg_site {
  size_t node;         /* index in graph_nodes' order */
  uint32_t param;      /* the kernel parameter holding it */
  size_t offset;       /* byte offset in the argument buffer */
  uint32_t size;       /* bytes */
  size_t param_size;   /* the whole parameter's size (a struct's holds more than the value) */
  size_t param_offset; /* the parameter's own offset */
  size_t pattern;      /* patch_plan_find: the index of the pattern found there */
} recap__arg_site_t;

/* One write of patch_plan_write: `size` bytes (the low bytes of bits) at `offset` of node
 * `node`'s arguments. */
typedef struct recap__arg_write {
  size_t node;
  size_t offset;
  uint32_t size;
  uint64_t bits;
} recap__arg_write_t;

/* A kernel node's launch shape. */
typedef struct recap__kernel_shape {
  unsigned grid[3], block[3];
} recap__kernel_shape_t;

/* A physical chunk of device memory made by vmm_create: CUmemGenericAllocationHandle for CUDA,
 * an id for the fake. 0 is never a chunk. */
typedef uint64_t recap__vmm_handle_t;

typedef struct recap__device_ops {
  const char *name; /* "cuda", "fake", or "none" (no_cuda.c: a build without CUDA) */

  /* Devices. device_count fails with RECAP_ERROR_NO_DEVICE where there is no driver or device,
   * without aborting. get_device/set_device act on the calling thread's current device. */
  recap_status_t (*device_count)(int *count);
  recap_status_t (*get_device)(int *device);
  recap_status_t (*set_device)(int device);
  recap_status_t (*device_synchronize)(void);

  /* Raw device memory of the current device. raw_malloc fails with RECAP_ERROR_OUT_OF_MEMORY
   * when the device has not enough (its last error then says so), other errors otherwise. */
  recap_status_t (*raw_malloc)(void **ptr, size_t size);
  recap_status_t (*raw_free)(void *ptr);
  recap_status_t (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);

  /* Events, with timing disabled (they only order work). */
  recap_status_t (*event_create)(recap__event_t *event);
  recap_status_t (*event_destroy)(recap__event_t event);
  recap_status_t (*event_record)(recap__event_t event, recap_stream_t stream);
  /* *done is true once the work before the record has finished. */
  recap_status_t (*event_query)(recap__event_t event, bool *done);
  recap_status_t (*event_synchronize)(recap__event_t event);
  /* Make the work enqueued on stream from now on wait, on the device, for the work before
   * event's latest record (cudaStreamWaitEvent, flags 0); the host does not block. An event
   * never recorded makes it wait for nothing. A NULL or destroyed event, or a stream that is
   * not one: RECAP_ERROR_CUDA (cudaErrorInvalidResourceHandle). On a capturing stream the event
   * must have been recorded in the same capture: one recorded outside it is
   * cudaErrorStreamCaptureIsolation (RECAP_ERROR_CAPTURE_INVALIDATED, the capture invalidated),
   * which recap never asks for. */
  recap_status_t (*stream_wait_event)(recap_stream_t stream, recap__event_t event);

  /* Streams (non-blocking with respect to the legacy default stream). */
  recap_status_t (*stream_create)(recap_stream_t *stream);
  /* *blocking: whether stream synchronises with the legacy default stream (cudaStreamGetFlags
   * without cudaStreamNonBlocking: made with cudaStreamCreate, the per-thread default stream,
   * and the legacy stream, NULL, itself). Work on the legacy stream, from any thread, then
   * invalidates a capture stream takes part in. A stream that is not one: RECAP_ERROR_CUDA. */
  recap_status_t (*stream_blocking)(recap_stream_t stream, bool *blocking);
  recap_status_t (*stream_destroy)(recap_stream_t stream);
  recap_status_t (*stream_synchronize)(recap_stream_t stream);
  /* Copy ordered on stream (cudaMemcpyAsync with cudaMemcpyDefault): either end may be device
   * memory (raw_malloc, or mapped chunks with access set) or pinned host memory
   * (host_alloc_pinned), the direction read from the pointers. */
  recap_status_t (*memcpy_async)(void *dst, const void *src, size_t bytes, recap_stream_t stream);

  /* The capture status of stream and, when active, the id of its capture sequence. Must never
   * create a CUDA context: with no context on the device it reports NONE. */
  recap_status_t (*stream_capture_info)(recap_stream_t stream, recap__capture_status_t *status,
                                        uint64_t *capture_id);
  /* The same, for callers that know a context exists (a capture is under way on the device):
   * it skips the context check, which costs more than the query itself. The allocator's
   * routing uses it on every allocation during a capture. */
  recap_status_t (*stream_capture_id)(recap_stream_t stream, recap__capture_status_t *status,
                                      uint64_t *capture_id);
  /* Swap the calling thread's capture mode with *mode (cudaThreadExchangeStreamCaptureMode). */
  recap_status_t (*exchange_capture_mode)(recap__capture_mode_t *mode);

  /* Graphs. begin_capture fails with RECAP_ERROR_INVALID_USAGE on the legacy default stream or
   * a stream already capturing. end_capture hands back the template; if the capture was
   * invalidated it fails with RECAP_ERROR_CAPTURE_INVALIDATED (the message names the CUDA
   * error) and *graph is NULL, and the stream no longer captures. Misuse (ending from another
   * thread or on a joined side stream) fails with RECAP_ERROR_INVALID_USAGE and leaves the
   * capture to be ended properly. */
  recap_status_t (*stream_begin_capture)(recap_stream_t stream, recap__capture_mode_t mode);
  recap_status_t (*stream_end_capture)(recap_stream_t stream, recap_cuda_graph_t *graph);
  /* Instantiate with auto-free-on-launch and node priorities (PyTorch's flags). */
  recap_status_t (*graph_instantiate)(recap_cuda_graph_exec_t *exec, recap_cuda_graph_t graph);
  recap_status_t (*graph_launch)(recap_cuda_graph_exec_t exec, recap_stream_t stream);
  /* Upload exec's work to the device in stream, without running it (cudaGraphUpload), so that
   * a later launch does not pay for it: a launch of an executable not uploaded since it was
   * instantiated or updated uploads it first. Ordered in stream like a launch. */
  recap_status_t (*graph_upload)(recap_cuda_graph_exec_t exec, recap_stream_t stream);
  recap_status_t (*graph_destroy)(recap_cuda_graph_t graph);
  recap_status_t (*graph_exec_destroy)(recap_cuda_graph_exec_t exec);
  /* Every node of graph, those in the bodies of its conditional nodes included (a child
   * graph node counts as one). */
  recap_status_t (*graph_node_count)(recap_cuda_graph_t graph, size_t *count);
  /* Graphviz DOT of the template, through the driver's verbose dump. */
  recap_status_t (*graph_debug_dot)(recap_cuda_graph_t graph, const char *path);
  /* Fill info (zeroed by the caller) with the template's nodes and edges, the bodies of
   * conditional nodes included, laid out as recap/inspect.h says (parent, branch, region_kind,
   * branches). Arrays and strings are malloc'ed one by one; recap_graph_info_free releases
   * them. */
  recap_status_t (*graph_inspect)(recap_cuda_graph_t graph, recap_graph_info_t *info);

  /* Debug aids (annotations, input liveness). capture_nodes: the graph that the capture of
   * stream is building (cudaStreamGetCaptureInfo's graph_out, owned by the capture) and its
   * nodes so far, in a malloc'ed array the caller frees (NULL when there is none); fails with
   * RECAP_ERROR_INVALID_USAGE when the stream does not take part in an active capture.
   * graph_nodes: the graph's own nodes (not those inside conditional bodies), in the order
   * graph_inspect reports them (its first ones).
   * graph_reads: every pointer-like value the graph's nodes read or write (graph_read_t), in a
   * malloc'ed array (what nodes inside child graphs and conditional bodies read counts as
   * their top-level node's, with nested set); graph_reads_check says whether graph_reads can work here (the CUDA seam
   * needs a driver for CUDA 12.4 or later to learn kernels' argument layouts). */
  recap_status_t (*capture_nodes)(recap_stream_t stream, recap_cuda_graph_t *graph,
                                  recap__graph_node_t **nodes, size_t *count);
  recap_status_t (*graph_nodes)(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                size_t *count);
  recap_status_t (*graph_reads_check)(void);
  recap_status_t (*graph_reads)(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                size_t *count);

  /* Rebinding: patching the addresses an executable holds, without a new capture.
   * patch_plan_create builds the patch plan of graph, the current template: the sites are
   * exactly what graph_reads reports of graph (same order: by node in graph_nodes order, then by
   * offset), in an array owned by the plan (*sites valid until patch_plan_destroy; their ptr
   * fields are kept current by patch_plan_apply). The plan caches, per node holding a site, what
   * setting that node's parameters needs (kernel: function, launch shape, a private copy of the
   * argument buffer and its pointer array; memcpy: the copy's parameters; memset: the memset's
   * parameters), read from graph, so that a patch costs one
   * cudaGraphExec{Kernel,Memcpy,Memset}NodeSetParams per node and nothing else.
   * origin is the graph the executables this plan patches were instantiated from (NULL: graph
   * itself). CUDA accepts in cudaGraphExec*NodeSetParams only the nodes of the graph an
   * executable was instantiated from, for the executable's whole life: after
   * cudaGraphExecUpdate(exec, graph) succeeds, graph's nodes are refused (cudaErrorInvalidValue)
   * and origin's nodes still work (measured on CUDA 13, driver 580). So the plan names, for a
   * node of graph, the node of origin at the same index (graph_nodes order; child-graph nodes'
   * insides are not patchable anyway). origin and graph with different node counts, or with
   * different node types at an index: RECAP_ERROR_INVALID_ARGUMENT naming the index. Both graphs
   * must outlive the plan: graph is where patch_plan_sync writes, origin's nodes are the handles
   * every patch names. */
  recap_status_t (*patch_plan_create)(recap_cuda_graph_t graph, recap_cuda_graph_t origin,
                                      recap__patch_plan_t *plan, const recap__graph_read_t **sites,
                                      size_t *count);
  /* Set each patches[i].site's word to value, in the plan and in exec (an executable
   * instantiated from the plan's origin, whatever it was updated from since). patches are
   * sorted by site, each site once. One cudaGraphExec{Kernel,Memcpy,Memset}NodeSetParams per
   * node touched. All or nothing: when a node's set fails, the nodes this call already set are
   * set back to their previous values, the plan is unchanged, and the failure is returned (the
   * message names the node index and the CUDA call); an executable not instantiated from the
   * plan's origin fails so (cudaErrorInvalidValue). A nested site: RECAP_ERROR_NOT_SUPPORTED, nothing set; a
   * site index out of range or patches out of order: RECAP_ERROR_INVALID_ARGUMENT. exec NULL:
   * only the plan changes (no CUDA call), its nodes waiting for patch_plan_sync, for a graph
   * that has no executable now. */
  recap_status_t (*patch_plan_apply)(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                     const recap__patch_t *patches, size_t count);
  /* Write the plan's values of every node patched since the last sync into the plan's graph
   * (cudaGraph{Kernel,Memcpy,Memset}NodeSetParams on the template), so that an instantiation or
   * update from the template, or its inspection, sees the rebinds. On failure the nodes not
   * yet written stay pending for the next sync. */
  recap_status_t (*patch_plan_sync)(recap__patch_plan_t plan);
  void (*patch_plan_destroy)(recap__patch_plan_t plan); /* NULL is a no-op */
  /* Graph parameters, on the same plan (which holds a copy of every top-level kernel node's
   * arguments whose layout the driver gives, sites or not, so that rebinds and parameters write
   * one copy per node and neither undoes the other).
   * patch_plan_find: every place where patterns[i] lies in those arguments, at an offset of its
   * parameter that is a multiple of its size, in a malloc'ed array sorted by node, then offset,
   * then pattern (the caller frees it); a kernel whose arguments cannot be read is skipped.
   * patch_plan_arg: where parameter `param` of node `node` lies (site->size is its size);
   * RECAP_ERROR_INVALID_ARGUMENT when node is no top-level kernel node of the plan (the message
   * says what it is) or has no such parameter.
   * patch_plan_write: writes[0..count), sorted by node (non-decreasing), each inside one
   * parameter of a kernel node of the plan, into the plan's copies and, exec not NULL, into
   * exec: one set per node touched, all or nothing as patch_plan_apply (a failure sets the nodes
   * already set back and leaves the plan unchanged); the nodes wait for patch_plan_sync.
   * patch_plan_shape: node's launch shape in the plan, and the most threads per block its kernel
   * takes (*max_threads, may be NULL). patch_plan_set_shape: set it, in the plan and, exec not
   * NULL, in exec (one set; a failure leaves both unchanged). Neither checks CUDA's limits
   * beyond what the set call does. */
  recap_status_t (*patch_plan_find)(recap__patch_plan_t plan, const recap__arg_pattern_t *patterns,
                                    size_t count, recap__arg_site_t **found, size_t *found_count);
  recap_status_t (*patch_plan_arg)(recap__patch_plan_t plan, size_t node, uint32_t param,
                                   recap__arg_site_t *site);
  recap_status_t (*patch_plan_write)(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                     const recap__arg_write_t *writes, size_t count);
  recap_status_t (*patch_plan_shape)(recap__patch_plan_t plan, size_t node,
                                     recap__kernel_shape_t *shape, int *max_threads);
  recap_status_t (*patch_plan_set_shape)(recap__patch_plan_t plan, recap_cuda_graph_exec_t exec,
                                         size_t node, const recap__kernel_shape_t *shape);
  /* Graph parameters applied on the GPU (applier_launch.h). params_device_supported: whether
   * the driver has device-updatable kernel nodes (CUDA 12.4). patch_plan_device_node: make
   * kernel node `node` of the plan's graph (a template not instantiated yet) device-updatable
   * (cudaLaunchAttributeDeviceUpdatableKernelNode) and *handle its cudaGraphDeviceNode_t; such
   * a graph is instantiated once and never passed to graph_exec_update, and an executable of
   * it must be uploaded (graph_upload) before a launch after it was instantiated or its
   * device-updatable nodes were set from the host. params_apply_launch enqueues recap's
   * applier kernel on stream, whose argument is table (device memory); params_source_launch
   * the source applier of a parameter whose value the GPU decides. Fault kind PATCH in the
   * fake for patch_plan_device_node, LAUNCH for the two launches.
   * patch_plan_precede_only: kernel node `node` of the plan's graph (not instantiated yet)
   * precedes exactly targets[0..count) (kernel nodes, distinct): its edges to other nodes are
   * removed, so that what waited only for it waits for nothing, and it gains an edge to each
   * target (so that the applier runs beside the work that takes no parameter). A failure
   * before the graph changed leaves it as it was. Fault kind PATCH in the fake. */
  recap_status_t (*params_device_supported)(bool *supported);
  recap_status_t (*patch_plan_device_node)(recap__patch_plan_t plan, size_t node, uint64_t *handle);
  recap_status_t (*patch_plan_precede_only)(recap__patch_plan_t plan, size_t node,
                                            const size_t *targets, size_t count);
  recap_status_t (*params_apply_launch)(recap_stream_t stream, struct recap__applier_table *table);
  recap_status_t (*params_source_launch)(recap_stream_t stream, struct recap__source_table *table);

  /* cudaGraphExecUpdate(exec, graph). Updated: RECAP_SUCCESS, *refused =
   * RECAP_UPDATE_REASON_NONE, *node = SIZE_MAX. Refused by the driver
   * (cudaErrorGraphExecUpdateFailure: exec is unchanged): RECAP_SUCCESS with *refused = the
   * reason from cudaGraphExecUpdateResultInfo and *node = the index (graph_nodes order of
   * `graph`) of the node it names, or SIZE_MAX. Any other failure: its status (exec
   * unchanged). After an update exec computes with graph's values, and is patched through a
   * plan of graph whose origin is the graph exec was instantiated from (patch_plan_create). */
  recap_status_t (*graph_exec_update)(recap_cuda_graph_exec_t exec, recap_cuda_graph_t graph,
                                      recap_update_reason_t *refused, size_t *node);

  /* Timing, for the update policy's measurements: an event with timing enabled (destroy with
   * event_destroy, record with event_record), and the milliseconds between two such events
   * once both completed (event_synchronize first). */
  recap_status_t (*timing_event_create)(recap__event_t *event);
  recap_status_t (*event_elapsed)(recap__event_t start, recap__event_t end, float *ms);

  /* Random numbers. state is a generator's three 64-bit words of device memory: {seed, base
   * offset, offset drawn on the device}. rng_write_state enqueues on stream the write of
   * state[0] = seed and state[1] = offset + state[2] (state[2] read when the write runs, so
   * that what loops drew on the device since the host last folded it in counts): the values
   * travel as launch arguments, so nothing on the host must outlive the call, and the write is
   * ordered before the graph launched after it. rng_launch enqueues one of the library's random
   * kernels (rng_launch.h). rng_advance enqueues state[1] += step and state[2] += step: the end
   * of a region's body that drew `step` values per thread, so that the next iteration (and what
   * follows the region) draws fresh ones. */
  recap_status_t (*rng_write_state)(recap_stream_t stream, uint64_t *state, uint64_t seed,
                                    uint64_t offset);
  recap_status_t (*rng_launch)(const struct recap__rng_launch *launch);
  recap_status_t (*rng_advance)(recap_stream_t stream, uint64_t *state, uint64_t step);

  /* Regions (conditional nodes). cond_supported: *supported = true when the driver runs
   * conditional nodes of all three types with several bodies (IF/ELSE and SWITCH: CUDA 12.8).
   *
   * capture_pause stops the capture of stream without losing it: *graph receives the graph
   * being built (the caller owns it from now on) and *deps (malloc'ed, the caller frees it;
   * NULL when *count is 0) the nodes that the stream's next captured work would have depended
   * on; the stream no longer captures. A stream not capturing: RECAP_ERROR_INVALID_USAGE,
   * nothing changed. An invalidated capture, or side streams forked from it and not joined
   * back (cudaErrorStreamCaptureUnjoined): RECAP_ERROR_CAPTURE_INVALIDATED naming the CUDA
   * error, the capture is gone and *graph is NULL.
   *
   * capture_to_graph makes stream capture into graph (cudaStreamBeginCaptureToGraph), the new
   * work depending on deps (count of them; 0: on nothing); the capture has a capture id of its
   * own (stream_capture_id). Errors as stream_begin_capture's.
   *
   * cond_handle_create creates a conditional handle for a conditional node to be added to
   * graph: with assign_default, the condition is set to `initial` at every launch of the
   * executable; without, it starts at `initial` at the first launch only and keeps the last
   * value set (recap then sets it where it must).
   *
   * cond_node_add adds to graph a conditional node of kind with `branches` bodies (1 for WHILE,
   * 1 or 2 for IF, 1 or more for SWITCH) on handle, after deps; *node receives it and
   * bodies[0..branches-1] its body graphs (owned by the node: valid while graph lives).
   *
   * cond_launch enqueues one of the library's condition kernels (cond_launch.h). */
  recap_status_t (*cond_supported)(bool *supported);
  recap_status_t (*capture_pause)(recap_stream_t stream, recap_cuda_graph_t *graph,
                                  recap__graph_node_t **deps, size_t *count);
  recap_status_t (*capture_to_graph)(recap_stream_t stream, recap_cuda_graph_t graph,
                                     const recap__graph_node_t *deps, size_t count,
                                     recap__capture_mode_t mode);
  recap_status_t (*cond_handle_create)(recap_cuda_graph_t graph, unsigned initial,
                                       bool assign_default, uint64_t *handle);
  recap_status_t (*cond_node_add)(recap_cuda_graph_t graph, const recap__graph_node_t *deps,
                                  size_t count, recap__cond_kind_t kind, uint64_t handle,
                                  unsigned branches, recap__graph_node_t *node,
                                  recap_cuda_graph_t *bodies);
  recap_status_t (*cond_launch)(const struct recap__cond_launch *launch);
  /* Add an empty node, depending on nothing, to graph: what recap puts into a conditional body
   * that would otherwise hold no node (a branch never captured, the body of the empty IF that
   * holds an unused condition's handle), which CUDA refuses to instantiate. Fault kind
   * COND_NODE in the fake. */
  recap_status_t (*graph_add_empty)(recap_cuda_graph_t graph);

  /* Embedding (a replay inside another capture). capture_add_child adds to the capture stream
   * takes part in a child graph node running a copy of graph (cudaStreamGetCaptureInfo for the
   * capture's graph and the stream's current dependencies, cudaGraphAddNode of a
   * cudaGraphNodeTypeGraph node after them, cudaStreamUpdateCaptureDependencies so that the
   * stream's later work follows it); graph stays the caller's and may change or go afterwards.
   * A stream not taking part in an active capture: RECAP_ERROR_INVALID_USAGE. A graph holding a
   * node CUDA forbids in a child graph (a conditional node, a memory allocation or free node,
   * at any depth): RECAP_ERROR_NOT_SUPPORTED naming its type, nothing added. Other failures
   * leave the capture as it was. Fault kind CAPTURE_CHILD in the fake. */
  recap_status_t (*capture_add_child)(recap_stream_t stream, recap_cuda_graph_t graph);

  /* Virtual memory management (cuMem* of the driver), for memory whose addresses stay while
   * its physical backing comes and goes: an address range is reserved once, physical chunks
   * are made and mapped into it, and unmapped and released again. Every op acts for the
   * calling thread's current device and pinned device memory (CU_MEM_ALLOCATION_TYPE_PINNED,
   * CU_MEM_LOCATION_TYPE_DEVICE); none is ordered on a stream (callers synchronize what uses
   * the memory first), and none is refused during a capture. Sizes and addresses must be
   * nonzero multiples of the minimum granularity: otherwise RECAP_ERROR_INVALID_ARGUMENT naming
   * the granularity, before CUDA is called; the other refusals are CUDA's (RECAP_ERROR_CUDA,
   * the message naming the cuMem call and the CUDA error).
   *
   * vmm_granularity: the minimum and recommended granularity of a chunk
   * (cuMemGetAllocationGranularity, CU_MEM_ALLOC_GRANULARITY_MINIMUM and _RECOMMENDED); either
   * pointer may be NULL, not both. A device without virtual memory management:
   * RECAP_ERROR_NOT_SUPPORTED.
   *
   * vmm_reserve: *ptr receives a range of size bytes of device addresses, aligned to the
   * minimum granularity, with nothing usable behind it (cuMemAddressReserve). vmm_release_range
   * gives back a whole range as reserved, ptr and size as vmm_reserve gave them
   * (cuMemAddressFree); every mapping inside it must have been unmapped first.
   *
   * vmm_create: *handle receives a physical chunk of size bytes of the device's memory
   * (cuMemCreate), counted as in use (mem_get_info) until it is released and unmapped
   * everywhere. Not enough memory: RECAP_ERROR_OUT_OF_MEMORY. vmm_release drops the handle
   * (cuMemRelease): a chunk still mapped stays behind its mappings, and its memory is free
   * once the last of them is unmapped; the handle names nothing afterwards. Handle 0 (never a
   * chunk): RECAP_ERROR_INVALID_ARGUMENT in vmm_release and vmm_map.
   *
   * vmm_map: the first size bytes of the chunk (size at most the chunk's) become the memory at
   * [ptr, ptr + size), which lies inside one reserved range and overlaps no other mapping
   * (cuMemMap, offset 0). The memory is not accessible until vmm_set_access grants the current
   * device read and write access to a mapped range (cuMemSetAccess); every new mapping starts
   * without access. vmm_unmap (cuMemUnmap) takes back whole mappings, [ptr, ptr + size) covering
   * each mapping it touches entirely and nothing unmapped; the range is reserved again. A chunk
   * keeps its contents while it lives: mapped again (at the same or another address, even
   * after it was unmapped), it shows what was written through its earlier mappings.
   *
   * host_alloc_pinned: *ptr receives size bytes of page-locked host memory (cudaHostAlloc,
   * cudaHostAllocDefault), which memcpy_async copies to and from device memory; size 0:
   * RECAP_ERROR_INVALID_ARGUMENT; not enough: RECAP_ERROR_OUT_OF_MEMORY. host_free_pinned
   * gives it back (cudaFreeHost; NULL is a no-op). Callers make neither call during a capture (cudaFreeHost synchronizes the device): the
   * fake refuses both as it refuses raw_malloc, while a capture forbids potentially unsafe
   * calls from the calling thread (RECAP_ERROR_CAPTURE_INVALIDATED). */
  recap_status_t (*vmm_granularity)(size_t *minimum, size_t *recommended);
  recap_status_t (*vmm_reserve)(void **ptr, size_t size);
  recap_status_t (*vmm_release_range)(void *ptr, size_t size);
  recap_status_t (*vmm_create)(recap__vmm_handle_t *handle, size_t size);
  recap_status_t (*vmm_release)(recap__vmm_handle_t handle);
  recap_status_t (*vmm_map)(void *ptr, size_t size, recap__vmm_handle_t handle);
  recap_status_t (*vmm_unmap)(void *ptr, size_t size);
  recap_status_t (*vmm_set_access)(void *ptr, size_t size);
  recap_status_t (*host_alloc_pinned)(void **ptr, size_t size);
  recap_status_t (*host_free_pinned)(void *ptr);
} recap__device_ops_t;

/* The seam in use. The first call picks the CUDA implementation unless a test installed the
 * fake. Never NULL. */
const recap__device_ops_t *recap__device(void);
/* Install an implementation (tests install the fake). Not thread safe: call it before any
 * other recap call of the process, or after everything was released. */
void recap__device_install(const recap__device_ops_t *ops);

/* Free everything graph_inspect and the layers' inspect hooks put into info (each node's
 * kernel_name, annotation, dependencies and dependents, parameters and set_alone, then the node
 * array) and zero it; info itself is the caller's.
 * NULL and a zeroed or half-filled info are fine. Shared by both seams and recap_graph_info_free. */
void recap__graph_info_clear(recap_graph_info_t *info);

/* The name of a node type, as recap_node_type_name gives it ("kernel", ...; "unknown" out of
 * range): static data from the X-macro list, so that every module that words the node types the
 * seams report (messages of regions, rebinding, input liveness) reads it without calling into
 * inspection. */
static inline const char *recap__node_type_name(recap_node_type_t type) {
  /* One entry per enumerator: both come from RECAP_NODE_TYPE_MAP, in its order. */
  static const char *const names[RECAP_NODE_TYPE_COUNT] = {
#define RECAP_X_NODE_NAME(name, text) text,
      RECAP_NODE_TYPE_MAP(RECAP_X_NODE_NAME)
#undef RECAP_X_NODE_NAME
  };
  return (unsigned)type < (unsigned)RECAP_NODE_TYPE_COUNT ? names[type] : "unknown";
}

/* The CUDA architectures recap's kernels were built for, as CMake's CUDA_ARCHITECTURES list
 * ("80-real;86-real;...;120-virtual"). */
const char *recap__device_cuda_architectures(void);

/* The message both seams give before recap's first kernel launch on a device that recap's
 * kernels have no image for (its compute capability major.minor is outside the architectures
 * above): it names the architectures, the device and its compute capability, and the CMake
 * option that builds for it. Written into buf (always terminated). The status that goes with
 * it is RECAP_ERROR_NOT_SUPPORTED. */
void recap__device_no_kernel_image_message(char *buf, size_t size, int device, const char *name,
                                           int major, int minor);

/* The refusal both seams give a VMM size or address that is 0 (NULL) or not a multiple of the
 * minimum granularity: false when value is fine; otherwise true with the message (naming call,
 * what: "size" or "address", the value, the device and its granularity) written into buf
 * (always terminated). The status that goes with it is RECAP_ERROR_INVALID_ARGUMENT. */
bool recap__vmm_refuse(char *buf, size_t size, const char *call, const char *what, uintptr_t value,
                       size_t granularity, int device);

/* The CUDA implementation (cuda.c), or in a build without CUDA the table that says so
 * (no_cuda.c). */
extern const recap__device_ops_t recap__cuda_ops;

#ifdef __cplusplus
}
#endif

#endif /* RECAP_DEVICE_H */
