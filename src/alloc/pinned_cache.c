/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pinned_cache.c — pinned host buffers for RECAP_SLEEP_OFFLOAD, kept between sleeps with the
 * option offload_keep_pinned (pinned_cache.h; docs/sleep.md, "The cost of OFFLOAD").
 *
 * The kept buffers are an unsorted array: a process keeps about one per pool that sleeps, so a
 * linear search for the smallest one that fits costs nothing beside the copies. sleep.c takes
 * and gives buffers; cache_release.c's recap_empty_cache releases them all; neither is called from
 * here, and the caller holds the allocator's lock.
 *
 * Keeping never adds to the pinned memory recap holds: a new buffer is pinned only when no kept
 * one is large enough, and then every kept one is freed first, so the pinned memory held
 * (kept and in use) never exceeds what the buffers in use held at the latest new pinning (a
 * buffer whose free failed aside), or what the caller asked recap_pinned_reserve for.
 *
 * A reserved buffer (recap_pinned_reserve) is pinned ahead of a sleep, so that the first OFFLOAD
 * sleep pins nothing; one per call, so that a recap_sleep of several pools finds one for each.
 * It is a kept buffer like the others, but that neither the option at 0 nor a take that pins
 * anew frees it: it waits for the take that hands it out (its mark goes with it; given back at
 * the wake, it is kept or freed by the option as any buffer), or for recap_empty_cache.
 */
#include "alloc/pinned_cache.h"

#include <stdbool.h>

#include "core/error.h"
#include "core/host.h"
#include "core/options.h"
#include "device/device.h"

typedef struct kept {
  void *ptr;
  size_t size;
  bool reserved; /* pinned ahead by recap__pinned_reserve: kept whatever the option says */
} kept_t;

static kept_t *kept;
static size_t kept_count, kept_capacity;

/* The option, read now; 0 when the options cannot be read (a bad RECAP_ALLOC_CONF): nothing is
 * kept then, which needs no option to be right. */
static bool keep_option(void) {
  recap__options_t o;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  bool keep = recap__options_get(&o) == RECAP_SUCCESS && o.offload_keep_pinned;
  recap__error_restore(&saved);
  return keep;
}

static void remove_at(size_t i) { kept[i] = kept[--kept_count]; }

/* Nothing kept holds no host memory either. */
static void free_list_if_empty(void) {
  if (kept_count) return;
  recap__host_free(kept);
  kept = NULL;
  kept_capacity = 0;
}

/* Free the kept buffers, the reserved ones too unless keep_reserved (recap__pinned_release_all
 * says what a failure does). */
static recap_status_t release(const char *call, bool keep_reserved) {
  recap_status_t first = RECAP_SUCCESS;
  recap__saved_error_t cause;
  for (size_t i = kept_count; i-- > 0;) {
    kept_t k = kept[i];
    if (keep_reserved && k.reserved) continue;
    recap_status_t s = recap__device()->host_free_pinned(k.ptr);
    if (s == RECAP_SUCCESS) {
      remove_at(i);
      continue;
    }
    if (first == RECAP_SUCCESS) {
      first = s;
      recap__error_save(&cause);
    }
  }
  if (first != RECAP_SUCCESS)
    return recap__error(first,
                        "%s: freeing a pinned host buffer kept for RECAP_SLEEP_OFFLOAD failed "
                        "(%s); it stays kept, and the next recap_empty_cache frees it",
                        call, cause.message);
  free_list_if_empty();
  return RECAP_SUCCESS;
}

recap_status_t recap__pinned_release_all(const char *call) { return release(call, false); }

/* Free the kept buffers (the reserved ones too unless keep_reserved) where the caller's own
 * outcome does not depend on it: a failure is a warning, the caller's error state untouched. */
static void release_quietly(const char *call, bool keep_reserved) {
  if (kept_count == 0) return;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  if (release(call, keep_reserved) != RECAP_SUCCESS) RECAP__WARN("%s", recap_last_error());
  recap__error_restore(&saved);
}

/* Room in the list for one more buffer; false without host memory. */
static bool list_reserve(void) {
  if (kept_count < kept_capacity) return true;
  size_t capacity = kept_capacity ? 2 * kept_capacity : 4;
  kept_t *grown = recap__host_realloc(kept, capacity * sizeof *grown);
  if (!grown) return false;
  kept = grown;
  kept_capacity = capacity;
  return true;
}

