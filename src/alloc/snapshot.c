/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot.c — the allocator's state as JSON: one walk over devices, pools, segments and blocks.
 *
 * Shape: {"devices":[{"device":0,"stats":{...},"pools":[{"id":[a,b],"references":n,
 * "routed":bool,"reserved_bytes":n,"allocated_bytes":n,"graphs":n,"exec_bytes":n,"nodes":n,
 * "capture_peak_bytes":n,"capture_peak_max_bytes":n,"budget_bytes":n,"budget_refusals":n,
 * "segments":[{"address":"0x..","size":n,"small":bool,"stream":"0x..",
 * "blocks":[{"address":"0x..","size":n,"requested":n,"state":"allocated"|"free"|
 * "pending_events"|"deferred"}]}]}]}]}
 * The pool's accounting fields are recap_pool_memory's (recap/memory.h), with its rules.
 */
#include <stdlib.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "core/json.h"

static const char *block_state(const recap__block_t *b) {
  if (b->allocated) return "allocated";
  if (b->deferred) return "deferred";
  if (b->event_count) return "pending_events";
  return "free";
}

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

/* recap_pool_memory's view of the pool (accounting.c gives the same figures). */
static void write_accounting(recap__json_t *j, const recap__pool_t *pool, bool is_default) {
  recap__json_key(j, "graphs");
  recap__json_int(j, pool->graphs);
  recap__json_key(j, "exec_bytes");
  recap__json_int(j, pool->exec_bytes);
  recap__json_key(j, "nodes");
  recap__json_int(j, pool->nodes);
  recap__json_key(j, "capture_peak_bytes");
  recap__json_int(j, recap__pool_capture_peak(pool, is_default));
  recap__json_key(j, "capture_peak_max_bytes");
  recap__json_int(j, recap__pool_capture_peak_max(pool, is_default));
  recap__json_key(j, "budget_bytes");
  recap__json_uint(j, pool->routed ? pool->budget : 0);
  recap__json_key(j, "budget_refusals");
  recap__json_uint(j, pool->budget_refusals);
}

static void write_pool(recap__json_t *j, const recap__pool_t *pool, bool is_default) {
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
  write_accounting(j, pool, is_default);
  recap__json_key(j, "segments");
  recap__json_array_begin(j);
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    recap__json_object_begin(j);
    recap__json_key(j, "address");
    recap__json_pointer(j, seg->base);
    recap__json_key(j, "size");
    recap__json_uint(j, seg->size);
    recap__json_key(j, "small");
    recap__json_bool(j, seg->small);
    recap__json_key(j, "stream");
    recap__json_pointer(j, seg->stream);
    recap__json_key(j, "blocks");
    recap__json_array_begin(j);
    for (const recap__block_t *b = seg->head; b; b = b->next) {
      /* The front cache's block is shown as the free block it stands for, merged with its
       * rest: the snapshot is the same whether the cache holds it or not. */
      const recap__front_t *f = &recap__alloc.front;
      const char *start = b->ptr;
      size_t size = b->size;
      if (b == f->block) {
        size = recap__front_merged_size(f);
        if (f->rest) b = f->rest; /* free too; the walk goes on after it */
      }
      recap__json_object_begin(j);
      recap__json_key(j, "address");
      recap__json_pointer(j, start);
      recap__json_key(j, "size");
      recap__json_uint(j, size);
      recap__json_key(j, "requested");
      recap__json_uint(j, b->requested);
      recap__json_key(j, "state");
      recap__json_string(j, block_state(b));
      recap__json_object_end(j);
    }
    recap__json_array_end(j);
    recap__json_object_end(j);
  }
  recap__json_array_end(j);
  recap__json_object_end(j);
}

recap_status_t recap_memory_snapshot_json(int device, char **json) {
  RECAP__ARG(json != NULL, "recap_memory_snapshot_json: json is NULL");
  *json = NULL;
  RECAP__ARG(device >= -1 && device < RECAP__MAX_DEVICES,
             "recap_memory_snapshot_json: device %d is out of range", device);
  if (device == -1) RECAP__CHECK(recap__device()->get_device(&device));
  recap__json_t j;
  recap__json_init(&j);
  recap__json_object_begin(&j);
  recap__json_key(&j, "devices");
  recap__json_array_begin(&j);
  recap__alloc_lock();
  const recap__device_state_t *d =
      device >= 0 && device < RECAP__MAX_DEVICES ? recap__alloc.devices[device] : NULL;
  if (d) {
    recap__json_object_begin(&j);
    recap__json_key(&j, "device");
    recap__json_int(&j, d->device);
    write_stats(&j, &d->stats);
    recap__json_key(&j, "pools");
    recap__json_array_begin(&j);
    write_pool(&j, &d->default_pool, true);
    for (const recap__pool_t *p = d->private_pools; p; p = p->next) write_pool(&j, p, false);
    recap__json_array_end(&j);
    recap__json_object_end(&j);
  }
  recap__alloc_unlock();
  recap__json_array_end(&j);
  recap__json_object_end(&j);
  return recap__json_finish(&j, json);
}

void recap_string_free(char *s) { recap__host_free(s); }
