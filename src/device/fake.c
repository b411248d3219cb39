/*
 * fake.c — the CPU fake device behind the device seam, for tests without a GPU.
 *
 * Memory is host memory (aligned like cudaMalloc's, never touched by the fake, so large
 * segments cost only address space), bounded per device by a configurable capacity. A stream is
 * a pair of counters, work items enqueued and completed, that the test moves by hand. An event
 * remembers the stream and the item its record enqueued, and is done once that item completed.
 * Captures are simulated with ids, joined side streams, an invalidated flag, and CUDA's rules on
 * which calls a capture forbids, so that the allocator's capture routing and its discipline
 * (no event record or query on a capturing stream, no unrelaxed cudaMalloc during a capture)
 * are tested for real. See fake.h for the semantics tests rely on.
 *
 * Graphs: work launched on a capturing stream becomes a node of the capture (a chain per
 * stream; a joined stream's first node waits for the origin's last node at the join). Ending
 * the capture turns the nodes into a fake graph; instantiating it gives a fake executable that
 * remembers the node count, and launching that enqueues one work item per node.
 *
 * All state lives in one static struct behind one mutex. What CUDA keeps per thread, the
 * current device and the capture mode of cudaThreadExchangeStreamCaptureMode, is thread-local
 * here too. Error messages are formatted under the lock and recorded after it is released, so
 * that a log callback that calls back into recap cannot deadlock.
 */
#include "device/fake.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"
#include "device/rng_launch.h"

/* Provided by the allocator (src/alloc/): drops all of the allocator's state (pools, cached
 * blocks, statistics, the capture registry) without calling the device, whose memory the fake
 * has just taken back itself. */
void recap__alloc_reset(void);
/* The graph layer provides it (src/graph/scope.c): it forgets the side streams it made, which
 * the reset frees. */
void recap__side_streams_forget(void);
/* And the capture registry (src/graph/registry.c): captures the reset ended are gone. */
void recap__registry_clear(void);

/* ---- configuration ---------------------------------------------------------------------- */

/* More devices than any node has; a config that asks for more gets this many. */
enum { FAKE_MAX_DEVICES = 64 };

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
  char *name; /* kernels: the name given at launch (malloc'ed); NULL otherwise */
  size_t dep; /* 1 + index of the node this one waits for; 0: none */
  uint64_t handle; /* its recap__graph_node_t, unique in the process, the same in the capture
                      and in the graph made from it */
  /* What the node reads (input-liveness checks): a kernel's pointer arguments (malloc'ed),
   * a copy's ends, a memset's destination. */
  const void **args;
  size_t arg_count;
  const void *src, *dst;
} fake_node_t;

typedef struct fake_nodes {
  fake_node_t *v;
  size_t count, cap;
} fake_nodes_t;

typedef struct fake_capture {
  uint64_t id;
  recap__capture_mode_t mode;
  pthread_t thread; /* the thread that began it, for the thread-local rules */
  bool invalidated;
  struct fake_stream *origin;
  fake_nodes_t nodes; /* the work captured so far */
  struct fake_capture *next;
} fake_capture_t;

typedef struct fake_stream {
  uint64_t enqueued;
  uint64_t completed;
  fake_capture_t *capture; /* the capture this stream takes part in, or NULL */
  size_t tail;             /* in that capture, 1 + index of this stream's last node; 0: none */
  struct fake_stream *next;
} fake_stream_t;

/* What stream_end_capture hands out as a recap_cuda_graph_t. */
typedef struct fake_graph {
  fake_nodes_t nodes;
  struct fake_graph *next;
} fake_graph_t;

/* What graph_instantiate hands out as a recap_cuda_graph_exec_t. */
typedef struct fake_exec {
  size_t node_count;
  uint64_t launches;
  struct fake_exec *next;
} fake_exec_t;

struct recap__event {
  uint32_t magic;
  fake_stream_t *stream; /* where it was last recorded; NULL: never recorded or stream gone */
  uint64_t item;         /* the work item its record enqueued on stream */
  struct recap__event *prev, *next;
};

/* A live raw allocation, in an open-addressing table keyed by pointer. */
typedef struct fake_block {
  void *ptr; /* NULL: empty slot */
  size_t size;
  int device;
} fake_block_t;

static struct {
  pthread_mutex_t lock;
  bool configured;
  int device_count;
  size_t capacity;
  size_t in_use[FAKE_MAX_DEVICES];

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
  uint64_t next_node_handle; /* never reset, so that no two nodes ever share a handle */
  bool dot_driver_style;     /* graph_debug_dot mimics the driver's verbose record format */

