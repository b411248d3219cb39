/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_state.h — the CPU fake device's private state, shared by its files (fake*.c) only.
 *
 * All state lives in one struct, recap__fake, behind one mutex. What CUDA keeps per thread, the
 * current device and the capture mode of cudaThreadExchangeStreamCaptureMode, is thread-local
 * here too. Every function declared below that touches the state is called with the lock held;
 * error messages are noted under the lock (recap__fake_note) and recorded as the thread's last
 * error after it is released (recap__fake_unlock_and_report), so that a log callback that calls
 * back into recap cannot deadlock.
 *
 * The files: fake.c (the state, failures, the ops table, reset and counters), fake_memory.c
 * (devices and memory), fake_stream.c (streams, events, copies and the launch controls),
 * fake_capture.c (captures, graphs, executables and their launches), fake_inspect.c (DOT,
 * inspection, node lists and what nodes read), fake_patch.c (patch plans, executable
 * updates), fake_rng.c (random numbers), fake_cond.c (regions: pausing and resuming captures,
 * conditional handles and nodes, their bodies at a launch, condition kernels), fake_vmm.c
 * (virtual memory management and pinned host memory), fake_child.c (child graph nodes: a
 * replay embedded in a capture), fake_fault.c (fault injection).
 */
#ifndef RECAP_FAKE_STATE_H
#define RECAP_FAKE_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/cond_launch.h"
#include "device/rng_launch.h"
#include "fake/fake.h"

/* ---- configuration ---------------------------------------------------------------------- */

/* cudaMalloc gives at least 256-byte alignment; 512 matches the allocator's rounding. */
enum { FAKE_ALIGNMENT = 512 };

#if SIZE_MAX > 0xFFFFFFFFu
#  define FAKE_DEFAULT_MEMORY ((size_t)64 << 30) /* 64 GiB of address room */
#else
#  define FAKE_DEFAULT_MEMORY ((size_t)1 << 30)
#endif

#define FAKE_EVENT_MAGIC 0x66616b65u /* "fake" */
#define FAKE_NODE_HANDLE_BASE 0x7e0000000000ull
#define FAKE_EVENT_DEAD 0xdeadbeefu

/* ---- objects ---------------------------------------------------------------------------- */

/* A node of a capture or of a fake graph. */
typedef struct fake_node {
  recap_node_type_t type;
  char *name;      /* kernels: the name given at launch (malloc'ed); NULL otherwise */
  size_t dep;      /* 1 + index of the node this one waits for; 0: none */
  size_t after;    /* 1 + index of a second node it waits for (patch_plan_precede_only); 0: none */
  uint64_t handle; /* its recap__graph_node_t, unique in the process, the same in the capture
                      and in the graph made from it */
  /* What the node reads (input-liveness checks): a kernel's pointer arguments (malloc'ed),
   * a copy's ends, a memset's destination. */
  const void **args;
  size_t arg_count;
  const void *src, *dst;
  size_t bytes; /* memcpy and memset: the bytes copied or set, as graph_inspect reports them */
  int value;    /* memset: the byte value */
  recap__fake_kernel_fn_t fn; /* kernels launched with a function: what a launch runs */
  /* Kernels: bit k set when parameter k (k < 32) is 4 bytes wide, its value in the low half of
   * args[k] (recap__fake_launch_kernel_sized); and the launch shape, set by patch plans (all
   * zero: {1,1,1} and {1,1,1}). */
  uint32_t narrow;
  unsigned grid[3], block[3];
  /* Kernels made device-updatable (patch_plan_device_node, fake_applier.c); in an executable's
   * copy, host_set says a host set changed it since the executable's last upload. */
  bool device_updatable, host_set;
  bool disabled; /* set so by a device update (cudaGraphKernelNodeSetEnabled): a launch skips it */
  /* Kernels that block (fake NCCL collectives, fake_nccl.c): run by a launch with the fake's
   * lock released, since they wait for other threads that need it; a failure fails the launch
   * with the message written. */
  recap_status_t (*unlocked)(void *const *args, size_t n, char *message, size_t cap);
  /* Conditional nodes (fake_cond.c): the kind, the handle and what it was created with, and
   * the bodies (`branches` fake graphs owned by the node). In an executable's copy, `value` is
   * the condition's current value there and `started` says whether a launch has set it. */
  recap__cond_kind_t cond_kind;
  uint64_t cond_handle;
  unsigned cond_initial;
  bool cond_assign_default;
  unsigned branches;
  struct fake_graph **bodies;
  unsigned cond_value;
  bool cond_started;
  /* Child graph nodes made by capture_add_child (fake_child.c): the copy of the graph the node
   * runs, owned by the node (not listed; an executable's copy owns its own copy). NULL for a
   * graph launched into a capture, which the fake records without content. */
  struct fake_graph *child;
} fake_node_t;

