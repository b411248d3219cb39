/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot.c — the allocator's state as JSON: the model of memory_model.h (one walk over devices,
 * pools, segments and blocks, under the lock) written out after the lock is released.
 *
 * Shape: {"devices":[{"device":0,"stats":{...},"pools":[{"id":[a,b],"references":n,
 * "routed":bool,"reserved_bytes":n,"allocated_bytes":n,"graphs":n,"exec_bytes":n,"nodes":n,
 * "capture_peak_bytes":n,"capture_peak_max_bytes":n,"budget_bytes":n,"budget_refusals":n,
 * "state":"awake"|"asleep (discarded)"|"asleep (offloaded)","sleeping_bytes":n,
 * "vmm_segments":n,
 * "segments":[{"address":"0x..","size":n,"small":bool,"stream":"0x..","vmm":bool,
 * "va_bytes":n,"chunks":n,"unmapped_bytes":n,
 * "blocks":[{"address":"0x..","size":n,"requested":n,"state":"allocated"|"free"|
 * "pending_events"|"deferred"}]}]}]}],"pinned_kept_buffers":n,"pinned_kept_bytes":n}
 * The pool's accounting fields are recap_pool_memory's (recap/memory.h), with its rules. A
 * segment's "size" is what its blocks tile (for a VMM segment, the mapped extent, which stays
 * while the pool sleeps); "va_bytes" is the virtual range a VMM segment reserves and "chunks" the
 * physical chunks mapped into it now, "unmapped_bytes" the bytes of its free blocks whose chunks
 * went back (holes; size - unmapped_bytes is what it reserves), all 0 for a classic segment.
 * "pinned_kept_buffers" and
 * "pinned_kept_bytes" are the process's pinned host buffers kept for the next OFFLOAD sleep
 * (the option offload_keep_pinned), whatever device the snapshot is of.
 */
#include "alloc/memory_model.h"
#include "alloc/sleep.h"
#include "alloc/state.h"
#include "core/error.h"
#include "core/host.h"
#include "core/json.h"
#include "device/device.h"

static void write_stat(recap__json_t *j, const char *name, const recap_stat_t *array) {
  static const char *const kinds[RECAP_STAT_KINDS] = {"all", "small", "large"};
  recap__json_key(j, name);
  recap__json_object_begin(j);
  for (int k = 0; k < RECAP_STAT_KINDS; k++) {
    recap__json_key(j, kinds[k]);
    recap__json_object_begin(j);
    recap__json_key(j, "current");
    recap__json_int(j, array[k].current);
    recap__json_key(j, "peak");
    recap__json_int(j, array[k].peak);
    recap__json_key(j, "allocated");
    recap__json_int(j, array[k].allocated);
    recap__json_key(j, "freed");
    recap__json_int(j, array[k].freed);
    recap__json_object_end(j);
  }
  recap__json_object_end(j);
}

static void write_stats(recap__json_t *j, const recap_memory_stats_t *st) {
  recap__json_key(j, "stats");
  recap__json_object_begin(j);
  write_stat(j, "allocation", st->allocation);
  write_stat(j, "segment", st->segment);
  write_stat(j, "active", st->active);
  write_stat(j, "inactive_split", st->inactive_split);
  write_stat(j, "allocated_bytes", st->allocated_bytes);
  write_stat(j, "reserved_bytes", st->reserved_bytes);
  write_stat(j, "active_bytes", st->active_bytes);
  write_stat(j, "inactive_split_bytes", st->inactive_split_bytes);
  write_stat(j, "requested_bytes", st->requested_bytes);
  recap__json_key(j, "num_alloc_retries");
  recap__json_int(j, st->num_alloc_retries);
  recap__json_key(j, "num_ooms");
  recap__json_int(j, st->num_ooms);
  recap__json_key(j, "num_device_alloc");
  recap__json_int(j, st->num_device_alloc);
  recap__json_key(j, "num_device_free");
  recap__json_int(j, st->num_device_free);
  recap__json_object_end(j);
}

static void write_blocks(recap__json_t *j, const recap__memory_model_t *m,
                         const recap__model_segment_t *seg) {
  recap__json_key(j, "blocks");
  recap__json_array_begin(j);
  for (size_t i = seg->first_block; i < seg->first_block + seg->blocks; i++) {
    const recap__model_block_t *b = &m->blocks[i];
    recap__json_object_begin(j);
    recap__json_key(j, "address");
    recap__json_pointer(j, b->address);
    recap__json_key(j, "size");
    recap__json_uint(j, b->size);
    recap__json_key(j, "requested");
    recap__json_uint(j, b->requested);
    recap__json_key(j, "state");
    recap__json_string(j, recap__model_block_state_name(b->state));
    recap__json_object_end(j);
  }
  recap__json_array_end(j);
}