  uint64_t calls[RECAP__FAKE_FAULT_KINDS];
  uint64_t fail_countdown[RECAP__FAKE_FAULT_KINDS]; /* 0: disarmed */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int tl_device;
static _Thread_local recap__capture_mode_t tl_capture_mode = RECAP__CAPTURE_MODE_GLOBAL;

/* ---- failures --------------------------------------------------------------------------- */

/* A failure noted under the lock and recorded as the thread's last error after it. */
typedef struct fake_failure {
  recap_status_t status;
  char message[512];
} fake_failure_t;

static recap_status_t note(fake_failure_t *f, recap_status_t status, const char *fmt, ...)
    RECAP__PRINTF(3, 4);

static recap_status_t note(fake_failure_t *f, recap_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
  f->status = status;
  return status;
}

static recap_status_t unlock_and_report(fake_failure_t *f) {
  pthread_mutex_unlock(&fake.lock);
  if (f->status != RECAP_SUCCESS) return recap__error(f->status, "%s", f->message);
  return RECAP_SUCCESS;
}

static const char *mode_name(recap__capture_mode_t mode) {
  switch (mode) {
    case RECAP__CAPTURE_MODE_GLOBAL: return "global";
    case RECAP__CAPTURE_MODE_THREAD_LOCAL: return "thread-local";
    case RECAP__CAPTURE_MODE_RELAXED: return "relaxed";
  }
  return "unknown";
}

/* ---- state helpers (all called with the lock held) -------------------------------------- */

static void configure(const recap__fake_config_t *cfg) {
  int count = 1;
  size_t memory = FAKE_DEFAULT_MEMORY;
  if (cfg) {
    /* 0 keeps the default, so that designated initializers can name only what they change; a
     * negative count simulates a machine with no device. */
    if (cfg->device_count < 0) count = 0;
    if (cfg->device_count > 0) count = cfg->device_count;
    if (cfg->memory_per_device > 0) memory = cfg->memory_per_device;
  }
  if (count > FAKE_MAX_DEVICES) count = FAKE_MAX_DEVICES;
  fake.device_count = count;
  fake.capacity = memory;
  fake.configured = true;
}

static void ensure_configured(void) {
  if (!fake.configured) configure(NULL);
}

/* Count a call of kind and say whether an armed fault makes this one fail. */
static bool count_call(recap__fake_fault_t kind) {
  fake.calls[kind]++;
  if (fake.fail_countdown[kind] == 0) return false;
  return --fake.fail_countdown[kind] == 0;
}

static fake_stream_t *stream_of(recap_stream_t handle) {
  if (!handle) return &fake.legacy;
  for (fake_stream_t *s = fake.streams; s; s = s->next)
    if ((recap_stream_t)s == handle) return s;
  return NULL;
}

/* Event handles come from recap's own code, so a magic word suffices to catch a mix-up; a
 * destroyed event read here is a use after free that the sanitizers report. */
static bool event_valid(recap__event_t e) { return e && e->magic == FAKE_EVENT_MAGIC; }

/* The captures that forbid a potentially unsafe call (cudaMalloc, cudaFree, device-wide
 * synchronisation) from the calling thread, per cudaThreadExchangeStreamCaptureMode: in global
 * mode, any global capture of any thread and any unrelaxed capture of this thread; in
 * thread-local mode, only the unrelaxed captures of this thread; in relaxed mode, none.
 * With invalidate, they are marked invalidated, as CUDA does. Returns how many, and the first. */
static int forbidding_captures(bool invalidate, fake_capture_t **first) {
  *first = NULL;
  if (tl_capture_mode == RECAP__CAPTURE_MODE_RELAXED) return 0;
  pthread_t self = pthread_self();
  int n = 0;
  for (fake_capture_t *c = fake.captures; c; c = c->next) {
    if (c->mode == RECAP__CAPTURE_MODE_RELAXED) continue;
    bool mine = pthread_equal(c->thread, self) != 0;
    bool forbids = mine || (tl_capture_mode == RECAP__CAPTURE_MODE_GLOBAL &&
                            c->mode == RECAP__CAPTURE_MODE_GLOBAL);
    if (!forbids) continue;
    if (invalidate) c->invalidated = true;
    if (!*first) *first = c;
    n++;
  }
  return n;
}

static recap_status_t note_forbidden(fake_failure_t *f, const char *call) {
  fake_capture_t *first;
  int n = forbidding_captures(true, &first);
  return note(f, RECAP_ERROR_CAPTURE_INVALIDATED,
              "%s: operation not permitted when stream is capturing "
              "(cudaErrorStreamCaptureUnsupported) on the fake device: capture %llu (%s mode)%s "
              "forbids it in this thread's %s capture mode; %s now invalidated",
              call, (unsigned long long)first->id, mode_name(first->mode),
              n > 1 ? " and others" : "", mode_name(tl_capture_mode),
              n > 1 ? "they are" : "it is");
}

static recap_status_t note_capturing_stream(fake_failure_t *f, const char *call,
                                            const fake_stream_t *s, bool invalidates) {
  return note(f, RECAP_ERROR_CAPTURE_INVALIDATED,
              "%s: operation not permitted when stream is capturing "
              "(cudaErrorStreamCaptureUnsupported): the stream takes part in capture %llu "
              "on the fake device%s",
              call, (unsigned long long)s->capture->id,
              invalidates ? ", which is now invalidated" : "");
}

/* --- captures and graphs --- */

static void nodes_free(fake_nodes_t *nodes) {
  for (size_t i = 0; i < nodes->count; i++) {
    free(nodes->v[i].name);
    free(nodes->v[i].args);
  }
  free(nodes->v);
  memset(nodes, 0, sizeof *nodes);
}

/* Append a node for work launched on s, which takes part in a capture: it waits for the
 * stream's previous node in the capture. An invalidated capture records nothing more, as CUDA
 * refuses further work into it. False when out of host memory. */
static bool capture_append(fake_stream_t *s, recap_node_type_t type, const char *name) {
  fake_capture_t *c = s->capture;
  if (c->invalidated) return true;
  fake_nodes_t *nodes = &c->nodes;
  if (nodes->count == nodes->cap) {
    size_t cap = nodes->cap ? nodes->cap * 2 : 16;
    fake_node_t *v = realloc(nodes->v, cap * sizeof *v);
    if (!v) return false;
    nodes->v = v;
    nodes->cap = cap;
  }
  char *copy = NULL;
  if (name && !(copy = recap__copy_string(name))) return false;
  /* Handles look like pointers (aligned, far from 0) and are never reused. */
  fake.next_node_handle += 0x10;
  nodes->v[nodes->count] = (fake_node_t){.type = type,
                                         .name = copy,
                                         .dep = s->tail,
                                         .handle = FAKE_NODE_HANDLE_BASE + fake.next_node_handle};
  nodes->count++;
  s->tail = nodes->count;
  return true;
}

/* Begin a capture on s (not capturing); NULL when out of host memory. */
static fake_capture_t *capture_begin_locked(fake_stream_t *s, recap__capture_mode_t mode) {
  fake_capture_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->id = ++fake.next_capture_id;
  c->mode = mode;
  c->thread = pthread_self();
  c->origin = s;
  c->next = fake.captures;
  fake.captures = c;
  s->capture = c;
  s->tail = 0;
  return c;
}

/* End capture c: every stream taking part leaves it, and it is unlinked and freed. Its nodes
 * go to *keep when given, and are freed otherwise. */
static void capture_finish(fake_capture_t *c, fake_nodes_t *keep) {
  for (fake_stream_t *t = fake.streams; t; t = t->next)
    if (t->capture == c) {
      t->capture = NULL;
      t->tail = 0;
    }
  fake_capture_t **link = &fake.captures;
  while (*link != c) link = &(*link)->next;
  *link = c->next;
  if (keep) *keep = c->nodes;
  else nodes_free(&c->nodes);
  free(c);
}

static fake_graph_t *graph_find(recap_cuda_graph_t handle) {
  for (fake_graph_t *g = fake.graphs; g; g = g->next)
    if ((recap_cuda_graph_t)g == handle) return g;
  return NULL;
}

static fake_exec_t *exec_find(recap_cuda_graph_exec_t handle) {
  for (fake_exec_t *x = fake.execs; x; x = x->next)
    if ((recap_cuda_graph_exec_t)x == handle) return x;
  return NULL;
}

static recap_status_t note_injected(fake_failure_t *f, const char *call, recap__fake_fault_t kind,
                                    const char *what) {
  return note(f, RECAP_ERROR_CUDA,
              "%s: unknown error (cudaErrorUnknown): fault injected by the fake device into %s "
              "call %llu",
              call, what, (unsigned long long)fake.calls[kind]);
}

/* The fake's answers to a handle it does not know, worded as CUDA's errors. */
static recap_status_t note_bad_stream(fake_failure_t *f, const char *call, recap_stream_t stream) {
  return note(f, RECAP_ERROR_CUDA,
              "%s: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not a fake "
              "stream",
              call, (void *)stream);
}

static recap_status_t note_bad_event(fake_failure_t *f, const char *call, recap__event_t event) {
  return note(f, RECAP_ERROR_CUDA,
              "%s: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not a live "
              "fake event",
              call, (void *)event);
}

/* what: "graph" or "executable graph". */
static recap_status_t note_bad_graph(fake_failure_t *f, const char *call, const void *graph,
                                     const char *what) {
  return note(f, RECAP_ERROR_CUDA,
              "%s: invalid argument (cudaErrorInvalidValue): %p is not a live fake %s", call,
              graph, what);
}

/* --- the table of live blocks --- */

static size_t block_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static void block_put(fake_block_t *slots, size_t cap, fake_block_t b) {
  size_t i = block_hash(b.ptr, cap);
  while (slots[i].ptr) i = (i + 1) & (cap - 1);
  slots[i] = b;
}

static bool blocks_insert(void *ptr, size_t size, int device) {
  if ((fake.blocks_count + 1) * 2 > fake.blocks_cap) {
    size_t cap = fake.blocks_cap ? fake.blocks_cap * 2 : 64;
    fake_block_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < fake.blocks_cap; i++)
      if (fake.blocks[i].ptr) block_put(slots, cap, fake.blocks[i]);
    free(fake.blocks);
    fake.blocks = slots;
    fake.blocks_cap = cap;
  }
  block_put(fake.blocks, fake.blocks_cap, (fake_block_t){ptr, size, device});
  fake.blocks_count++;
  return true;
}

/* The slot of ptr, or SIZE_MAX. */
static size_t blocks_find(const void *ptr) {
  if (!fake.blocks_cap) return SIZE_MAX;
  size_t mask = fake.blocks_cap - 1;
  for (size_t i = block_hash(ptr, fake.blocks_cap);; i = (i + 1) & mask) {
    if (!fake.blocks[i].ptr) return SIZE_MAX;
    if (fake.blocks[i].ptr == ptr) return i;
  }
}

/* Remove slot i by shifting later members of its probe run back, so no tombstones are needed. */
static void blocks_remove(size_t i) {
  size_t mask = fake.blocks_cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!fake.blocks[j].ptr) break;
    size_t home = block_hash(fake.blocks[j].ptr, fake.blocks_cap);
    /* The entry at j may stay if its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    fake.blocks[i] = fake.blocks[j];
    i = j;
  }
  fake.blocks[i].ptr = NULL;
  fake.blocks_count--;
}

/* ---- devices ---------------------------------------------------------------------------- */