typedef struct fake_nodes {
  fake_node_t *v;
  size_t count, cap;
} fake_nodes_t;

typedef struct fake_capture {
  uint64_t id;
  recap__capture_mode_t mode;
  pthread_t thread; /* the thread that began it, for the thread-local rules */
  int device;       /* the device of the stream it began on; its rules hold on every device */
  bool invalidated;
  struct fake_stream *origin;
  /* The graph being built: made at stream_begin_capture (listed among the graphs only when a
   * capture_pause or stream_end_capture hands it out), or the graph given to capture_to_graph
   * (into_graph), which the capture appends to. */
  struct fake_graph *graph;
  bool into_graph;
  struct fake_capture *next;
} fake_capture_t;

/* A marker item of a stream that waits for another stream's work (stream_wait_event): once
 * its stream completes item `at`, stream `on` has completed `item`. */
typedef struct fake_wait {
  uint64_t at;
  struct fake_stream *on;
  uint64_t item;
} fake_wait_t;

typedef struct fake_stream {
  uint64_t enqueued;
  uint64_t completed; /* moved only by recap__fake_stream_advance */
  /* The stream's markers still waiting, in item order: waits[wait_head .. wait_count). */
  fake_wait_t *waits;
  size_t wait_head, wait_count, wait_cap;
  int device;    /* the thread's current device when the stream was made */
  bool blocking; /* synchronises with the legacy stream (recap__fake_stream_new_blocking) */
  fake_capture_t *capture; /* the capture this stream takes part in, or NULL */
  size_t tail;             /* in that capture, 1 + index of this stream's last node; 0: none */
  double clock_us;         /* the timing model's clock: work items and graph launches so far */
  struct fake_stream *next;
} fake_stream_t;

/* What stream_end_capture hands out as a recap_cuda_graph_t. */
typedef struct fake_graph {
  fake_nodes_t nodes;
  uint64_t id; /* unique in the process: what an executable remembers of its source */
  /* In recap__fake.graphs (handed out as a recap_cuda_graph_t). The body graphs of an
   * executable's conditional nodes are not. */
  bool listed;
  /* A body: the graph whose conditional node owns it (freed with it, not counted in
   * live_graphs, refused by graph_destroy); NULL for a graph of its own. */
  struct fake_graph *owner;
  struct fake_graph *next;
} fake_graph_t;

/* A conditional handle (cond_handle_create). */
typedef struct fake_handle {
  uint64_t handle;
  uint64_t graph_id; /* the graph it was created for, whose conditional node it may serve */
  unsigned initial;
  bool assign_default;
  bool used;      /* a conditional node holds it */
  unsigned value; /* what condition kernels run outside any launch set (eager) */
} fake_handle_t;

/* What graph_instantiate hands out as a recap_cuda_graph_exec_t. */
typedef struct fake_exec {
  fake_nodes_t nodes; /* its own copy of the graph's nodes: patches change these only */
  /* The graph it was instantiated from, for its whole life (updates keep it): as on CUDA, the
   * only graph whose nodes name this executable's nodes in a patch. */
  uint64_t origin_id;
  bool updated;     /* updated at least once (the timing model's slowdown applies) */
  uint64_t changes; /* updates and patch calls that changed it (the timing model) */
  bool uploaded;    /* graph_upload since the instantiation (device-updatable nodes need it) */
  uint64_t launches;
  int device;   /* the thread's current device at instantiation */
  size_t bytes; /* the device memory it holds: RECAP__FAKE_EXEC_BYTES_PER_NODE per node */
  struct fake_exec *next;
} fake_exec_t;

struct recap__event {
  uint32_t magic;
  fake_stream_t *stream; /* where it was last recorded; NULL: never recorded or stream gone */
  uint64_t item;         /* the work item its record enqueued on stream */
  bool timing;           /* made by timing_event_create */
  double clock_us;       /* the stream's clock at the last record */
  struct recap__event *prev, *next;
};

