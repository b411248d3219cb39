/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ptr_map.h — an open-addressing hash map from a device pointer to its allocated block.
 *
 * recap_free() looks up every pointer here, so the map is built for that one job: pointer keys,
 * linear probing, deletion by backward shift (no tombstones, so lookups stay short however
 * many allocations come and go).
 */
#ifndef RECAP_ALLOC_PTR_MAP_H
#define RECAP_ALLOC_PTR_MAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct recap__ptr_map_slot {
  const void *key; /* NULL: empty */
  void *value;
} recap__ptr_map_slot_t;

typedef struct recap__ptr_map {
  recap__ptr_map_slot_t *slots;
  size_t capacity; /* a power of two, or 0 before the first insert */
  size_t count;
} recap__ptr_map_t;

/* Make room for `extra` more keys, so the inserts that follow cannot fail. */
bool recap__ptr_map_grow(recap__ptr_map_t *m, size_t extra);
static inline bool recap__ptr_map_reserve(recap__ptr_map_t *m, size_t extra) {
  /* Keep the load under 1/2: probes stay short and an empty slot always exists. */
  return (m->count + extra) * 2 <= m->capacity || recap__ptr_map_grow(m, extra);
}
/* Insert key -> value; key must not be NULL or present. False when out of host memory. */
bool recap__ptr_map_insert(recap__ptr_map_t *m, const void *key, void *value);
/* The value stored for key, or NULL. */
void *recap__ptr_map_get(const recap__ptr_map_t *m, const void *key);
/* Remove key and return its value, or NULL if absent. */
void *recap__ptr_map_remove(recap__ptr_map_t *m, const void *key);
/* The slot of key, m->capacity if absent: for a lookup that may be followed by a removal
 * (recap__ptr_map_remove_at) without a second probe. */
size_t recap__ptr_map_slot(const recap__ptr_map_t *m, const void *key);
/* Remove the key in slot i (a slot recap__ptr_map_slot gave, with no change since) and return
 * its value. */
void *recap__ptr_map_remove_at(recap__ptr_map_t *m, size_t i);
void recap__ptr_map_clear(recap__ptr_map_t *m);

#endif /* RECAP_ALLOC_PTR_MAP_H */
