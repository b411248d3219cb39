/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/params.h — graph parameters: values that captured kernels take by value (a learning
 * rate, a step count, a seed, a position), changed before any replay without a recapture and
 * without touching the kernels; one argument of one kernel node set on its own; and the launch
 * shape of a kernel node set per replay. See docs/params.md.
 */
#ifndef RECAP_PARAMS_H
#define RECAP_PARAMS_H

#include <stdint.h>

#include "core.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parameter's type: what its placeholder and its values are. A 4-byte integer of any
 * signedness is INT32, an 8-byte one (size_t included) INT64. */
typedef enum recap_param_type {
  RECAP_PARAM_INT32 = 0,
  RECAP_PARAM_INT64,
  RECAP_PARAM_FLOAT,
  RECAP_PARAM_DOUBLE
} recap_param_type_t;

/* A parameter of a graph: valid while the graph lives, the same handle for the same name in
 * every capture of the graph that declares it. */
typedef struct recap_param *recap_param_t;

/* ---- Declaring ------------------------------------------------------------------------------- */

/* During graph's capture: declare the parameter `name` (unique in the capture; copied) of
 * `type`, whose value is *initial (4 or 8 bytes, as type says). *placeholder gets the value to
 * pass to the kernels in its place, unchanged: a bit pattern unique in the capture, which
 * capture_end finds in the kernel nodes' arguments and replaces with the parameter's value
 * before the graph is instantiated. A value computed on the host from a parameter is a
 * parameter of its own. *param (may be NULL) gets the handle.
 * capture_end fails (RECAP_ERROR_INVALID_ARGUMENT, the capture thrown away, the message naming
 * the parameter) for a parameter found in no kernel argument, or found inside a wider scalar
 * argument (a 4-byte placeholder in an 8-byte parameter: declare the type the kernel takes).
 * Kernels inside regions' bodies and child graphs are not searched (nor any kernel of a
 * capture whose regions run on the host path; the message says which), nor are values a
 * library keeps in its own structures (docs/params.md).
 * INVALID_ARGUMENT: name NULL, empty or declared twice in the capture, a type out of range,
 * initial or placeholder NULL; INVALID_USAGE: the graph is not capturing. A name a previous
 * capture of the graph declared keeps its handle, with *initial as its value. */
RECAP_NODISCARD RECAP_API recap_status_t
recap_graph_param_declare(recap_graph_t graph, const char *name, recap_param_type_t type,
                          const void *initial, void *placeholder, recap_param_t *param);

/* During graph's capture: declare the parameter `name` of `type` whose value the GPU decides,
 * on stream. At this point of stream's work the graph reads the 4 or 8 bytes at
 * device_value (device memory that the graph's own earlier work wrote, or the program writes
 * between replays) and writes them, at every replay, into the kernel nodes that take
 * *placeholder: pass it, unchanged, to kernels launched after this call on stream (or on
 * streams that wait for stream's work after it). With per_block (integer types only; 0: none)
 * each of those nodes also runs a grid of ceil(value / per_block) blocks in x (its y and z as
 * captured), and is skipped while the value is 0 or less: one executable serves every size the
 * GPU decides, with no padding. recap captures a one-block kernel of its own here
 * (recap_params_source_kernel) and makes the nodes device-updatable (docs/params.md).
 * The parameter is not set from the host (recap_param_set: INVALID_USAGE). INVALID_ARGUMENT as
 * recap_graph_param_declare, and device_value NULL, or per_block with a floating type;
 * NOT_SUPPORTED: the driver has no device-updatable kernel nodes (CUDA 12.4). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_param_device(
    recap_graph_t graph, const char *name, recap_param_type_t type, const void *device_value,
    unsigned per_block, recap_stream_t stream, void *placeholder, recap_param_t *param);

/* The typed forms: the placeholder is the return value's target. */
RECAP_NODISCARD static inline recap_status_t recap_graph_param_int32(recap_graph_t graph,
                                                                     const char *name,
                                                                     int32_t initial,
                                                                     int32_t *placeholder,
                                                                     recap_param_t *param) {
  return recap_graph_param_declare(graph, name, RECAP_PARAM_INT32, &initial, placeholder, param);
}
RECAP_NODISCARD static inline recap_status_t recap_graph_param_int64(recap_graph_t graph,
                                                                     const char *name,
                                                                     int64_t initial,
                                                                     int64_t *placeholder,
                                                                     recap_param_t *param) {
  return recap_graph_param_declare(graph, name, RECAP_PARAM_INT64, &initial, placeholder, param);
}
RECAP_NODISCARD static inline recap_status_t recap_graph_param_float(recap_graph_t graph,
                                                                     const char *name,
                                                                     float initial,
                                                                     float *placeholder,
                                                                     recap_param_t *param) {
  return recap_graph_param_declare(graph, name, RECAP_PARAM_FLOAT, &initial, placeholder, param);
}
RECAP_NODISCARD static inline recap_status_t recap_graph_param_double(recap_graph_t graph,
                                                                      const char *name,
                                                                      double initial,
                                                                      double *placeholder,
                                                                      recap_param_t *param) {
  return recap_graph_param_declare(graph, name, RECAP_PARAM_DOUBLE, &initial, placeholder, param);
}