/* A live raw allocation, in an open-addressing table keyed by pointer. */
typedef struct fake_block {
  void *ptr; /* NULL: empty slot */
  size_t size;
  int device;
} fake_block_t;

/* Virtual memory management (fake_vmm.c). A physical chunk: its backing is a memory file, so
 * that every mapping of it shows the same bytes and an unmapped chunk keeps them. */
typedef struct fake_chunk {
  uint64_t handle; /* 0 once released (the chunk then lives only behind its mappings) */
  size_t size;
  int device; /* whose in_use counts it */
  int fd;
  size_t mappings;
  struct fake_chunk *next;
} fake_chunk_t;

/* A range reserved by vmm_reserve, and a mapping inside one. */
typedef struct fake_range {
  char *base;
  size_t size;
  struct fake_range *next;
} fake_range_t;

typedef struct fake_mapping {
  char *base;
  size_t size;
  fake_chunk_t *chunk;
  struct fake_mapping *next;
} fake_mapping_t;

/* A pinned host allocation (host_alloc_pinned). */
typedef struct fake_pinned {
  void *ptr;
  size_t size;
  struct fake_pinned *next;
} fake_pinned_t;

/* A failure noted under the lock and recorded as the thread's last error after it. */
typedef struct fake_failure {
  recap_status_t status;
  char message[512];
} fake_failure_t;

/* ---- the state -------------------------------------------------------------------------- */

typedef struct fake_state {
  pthread_mutex_t lock;
  bool configured;
  int device_count;
  size_t capacity;
  size_t in_use[RECAP__FAKE_MAX_DEVICES];
  size_t exec_bytes[RECAP__FAKE_MAX_DEVICES]; /* held by live executables (fake_exec_t.bytes) */
  int compute_capability;                     /* the devices' major * 10 + minor */
  bool no_kernel_image; /* recap's kernels have no image for that compute capability */

  fake_block_t *blocks; /* capacity blocks_cap, a power of two; at most half full */
  size_t blocks_cap;
  size_t blocks_count;

  fake_stream_t legacy; /* the legacy default stream, handle NULL */
  fake_stream_t *streams;
  struct recap__event *events;
  int64_t live_events;
  fake_capture_t *captures;
  uint64_t next_capture_id;
  fake_graph_t *graphs;
  int64_t live_graphs;
  fake_exec_t *execs;
  int64_t live_execs;
  uint64_t graph_launches;
  uint64_t graph_uploads;
  uint64_t next_node_handle; /* never reset, so that no two nodes ever share a handle */
  uint64_t next_graph_id;    /* never reset, as node handles */
  /* Patches and updates (fake_patch.c). */
  uint64_t exec_patches, template_patches, exec_updates, update_refusals;
  uint64_t eager_copies;    /* memcpy_async calls outside captures */
  uint64_t capture_queries; /* stream_capture_info and stream_capture_id calls */
  bool refuse_armed;        /* recap__fake_refuse_next_update */
  recap_update_reason_t refuse_reason;
  size_t refuse_node;
  double updated_slowdown; /* the timing model's factor for updated executables */
  /* ... and for executables changed at least changed_after times (0: none) */
  uint64_t changed_after;
  double changed_slowdown;
  bool dot_driver_style; /* graph_debug_dot mimics the driver's verbose record format */
  bool strict_joins; /* recap__fake_strict_joins(true): ending with a side stream joined fails */
  /* Eager rng_write_state and rng_launch calls since the process started (never reset). */
  uint64_t rng_state_writes, rng_launches;
  /* Regions (fake_cond.c). */
  fake_handle_t *handles;
  size_t handle_count, handle_cap;
  bool cond_unsupported;         /* recap__fake_cond_supported(false) */
  uint64_t cond_iteration_limit; /* 0: the default */
  uint64_t cond_nodes_run, body_launches, cond_kernels_run;
  /* Graph parameters applied on the GPU (fake_applier.c). */
  bool params_device_unsupported; /* recap__fake_params_device_supported(false) */
  uint64_t applier_runs;          /* applier kernels run in executables */

  /* Virtual memory management and pinned host memory (fake_vmm.c). */
  size_t vmm_granularity;
  size_t vmm_recommended; /* a multiple of vmm_granularity */
  bool vmm_unsupported;
  fake_chunk_t *chunks;
  fake_range_t *ranges;
  fake_mapping_t *mappings;
  fake_pinned_t *pinned;
  uint64_t next_vmm_handle; /* never reset, so that a stale handle never names a new chunk */
  int64_t vmm_chunks_live, vmm_ranges_live, pinned_live;
  size_t vmm_bytes_mapped, vmm_bytes_reserved, pinned_bytes;
  uint64_t vmm_unmaps_unfinished; /* vmm_unmap calls made while a stream had work queued */

  uint64_t calls[RECAP__FAKE_FAULT_KINDS];
  uint64_t fail_countdown[RECAP__FAKE_FAULT_KINDS]; /* 0: disarmed */
} fake_state_t;