static void write_segments(recap__json_t *j, const recap__memory_model_t *m,
                           const recap__model_pool_t *pool) {
  recap__json_key(j, "segments");
  recap__json_array_begin(j);
  for (size_t i = pool->first_segment; i < pool->first_segment + pool->segments; i++) {
    const recap__model_segment_t *seg = &m->segments[i];
    recap__json_object_begin(j);
    recap__json_key(j, "address");
    recap__json_pointer(j, seg->address);
    recap__json_key(j, "size");
    recap__json_uint(j, seg->size);
    recap__json_key(j, "small");
    recap__json_bool(j, seg->small);
    recap__json_key(j, "stream");
    recap__json_pointer(j, seg->stream);
    recap__json_key(j, "vmm");
    recap__json_bool(j, seg->vmm);
    recap__json_key(j, "va_bytes");
    recap__json_uint(j, seg->va_bytes);
    recap__json_key(j, "chunks");
    recap__json_int(j, seg->chunks);
    recap__json_key(j, "unmapped_bytes");
    recap__json_uint(j, seg->unmapped);
    write_blocks(j, m, seg);
    recap__json_object_end(j);
  }
  recap__json_array_end(j);
}

static void write_pool(recap__json_t *j, const recap__memory_model_t *m,
                       const recap__model_pool_t *pool) {
  recap__json_object_begin(j);
  recap__json_key(j, "id");
  recap__json_array_begin(j);
  recap__json_uint(j, pool->id.a);
  recap__json_uint(j, pool->id.b);
  recap__json_array_end(j);
  recap__json_key(j, "references");
  recap__json_int(j, pool->references);
  recap__json_key(j, "routed");
  recap__json_bool(j, pool->routed);
  recap__json_key(j, "reserved_bytes");
  recap__json_int(j, pool->reserved_bytes);
  recap__json_key(j, "allocated_bytes");
  recap__json_int(j, pool->allocated_bytes);
  /* recap_pool_memory's view of the pool (accounting.c gives the same figures). */
  recap__json_key(j, "graphs");
  recap__json_int(j, pool->graphs);
  recap__json_key(j, "exec_bytes");
  recap__json_int(j, pool->exec_bytes);
  recap__json_key(j, "nodes");
  recap__json_int(j, pool->nodes);
  recap__json_key(j, "capture_peak_bytes");
  recap__json_int(j, pool->capture_peak);
  recap__json_key(j, "capture_peak_max_bytes");
  recap__json_int(j, pool->capture_peak_max);
  recap__json_key(j, "budget_bytes");
  recap__json_uint(j, pool->budget);
  recap__json_key(j, "budget_refusals");
  recap__json_uint(j, pool->budget_refusals);
  recap__json_key(j, "state");
  recap__json_string(j, recap__pool_state_text(pool->state));
  recap__json_key(j, "sleeping_bytes");
  recap__json_int(j, pool->sleeping_bytes);
  recap__json_key(j, "vmm_segments");
  recap__json_uint(j, pool->vmm_segments);
  write_segments(j, m, pool);
  recap__json_object_end(j);
}

recap_status_t recap_memory_snapshot_json(int device, char **json) {
  RECAP__ARG(json != NULL, "recap_memory_snapshot_json: json is NULL");
  *json = NULL;
  RECAP__ARG(device >= -1 && device < RECAP__MAX_DEVICES,
             "recap_memory_snapshot_json: device %d is out of range", device);
  if (device == -1) RECAP__CHECK(recap__device()->get_device(&device));
  /* A current device recap cannot handle has no state: an empty list. */
  bool known = device >= 0 && device < RECAP__MAX_DEVICES;
  recap__memory_model_t m;
  recap_status_t s = recap__memory_model_take(&m, known ? device : 0, known ? device : -1,
                                              "recap_memory_snapshot_json");
  if (s != RECAP_SUCCESS) {
    recap__memory_model_free(&m);
    return s;
  }
  recap__json_t j;
  recap__json_init(&j);
  recap__json_object_begin(&j);
  recap__json_key(&j, "devices");
  recap__json_array_begin(&j);
  for (size_t d = 0; d < m.device_count; d++) {
    const recap__model_device_t *dev = &m.devices[d];
    recap__json_object_begin(&j);
    recap__json_key(&j, "device");
    recap__json_int(&j, dev->device);
    write_stats(&j, &dev->stats);
    recap__json_key(&j, "pools");
    recap__json_array_begin(&j);
    for (size_t p = dev->first_pool; p < dev->first_pool + dev->pools; p++)
      write_pool(&j, &m, &m.pools[p]);
    recap__json_array_end(&j);
    recap__json_object_end(&j);
  }
  recap__json_array_end(&j);
  recap__json_key(&j, "pinned_kept_buffers");
  recap__json_uint(&j, m.pinned_kept_buffers);
  recap__json_key(&j, "pinned_kept_bytes");
  recap__json_uint(&j, m.pinned_kept_bytes);
  recap__json_object_end(&j);
  recap__memory_model_free(&m);
  return recap__json_finish(&j, json);
}
