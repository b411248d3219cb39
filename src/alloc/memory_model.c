/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_model.c — the walk of memory_model.h: devices, pools, segments and blocks copied under
 * the allocator's lock.
 */
#include "alloc/memory_model.h"

#include <string.h>

#include "alloc/accounting.h"
#include "alloc/alloc_lock.h"
#include "alloc/memory_model.h"
#include "alloc/pinned_cache.h"
#include "core/error.h"
#include "core/host.h"

const char *recap__model_block_state_name(recap__model_block_state_t state) {
  static const char *const names[] = {"allocated", "free", "pending_events", "deferred"};
  return names[state];
}

/* A zeroed element at the end of the array whose pointer is at array_pointer (count elements of
 * size bytes, room for *cap), or NULL when the host has no memory for more. The pointer is read
 * and written through memcpy: it is one of the model's four typed pointers. */
static void *append(void *array_pointer, size_t *count, size_t *cap, size_t size) {
  char *array;
  memcpy(&array, array_pointer, sizeof array);
  if (*count == *cap) {
    size_t grown_cap = *cap ? *cap * 2 : 16;
    char *grown = recap__host_realloc(array, grown_cap * size);
    if (!grown) return NULL;
    array = grown;
    memcpy(array_pointer, &array, sizeof array);
    *cap = grown_cap;
  }
  void *slot = array + (*count)++ * size;
  memset(slot, 0, size);
  return slot;
}

static recap__model_block_state_t block_state(const recap__block_t *b) {
  if (b->allocated) return RECAP__MODEL_BLOCK_ALLOCATED;
  if (b->deferred) return RECAP__MODEL_BLOCK_DEFERRED;
  if (b->event_count) return RECAP__MODEL_BLOCK_PENDING_EVENTS;
  return RECAP__MODEL_BLOCK_FREE;
}

static bool take_segment(recap__memory_model_t *m, const recap__segment_t *seg) {
  recap__model_segment_t *s = append(&m->segments, &m->segment_count, &m->segment_cap, sizeof *s);
  if (!s) return false;
  s->address = seg->base;
  s->size = seg->size;
  s->small = seg->small;
  s->vmm = seg->vmm;
  s->stream = seg->stream;
  s->va_bytes = seg->vmm ? seg->va_size : 0;
  s->chunks = seg->vmm ? seg->chunk_count : 0;
  s->unmapped = seg->unmapped;
  s->first_block = m->block_count;
  for (const recap__block_t *b = seg->head; b; b = b->next) {
    /* The front cache's block is taken as the free block it stands for, merged with its rest:
     * the model is the same whether the cache holds it or not. */
    const recap__front_t *f = &recap__alloc.front;
    const char *start = b->ptr;
    size_t size = b->size;
    if (b == f->block) {
      size = recap__front_merged_size(f);
      if (f->rest) b = f->rest; /* free too; the walk goes on after it */
    }
    recap__model_block_t *mb = append(&m->blocks, &m->block_count, &m->block_cap, sizeof *mb);
    if (!mb) return false;
    *mb = (recap__model_block_t){start, size, b->requested, block_state(b)};
    s->blocks++;
  }
  return true;
}

static bool take_pool(recap__memory_model_t *m, const recap__pool_t *pool, bool is_default) {
  recap__model_pool_t *p = append(&m->pools, &m->pool_count, &m->pool_cap, sizeof *p);
  if (!p) return false;
  p->id = pool->id;
  p->is_default = is_default;
  p->routed = pool->routed;
  p->references = pool->references;
  p->graphs = pool->graphs;
  p->reserved_bytes = pool->reserved_bytes;
  p->allocated_bytes = pool->allocated_bytes;
  p->exec_bytes = pool->exec_bytes;
  p->nodes = pool->nodes;
  p->capture_peak = recap__pool_capture_peak(pool, is_default);
  p->capture_peak_max = recap__pool_capture_peak_max(pool, is_default);
  p->budget = pool->routed ? pool->budget : 0;
  p->budget_refusals = pool->budget_refusals;
  p->state = pool->state;
  p->sleeping_bytes = pool->sleeping_bytes;
  p->first_segment = m->segment_count;
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    if (!take_segment(m, seg)) return false;
    p->segments++;
    p->vmm_segments += seg->vmm;
  }
  return true;
}

static bool take_device(recap__memory_model_t *m, const recap__device_state_t *d) {
  recap__model_device_t *md = append(&m->devices, &m->device_count, &m->device_cap, sizeof *md);
  if (!md) return false;
  md->device = d->device;
  md->stats = d->stats;
  md->first_pool = m->pool_count;
  if (!take_pool(m, &d->default_pool, true)) return false;
  for (const recap__pool_t *p = d->private_pools; p; p = p->next)
    if (!take_pool(m, p, false)) return false;
  md->pools = m->pool_count - md->first_pool;
  return true;
}

recap_status_t recap__memory_model_take(recap__memory_model_t *model, int first, int last,
                                        const char *who) {
  memset(model, 0, sizeof *model);
  bool taken = true;
  recap__alloc_lock();
  for (int device = first; taken && device <= last; device++)
    if (recap__alloc.devices[device]) taken = take_device(model, recap__alloc.devices[device]);
  recap__pinned_kept(&model->pinned_kept_buffers, &model->pinned_kept_bytes);
  recap__alloc_unlock();
  if (!taken)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: out of host memory copying the allocator's state", who);
  return RECAP_SUCCESS;
}

void recap__memory_model_free(recap__memory_model_t *model) {
  recap__host_free(model->devices);
  recap__host_free(model->pools);
  recap__host_free(model->segments);
  recap__host_free(model->blocks);
  memset(model, 0, sizeof *model);
}