extern fake_state_t recap__fake;
extern _Thread_local int recap__fake_tl_device;
extern _Thread_local recap__capture_mode_t recap__fake_tl_capture_mode;
/* The stream of the graph_launch this thread is running (NULL outside one): what a node that
 * runs unlocked executes on. */
extern _Thread_local recap_stream_t recap__fake_tl_launch_stream;

/* ---- NCCL (fake_nccl.c) ----------------------------------------------------------------- */

/* Free every clique, allocation and registration, restore the defaults and install the fake's
 * NCCL table; called by recap__fake_reset without the fake's lock. */
void recap__fake_nccl_reset(void);

/* ---- memory (fake_memory.c) ------------------------------------------------------------- */

/* What device still has free. Everything the fake takes from a device's capacity, raw
 * allocations and VMM chunks (in_use) and executables (exec_bytes), is checked against this one
 * figure before it is taken (recap__fake_fits), so what is held never exceeds the capacity and
 * the difference cannot wrap. A fake that held more would report more free memory than it has
 * and let every later check pass; that is a broken fake, not a state to test on, so the check
 * aborts in every build. */
static inline size_t recap__fake_free_bytes(int device) {
  size_t in_use = recap__fake.in_use[device], exec = recap__fake.exec_bytes[device];
  if (in_use > recap__fake.capacity || exec > recap__fake.capacity - in_use) {
    fprintf(stderr,
            "recap fake device: device %d holds %zu bytes (%zu raw and VMM, %zu executables), "
            "more than its capacity of %zu\n",
            device, in_use + exec, in_use, exec, recap__fake.capacity);
    fflush(stderr);
    abort();
  }
  return recap__fake.capacity - in_use - exec;
}

/* Whether size more bytes fit in device's free memory. */
static inline bool recap__fake_fits(int device, size_t size) {
  return size <= recap__fake_free_bytes(device);
}

/* Take size bytes of the calling thread's current device for memory the fake keeps outside
 * this state (the fake NCCL's mem_alloc), checked as raw_malloc is; false when they do not fit
 * or the device is not one of the fake's. *device, *free_bytes and *total say what was found,
 * for the caller's message. Takes the lock itself. */
bool recap__fake_memory_take(size_t size, int *device, size_t *free_bytes, size_t *total);
/* Give back what recap__fake_memory_take took on device. Takes the lock itself. */
void recap__fake_memory_give(int device, size_t size);
/* Whether device, the calling thread's current one, is not one of the fake's: then the failure
 * of call is noted in f (cudaErrorInvalidDevice). Lock held. */
bool recap__fake_note_bad_device(fake_failure_t *f, const char *call, int device);

/* ---- failures (fake.c) ------------------------------------------------------------------ */

/* Note a failure in *f (formatted now, recorded later); returns status. */
recap_status_t recap__fake_note(fake_failure_t *f, recap_status_t status, const char *fmt, ...)
    RECAP__PRINTF(3, 4);
/* Release the lock, then record *f as the thread's last error if it holds a failure. */
recap_status_t recap__fake_unlock_and_report(fake_failure_t *f);
/* "global", "thread-local" or "relaxed". */
const char *recap__fake_mode_name(recap__capture_mode_t mode);
/* Apply cfg (NULL: defaults); recap__fake_ensure_configured applies the defaults once. */
void recap__fake_configure(const recap__fake_config_t *cfg);
void recap__fake_ensure_configured(void);

/* ---- fault injection (fake_fault.c) ----------------------------------------------------- */

/* Count a call of kind and say whether an armed fault makes this one fail. */
bool recap__fake_count_call(recap__fake_fault_t kind);
/* The failure of an injected fault into the call of kind just counted; what names the call. */
recap_status_t recap__fake_note_injected(fake_failure_t *f, const char *call,
                                         recap__fake_fault_t kind, const char *what);