static recap_status_t fake_device_count(int *count) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  ensure_configured();
  if (!count) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGetDeviceCount: count is NULL");
  } else if (fake.device_count == 0) {
    *count = 0;
    note(&f, RECAP_ERROR_NO_DEVICE,
         "cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice): the fake "
         "device was configured with no device");
  } else {
    *count = fake.device_count;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_get_device(int *device) {
  if (!device) return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "cudaGetDevice: device is NULL");
  *device = tl_device;
  return RECAP_SUCCESS;
}

static recap_status_t fake_set_device(int device) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  ensure_configured();
  if (device < 0 || device >= fake.device_count)
    note(&f, RECAP_ERROR_INVALID_ARGUMENT,
         "cudaSetDevice: invalid device ordinal (cudaErrorInvalidDevice): device %d of the fake, "
         "which has %d",
         device, fake.device_count);
  else
    tl_device = device;
  return unlock_and_report(&f);
}

static recap_status_t fake_device_synchronize(void) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_capture_t *first;
  if (forbidding_captures(false, &first) > 0) {
    note_forbidden(&f, "cudaDeviceSynchronize");
  } else {
    fake.legacy.completed = fake.legacy.enqueued;
    for (fake_stream_t *s = fake.streams; s; s = s->next) s->completed = s->enqueued;
  }
  return unlock_and_report(&f);
}

/* ---- memory ----------------------------------------------------------------------------- */

static recap_status_t fake_raw_malloc(void **ptr, size_t size) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  ensure_configured();
  bool inject = count_call(RECAP__FAKE_FAULT_RAW_MALLOC);
  int device = tl_device;
  fake_capture_t *first;
  if (ptr) *ptr = NULL;

  /* The injected fault comes first, so that the nth call fails whatever else it would do. */
  if (inject) {
    note(&f, RECAP_ERROR_OUT_OF_MEMORY,
         "cudaMalloc: out of memory (cudaErrorMemoryAllocation): fault injected by the fake "
         "device into raw allocation call %llu (%zu bytes)",
         (unsigned long long)fake.calls[RECAP__FAKE_FAULT_RAW_MALLOC], size);
  } else if (!ptr) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaMalloc: ptr is NULL");
  } else if (device < 0 || device >= fake.device_count) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaMalloc: invalid device ordinal (cudaErrorInvalidDevice): this thread's current "
         "device %d is not one of the fake's %d",
         device, fake.device_count);
  } else if (forbidding_captures(false, &first) > 0) {
    note_forbidden(&f, "cudaMalloc");
  } else if (size == 0) {
    /* cudaMalloc(&p, 0) succeeds with a null pointer. */
  } else if (size > fake.capacity - fake.in_use[device] ||
             size > SIZE_MAX - (FAKE_ALIGNMENT - 1)) {
    note(&f, RECAP_ERROR_OUT_OF_MEMORY,
         "cudaMalloc: out of memory (cudaErrorMemoryAllocation): tried to allocate %zu bytes on "
         "fake device %d, which has %zu bytes free of %zu",
         size, device, fake.capacity - fake.in_use[device], fake.capacity);
  } else {
    size_t rounded = (size + FAKE_ALIGNMENT - 1) / FAKE_ALIGNMENT * FAKE_ALIGNMENT;
    /* aligned_alloc, not calloc: the pages stay untouched until the test writes to them. */
    void *p = aligned_alloc(FAKE_ALIGNMENT, rounded);
    if (!p || !blocks_insert(p, size, device)) {
      free(p);
      note(&f, RECAP_ERROR_OUT_OF_MEMORY,
           "cudaMalloc: out of memory (cudaErrorMemoryAllocation): the host memory behind fake "
           "device %d could not supply %zu bytes",
           device, size);
    } else {
      fake.in_use[device] += size;
      *ptr = p;
    }
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_raw_free(void *ptr) {
  fake_failure_t f = {0};
  if (!ptr) return RECAP_SUCCESS; /* cudaFree(NULL) does nothing */
  pthread_mutex_lock(&fake.lock);
  fake_capture_t *first;
  size_t slot = blocks_find(ptr);
  if (slot == SIZE_MAX) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaFree: invalid argument (cudaErrorInvalidValue): %p was not allocated by the fake "
         "device, or was freed already",
         ptr);
  } else if (forbidding_captures(false, &first) > 0) {
    note_forbidden(&f, "cudaFree");
  } else {
    fake_block_t b = fake.blocks[slot];
    blocks_remove(slot);
    fake.in_use[b.device] -= b.size;
    free(b.ptr);
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  ensure_configured();
  int device = tl_device;
  if (!free_bytes || !total_bytes) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaMemGetInfo: an out-parameter is NULL");
  } else if (device < 0 || device >= fake.device_count) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaMemGetInfo: invalid device ordinal (cudaErrorInvalidDevice): this thread's current "
         "device %d is not one of the fake's %d",
         device, fake.device_count);
  } else {
    *free_bytes = fake.capacity - fake.in_use[device];
    *total_bytes = fake.capacity;
  }
  return unlock_and_report(&f);
}

/* ---- events ----------------------------------------------------------------------------- */

static recap_status_t fake_event_create(recap__event_t *event) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_EVENT_CREATE);
  if (event) *event = NULL;
  if (inject) {
    note_injected(&f, "cudaEventCreateWithFlags", RECAP__FAKE_FAULT_EVENT_CREATE, "event creation");
  } else if (!event) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventCreateWithFlags: event is NULL");
  } else {
    struct recap__event *e = calloc(1, sizeof *e);
    if (!e) {
      note(&f, RECAP_ERROR_CUDA,
           "cudaEventCreateWithFlags: out of memory (cudaErrorMemoryAllocation): no host memory "
           "for a fake event");
    } else {
      e->magic = FAKE_EVENT_MAGIC;
      e->next = fake.events;
      if (fake.events) fake.events->prev = e;
      fake.events = e;
      fake.live_events++;
      *event = e;
    }
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_event_destroy(recap__event_t event) {
  fake_failure_t f = {0};
  if (!event)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "cudaEventDestroy: the event is NULL");
  pthread_mutex_lock(&fake.lock);
  if (!event_valid(event)) {
    note_bad_event(&f, "cudaEventDestroy", event);
  } else {
    if (event->prev) event->prev->next = event->next;
    else fake.events = event->next;
    if (event->next) event->next->prev = event->prev;
    event->magic = FAKE_EVENT_DEAD;
    free(event);
    fake.live_events--;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_event_record(recap__event_t event, recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_EVENT_RECORD);
  fake_stream_t *s = stream_of(stream);
  if (inject) {
    note_injected(&f, "cudaEventRecord", RECAP__FAKE_FAULT_EVENT_RECORD, "event record");
  } else if (!event) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventRecord: the event is NULL");
  } else if (!event_valid(event)) {
    note_bad_event(&f, "cudaEventRecord", event);
  } else if (!s) {
    note_bad_stream(&f, "cudaEventRecord", stream);
  } else if (s->capture) {
    /* CUDA would turn the record into a graph node; an allocator must never rely on that. */
    note_capturing_stream(&f, "cudaEventRecord", s, false);
  } else {
    s->enqueued++;
    event->stream = s;
    event->item = s->enqueued;
  }
  return unlock_and_report(&f);
}

/* Checks shared by query and synchronize; RECAP_SUCCESS when the event may be waited on. */
static recap_status_t check_event_wait(fake_failure_t *f, recap__event_t event, const char *call) {
  if (!event) return note(f, RECAP_ERROR_INVALID_ARGUMENT, "%s: the event is NULL", call);
  if (!event_valid(event))
    return note_bad_event(f, call, event);
  if (event->stream && event->stream->capture) {
    /* Waiting on work of a capturing stream is illegal and invalidates its capture. */
    event->stream->capture->invalidated = true;
    return note_capturing_stream(f, call, event->stream, true);
  }
  return RECAP_SUCCESS;
}

