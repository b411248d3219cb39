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
 * All state lives in one static struct behind one mutex. What CUDA keeps per thread, the
 * current device and the capture mode of cudaThreadExchangeStreamCaptureMode, is thread-local
 * here too. Error messages are formatted under the lock and recorded after it is released, so
 * that a log callback that calls back into recap cannot deadlock.
 */
#include "device/fake.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Provided by the allocator (src/alloc/): drops all of the allocator's state (pools, cached
 * blocks, statistics, the capture registry) without calling the device, whose memory the fake
 * has just taken back itself. */
void recap__alloc_reset(void);

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
#define FAKE_EVENT_DEAD 0xdeadbeefu

/* ---- objects ---------------------------------------------------------------------------- */

typedef struct fake_capture {
  uint64_t id;
  recap__capture_mode_t mode;
  pthread_t thread; /* the thread that began it, for the thread-local rules */
  bool invalidated;
  struct fake_stream *origin;
  struct fake_capture *next;
} fake_capture_t;

typedef struct fake_stream {
  uint64_t enqueued;
  uint64_t completed;
  fake_capture_t *capture; /* the capture this stream takes part in, or NULL */
  struct fake_stream *next;
} fake_stream_t;

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
    note(&f, RECAP_ERROR_CUDA,
         "cudaEventCreateWithFlags: unknown error (cudaErrorUnknown): fault injected by the fake "
         "device into event creation call %llu",
         (unsigned long long)fake.calls[RECAP__FAKE_FAULT_EVENT_CREATE]);
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaEventDestroy: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not "
         "a live fake event",
         (void *)event);
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaEventRecord: unknown error (cudaErrorUnknown): fault injected by the fake device "
         "into event record call %llu",
         (unsigned long long)fake.calls[RECAP__FAKE_FAULT_EVENT_RECORD]);
  } else if (!event) {
    note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaEventRecord: the event is NULL");
  } else if (!event_valid(event)) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaEventRecord: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not "
         "a live fake event",
         (void *)event);
  } else if (!s) {
    note(&f, RECAP_ERROR_CUDA,
         "cudaEventRecord: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not "
         "a fake stream",
         (void *)stream);
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
    return note(f, RECAP_ERROR_CUDA,
                "%s: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not a live "
                "fake event",
                call, (void *)event);
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaStreamCreateWithFlags: unknown error (cudaErrorUnknown): fault injected by the "
         "fake device into stream creation call %llu",
         (unsigned long long)fake.calls[RECAP__FAKE_FAULT_STREAM_CREATE]);
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaStreamDestroy: invalid resource handle (cudaErrorInvalidResourceHandle): %p is not "
         "a fake stream",
         (void *)stream);
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaStreamSynchronize: invalid resource handle (cudaErrorInvalidResourceHandle): %p is "
         "not a fake stream",
         (void *)stream);
  } else if (s->capture) {
    s->capture->invalidated = true;
    note_capturing_stream(&f, "cudaStreamSynchronize", s, true);
  } else {
    s->completed = s->enqueued;
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
    note(&f, RECAP_ERROR_CUDA,
         "cudaStreamGetCaptureInfo: invalid resource handle (cudaErrorInvalidResourceHandle): %p "
         "is not a fake stream",
         (void *)stream);
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
    .stream_capture_info = fake_stream_capture_info,
    .exchange_capture_mode = fake_exchange_capture_mode,
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
    free(c);
  }
  fake.captures = NULL;
  fake.next_capture_id = 0;
  for (size_t i = 0; i < fake.blocks_cap; i++) free(fake.blocks[i].ptr);
  free(fake.blocks);
  fake.blocks = NULL;
  fake.blocks_cap = 0;
  fake.blocks_count = 0;
  memset(fake.in_use, 0, sizeof fake.in_use);
  memset(&fake.legacy, 0, sizeof fake.legacy);
  memset(fake.calls, 0, sizeof fake.calls);
  memset(fake.fail_countdown, 0, sizeof fake.fail_countdown);
  configure(cfg);
  pthread_mutex_unlock(&fake.lock);

  /* Only the calling thread's per-thread state can be reset; other threads keep theirs. */
  tl_device = 0;
  tl_capture_mode = RECAP__CAPTURE_MODE_GLOBAL;

  recap__device_install(&recap__fake_ops);
  recap__alloc_reset();
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

void recap__fake_stream_enqueue(recap_stream_t stream) {
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  /* Work launched on a capturing stream goes into the graph; it does not run. */
  if (s && !s->capture) s->enqueued++;
  pthread_mutex_unlock(&fake.lock);
}

uint64_t recap__fake_capture_begin(recap_stream_t stream, recap__capture_mode_t mode) {
  if (!stream) return 0;
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED)
    return 0;
  uint64_t id = 0;
  pthread_mutex_lock(&fake.lock);
  fake_stream_t *s = stream_of(stream);
  fake_capture_t *c = NULL;
  if (s && !s->capture && (c = calloc(1, sizeof *c)) != NULL) {
    c->id = id = ++fake.next_capture_id;
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    c->next = fake.captures;
    fake.captures = c;
    s->capture = c;
  }
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
    for (fake_stream_t *t = fake.streams; t; t = t->next)
      if (t->capture == c) t->capture = NULL;
    fake_capture_t **link = &fake.captures;
    while (*link != c) link = &(*link)->next;
    *link = c->next;
    free(c);
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