/* The start of an op with a fault point: the fake's lock taken, the call of kind counted, and,
 * when an armed fault makes it fail, the fault noted in f (as recap__fake_note_injected). True
 * then: the op changes nothing and returns recap__fake_unlock_and_report(f). */
bool recap__fake_op_enter(fake_failure_t *f, recap__fake_fault_t kind, const char *call,
                          const char *what);
/* The start of such an op: declares its failure f, takes the lock (recap__fake_op_enter), and
 * when an armed fault fails the call returns that failure at once, as the ops' argument checks
 * return theirs. */
#define RECAP__FAKE_OP_BEGIN(f, kind, call, what) \
  fake_failure_t f = {0};                         \
  if (recap__fake_op_enter(&(f), (kind), (call), (what))) return recap__fake_unlock_and_report(&(f))

/* ---- streams (fake_stream.c) ------------------------------------------------------------ */

/* Enqueue `items` eager work items on s: the timing model's clock advances 1 µs per item. */
static inline void recap__fake_work(fake_stream_t *s, uint64_t items) {
  s->enqueued += items;
  s->clock_us += (double)items;
}

/* Complete s's work up to item (nothing when it has already), and with it, transitively, the
 * work on other streams that the completed marker items waited for. Every change of a stream's
 * completed goes through here. */
void recap__fake_stream_advance(fake_stream_t *s, uint64_t item);
/* Free s's waits (recap__fake_reset, stream destruction). */
void recap__fake_stream_waits_free(fake_stream_t *s);

/* The fake stream of handle (NULL: the legacy stream), or NULL when it is not one. */
fake_stream_t *recap__fake_stream_of(recap_stream_t handle);
/* The fake's answer to a stream handle it does not know, worded as CUDA's error. */
recap_status_t recap__fake_note_bad_stream(fake_failure_t *f, const char *call,
                                           recap_stream_t stream);

/* ---- captures and graphs (fake_capture.c) ----------------------------------------------- */

/* The captures that forbid a potentially unsafe call from the calling thread (see there);
 * with invalidate they are marked invalidated. Returns how many, and the first. */
int recap__fake_forbidding_captures(bool invalidate, fake_capture_t **first);
/* The failure of such a call (cudaErrorStreamCaptureUnsupported); invalidates the captures. */
recap_status_t recap__fake_note_forbidden(fake_failure_t *f, const char *call);
/* Whether captures forbid call now: then its failure is noted in f (recap__fake_note_forbidden). */
bool recap__fake_refuse_forbidden(fake_failure_t *f, const char *call);
/* The failure of a call refused on stream s, which takes part in a capture. */
recap_status_t recap__fake_note_capturing_stream(fake_failure_t *f, const char *call,
                                                 const fake_stream_t *s, bool invalidates);
/* The failure for a graph handle that is not a live fake one; what: "graph" or "executable
 * graph". */
recap_status_t recap__fake_note_bad_graph(fake_failure_t *f, const char *call, const void *graph,
                                          const char *what);
/* Begin a capture on s (not capturing), building a new graph or, into given, appending to
 * that graph; NULL when out of host memory. */
fake_capture_t *recap__fake_capture_begin_locked(fake_stream_t *s, recap__capture_mode_t mode,
                                                 fake_graph_t *into);
/* End capture c: every stream taking part leaves it, and it is unlinked and freed. With keep
 * its graph is returned (listed or not: the caller lists it); otherwise a graph it made is
 * freed, a graph given to capture_to_graph kept as it is, and NULL returned. */
fake_graph_t *recap__fake_capture_finish(fake_capture_t *c, bool keep);
/* Append a node for work launched on s, which takes part in a capture; false when out of host
 * memory. An invalidated capture records nothing more. */
bool recap__fake_capture_append(fake_stream_t *s, recap_node_type_t type, const char *name);
/* Enqueue work on s: in a capture, one node of the given type and name (it does not run);
 * otherwise `items` work items. *eager says which (false on failure too). */
recap_status_t recap__fake_enqueue(fake_failure_t *f, fake_stream_t *s, const char *call,
                                   recap_node_type_t type, const char *name, uint64_t items,
                                   bool *eager);
void recap__fake_nodes_free(fake_nodes_t *nodes);
/* A deep copy of src into *dst (names and arguments too); false when out of host memory, with
 * *dst empty. */
