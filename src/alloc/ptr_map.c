/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ptr_map.c — the pointer map of ptr_map.h.
 */
#include "alloc/ptr_map.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/assert.h"
#include "core/host.h"

static size_t slot_of(const void *key, size_t capacity) {
  /* Blocks are at least 512-byte aligned: drop the low bits, then spread with a multiplicative
   * hash so that neighbouring blocks land far apart. */
  uint64_t k = (uint64_t)(uintptr_t)key >> 9;
  return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17) & (capacity - 1);
}

static bool grow(recap__ptr_map_t *m) {
  size_t capacity = m->capacity ? m->capacity * 2 : 64;
  recap__ptr_map_slot_t *slots = recap__host_calloc(capacity, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < m->capacity; i++) {
    if (!m->slots[i].key) continue;
    size_t j = slot_of(m->slots[i].key, capacity);
    while (slots[j].key) j = (j + 1) & (capacity - 1);
    slots[j] = m->slots[i];
  }
  recap__host_free(m->slots);
  m->slots = slots;
  m->capacity = capacity;
  return true;
}

bool recap__ptr_map_grow(recap__ptr_map_t *m, size_t extra) {
  while ((m->count + extra) * 2 > m->capacity)
    if (!grow(m)) return false;
  return true;
}

bool recap__ptr_map_insert(recap__ptr_map_t *m, const void *key, void *value) {
  if (!recap__ptr_map_reserve(m, 1)) return false;
  size_t mask = m->capacity - 1;
  size_t i = slot_of(key, m->capacity);
  RECAP__ASSERT(key != NULL);
  /* A key present twice would leave one of its blocks unreachable: the probe run holds no copy. */
  for (; m->slots[i].key; i = (i + 1) & mask) RECAP__ASSERT(m->slots[i].key != key);
  m->slots[i].key = key;
  m->slots[i].value = value;
  m->count++;
  return true;
}

void *recap__ptr_map_get(const recap__ptr_map_t *m, const void *key) {
  if (!m->capacity || !key) return NULL;
  size_t mask = m->capacity - 1;
  for (size_t i = slot_of(key, m->capacity); m->slots[i].key; i = (i + 1) & mask)
    if (m->slots[i].key == key) return m->slots[i].value;
  return NULL;
}

size_t recap__ptr_map_slot(const recap__ptr_map_t *m, const void *key) {
  if (!m->capacity || !key) return m->capacity;
  size_t mask = m->capacity - 1;
  size_t i = slot_of(key, m->capacity);
  while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & mask;
  return m->slots[i].key ? i : m->capacity;
}

void *recap__ptr_map_remove(recap__ptr_map_t *m, const void *key) {
  size_t i = recap__ptr_map_slot(m, key);
  return i < m->capacity ? recap__ptr_map_remove_at(m, i) : NULL;
}

void *recap__ptr_map_remove_at(recap__ptr_map_t *m, size_t i) {
  RECAP__ASSERT(i < m->capacity && m->slots[i].key != NULL);
  size_t mask = m->capacity - 1;
  const void *key = m->slots[i].key;
  void *value = m->slots[i].value;
  /* Backward-shift deletion: move later members of the probe run into the hole when their
   * home slot does not lie (cyclically) between the hole and their current slot. */
  size_t hole = i;
  for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
    size_t home = slot_of(m->slots[j].key, m->capacity);
    bool home_in_between = (hole <= j) ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!home_in_between) {
      m->slots[hole] = m->slots[j];
      hole = j;
    }
  }
  m->slots[hole].key = NULL;
  m->slots[hole].value = NULL;
  RECAP__ASSERT(m->count > 0);
  m->count--;
  RECAP__ASSERT(recap__ptr_map_get(m, key) == NULL);
  (void)key;
  return value;
}

void recap__ptr_map_clear(recap__ptr_map_t *m) {
  recap__host_free(m->slots);
  m->slots = NULL;
  m->capacity = 0;
  m->count = 0;
}