static recap_status_t fake_event_query(recap__event_t event, bool *done) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  if (!done) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventQuery: done is NULL");
  } else if (check_event_wait(&f, event, "cudaEventQuery") == RECAP_SUCCESS) {
    /* An event never recorded (or whose stream is gone, its work finished) is done. */
    *done = !event->stream || event->stream->completed >= event->item;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_event_synchronize(recap__event_t event) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  if (check_event_wait(&f, event, "cudaEventSynchronize") == RECAP_SUCCESS && event->stream &&
      event->stream->completed < event->item)
    event->stream->completed = event->item;
  return unlock_and_report(&f);
}

/* ---- streams ---------------------------------------------------------------------------- */

static fake_stream_t *stream_new_locked(void) {
  fake_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->next = fake.streams;
  fake.streams = s;
  return s;
}

static recap_status_t fake_stream_create(recap_stream_t *stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_STREAM_CREATE);
  if (stream) *stream = NULL;
  if (inject) {
    note_injected(&f, "cudaStreamCreateWithFlags", RECAP__FAKE_FAULT_STREAM_CREATE,
                  "stream creation");
  } else if (!stream) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamCreateWithFlags: stream is NULL");
  } else {
    fake_stream_t *s = stream_new_locked();
    if (!s)
      note(&f, RECAP_ERROR_CUDA,
           "cudaStreamCreateWithFlags: out of memory (cudaErrorMemoryAllocation): no host memory "
           "for a fake stream");
    else
      *stream = (recap_stream_t)s;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_stream_destroy(recap_stream_t stream) {
  fake_failure_t f = {0};
  if (!stream)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "cudaStreamDestroy: the legacy default stream cannot be destroyed");
  pthread_mutex_lock(&fake.lock);
  fake_stream_t **link = &fake.streams;
  while (*link && (recap_stream_t)*link != stream) link = &(*link)->next;
  fake_stream_t *s = *link;
  if (!s) {
    note_bad_stream(&f, "cudaStreamDestroy", stream);
  } else if (s->capture) {
    s->capture->invalidated = true;
    note_capturing_stream(&f, "cudaStreamDestroy", s, true);
  } else {
    /* CUDA finishes the work of a destroyed stream, so events recorded on it become done. */
    for (struct recap__event *e = fake.events; e; e = e->next)
      if (e->stream == s) e->stream = NULL;
    *link = s->next;
    free(s);
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_stream_synchronize(recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (!s) {
    note_bad_stream(&f, "cudaStreamSynchronize", stream);
  } else if (s->capture) {
    s->capture->invalidated = true;
    note_capturing_stream(&f, "cudaStreamSynchronize", s, true);
  } else {
    s->completed = s->enqueued;
  }
  return unlock_and_report(&f);
}

/* Eagerly the copy happens at once (the fake's device memory is host memory); in a capture it
 * becomes a memcpy node, which, like every fake node, does nothing when the graph replays. */
static recap_status_t fake_memcpy_async(void *dst, const void *src, size_t bytes,
                                        recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (!s) {
    note_bad_stream(&f, "cudaMemcpyAsync", stream);
  } else if ((!dst || !src) && bytes) {
    note(&f, RECAP_ERROR_CUDA, "cudaMemcpyAsync: invalid argument (cudaErrorInvalidValue)");
  } else if (s->capture) {
    if (!capture_append(s, RECAP_NODE_MEMCPY, NULL))
      note(&f, RECAP_ERROR_OUT_OF_MEMORY, "cudaMemcpyAsync: out of host memory in the fake");
    else if (!s->capture->invalidated) {
      fake_node_t *node = &s->capture->nodes.v[s->tail - 1];
      node->src = src;
      node->dst = dst;
    }
  } else {
    if (bytes) memmove(dst, src, bytes);
    s->enqueued++;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_stream_capture_info(recap_stream_t stream,
                                               recap__capture_status_t *status,
                                               uint64_t *capture_id) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (!status) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamGetCaptureInfo: status is NULL");
  } else if (!s) {
    note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!s->capture) {
    *status = RECAP__CAPTURE_NONE;
    if (capture_id) *capture_id = 0;
  } else {
    *status = s->capture->invalidated ? RECAP__CAPTURE_INVALIDATED : RECAP__CAPTURE_ACTIVE;
    if (capture_id) *capture_id = s->capture->id;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_exchange_capture_mode(recap__capture_mode_t *mode) {
  RECAP__ARG(mode, "cudaThreadExchangeStreamCaptureMode: mode is NULL");
  RECAP__ARG(*mode == RECAP__CAPTURE_MODE_GLOBAL || *mode == RECAP__CAPTURE_MODE_THREAD_LOCAL ||
                 *mode == RECAP__CAPTURE_MODE_RELAXED,
             "cudaThreadExchangeStreamCaptureMode: invalid argument (cudaErrorInvalidValue): "
             "mode %d is not a capture mode",
             (int)*mode);
  recap__capture_mode_t old = tl_capture_mode;
  tl_capture_mode = *mode;
  *mode = old;
  return RECAP_SUCCESS;
}

/* ---- graphs ----------------------------------------------------------------------------- */

static recap_status_t fake_stream_begin_capture(recap_stream_t stream,
                                                recap__capture_mode_t mode) {
  /* Refused before anything reaches the device, as in the CUDA seam. */
  if (!stream)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "cudaStreamBeginCapture: the legacy default stream cannot capture; "
                        "capture on a stream you created (cudaStreamCreate, or "
                        "cudaStreamCreateWithFlags with cudaStreamNonBlocking)");
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_CAPTURE_BEGIN);
  fake_stream_t *s = stream_of(stream);
  if (inject) {
    note_injected(&f, "cudaStreamBeginCapture", RECAP__FAKE_FAULT_CAPTURE_BEGIN, "capture begin");
  } else if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
             mode != RECAP__CAPTURE_MODE_RELAXED) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT,
         "cudaStreamBeginCapture: invalid argument (cudaErrorInvalidValue): %d is not a capture "
         "mode",
         (int)mode);
  } else if (!s) {
    note_bad_stream(&f, "cudaStreamBeginCapture", stream);
  } else if (s->capture) {
    note(&f, RECAP_ERROR_INVALID_USAGE,
         "cudaStreamBeginCapture(stream %p): the stream is already capturing (capture %llu on "
         "the fake device, %s)%s; end that capture first",
         (void *)stream, (unsigned long long)s->capture->id,
         s->capture->origin == s ? "begun on it" : "joined by an event wait",
         s->capture->invalidated ? ", now invalidated" : "");
  } else if (!capture_begin_locked(s, mode)) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaStreamBeginCapture: out of memory (cudaErrorMemoryAllocation): no host memory for "
         "a fake capture");
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_stream_end_capture(recap_stream_t stream, recap_cuda_graph_t *graph) {
  fake_failure_t f = {0};
  if (graph) *graph = NULL;
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_CAPTURE_END);
  fake_stream_t *s = stream_of(stream);
  fake_capture_t *c = s ? s->capture : NULL;
  if (inject) {
    /* A failed end leaves the stream not capturing, as the seam promises. */
    if (c && c->origin == s) capture_finish(c, NULL);
    note_injected(&f, "cudaStreamEndCapture", RECAP__FAKE_FAULT_CAPTURE_END, "capture end");
  } else if (!graph) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaStreamEndCapture: graph is NULL");
  } else if (!s) {
    note_bad_stream(&f, "cudaStreamEndCapture", stream);
  } else if (!c) {
    note(&f, RECAP_ERROR_INVALID_USAGE,
         "cudaStreamEndCapture(stream %p) failed: cudaErrorIllegalState: the stream is not "
         "capturing",
         (void *)stream);
  } else if (c->origin != s) {
    /* As recap__fake_capture_end: this invalidates the capture, which stays under way. */
    c->invalidated = true;
    note(&f, RECAP_ERROR_INVALID_USAGE,
         "cudaStreamEndCapture(stream %p) failed: cudaErrorStreamCaptureUnmatched: capture %llu "
         "was not begun on this stream, which only joined it; end it on the stream it began on "
         "(it is now invalidated)",
         (void *)stream, (unsigned long long)c->id);
  } else if (c->mode != RECAP__CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
    note(&f, RECAP_ERROR_INVALID_USAGE,
         "cudaStreamEndCapture(stream %p) failed: cudaErrorStreamCaptureWrongThread: capture %llu "
         "was begun in %s mode by another thread, which must end it (or begin it in relaxed "
         "mode)",
         (void *)stream, (unsigned long long)c->id, mode_name(c->mode));
  } else if (c->invalidated) {
    uint64_t id = c->id;
    capture_finish(c, NULL);
    note(&f, RECAP_ERROR_CAPTURE_INVALIDATED,
         "cudaStreamEndCapture(stream %p): capture %llu was invalidated "
         "(cudaErrorStreamCaptureInvalidated): an illegal call was made while it ran (a "
         "synchronous copy, a synchronisation, cudaMalloc under global mode...); no graph was "
         "made and the stream no longer captures",
         (void *)stream, (unsigned long long)id);
  } else {
    fake_graph_t *g = calloc(1, sizeof *g);
    if (!g) {
      capture_finish(c, NULL);
      note(&f, RECAP_ERROR_CUDA,
           "cudaStreamEndCapture: out of memory (cudaErrorMemoryAllocation): no host memory for "
           "a fake graph; the capture is thrown away");
    } else {
      capture_finish(c, &g->nodes);
      g->next = fake.graphs;
      fake.graphs = g;
      fake.live_graphs++;
      *graph = (recap_cuda_graph_t)g;
    }
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_instantiate(recap_cuda_graph_exec_t *exec,
                                             recap_cuda_graph_t graph) {
  fake_failure_t f = {0};
  if (exec) *exec = NULL;
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_INSTANTIATE);
  fake_graph_t *g = graph_find(graph);
  if (inject) {
    note_injected(&f, "cudaGraphInstantiateWithFlags", RECAP__FAKE_FAULT_INSTANTIATE,
                  "graph instantiation");
  } else if (!exec) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGraphInstantiateWithFlags: exec is NULL");
  } else if (!g) {
    note_bad_graph(&f, "cudaGraphInstantiateWithFlags", (const void *)graph, "graph");
  } else {
    fake_exec_t *x = calloc(1, sizeof *x);
    if (!x) {
      note(&f, RECAP_ERROR_CUDA,
           "cudaGraphInstantiateWithFlags: out of memory (cudaErrorMemoryAllocation): no host "
           "memory for a fake executable graph");
    } else {
      x->node_count = g->nodes.count;
      x->next = fake.execs;
      fake.execs = x;
      fake.live_execs++;
      *exec = (recap_cuda_graph_exec_t)x;
    }
  }
  return unlock_and_report(&f);
}