bool recap__fake_nodes_copy(fake_nodes_t *dst, const fake_nodes_t *src);
/* Room for one more node in nodes (false, nodes unchanged, when out of host memory), and the
 * handle of a new node. Lock held. */
bool recap__fake_nodes_reserve(fake_nodes_t *nodes);
uint64_t recap__fake_node_handle_new(void);
fake_graph_t *recap__fake_graph_find(recap_cuda_graph_t handle);
fake_exec_t *recap__fake_exec_find(recap_cuda_graph_exec_t handle);

/* ---- the seam's functions, one file per concern (the table is in fake.c) ---------------- */

/* fake_memory.c */
recap_status_t recap__fake_op_device_count(int *count);
recap_status_t recap__fake_op_get_device(int *device);
recap_status_t recap__fake_op_set_device(int device);
recap_status_t recap__fake_op_raw_malloc(void **ptr, size_t size);
recap_status_t recap__fake_op_raw_free(void *ptr);
recap_status_t recap__fake_op_mem_get_info(size_t *free_bytes, size_t *total_bytes);
/* fake_stream.c */
recap_status_t recap__fake_op_device_synchronize(void);
recap_status_t recap__fake_op_event_create(recap__event_t *event);
recap_status_t recap__fake_op_event_destroy(recap__event_t event);
recap_status_t recap__fake_op_event_record(recap__event_t event, recap_stream_t stream);
recap_status_t recap__fake_op_event_query(recap__event_t event, bool *done);
recap_status_t recap__fake_op_event_synchronize(recap__event_t event);
recap_status_t recap__fake_op_stream_wait_event(recap_stream_t stream, recap__event_t event);
recap_status_t recap__fake_op_timing_event_create(recap__event_t *event);
recap_status_t recap__fake_op_event_elapsed(recap__event_t start, recap__event_t end, float *ms);
recap_status_t recap__fake_op_stream_create(recap_stream_t *stream);
recap_status_t recap__fake_op_stream_blocking(recap_stream_t stream, bool *blocking);
recap_status_t recap__fake_op_stream_destroy(recap_stream_t stream);
recap_status_t recap__fake_op_stream_synchronize(recap_stream_t stream);
recap_status_t recap__fake_op_memcpy_async(void *dst, const void *src, size_t bytes,
                                           recap_stream_t stream);
recap_status_t recap__fake_op_stream_capture_info(recap_stream_t stream,
                                                  recap__capture_status_t *status,
                                                  uint64_t *capture_id);
recap_status_t recap__fake_op_exchange_capture_mode(recap__capture_mode_t *mode);
/* fake_capture.c */
recap_status_t recap__fake_op_stream_begin_capture(recap_stream_t stream,
                                                   recap__capture_mode_t mode);
recap_status_t recap__fake_op_stream_end_capture(recap_stream_t stream, recap_cuda_graph_t *graph);
recap_status_t recap__fake_op_graph_instantiate(recap_cuda_graph_exec_t *exec,
                                                recap_cuda_graph_t graph);
recap_status_t recap__fake_op_graph_launch(recap_cuda_graph_exec_t exec, recap_stream_t stream);
recap_status_t recap__fake_op_graph_upload(recap_cuda_graph_exec_t exec, recap_stream_t stream);
recap_status_t recap__fake_op_graph_destroy(recap_cuda_graph_t graph);
recap_status_t recap__fake_op_graph_exec_destroy(recap_cuda_graph_exec_t exec);
recap_status_t recap__fake_op_graph_node_count(recap_cuda_graph_t graph, size_t *count);
/* fake_inspect.c */
recap_status_t recap__fake_op_graph_debug_dot(recap_cuda_graph_t graph, const char *path);
recap_status_t recap__fake_op_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info);
recap_status_t recap__fake_op_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                            recap__graph_node_t **nodes, size_t *count);
recap_status_t recap__fake_op_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                          size_t *count);
recap_status_t recap__fake_op_graph_reads_check(void);
recap_status_t recap__fake_op_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                          size_t *count);
/* fake_patch.c (the timing events are in fake_stream.c, with the other events) */
recap_status_t recap__fake_op_patch_plan_create(recap_cuda_graph_t graph, recap_cuda_graph_t origin,
                                                recap__patch_plan_t *plan,
                                                const recap__graph_read_t **sites, size_t *count);
recap_status_t recap__fake_op_patch_plan_apply(recap__patch_plan_t plan,
                                               recap_cuda_graph_exec_t exec,
                                               const recap__patch_t *patches, size_t count);
