/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep.c — pools that sleep and wake (recap/sleep.h; docs/sleep.md).
 *
 * A pool sleeps when every segment it keeps is on CUDA virtual memory (vmm_segment.c): its
 * blocks, free sets and statistics stay as they are, only the physical chunks behind its
 * segments go. Sleep waits for the device, copies the blocks in use to one pinned host buffer
 * (OFFLOAD; the buffer comes from pinned_cache.c, which keeps buffers between sleeps with the
 * option offload_keep_pinned and holds those recap_pinned_reserve pins ahead), unmaps every
 * chunk and releases every handle; wake maps fresh chunks of up to RECAP__VMM_WAKE_CHUNK at the
 * same addresses over what each segment had mapped (the ranges the sleep noted: the holes of
 * free blocks, vmm_segment.c, stay holes), copies the blocks back and hands the buffer back to
 * pinned_cache.c. Every step that can fail
 * before the pool's state changes is undone on failure, so a pool is asleep or awake, never
 * half. Three failures leave a new state instead, each whole: a release after every unmap
 * succeeded (the handle is kept in its segment and released at the wake; until then its memory
 * stays taken); an unmap whose roll-back cannot map everything back (the sleep goes forward and
 * the pool sleeps: an OFFLOAD copy was taken before the unmaps); and a pinned copy that cannot
 * be freed after a restore that succeeded (the pool is awake, the buffer lost, a warning says
 * so). What a failure cannot give back (a chunk whose unmap or release failed during an undo)
 * stays in its segment's chunk list, marked by recap__vmm_chunk_t.held, and the next wake gives
 * it back before it maps anything.
 *
 * While a pool sleeps, the allocator refuses to hand out its blocks (request_begin in
 * allocator.c) and to route a capture to it (pool.c), recap_empty_cache leaves it alone, and the
 * graph layer asks recap__pool_replay_check before each replay once anything sleeps
 * (recap__alloc_sleeping, read without the lock). Every function here takes the allocator's one
 * lock itself, except the two the allocator calls with it held.
 *
 * This file orders the steps and keeps the pools' states; the pinned copy is sleep_offload.c's,
 * the unmapping, releasing and mapping of the segments' chunks sleep_chunks.c's.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_lock.h"
#include "alloc/allocator.h"
#include "alloc/blocks.h"
#include "alloc/cache_release.h"
#include "alloc/events.h"
#include "alloc/pinned_cache.h"
#include "alloc/sleep.h"
#include "alloc/sleep_chunks.h"
#include "alloc/sleep_offload.h"
#include "alloc/vmm_segment.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"

_Atomic int recap__alloc_sleeping;

/* A failure while undoing a failure: the caller's error stays, this one is logged. */
#define LOG_ERROR(...) recap__log(RECAP_LOG_LEVEL_ERROR, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------
 * Names and lookups
 * ---------------------------------------------------------------------------------------- */

const char *recap_pool_state_name(recap_pool_state_t state) {
  return recap__pool_state_text((int)state);
}

static const char *pool_kind(const recap__pool_t *pool) {
  return recap_pool_is_default(pool->id) ? " (the default pool)" : "";
}

static recap__pool_t *find_pool(recap__device_state_t *d, recap_pool_id_t id) {
  if (!d) return NULL;
  if (recap_pool_is_default(id)) return &d->default_pool;
  for (recap__pool_t *p = d->private_pools; p; p = p->next)
    if (recap__pool_id_equal(p->id, id)) return p;
  return NULL;
}

static recap_status_t unknown_pool(const char *call, recap_pool_id_t id, int device) {
  return recap__error(RECAP_ERROR_NOT_FOUND,
                      "%s: pool {%" PRIu64 ",%" PRIu64
                      "} does not exist on device %d (never used, or its memory went back to "
                      "the driver); pass a pool a graph or recap_pool_route_begin made on the "
                      "current device",
                      call, id.a, id.b, device);
}