/* Enqueue work on s: in a capture, one node of the given type and name (it does not run);
 * otherwise `items` work items. *eager says which (false on failure too). Called with the lock
 * held. */
static recap_status_t fake_enqueue(fake_failure_t *f, fake_stream_t *s, const char *call,
                                   recap_node_type_t type, const char *name, uint64_t items,
                                   bool *eager) {
  *eager = false;
  if (s->capture && s->capture->invalidated)
    return note(f, RECAP_ERROR_CAPTURE_INVALIDATED,
                "%s: operation failed due to a previous error during capture "
                "(cudaErrorStreamCaptureInvalidated): the stream takes part in capture %llu on "
                "the fake device, which was invalidated",
                call, (unsigned long long)s->capture->id);
  if (s->capture) {
    if (!capture_append(s, type, name))
      return note(f, RECAP_ERROR_CUDA,
                  "%s: out of memory (cudaErrorMemoryAllocation): no host memory for a node of "
                  "capture %llu",
                  call, (unsigned long long)s->capture->id);
    return RECAP_SUCCESS;
  }
  s->enqueued += items;
  *eager = true;
  return RECAP_SUCCESS;
}

static recap_status_t fake_graph_launch(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  bool inject = count_call(RECAP__FAKE_FAULT_LAUNCH);
  fake_exec_t *x = exec_find(exec);
  fake_stream_t *s = stream_of(stream);
  if (inject) {
    note_injected(&f, "cudaGraphLaunch", RECAP__FAKE_FAULT_LAUNCH, "graph launch");
  } else if (!x) {
    note_bad_graph(&f, "cudaGraphLaunch", (const void *)exec, "executable graph");
  } else if (!s) {
    note_bad_stream(&f, "cudaGraphLaunch", stream);
  } else {
    /* Launched into a capture, the graph becomes a child graph node; it does not run. */
    bool eager;
    recap_status_t st =
        fake_enqueue(&f, s, "cudaGraphLaunch", RECAP_NODE_GRAPH, NULL, x->node_count, &eager);
    if (st == RECAP_SUCCESS && eager) {
      x->launches++;
      fake.graph_launches++;
    }
  }
  return unlock_and_report(&f);
}

