/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registry.c — the capture registry of registry.h: a small array under a mutex. Captures under
 * way at once are few (one per capturing thread), so a linear scan is the fastest structure.
 */
#include "graph/registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"

typedef struct entry {
  uint64_t capture_id;
  recap_graph_t graph;
} entry_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *entries;
static int entry_count, entry_capacity;
/* entry_count, readable without the lock: the cheap "is any capture under way?" of code that
 * must cost nothing outside captures (annotations). */
static _Atomic int active_count;

recap_status_t recap__registry_add(uint64_t capture_id, recap_graph_t graph) {
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&registry_lock);
  if (entry_count == entry_capacity) {
    int capacity = entry_capacity ? entry_capacity * 2 : 8;
    entry_t *grown = recap__host_realloc(entries, (size_t)capacity * sizeof *grown);
    if (!grown) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "capture registry: out of host memory");
      goto out;
    }
    entries = grown;
    entry_capacity = capacity;
  }
  entries[entry_count].capture_id = capture_id;
  entries[entry_count].graph = graph;
  entry_count++;
  atomic_store_explicit(&active_count, entry_count, memory_order_relaxed);
out:
  pthread_mutex_unlock(&registry_lock);
  return s;
}

void recap__registry_remove(uint64_t capture_id) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < entry_count; i++) {
    if (entries[i].capture_id == capture_id) {
      entries[i] = entries[--entry_count];
      atomic_store_explicit(&active_count, entry_count, memory_order_relaxed);
      break;
    }
  }
  pthread_mutex_unlock(&registry_lock);
}

recap_graph_t recap__registry_find(uint64_t capture_id) {
  recap_graph_t graph = NULL;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < entry_count; i++)
    if (entries[i].capture_id == capture_id) graph = entries[i].graph;
  pthread_mutex_unlock(&registry_lock);
  return graph;
}

recap_status_t recap__registry_find_stream(recap_stream_t stream, recap_graph_t *graph) {
  *graph = NULL;
  if (recap__registry_active() == 0) return RECAP_SUCCESS; /* no capture to find: no query */
  recap__capture_status_t status;
  uint64_t id = 0;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
  if (status == RECAP__CAPTURE_ACTIVE) *graph = recap__registry_find(id);
  return RECAP_SUCCESS;
}

void recap__registry_clear(void) {
  pthread_mutex_lock(&registry_lock);
  entry_count = 0;
  atomic_store_explicit(&active_count, 0, memory_order_relaxed);
  pthread_mutex_unlock(&registry_lock);
}

int recap__registry_count(void) {
  pthread_mutex_lock(&registry_lock);
  int n = entry_count;
  pthread_mutex_unlock(&registry_lock);
  return n;
}

int recap__registry_active(void) {
  return atomic_load_explicit(&active_count, memory_order_relaxed);
}