/* For code handed a stream and not the graph (a graph set's step, recap/graph_set.h): on a
 * stream that captures into a recap graph, declare `name` on that graph as
 * recap_graph_param_declare does, with *value as its initial value, *placeholder getting the
 * placeholder; on a stream that captures nothing (an eager run), *placeholder = *value. Pass
 * *placeholder to the kernels either way. Inside a graph set's step, the value
 * recap_graph_set_param_set last gave `name` (with this type) takes the place of *value.
 * INVALID_USAGE: the stream captures into no recap graph (a raw CUDA capture); else
 * recap_graph_param_declare's errors. */
RECAP_NODISCARD RECAP_API recap_status_t recap_param_on_stream(const char *name,
                                                               recap_param_type_t type,
                                                               const void *value,
                                                               recap_stream_t stream,
                                                               void *placeholder);

RECAP_NODISCARD static inline recap_status_t recap_param_on_stream_int32(const char *name,
                                                                         int32_t value,
                                                                         recap_stream_t stream,
                                                                         int32_t *placeholder) {
  return recap_param_on_stream(name, RECAP_PARAM_INT32, &value, stream, placeholder);
}
RECAP_NODISCARD static inline recap_status_t recap_param_on_stream_int64(const char *name,
                                                                         int64_t value,
                                                                         recap_stream_t stream,
                                                                         int64_t *placeholder) {
  return recap_param_on_stream(name, RECAP_PARAM_INT64, &value, stream, placeholder);
}
RECAP_NODISCARD static inline recap_status_t recap_param_on_stream_float(const char *name,
                                                                         float value,
                                                                         recap_stream_t stream,
                                                                         float *placeholder) {
  return recap_param_on_stream(name, RECAP_PARAM_FLOAT, &value, stream, placeholder);
}
RECAP_NODISCARD static inline recap_status_t recap_param_on_stream_double(const char *name,
                                                                          double value,
                                                                          recap_stream_t stream,
                                                                          double *placeholder) {
  return recap_param_on_stream(name, RECAP_PARAM_DOUBLE, &value, stream, placeholder);
}

/* ---- Setting --------------------------------------------------------------------------------- */

/* Set param to *value (4 or 8 bytes, as its type says) at every site its graph's capture found
 * it: the executable's kernel nodes are patched now (one cudaGraphExecKernelNodeSetParams per
 * node), so the next replay computes with it; a replay already launched keeps the old value.
 * The template learns it before it is next instantiated, updated or read. From one thread at a
 * time, not during another's replay of the graph. All or nothing: a failure leaves the old value
 * everywhere. INVALID_ARGUMENT: value NULL, param not a live parameter; INVALID_USAGE: the graph
 * holds no capture, is being recaptured, or its capture did not declare param. */
RECAP_NODISCARD RECAP_API recap_status_t recap_param_set(recap_param_t param, const void *value);

RECAP_NODISCARD static inline recap_status_t recap_param_set_int32(recap_param_t param,
                                                                   int32_t value) {
  return recap_param_set(param, &value);
}
RECAP_NODISCARD static inline recap_status_t recap_param_set_int64(recap_param_t param,
                                                                   int64_t value) {
  return recap_param_set(param, &value);
}
RECAP_NODISCARD static inline recap_status_t recap_param_set_float(recap_param_t param,
                                                                   float value) {
  return recap_param_set(param, &value);
}
RECAP_NODISCARD static inline recap_status_t recap_param_set_double(recap_param_t param,
                                                                    double value) {
  return recap_param_set(param, &value);
}

/* One value of a batch (a plain value: no size field). */
typedef struct recap_param_value {
  recap_param_t param;
  const void *value;
} recap_param_value_t;