recap_status_t recap__fake_op_patch_plan_sync(recap__patch_plan_t plan);
void recap__fake_op_patch_plan_destroy(recap__patch_plan_t plan);
recap_status_t recap__fake_op_patch_plan_find(recap__patch_plan_t plan,
                                              const recap__arg_pattern_t *patterns, size_t count,
                                              recap__arg_site_t **found, size_t *found_count);
recap_status_t recap__fake_op_patch_plan_arg(recap__patch_plan_t plan, size_t node, uint32_t param,
                                             recap__arg_site_t *site);
recap_status_t recap__fake_op_patch_plan_write(recap__patch_plan_t plan,
                                               recap_cuda_graph_exec_t exec,
                                               const recap__arg_write_t *writes, size_t count);
recap_status_t recap__fake_op_patch_plan_shape(recap__patch_plan_t plan, size_t node,
                                               recap__kernel_shape_t *shape, int *max_threads);
recap_status_t recap__fake_op_patch_plan_set_shape(recap__patch_plan_t plan,
                                                   recap_cuda_graph_exec_t exec, size_t node,
                                                   const recap__kernel_shape_t *shape);
/* A fake kernel parameter: its size (4 when bit k of the node's narrow mask is set, else 8) and
 * its offset in the modelled argument buffer (8k: every parameter in an 8-byte slot). */
size_t recap__fake_param_size(uint32_t narrow, size_t k);
recap_status_t recap__fake_op_graph_exec_update(recap_cuda_graph_exec_t exec,
                                                recap_cuda_graph_t graph,
                                                recap_update_reason_t *refused, size_t *node);
/* The reads of nodes (graph_reads' list, with offsets and parameters) into a malloc'ed array
 * (recap's host seam); false when out of host memory. Shared by graph_reads and the plans. */
bool recap__fake_nodes_reads(const fake_nodes_t *nodes, recap__graph_read_t **reads, size_t *count);
/* fake_rng.c */
recap_status_t recap__fake_op_rng_write_state(recap_stream_t stream, uint64_t *state, uint64_t seed,
                                              uint64_t offset);
recap_status_t recap__fake_op_rng_launch(const recap__rng_launch_t *launch);
recap_status_t recap__fake_op_rng_advance(recap_stream_t stream, uint64_t *state, uint64_t step);
/* The failure before recap's first kernel launch on a device its kernels have no image for
 * (recap__fake_config_t.no_kernel_image); false (nothing noted) otherwise. */
bool recap__fake_no_kernel_image(fake_failure_t *f);
/* Enqueue a kernel of the fake's own that computes, fn(args, n): in a capture a kernel node
 * named name holding fn and a copy of the words (run by graph launches); otherwise one work
 * item, and fn runs at once, under the lock. Errors as recap__fake_enqueue's. */
recap_status_t recap__fake_enqueue_fn(fake_failure_t *f, fake_stream_t *s, const char *call,
                                      const char *name, recap__fake_kernel_fn_t fn,
                                      const void *const *args, size_t n);

/* ---- virtual memory management and pinned host memory (fake_vmm.c) ---------------------- */

recap_status_t recap__fake_op_vmm_granularity(size_t *minimum, size_t *recommended);
recap_status_t recap__fake_op_vmm_reserve(void **ptr, size_t size);
recap_status_t recap__fake_op_vmm_release_range(void *ptr, size_t size);
recap_status_t recap__fake_op_vmm_create(recap__vmm_handle_t *handle, size_t size);
recap_status_t recap__fake_op_vmm_release(recap__vmm_handle_t handle);
recap_status_t recap__fake_op_vmm_map(void *ptr, size_t size, recap__vmm_handle_t handle);
recap_status_t recap__fake_op_vmm_unmap(void *ptr, size_t size);
recap_status_t recap__fake_op_vmm_set_access(void *ptr, size_t size);
recap_status_t recap__fake_op_host_alloc_pinned(void **ptr, size_t size);
recap_status_t recap__fake_op_host_free_pinned(void *ptr);
/* Give back every range, mapping, chunk and pinned allocation, and zero the counters
 * (recap__fake_reset; the devices' in_use is reset there). */
void recap__fake_vmm_reset(void);

/* ---- regions (fake_cond.c) ---------------------------------------------------------------- */