static recap_status_t capture_refusal(const char *call, int device) {
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: a capture is under way on device %d; sleep and wake wait for the "
                      "device and copy on it, which would invalidate the capture. Call it "
                      "before the capture begins or after it ends",
                      call, device);
}

/* The option offload_keep_pinned at 0 frees the kept pinned buffers at the next sleep or wake
 * (pinned_cache.c), unless a capture is under way: cudaFreeHost would invalidate it. */
static void apply_keep_option(const char *call) {
  int capturing;
  if (!recap__alloc_capture_under_way(&capturing)) recap__pinned_apply_option(call);
}

static bool is_asleep(const recap__pool_t *pool) { return pool->state != RECAP_POOL_AWAKE; }

recap_status_t recap__pool_replay_check(int device, recap_pool_id_t id) {
  if (device < 0 || device >= RECAP__MAX_DEVICES) return RECAP_SUCCESS;
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  const recap__pool_t *pool = find_pool(d, id);
  if (d && is_asleep(&d->default_pool)) {
    s = recap__error(RECAP_ERROR_POOL_ASLEEP,
                     "recap_graph_replay: the default pool {0,0} of device %d is %s, and a "
                     "graph may read blocks of it; nothing was launched. Wake it "
                     "(recap_pool_wake of {0,0}, or recap_wake) before replaying",
                     device, recap_pool_state_name((recap_pool_state_t)d->default_pool.state));
  } else if (pool && is_asleep(pool)) {
    s = recap__error(RECAP_ERROR_POOL_ASLEEP,
                     "recap_graph_replay: the graph's pool {%" PRIu64 ",%" PRIu64
                     "} on device %d is %s; nothing was launched. Wake it (recap_pool_wake, "
                     "or recap_wake) before replaying",
                     id.a, id.b, device, recap_pool_state_name((recap_pool_state_t)pool->state));
  }
  recap__alloc_unlock();
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Sleep and wake of one pool (lock held, the pool's device current)
 * ---------------------------------------------------------------------------------------- */

/* The bytes mapped into pool's segments (their reserved bytes). */
static int64_t vmm_bytes(const recap__pool_t *pool) {
  int64_t bytes = 0;
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    if (seg->vmm) bytes += (int64_t)(seg->size - seg->unmapped);
  return bytes;
}

static recap_status_t sleep_pool(recap__device_state_t *d, recap__pool_t *pool,
                                 recap_sleep_mode_t mode, const char *call) {
  if (is_asleep(pool))
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: pool {%" PRIu64 ",%" PRIu64 "}%s is %s already; wake it first", call,
                        pool->id.a, pool->id.b, pool_kind(pool),
                        recap_pool_state_name((recap_pool_state_t)pool->state));
  int capturing;
  if (recap__alloc_capture_under_way(&capturing)) return capture_refusal(call, capturing);
  /* Free classic segments go back now: what stays of cudaMalloc could not sleep. */
  RECAP__CHECK(recap__alloc_pool_release_free(d, pool));
  int classic = 0;
  size_t classic_bytes = 0;
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    if (!seg->vmm) {
      classic++;
      classic_bytes += seg->size;
    }
  if (classic)
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: pool {%" PRIu64 ",%" PRIu64
                        "}%s keeps %d segment(s) of %zu bytes from cudaMalloc with blocks in "
                        "use; only segments on virtual memory can sleep. Set the option "
                        "expandable_segments to 1 before the pool's first allocation, or free "
                        "its blocks first",
                        call, pool->id.a, pool->id.b, pool_kind(pool), classic, classic_bytes);
  /* A replay still running may read or write the pool. */
  recap_status_t s = recap__device()->device_synchronize();
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    return recap__error(s,
                        "%s: waiting for device %d failed: %s; pool {%" PRIu64 ",%" PRIu64
                        "} stays awake",
                        call, d->device, cause.message, pool->id.a, pool->id.b);
  }
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    if (!recap__sleep_runs_take(seg))
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "%s: out of host memory for the chunk ranges of pool {%" PRIu64
                          ",%" PRIu64 "}; it stays awake",
                          call, pool->id.a, pool->id.b);
  recap__offload_t *off = NULL;
  if (mode == RECAP_SLEEP_OFFLOAD) RECAP__CHECK(recap__sleep_offload_take(pool, call, &off));
  bool forward;
  s = recap__sleep_unmap_all(pool, mode == RECAP_SLEEP_OFFLOAD, call, &forward);
  if (s != RECAP_SUCCESS && !forward) {
    recap__sleep_offload_drop(off);
    return s;
  }
  /* Every chunk is unmapped (or, going forward after a failed roll-back, every chunk that could
   * be): the pool sleeps from here on, whatever the releases say. */
  int failed = 0;
  size_t failed_bytes = 0;
  recap__saved_error_t first, unmap_error;
  if (forward) recap__error_save(&unmap_error);
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    recap__sleep_release_handles(seg, &failed, &failed_bytes, &first);
  pool->state =
      mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
  pool->sleeping_bytes = vmm_bytes(pool);
  pool->offload = off;
  atomic_fetch_add(&recap__alloc_sleeping, 1);
  if (forward) {
    if (failed)
      LOG_ERROR("%s: %d physical chunk(s) of pool {%" PRIu64 ",%" PRIu64
                "} (%zu bytes) could not be released after its sleep went forward (%s); their "
                "memory stays taken until recap_pool_wake releases them",
                call, failed, pool->id.a, pool->id.b, failed_bytes, first.message);
    return recap__error_restore(&unmap_error);
  }
  if (failed)
    return recap__error(first.status,
                        "%s: pool {%" PRIu64 ",%" PRIu64
                        "} is asleep, but %d of its physical chunks (%zu bytes) could not be "
                        "released (%s); their memory stays taken until recap_pool_wake "
                        "releases them",
                        call, pool->id.a, pool->id.b, failed, failed_bytes, first.message);
  return RECAP_SUCCESS;
}