/* The smallest kept buffer of at least bytes (not reserved, with unreserved_only), or
 * kept_count. */
static size_t smallest_fit(size_t bytes, bool unreserved_only) {
  size_t best = kept_count;
  for (size_t i = 0; i < kept_count; i++)
    if (kept[i].size >= bytes && !(unreserved_only && kept[i].reserved) &&
        (best == kept_count || kept[i].size < kept[best].size))
      best = i;
  return best;
}

recap_status_t recap__pinned_take(size_t bytes, void **ptr, size_t *size, const char *call) {
  size_t best = smallest_fit(bytes, false);
  if (best < kept_count) {
    *ptr = kept[best].ptr;
    *size = kept[best].size;
    remove_at(best);
    return RECAP_SUCCESS;
  }
  /* The reserved buffers stay for the sleeps they were pinned for. */
  release_quietly(call, true);
  void *p = NULL;
  RECAP__CHECK(recap__device()->host_alloc_pinned(&p, bytes));
  *ptr = p;
  *size = bytes;
  return RECAP_SUCCESS;
}

recap_status_t recap__pinned_give(void *ptr, size_t size) {
  if (keep_option() && list_reserve()) {
    kept[kept_count++] = (kept_t){.ptr = ptr, .size = size};
    return RECAP_SUCCESS;
  }
  recap_status_t s = recap__device()->host_free_pinned(ptr);
  if (s == RECAP_SUCCESS) return RECAP_SUCCESS;
  /* A buffer that could not be freed is kept, so that recap_empty_cache (or the option at 0
   * at the next sleep or wake) frees it: host memory comes back once the device lets it. */
  recap__saved_error_t cause;
  recap__error_save(&cause);
  if (list_reserve()) {
    kept[kept_count++] = (kept_t){.ptr = ptr, .size = size};
    return recap__error(s,
                        "freeing %zu bytes of pinned host memory failed (%s); the buffer stays "
                        "kept, and the next recap_empty_cache frees it",
                        size, cause.message);
  }
  return recap__error(s,
                      "freeing %zu bytes of pinned host memory failed (%s), and no host memory "
                      "is left to list it for a later free: it stays pinned until the process "
                      "ends",
                      size, cause.message);
}

recap_status_t recap__pinned_reserve(size_t bytes, const char *call) {
  size_t best = smallest_fit(bytes, true);
  if (best < kept_count) {
    kept[best].reserved = true;
    return RECAP_SUCCESS;
  }
  /* As a take that pins anew: the unreserved kept buffers are all too small, and freeing them
   * first keeps the pinned memory held to what the buffers wanted need. */
  release_quietly(call, true);
  /* The room for the new entry is made after that release, which frees the list itself when it
   * leaves nothing kept; room made before it would be gone. */
  if (!list_reserve())
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: out of host memory for the list of pinned buffers; nothing was "
                        "pinned",
                        call);
  void *p = NULL;
  recap_status_t s = recap__device()->host_alloc_pinned(&p, bytes);
  if (s != RECAP_SUCCESS) {
    free_list_if_empty();
    recap__saved_error_t cause; /* recap__error rewrites the message it is read from */
    recap__error_save(&cause);
    return recap__error(s,
                        "%s: pinning %zu bytes of host memory failed (%s); nothing was pinned. "
                        "Free host memory, or reserve fewer bytes",
                        call, bytes, cause.message);
  }
  kept[kept_count++] = (kept_t){.ptr = p, .size = bytes, .reserved = true};
  return RECAP_SUCCESS;
}

void recap__pinned_apply_option(const char *call) {
  if (kept_count && !keep_option()) release_quietly(call, true);
}

void recap__pinned_kept(size_t *buffers, size_t *bytes) {
  size_t sum = 0;
  for (size_t i = 0; i < kept_count; i++) sum += kept[i].size;
  *buffers = kept_count;
  *bytes = sum;
}

bool recap__pinned_is_kept(const void *ptr) {
  for (size_t i = 0; i < kept_count; i++)
    if (kept[i].ptr == ptr) return true;
  return false;
}

void recap__pinned_reset(void) {
  recap__host_free(kept);
  kept = NULL;
  kept_count = kept_capacity = 0;
}