/* Destroying NULL is a no-op, as in the CUDA seam. */
static recap_status_t fake_graph_destroy(recap_cuda_graph_t graph) {
  if (!graph) return RECAP_SUCCESS;
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_graph_t **link = &fake.graphs;
  while (*link && (recap_cuda_graph_t)*link != graph) link = &(*link)->next;
  fake_graph_t *g = *link;
  if (!g) {
    note_bad_graph(&f, "cudaGraphDestroy", (const void *)graph, "graph");
  } else {
    *link = g->next;
    nodes_free(&g->nodes);
    free(g);
    fake.live_graphs--;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_exec_destroy(recap_cuda_graph_exec_t exec) {
  if (!exec) return RECAP_SUCCESS;
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_exec_t **link = &fake.execs;
  while (*link && (recap_cuda_graph_exec_t)*link != exec) link = &(*link)->next;
  fake_exec_t *x = *link;
  if (!x) {
    note_bad_graph(&f, "cudaGraphExecDestroy", (const void *)exec, "executable graph");
  } else {
    *link = x->next;
    free(x);
    fake.live_execs--;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_node_count(recap_cuda_graph_t graph, size_t *count) {
  fake_failure_t f = {0};
  if (count) *count = 0;
  pthread_mutex_lock(&fake.lock);
  fake_graph_t *g = graph_find(graph);
  if (!count)
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGraphGetNodes: count is NULL");
  else if (!g)
    note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  else
    *count = g->nodes.count;
  return unlock_and_report(&f);
}

static const char *node_type_text(recap_node_type_t type) {
  static const char *const names[] = {
#define RECAP_X_NODE_NAME(name, text) text,
      RECAP_NODE_TYPE_MAP(RECAP_X_NODE_NAME)
#undef RECAP_X_NODE_NAME
  };
  return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* A kernel name inside a quoted DOT string. */
static void dot_quoted(FILE *out, const char *text) {
  for (; *text; text++) {
    if (*text == '"' || *text == '\\') fputc('\\', out);
    fputc(*text, out);
  }
}

/* The fake's own DOT: one simple statement per node, the handles in statements of their own
 * (as the driver's verbose dump shows them, "node handle | 0x..."), then the edges. */
static void write_simple_dot(FILE *out, const fake_graph_t *g) {
  fprintf(out, "digraph fake {\n");
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    fprintf(out, "  n%zu [label=\"%zu: %s", i, i, node_type_text(n->type));
    if (n->name) {
      fputc(' ', out);
      dot_quoted(out, n->name);
    }
    fprintf(out, "\"];\n");
  }
  for (size_t i = 0; i < g->nodes.count; i++)
    fprintf(out, "  n%zu [comment=\"node handle | 0x%016llX\"];\n", i,
            (unsigned long long)g->nodes.v[i].handle);
  for (size_t i = 0; i < g->nodes.count; i++)
    if (g->nodes.v[i].dep) fprintf(out, "  n%zu -> n%zu;\n", g->nodes.v[i].dep - 1, i);
  fprintf(out, "}\n");
}

/* The shape of cudaGraphDebugDotPrint's verbose output (CUDA 12 and 13): a cluster per graph,
 * quoted node ids, record labels spanning several lines with escaped angle brackets, and each
 * node's handle in a "node handle" field. */
static void write_driver_style_dot(FILE *out, const fake_graph_t *g) {
  fputs("digraph dot {\nsubgraph cluster_1 {\nlabel=\"graph_1\" graph[style=\"dashed\"];\n", out);
  for (size_t i = 0; i < g->nodes.count; i++) {
    const fake_node_t *n = &g->nodes.v[i];
    fprintf(out, "\"graph_1_node_%zu\"[style=\"bold\" shape=\"record\" label=\"{%s\n", i,
            n->type == RECAP_NODE_KERNEL ? "KERNEL" : "MEMCPY");
    fprintf(out, "| {ID | %zu (topoId: %zu) | ", i, g->nodes.count - i);
    if (n->name) dot_quoted(out, n->name);
    fputs("\\<\\<\\<1,1,0\\>\\>\\>}\n", out);
    fprintf(out, "| {{node handle | func handle} | {0x%016llX | 0x%016llX}}\n",
            (unsigned long long)n->handle, (unsigned long long)n->handle + 8);
    fputs("| {accessPolicyWindow | {base_ptr | num_bytes | hitRatio | hitProp | missProp} | "
          "{0x0000000000000000 | 0 | 0.000000 | N | N}}\n}\"];\n",
          out);
  }
  for (size_t i = 0; i < g->nodes.count; i++)
    if (g->nodes.v[i].dep)
      fprintf(out, "\"graph_1_node_%zu\" -> \"graph_1_node_%zu\" [headlabel=0];\n",
              g->nodes.v[i].dep - 1, i);
  fputs("}\n}\n", out);
}

static recap_status_t fake_graph_debug_dot(recap_cuda_graph_t graph, const char *path) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_graph_t *g = graph_find(graph);
  if (!path || !path[0]) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGraphDebugDotPrint: path is NULL or empty");
  } else if (!g) {
    note_bad_graph(&f, "cudaGraphDebugDotPrint", (const void *)graph, "graph");
  } else {
    FILE *out = fopen(path, "w");
    if (!out) {
      note(&f, RECAP_ERROR_IO, "cudaGraphDebugDotPrint: cannot write \"%s\": %s", path,
           strerror(errno));
    } else {
      if (fake.dot_driver_style)
        write_driver_style_dot(out, g);
      else
        write_simple_dot(out, g);
      if (ferror(out) | (fclose(out) != 0))
        note(&f, RECAP_ERROR_IO, "cudaGraphDebugDotPrint: writing \"%s\" failed", path);
    }
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_inspect(recap_cuda_graph_t graph, recap_graph_info_t *info) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_graph_t *g = graph_find(graph);
  if (!info) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "graph inspection: info is NULL");
  } else if (!g) {
    note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  } else if (g->nodes.count > 0) {
    size_t n = g->nodes.count;
    bool ok = (info->nodes = calloc(n, sizeof *info->nodes)) != NULL;
    if (ok) info->node_count = n;
    /* Each node waits for at most one other: count the dependents first. */
    for (size_t i = 0; ok && i < n; i++)
      if (g->nodes.v[i].dep) info->nodes[g->nodes.v[i].dep - 1].dependent_count++;
    for (size_t i = 0; ok && i < n; i++) {
      const fake_node_t *src = &g->nodes.v[i];
      recap_graph_node_t *dst = &info->nodes[i];
      dst->type = src->type;
      if (src->type == RECAP_NODE_KERNEL) {
        for (int d = 0; d < 3; d++) dst->grid[d] = dst->block[d] = 1;
        if (src->name && !(dst->kernel_name = recap__copy_string(src->name))) ok = false;
      }
      if (ok && src->dep) {
        if (!(dst->dependencies = malloc(sizeof *dst->dependencies))) ok = false;
        else {
          dst->dependencies[0] = src->dep - 1;
          dst->dependency_count = 1;
          info->edge_count++;
        }
      }
      if (ok && dst->dependent_count) {
        if (!(dst->dependents = malloc(dst->dependent_count * sizeof *dst->dependents)))
          ok = false;
        dst->dependent_count = 0; /* counted again as they are filled in below */
      }
    }
    for (size_t i = 0; ok && i < n; i++)
      if (g->nodes.v[i].dep) {
        recap_graph_node_t *parent = &info->nodes[g->nodes.v[i].dep - 1];
        parent->dependents[parent->dependent_count++] = i;
      }
    if (!ok) {
      recap__graph_info_clear(info);
      note(&f, RECAP_ERROR_OUT_OF_MEMORY, "graph inspection: out of host memory");
    }
  }
  return unlock_and_report(&f);
}

/* ---- debug aids: node lists and what nodes read ------------------------------------------ */

static recap__graph_node_t node_handle(const fake_node_t *n) {
  return (recap__graph_node_t)(uintptr_t)n->handle;
}

/* The handles of nodes into a malloc'ed array; false when out of host memory. */
static bool handles_of(const fake_nodes_t *nodes, recap__graph_node_t **out, size_t *count) {
  *out = NULL;
  *count = 0;
  if (nodes->count == 0) return true;
  recap__graph_node_t *list = malloc(nodes->count * sizeof *list);
  if (!list) return false;
  for (size_t i = 0; i < nodes->count; i++) list[i] = node_handle(&nodes->v[i]);
  *out = list;
  *count = nodes->count;
  return true;
}

/* The capture's "graph" is the capture itself: the fake makes its graph only at the end. */
static recap_status_t fake_capture_nodes(recap_stream_t stream, recap_cuda_graph_t *graph,
                                         recap__graph_node_t **nodes, size_t *count) {
  RECAP__ARG(graph && nodes && count, "capture node list: an out-parameter is NULL");
  *graph = NULL;
  *nodes = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (!s) {
    note_bad_stream(&f, "cudaStreamGetCaptureInfo", stream);
  } else if (!s->capture || s->capture->invalidated) {
    note(&f, RECAP_ERROR_INVALID_USAGE,
         "cudaStreamGetCaptureInfo(stream %p): the stream takes part in no active capture (%s)",
         (void *)stream, s->capture ? "its capture was invalidated" : "not capturing");
  } else if (!handles_of(&s->capture->nodes, nodes, count)) {
    note(&f, RECAP_ERROR_OUT_OF_MEMORY, "capture node list: out of host memory in the fake");
  } else {
    *graph = (recap_cuda_graph_t)(void *)s->capture;
  }
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_nodes(recap_cuda_graph_t graph, recap__graph_node_t **nodes,
                                       size_t *count) {
  RECAP__ARG(nodes && count, "graph node list: an out-parameter is NULL");
  *nodes = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_graph_t *g = graph_find(graph);
  if (!g)
    note_bad_graph(&f, "cudaGraphGetNodes", (const void *)graph, "graph");
  else if (!handles_of(&g->nodes, nodes, count))
    note(&f, RECAP_ERROR_OUT_OF_MEMORY, "graph node list: out of host memory in the fake");
  return unlock_and_report(&f);
}

static recap_status_t fake_graph_reads_check(void) { return RECAP_SUCCESS; }

static bool reads_push(recap__graph_read_t **v, size_t *count, size_t *cap, size_t node,
                       const void *ptr, recap__read_kind_t kind) {
  if (!ptr) return true;
  if (*count == *cap) {
    size_t grown_cap = *cap ? *cap * 2 : 16;
    recap__graph_read_t *grown = realloc(*v, grown_cap * sizeof *grown);
    if (!grown) return false;
    *v = grown;
    *cap = grown_cap;
  }
  (*v)[(*count)++] = (recap__graph_read_t){node, ptr, kind};
  return true;
}

static recap_status_t fake_graph_reads(recap_cuda_graph_t graph, recap__graph_read_t **reads,
                                       size_t *count) {
  RECAP__ARG(reads && count, "graph reads: an out-parameter is NULL");
  *reads = NULL;
  *count = 0;
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_graph_t *g = graph_find(graph);
  recap__graph_read_t *v = NULL;
  size_t n = 0, cap = 0;
  bool ok = true;
  if (!g) {
    note_bad_graph(&f, "graph reads", (const void *)graph, "graph");
  } else {
    for (size_t i = 0; ok && i < g->nodes.count; i++) {
      const fake_node_t *node = &g->nodes.v[i];
      for (size_t k = 0; ok && k < node->arg_count; k++)
        ok = reads_push(&v, &n, &cap, i, node->args[k], RECAP__READ_KERNEL_ARG);
      if (node->type == RECAP_NODE_MEMCPY)
        ok = ok && reads_push(&v, &n, &cap, i, node->src, RECAP__READ_COPY_SRC) &&
             reads_push(&v, &n, &cap, i, node->dst, RECAP__READ_COPY_DST);
      else if (node->type == RECAP_NODE_MEMSET)
        ok = ok && reads_push(&v, &n, &cap, i, node->dst, RECAP__READ_MEMSET_DST);
    }
    if (!ok) {
      free(v);
      v = NULL;
      n = 0;
      note(&f, RECAP_ERROR_OUT_OF_MEMORY, "graph reads: out of host memory in the fake");
    }
  }
  *reads = v;
  *count = n;
  return unlock_and_report(&f);
}

/* ---- random numbers ----------------------------------------------------------------------
 * The fake computes no real random numbers: eager kernels fill their output with a simple
 * function of the seed, the offset and the index (fake.h), which is enough for tests to see
 * that eager calls advance the generator and that replays are fed the right state. */

/* Eager rng_write_state and rng_launch calls, since the process started (never reset). */
static uint64_t fake_rng_state_writes, fake_rng_launches;

static const char *fake_rng_kernel_name(recap__rng_kind_t kind) {
  switch (kind) {
    case RECAP__RNG_UNIFORM: return "recap_rng_uniform";
    case RECAP__RNG_NORMAL: return "recap_rng_normal";
    case RECAP__RNG_RANDINT: return "recap_rng_randint";
    case RECAP__RNG_DROPOUT: return "recap_rng_dropout";
  }
  return NULL;
}

static recap_status_t fake_rng_write_state(recap_stream_t stream, uint64_t *state, uint64_t seed,
                                           uint64_t offset) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  bool eager = false;
  if (!state) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "fake_rng_state: the state pointer is NULL");
  } else if (!s) {
    note_bad_stream(&f, "fake_rng_state<<<1, 1>>>", stream);
  } else if (fake_enqueue(&f, s, "fake_rng_state<<<1, 1>>>", RECAP_NODE_KERNEL,
                          "fake_rng_state", 1, &eager) == RECAP_SUCCESS &&
             eager) {
    /* Fake device memory is host memory: the kernel's write happens now. */
    state[0] = seed;
    state[1] = offset;
    fake_rng_state_writes++;
  }
  return unlock_and_report(&f);
}