static recap_status_t wake_pool(recap__pool_t *pool, int device, const char *call) {
  if (!is_asleep(pool)) return RECAP_SUCCESS;
  int capturing;
  if (recap__alloc_capture_under_way(&capturing)) return capture_refusal(call, capturing);
  const recap__device_ops_t *dev = recap__device();
  /* What a failure left in the chunk lists first: chunks still mapped (an unmap failed) are
   * unmapped, since the wake maps over their addresses, and handles not released are released,
   * since their memory is what the wake needs. */
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    while (seg->chunk_count > 0) {
      recap__vmm_chunk_t *c = &seg->chunks[seg->chunk_count - 1];
      bool mapped = !c->held;
      recap_status_t s = mapped ? dev->vmm_unmap(seg->base + c->offset, c->size) : RECAP_SUCCESS;
      if (s == RECAP_SUCCESS) {
        c->held = true;
        s = dev->vmm_release(c->handle);
      }
      if (s != RECAP_SUCCESS) {
        recap__saved_error_t cause;
        recap__error_save(&cause);
        return recap__error(s,
                            "%s: pool {%" PRIu64 ",%" PRIu64
                            "} stays asleep: a physical chunk (%zu bytes at %p) that an earlier "
                            "failure left %s could not be %s now either (%s)",
                            call, pool->id.a, pool->id.b, c->size, (void *)(seg->base + c->offset),
                            mapped && !c->held ? "mapped" : "unreleased",
                            mapped && !c->held ? "unmapped" : "released", cause.message);
      }
      seg->chunk_count--;
    }
  }
  int64_t needed = 0;
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    needed += (int64_t)(seg->size - seg->unmapped);
    if (!recap__sleep_reserve_chunks(seg, recap__sleep_wake_chunk_count(seg)))
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "%s: out of host memory for the chunk list of pool {%" PRIu64 ",%" PRIu64
                          "}; it stays asleep",
                          call, pool->id.a, pool->id.b);
  }
  recap_status_t s = RECAP_SUCCESS;
  size_t asked = 0;
  for (recap__segment_t *seg = pool->segments; seg && s == RECAP_SUCCESS; seg = seg->next) {
    for (int i = 0; i < seg->asleep_run_count && s == RECAP_SUCCESS; i++) {
      for (size_t offset = seg->asleep_runs[i].offset, end = offset + seg->asleep_runs[i].size;
           offset < end && s == RECAP_SUCCESS;) {
        size_t size = end - offset < RECAP__VMM_WAKE_CHUNK ? end - offset : RECAP__VMM_WAKE_CHUNK;
        asked = size;
        s = recap__sleep_map_fresh(seg, offset, size);
        offset += size;
      }
    }
  }
  if (s != RECAP_SUCCESS) {
    int left;
    size_t left_bytes;
    recap__sleep_wake_undo(pool, &left, &left_bytes);
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (left)
      return recap__error(s,
                          "%s: mapping a chunk of %zu bytes into pool {%" PRIu64 ",%" PRIu64
                          "} failed: %s. The pool stays asleep; %d chunk(s) of this wake (%zu "
                          "bytes) could not be given back (the log says why), and the next wake "
                          "gives them back first",
                          call, asked, pool->id.a, pool->id.b, saved.message, left, left_bytes);
    if (s != RECAP_ERROR_OUT_OF_MEMORY)
      return recap__error(s,
                          "%s: mapping a chunk of %zu bytes into pool {%" PRIu64 ",%" PRIu64
                          "} failed: %s. Nothing of it is mapped; the pool stays asleep",
                          call, asked, pool->id.a, pool->id.b, saved.message);
    size_t free_bytes = 0, total = 0;
    if (dev->mem_get_info(&free_bytes, &total) != RECAP_SUCCESS) free_bytes = total = 0;
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: out of device memory on device %d: waking pool {%" PRIu64 ",%" PRIu64
                        "} needs %" PRId64
                        " bytes (its chunk of %zu bytes could not be had: %s), and the device "
                        "has %zu bytes free of %zu. Nothing of it is mapped; the pool stays "
                        "asleep. Free device memory and call %s again",
                        call, device, pool->id.a, pool->id.b, needed, asked, saved.message,
                        free_bytes, total, call);
  }
  recap__offload_t *off = pool->offload;
  if (off && off->bytes) s = recap__sleep_copy_back(pool, off);
  if (s != RECAP_SUCCESS) {
    /* The copy is still whole in host memory: back to sleep as before. */
    int left;
    size_t left_bytes;
    recap__sleep_wake_undo(pool, &left, &left_bytes);
    recap__saved_error_t cause;
    recap__error_save(&cause);
    if (left)
      return recap__error(s,
                          "%s: restoring the copy of pool {%" PRIu64 ",%" PRIu64
                          "} from pinned host memory failed: %s. The pool stays asleep with its "
                          "copy; %d chunk(s) of this wake (%zu bytes) could not be given back "
                          "(the log says why), and the next wake gives them back first",
                          call, pool->id.a, pool->id.b, cause.message, left, left_bytes);
    return recap__error(s,
                        "%s: restoring the copy of pool {%" PRIu64 ",%" PRIu64
                        "} from pinned host memory failed: %s. Nothing of it is mapped; the "
                        "pool stays asleep with its copy",
                        call, pool->id.a, pool->id.b, cause.message);
  }
  /* The pool is restored: a pinned buffer that cannot be freed is lost, not the wake. */
  if (off && off->host) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (recap__pinned_give(off->host, off->host_bytes) != RECAP_SUCCESS)
      RECAP__WARN("%s: pool {%" PRIu64 ",%" PRIu64
                  "} is awake, but its pinned host copy (%zu bytes) could not be freed: %s",
                  call, pool->id.a, pool->id.b, off->host_bytes, recap_last_error());
    recap__error_restore(&saved);
  }
  recap__host_free(off);
  pool->offload = NULL;
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    recap__host_free(seg->asleep_runs);
    seg->asleep_runs = NULL;
    seg->asleep_run_count = 0;
  }
  pool->state = RECAP_POOL_AWAKE;
  pool->sleeping_bytes = 0;
  atomic_fetch_sub(&recap__alloc_sleeping, 1);
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * The public calls
 * ---------------------------------------------------------------------------------------- */