/* Set several parameters of one graph at once, as recap_param_set does each, with one set per
 * kernel node touched whatever the number of parameters it takes; all or nothing.
 * INVALID_ARGUMENT: a parameter twice in the batch, or parameters of different graphs. */
RECAP_NODISCARD RECAP_API recap_status_t recap_params_set(const recap_param_value_t *values,
                                                          size_t count);

/* ---- Reading --------------------------------------------------------------------------------- */

/* The parameter `name` of graph, declared by the capture it holds or by an earlier one
 * (NOT_FOUND: none by that name). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_param_find(recap_graph_t graph,
                                                                const char *name,
                                                                recap_param_t *param);

/* What a parameter is now. Start from RECAP_PARAM_INFO_INIT (the first version ends at
 * sites). */
typedef struct recap_param_info {
  size_t size;      /* sizeof(recap_param_info_t), set by RECAP_PARAM_INFO_INIT */
  const char *name; /* the graph's copy: valid while the graph lives */
  recap_param_type_t type;
  uint64_t bits;        /* its value in the capture the graph holds, in the low 4 or 8 bytes */
  uint64_t placeholder; /* that capture's placeholder for it */
  size_t sites;         /* kernel arguments holding it in that capture; 0 (and bits and
                           placeholder 0) when the graph holds no capture that declared it */
} recap_param_info_t;

#define RECAP_PARAM_INFO_INIT \
  { sizeof(recap_param_info_t), NULL, RECAP_PARAM_INT32, 0, 0, 0 }

RECAP_NODISCARD RECAP_API recap_status_t recap_param_info(recap_param_t param,
                                                          recap_param_info_t *info);

/* One kernel argument a parameter reaches. Start each element from RECAP_PARAM_SITE_INIT (the
 * first version ends at bytes). */
typedef struct recap_param_site {
  size_t size;    /* sizeof(recap_param_site_t), set by RECAP_PARAM_SITE_INIT */
  size_t node;    /* node index, in recap_graph_inspect's order */
  uint32_t arg;   /* the kernel parameter's index */
  size_t offset;  /* byte offset of the value in the kernel's argument buffer */
  uint32_t bytes; /* 4 or 8 */
} recap_param_site_t;

#define RECAP_PARAM_SITE_INIT \
  { sizeof(recap_param_site_t), 0, 0, 0, 0 }

/* param's sites in the capture its graph holds, in node order: *count gets how many, sites the first
 * min(capacity, *count) (NULL and 0: count only). */
RECAP_NODISCARD RECAP_API recap_status_t recap_param_sites(recap_param_t param,
                                                           recap_param_site_t *sites,
                                                           size_t capacity, size_t *count);

/* ---- One argument, one node ------------------------------------------------------------------ */

/* Set argument `arg` of kernel node `node` (recap_graph_inspect's order) to the `size` bytes at
 * value: this site only, not the other uses of the same value (an address that aliases
 * another buffer at one node, a tied weight). size must be the argument's size. The graph must
 * be patchable: captured with options.patchable, with rebinding on, or with a parameter
 * declared. recap keeps the value: later rebinds do not move it (the site leaves the rebind
 * index), a fresh instantiation and a recapture keep it (a recapture whose node `node` is no
 * longer a kernel with such an argument drops it, with a warning). Executables as
 * recap_param_set. INVALID_ARGUMENT: no such kernel node (those inside regions' bodies and
 * child graphs cannot be set) or argument, size not its size, a parameter's site (set the
 * parameter); INVALID_USAGE: no capture held, or the graph is not patchable. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_kernel_arg_set(recap_graph_t graph,
                                                                    size_t node, uint32_t arg,
                                                                    const void *value, size_t size);

/* ---- Launch shapes --------------------------------------------------------------------------- */

/* Kernel node `node`'s grid and block (3 values each), as the executable runs it. Patchable
 * graphs only. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_kernel_shape(recap_graph_t graph, size_t node,
                                                                  unsigned *grid, unsigned *block);

/* Set kernel node `node`'s grid (and block, when block is not NULL) for the next replays, kept
 * as recap_graph_kernel_arg_set keeps a value. CUDA's limits are checked first:
 * INVALID_ARGUMENT for a dimension of 0, grid beyond {2^31 - 1, 65535, 65535}, block beyond
 * {1024, 1024, 64}, or more threads per block than the kernel allows (the message says how
 * many it allows). The kernel must be written for the new shape: recap cannot know what it
 * indexes. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_kernel_shape_set(recap_graph_t graph,
                                                                      size_t node,
                                                                      const unsigned *grid,
                                                                      const unsigned *block);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_PARAMS_H */