/* The fake's stand-in for a uniform draw in (0, 1]: ((seed + offset + i) mod 1000 + 1) / 1000. */
static float fake_rng_uniform_at(uint64_t seed, uint64_t offset, size_t i) {
  return (float)((seed + offset + (uint64_t)i) % 1000u + 1u) / 1000.0f;
}

static void fake_rng_fill(const recap__rng_launch_t *l) {
  uint64_t seed = l->state.seed, offset = l->state.offset;
  if (l->state.captured) { /* not expected eagerly, but read the words as a kernel would */
    seed = *l->state.seed_ptr;
    offset = *l->state.offset_ptr + l->state.offset_intragraph;
  }
  switch (l->kind) {
    case RECAP__RNG_UNIFORM: {
      float *out = l->out;
      for (size_t i = 0; i < l->n; i++) out[i] = fake_rng_uniform_at(seed, offset, i);
      break;
    }
    case RECAP__RNG_NORMAL: {
      float *out = l->out;
      for (size_t i = 0; i < l->n; i++)
        out[i] = l->a + l->b * (fake_rng_uniform_at(seed, offset, i) - 0.5f);
      break;
    }
    case RECAP__RNG_RANDINT: {
      int32_t *out = l->out;
      uint64_t range = (uint64_t)((int64_t)l->high - (int64_t)l->low);
      for (size_t i = 0; i < l->n; i++)
        out[i] = (int32_t)((int64_t)l->low + (int64_t)((seed + offset + (uint64_t)i) % range));
      break;
    }
    case RECAP__RNG_DROPOUT: {
      float *out = l->out;
      float scale = 1.0f / (1.0f - l->a);
      for (size_t i = 0; i < l->n; i++) {
        bool keep = fake_rng_uniform_at(seed, offset, i) > l->a;
        out[i] = l->in[i] * (float)keep * scale;
        if (l->mask) l->mask[i] = keep ? 1 : 0;
      }
      break;
    }
  }
}

static recap_status_t fake_rng_launch(const recap__rng_launch_t *l) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = l ? stream_of(l->stream) : NULL;
  const char *name = l ? fake_rng_kernel_name(l->kind) : NULL;
  bool eager = false;
  if (!l) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "random kernel launch: launch is NULL");
  } else if (!name) {
    note(&f, RECAP_ERROR_INTERNAL, "random kernel launch: unknown kind %d", (int)l->kind);
  } else if (l->n == 0) {
    /* Nothing to launch. */
  } else if (!l->out || (l->kind == RECAP__RNG_DROPOUT && !l->in)) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: out or in is NULL", name);
  } else if (l->kind == RECAP__RNG_RANDINT && l->high <= l->low) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: the range [%d, %d) is empty", name, (int)l->low,
         (int)l->high);
  } else if (l->kind == RECAP__RNG_DROPOUT && !(l->a >= 0.0f && l->a < 1.0f)) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "%s: p = %g is not in [0, 1)", name, (double)l->a);
  } else if (l->grid == 0 || l->grid > RECAP__RNG_MAX_GRID) {
    note(&f, RECAP_ERROR_INTERNAL, "%s: grid %u is not a shape recap__rng_shape gives", name,
         l->grid);
  } else if (!s) {
    note_bad_stream(&f, name, l->stream);
  } else if (fake_enqueue(&f, s, name, RECAP_NODE_KERNEL, name, 1, &eager) == RECAP_SUCCESS &&
             eager) {
    fake_rng_fill(l);
    fake_rng_launches++;
  }
  return unlock_and_report(&f);
}

const recap__device_ops_t recap__fake_ops = {
    .name = "fake",
    .device_count = fake_device_count,
    .get_device = fake_get_device,
    .set_device = fake_set_device,
    .device_synchronize = fake_device_synchronize,
    .raw_malloc = fake_raw_malloc,
    .raw_free = fake_raw_free,
    .mem_get_info = fake_mem_get_info,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .event_query = fake_event_query,
    .event_synchronize = fake_event_synchronize,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_synchronize = fake_stream_synchronize,
    .memcpy_async = fake_memcpy_async,
    .stream_capture_info = fake_stream_capture_info,
    .exchange_capture_mode = fake_exchange_capture_mode,
    .stream_capture_id = fake_stream_capture_info,
    .stream_begin_capture = fake_stream_begin_capture,
    .stream_end_capture = fake_stream_end_capture,
    .graph_instantiate = fake_graph_instantiate,
    .graph_launch = fake_graph_launch,
    .graph_destroy = fake_graph_destroy,
    .graph_exec_destroy = fake_graph_exec_destroy,
    .graph_node_count = fake_graph_node_count,
    .graph_debug_dot = fake_graph_debug_dot,
    .graph_inspect = fake_graph_inspect,
    .capture_nodes = fake_capture_nodes,
    .graph_nodes = fake_graph_nodes,
    .graph_reads_check = fake_graph_reads_check,
    .graph_reads = fake_graph_reads,
    .rng_write_state = fake_rng_write_state,
    .rng_launch = fake_rng_launch,
};

/* ---- test controls ---------------------------------------------------------------------- */