static bool mode_valid(recap_sleep_mode_t mode) {
  return mode == RECAP_SLEEP_DISCARD || mode == RECAP_SLEEP_OFFLOAD;
}

#define MODE_ARG(call, mode)                                                           \
  RECAP__ARG(mode_valid(mode),                                                         \
             call                                                                      \
             ": mode %d is not a recap_sleep_mode_t; pass RECAP_SLEEP_DISCARD (0) or " \
             "RECAP_SLEEP_OFFLOAD (1)",                                                \
             (int)(mode))

recap_status_t recap_pool_sleep(recap_pool_id_t id, recap_sleep_mode_t mode) {
  MODE_ARG("recap_pool_sleep", mode);
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  recap_status_t s;
  recap__alloc_lock();
  recap__alloc_settle();
  apply_keep_option("recap_pool_sleep");
  /* The default pool of a device recap has not used yet can sleep too (it is empty). */
  recap__device_state_t *d =
      recap_pool_is_default(id) ? recap__alloc_device_state(device) : recap__alloc.devices[device];
  recap__pool_t *pool = find_pool(d, id);
  if (!d && recap_pool_is_default(id))
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_pool_sleep: out of host memory");
  else if (!pool)
    s = unknown_pool("recap_pool_sleep", id, device);
  else
    s = sleep_pool(d, pool, mode, "recap_pool_sleep");
  recap__alloc_unlock();
  return s;
}