recap_status_t recap__fake_op_cond_supported(bool *supported);
recap_status_t recap__fake_op_capture_pause(recap_stream_t stream, recap_cuda_graph_t *graph,
                                            recap__graph_node_t **deps, size_t *count);
recap_status_t recap__fake_op_capture_to_graph(recap_stream_t stream, recap_cuda_graph_t graph,
                                               const recap__graph_node_t *deps, size_t count,
                                               recap__capture_mode_t mode);
/* Whether every conditional handle created on g or its bodies is held by a conditional node of
 * its graph (instantiation refuses a graph otherwise); *handle: the first that is not. Lock
 * held. */
bool recap__fake_cond_handles_held(const fake_graph_t *g, uint64_t *handle);
/* Whether a conditional node of g or of its bodies has an empty body (instantiation refuses
 * it). Lock held. */
bool recap__fake_cond_body_empty(const fake_graph_t *g);
recap_status_t recap__fake_op_graph_add_empty(recap_cuda_graph_t graph);
recap_status_t recap__fake_op_cond_handle_create(recap_cuda_graph_t graph, unsigned initial,
                                                 bool assign_default, uint64_t *handle);
recap_status_t recap__fake_op_cond_node_add(recap_cuda_graph_t graph,
                                            const recap__graph_node_t *deps, size_t count,
                                            recap__cond_kind_t kind, uint64_t handle,
                                            unsigned branches, recap__graph_node_t *node,
                                            recap_cuda_graph_t *bodies);
recap_status_t recap__fake_op_cond_launch(const struct recap__cond_launch *launch);

/* A new fake graph, not listed, with no nodes; NULL when out of host memory. */
fake_graph_t *recap__fake_graph_new(void);
/* List g among the graphs handed out (a new id; counted in live_graphs unless a body). */
void recap__fake_graph_list(fake_graph_t *g);
/* Free g, its nodes and their bodies, unlinking every listed one; counts live_graphs down for
 * a listed graph of its own. */
void recap__fake_graph_free(fake_graph_t *g);
/* Every node of nodes, those in the bodies of their conditional nodes included. */
size_t recap__fake_nodes_count_deep(const fake_nodes_t *nodes);
/* Run the nodes of an executable (graph_launch): kernels with functions, copies, memsets and
 * conditional nodes with their bodies. False when a launch fails (noted in f): a WHILE past
 * the iteration limit, a condition kernel setting a handle this executable does not hold. */
bool recap__fake_exec_run(fake_failure_t *f, fake_exec_t *x);
/* Prepare an executable's conditions for a launch: assign_default ones take their default,
 * the others their initial value at the first launch. */
void recap__fake_exec_conds_reset(fake_nodes_t *nodes);
/* Why graph_exec_update refuses x's nodes to become g's because of conditional nodes (the
 * kinds, branch counts and bodies' structure must match), or NONE; *node the top-level node. */
recap_update_reason_t recap__fake_cond_update_refusal(const fake_nodes_t *x, const fake_nodes_t *g,
                                                      size_t *node);
/* fake_child.c */
recap_status_t recap__fake_op_capture_add_child(recap_stream_t stream, recap_cuda_graph_t graph);

/* Whether some capture appends to g or to a body inside g. */
bool recap__fake_graph_capturing(const fake_graph_t *g);
/* Free the handles table (recap__fake_reset). */
/* ---- graph parameters applied on the GPU (fake_applier.c) -------------------------------- */

recap_status_t recap__fake_op_params_device_supported(bool *supported);
recap_status_t recap__fake_op_patch_plan_device_node(recap__patch_plan_t plan, size_t node,
                                                     uint64_t *handle);
recap_status_t recap__fake_op_patch_plan_precede_only(recap__patch_plan_t plan, size_t node,
                                                      const size_t *targets, size_t count);
recap_status_t recap__fake_op_params_apply_launch(recap_stream_t stream,
                                                  struct recap__applier_table *table);
recap_status_t recap__fake_op_params_source_launch(recap_stream_t stream,
                                                   struct recap__source_table *table);
/* Whether x holds a device-updatable node; whether one of them was set from the host since
 * x's last upload. */
bool recap__fake_exec_device_nodes(const fake_exec_t *x, bool *host_set);
/* The executable a graph_launch of this thread is running (NULL outside one). */
fake_exec_t *recap__fake_running_exec(void);
void recap__fake_applier_reset(void);

void recap__fake_cond_reset(void);

#endif /* RECAP_FAKE_STATE_H */