void recap__fake_reset(const recap__fake_config_t *cfg) {
  pthread_mutex_lock(&fake.lock);
  for (fake_stream_t *s = fake.streams, *next; s; s = next) {
    next = s->next;
    free(s);
  }
  fake.streams = NULL;
  for (struct recap__event *e = fake.events, *next; e; e = next) {
    next = e->next;
    e->magic = FAKE_EVENT_DEAD;
    free(e);
  }
  fake.events = NULL;
  fake.live_events = 0;
  for (fake_capture_t *c = fake.captures, *next; c; c = next) {
    next = c->next;
    nodes_free(&c->nodes);
    free(c);
  }
  fake.captures = NULL;
  fake.next_capture_id = 0;
  for (fake_graph_t *g = fake.graphs, *next; g; g = next) {
    next = g->next;
    nodes_free(&g->nodes);
    free(g);
  }
  fake.graphs = NULL;
  fake.live_graphs = 0;
  for (fake_exec_t *x = fake.execs, *next; x; x = next) {
    next = x->next;
    free(x);
  }
  fake.execs = NULL;
  fake.live_execs = 0;
  fake.graph_launches = 0;
  for (size_t i = 0; i < fake.blocks_cap; i++) free(fake.blocks[i].ptr);
  free(fake.blocks);
  fake.blocks = NULL;
  fake.blocks_cap = 0;
  fake.blocks_count = 0;
  memset(fake.in_use, 0, sizeof fake.in_use);
  memset(&fake.legacy, 0, sizeof fake.legacy);
  memset(fake.calls, 0, sizeof fake.calls);
  memset(fake.fail_countdown, 0, sizeof fake.fail_countdown);
  fake.dot_driver_style = false;
  configure(cfg);
  pthread_mutex_unlock(&fake.lock);

  /* Only the calling thread's per-thread state can be reset; other threads keep theirs. */
  tl_device = 0;
  tl_capture_mode = RECAP__CAPTURE_MODE_GLOBAL;

  recap__device_install(&recap__fake_ops);
  recap__alloc_reset();
  recap__side_streams_forget();
  recap__registry_clear();
  recap_options_reset();
}

recap_stream_t recap__fake_stream_new(void) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_new_locked();
  pthread_mutex_unlock(&fake.lock);
  if (!s) abort(); /* a test control: no host memory for a few bytes leaves nothing to test */
  return (recap_stream_t)s;
}

void recap__fake_stream_complete(recap_stream_t stream) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (s) s->completed = s->enqueued;
  pthread_mutex_unlock(&fake.lock);
}

void recap__fake_launch_kernel(recap_stream_t stream, const char *name) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  bool ok = true;
  /* Work launched on a capturing stream goes into the graph; it does not run. */
  if (s && s->capture) ok = capture_append(s, RECAP_NODE_KERNEL, name ? name : "fake_kernel");
  else if (s) s->enqueued++;
  pthread_mutex_unlock(&fake.lock);
  if (!ok) abort(); /* a test control: see recap__fake_stream_new */
}

void recap__fake_stream_enqueue(recap_stream_t stream) { recap__fake_launch_kernel(stream, NULL); }

void recap__fake_launch_kernel_args(recap_stream_t stream, const char *name,
                                    const void *const *args, size_t n) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  bool ok = true;
  if (s && s->capture) {
    ok = capture_append(s, RECAP_NODE_KERNEL, name ? name : "fake_kernel");
    if (ok && !s->capture->invalidated && n > 0) {
      fake_node_t *node = &s->capture->nodes.v[s->tail - 1];
      node->args = malloc(n * sizeof *node->args);
      ok = node->args != NULL;
      if (ok) {
        for (size_t i = 0; i < n; i++) node->args[i] = args[i];
        node->arg_count = n;
      }
    }
  } else if (s) {
    s->enqueued++;
  }
  pthread_mutex_unlock(&fake.lock);
  if (!ok) abort(); /* a test control: see recap__fake_stream_new */
}

void recap__fake_dot_driver_style(bool on) {
  pthread_mutex_lock(&fake.lock);
  fake.dot_driver_style = on;
  pthread_mutex_unlock(&fake.lock);
}

void recap__fake_memset_async(recap_stream_t stream, void *dst, int value, size_t bytes) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  bool ok = true;
  if (s && s->capture) {
    ok = capture_append(s, RECAP_NODE_MEMSET, NULL);
    if (ok && !s->capture->invalidated) s->capture->nodes.v[s->tail - 1].dst = dst;
  } else if (s) {
    if (dst && bytes) memset(dst, value, bytes); /* the fake's device memory is host memory */
    s->enqueued++;
  }
  pthread_mutex_unlock(&fake.lock);
  if (!ok) abort();
}

uint64_t recap__fake_capture_begin(recap_stream_t stream, recap__capture_mode_t mode) {
  if (!stream) return 0;
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED)
    return 0;
  uint64_t id = 0;
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  fake_capture_t *c;
  if (s && !s->capture && (c = capture_begin_locked(s, mode)) != NULL) id = c->id;
  pthread_mutex_unlock(&fake.lock);
  return id;
}

bool recap__fake_capture_join(recap_stream_t side, recap_stream_t origin) {
  if (!side) return false; /* the legacy stream never captures */
  bool joined = false;
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(side);
  fake_stream_t *o = stream_of(origin);
  if (s && o && o->capture && !s->capture) {
    s->capture = o->capture;
    s->tail = o->tail; /* its first node waits for the origin's work so far */
    joined = true;
  }
  pthread_mutex_unlock(&fake.lock);
  return joined;
}

bool recap__fake_capture_end(recap_stream_t origin) {
  bool ok = false;
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(origin);
  fake_capture_t *c = s ? s->capture : NULL;
  if (c && c->origin != s) {
    /* Ending from a joined stream is cudaErrorStreamCaptureUnmatched, which invalidates the
     * capture; it stays under way until its origin ends it. */
    c->invalidated = true;
  } else if (c) {
    ok = !c->invalidated;
    capture_finish(c, NULL); /* the captured nodes are thrown away */
  }
  pthread_mutex_unlock(&fake.lock);
  return ok;
}

void recap__fake_capture_invalidate(recap_stream_t stream) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  if (s && s->capture) s->capture->invalidated = true;
  pthread_mutex_unlock(&fake.lock);
}

void recap__fake_fail_nth(recap__fake_fault_t kind, uint64_t nth) {
  if ((int)kind < 0 || kind >= RECAP__FAKE_FAULT_KINDS) return;
  pthread_mutex_lock(&fake.lock);
  fake.fail_countdown[kind] = nth;
  pthread_mutex_unlock(&fake.lock);
}

uint64_t recap__fake_calls(recap__fake_fault_t kind) {
  if ((int)kind < 0 || kind >= RECAP__FAKE_FAULT_KINDS) return 0;
  pthread_mutex_lock(&fake.lock);
  uint64_t n = fake.calls[kind];
  pthread_mutex_unlock(&fake.lock);
  return n;
}

size_t recap__fake_bytes_in_use(int device) {
  if (device < 0 || device >= FAKE_MAX_DEVICES) return 0;
  pthread_mutex_lock(&fake.lock);
  size_t n = fake.in_use[device];
  pthread_mutex_unlock(&fake.lock);
  return n;
}

int64_t recap__fake_live_events(void) {
  pthread_mutex_lock(&fake.lock);
  int64_t n = fake.live_events;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

uint64_t recap__fake_graph_launches(void) {
  pthread_mutex_lock(&fake.lock);
  uint64_t n = fake.graph_launches;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

int64_t recap__fake_live_graphs(void) {
  pthread_mutex_lock(&fake.lock);
  int64_t n = fake.live_graphs;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

int64_t recap__fake_live_execs(void) {
  pthread_mutex_lock(&fake.lock);
  int64_t n = fake.live_execs;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

uint64_t recap__fake_rng_state_writes(void) {
  pthread_mutex_lock(&fake.lock);
  uint64_t n = fake_rng_state_writes;
  pthread_mutex_unlock(&fake.lock);
  return n;
}

uint64_t recap__fake_rng_launches(void) {
  pthread_mutex_lock(&fake.lock);
  uint64_t n = fake_rng_launches;
  pthread_mutex_unlock(&fake.lock);
  return n;
}