recap_status_t recap_pool_wake(recap_pool_id_t id) {
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  apply_keep_option("recap_pool_wake");
  recap__device_state_t *d = recap__alloc.devices[device];
  recap__pool_t *pool = find_pool(d, id);
  if (!pool && !recap_pool_is_default(id))
    s = unknown_pool("recap_pool_wake", id, device);
  else if (pool)
    s = wake_pool(pool, device, "recap_pool_wake");
  recap__alloc_unlock();
  return s;
}

recap_status_t recap_pool_state(recap_pool_id_t id, recap_pool_state_t *state) {
  RECAP__ARG(state != NULL, "recap_pool_state: state is NULL");
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  const recap__pool_t *pool = find_pool(recap__alloc.devices[device], id);
  if (pool)
    *state = (recap_pool_state_t)pool->state;
  else if (recap_pool_is_default(id))
    *state = RECAP_POOL_AWAKE;
  else
    s = unknown_pool("recap_pool_state", id, device);
  recap__alloc_unlock();
  return s;
}

/* Make device current for the device calls of its pools; *switched says whether to switch
 * back to previous. */
static recap_status_t enter_device(int device, int previous, bool *switched) {
  *switched = false;
  if (device == previous) return RECAP_SUCCESS;
  RECAP__CHECK(recap__device()->set_device(device));
  *switched = true;
  return RECAP_SUCCESS;
}

static void leave_device(int previous, bool switched) {
  if (switched) (void)recap__device()->set_device(previous);
}

/* The pools of every device, in one list: the default pool first, then the private ones. */
static size_t pool_count(void) {
  size_t n = 0;
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    const recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    n++;
    for (const recap__pool_t *p = d->private_pools; p; p = p->next) n++;
  }
  return n;
}

/* Wake the n pools of list (rolling back recap_sleep): a failure is logged, the caller's
 * error stays. */
static void wake_list(recap__pool_t **list, const int *devices, size_t n, int previous) {
  recap__saved_error_t saved;
  recap__error_save(&saved);
  for (size_t k = 0; k < n; k++) {
    bool switched;
    recap_status_t s = enter_device(devices[k], previous, &switched);
    if (s == RECAP_SUCCESS) s = wake_pool(list[k], devices[k], "recap_sleep");
    leave_device(previous, switched);
    if (s != RECAP_SUCCESS)
      LOG_ERROR("recap_sleep: pool {%" PRIu64 ",%" PRIu64
                "} of device %d could not be woken after a failure (%s); it stays asleep",
                list[k]->id.a, list[k]->id.b, devices[k], recap_last_error());
  }
  recap__error_restore(&saved);
}

recap_status_t recap_sleep(recap_sleep_mode_t mode) {
  MODE_ARG("recap_sleep", mode);
  int previous;
  RECAP__CHECK(recap__device()->get_device(&previous));
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle();
  int capturing;
  size_t total = pool_count();
  recap__pool_t **slept = NULL;
  int *devices = NULL;
  size_t n = 0;
  if (recap__alloc_capture_under_way(&capturing)) {
    s = capture_refusal("recap_sleep", capturing);
    goto out;
  }
  recap__pinned_apply_option("recap_sleep");
  slept = recap__host_calloc(total ? total : 1, sizeof *slept);
  devices = recap__host_calloc(total ? total : 1, sizeof *devices);
  if (!slept || !devices) {
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_sleep: out of host memory");
    goto out;
  }
  for (int i = 0; i < RECAP__MAX_DEVICES && s == RECAP_SUCCESS; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    bool switched;
    s = enter_device(i, previous, &switched);
    for (recap__pool_t *p = &d->default_pool; p && s == RECAP_SUCCESS;
         p = p == &d->default_pool ? d->private_pools : p->next) {
      if (is_asleep(p)) continue;
      s = sleep_pool(d, p, mode, "recap_sleep");
      /* A release that failed, or a roll-back that failed, leaves the pool asleep: the
       * roll-back of this call wakes it too. */
      if (is_asleep(p)) {
        slept[n] = p;
        devices[n++] = i;
      }
    }
    leave_device(previous, switched);
  }
  if (s != RECAP_SUCCESS) wake_list(slept, devices, n, previous);
out:
  recap__alloc_unlock();
  recap__host_free(slept);
  recap__host_free(devices);
  return s;
}

recap_status_t recap_pinned_reserve(size_t bytes) {
  if (bytes == 0) return RECAP_SUCCESS;
  recap_status_t s;
  int capturing;
  recap__alloc_lock();
  if (recap__alloc_capture_under_way(&capturing))
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "recap_pinned_reserve: a capture is under way on device %d; pinning host "
                     "memory (cudaHostAlloc) now could invalidate it. Call it before the "
                     "capture begins or after it ends",
                     capturing);
  else
    s = recap__pinned_reserve(bytes, "recap_pinned_reserve");
  recap__alloc_unlock();
  return s;
}

recap_status_t recap_wake(void) {
  int previous;
  RECAP__CHECK(recap__device()->get_device(&previous));
  recap_status_t first = RECAP_SUCCESS;
  recap__saved_error_t saved;
  recap__alloc_lock();
  recap__alloc_settle();
  apply_keep_option("recap_wake");
  for (int i = 0; i < RECAP__MAX_DEVICES; i++) {
    recap__device_state_t *d = recap__alloc.devices[i];
    if (!d) continue;
    bool switched;
    recap_status_t s = enter_device(i, previous, &switched);
    for (recap__pool_t *p = &d->default_pool; p && s == RECAP_SUCCESS;
         p = p == &d->default_pool ? d->private_pools : p->next) {
      recap_status_t w = wake_pool(p, i, "recap_wake");
      if (w != RECAP_SUCCESS && first == RECAP_SUCCESS) {
        first = w;
        recap__error_save(&saved);
      }
    }
    leave_device(previous, switched);
    if (s != RECAP_SUCCESS && first == RECAP_SUCCESS) {
      first = s;
      recap__error_save(&saved);
    }
  }
  recap__alloc_unlock();
  if (first != RECAP_SUCCESS) recap__error_restore(&saved);
  return first;
}
