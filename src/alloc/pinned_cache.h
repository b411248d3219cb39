/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pinned_cache.h — the pinned host buffers that RECAP_SLEEP_OFFLOAD copies pools into, and the
 * ones kept between sleeps with the option offload_keep_pinned (docs/sleep.md, "The cost of
 * OFFLOAD").
 *
 * Page-locking host memory (cudaHostAlloc) costs about as much per byte as a tenth of a second
 * per GiB on a Linux host, far more than the copy into it; unpinning costs a fifth of that. With
 * the option at 1, a wake keeps its pool's buffer here instead of freeing it, and the next
 * OFFLOAD sleep of any pool takes the smallest kept buffer that holds its bytes. The buffers are
 * process-wide: pinned memory from cudaHostAlloc serves every device of the process.
 *
 * Every function is called with the allocator's lock held (recap__alloc_lock) and takes no lock
 * of its own; none calls back into the allocator, so cache_release.c and sleep.c both call it.
 */
#ifndef RECAP_ALLOC_PINNED_CACHE_H
#define RECAP_ALLOC_PINNED_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "recap/core.h"

/* A pinned buffer of at least bytes (bytes > 0) into *ptr and its size into *size: the smallest
 * kept one that is large enough (reserved or not), else a new one (host_alloc_pinned of
 * exactly bytes). Before pinning anew, every kept buffer not reserved is freed (all are too
 * small, and the host memory they lock is what the new one needs; a failed free is a warning
 * naming call, that buffer stays kept). Fails with host_alloc_pinned's status and
 * message (RECAP_ERROR_OUT_OF_MEMORY when the host has none), nothing taken. */
recap_status_t recap__pinned_take(size_t bytes, void **ptr, size_t *size, const char *call);

/* Hand back a buffer recap__pinned_take gave: kept when the option is 1, freed
 * (host_free_pinned) when it is 0 or the host lacks memory to list it. A failed free is
 * returned, its message saying where the buffer went: kept (unreserved, so recap_empty_cache
 * or the option at 0 frees it later), or, without host memory for the list, pinned until the
 * process ends. Either way the caller no longer owns it. */
recap_status_t recap__pinned_give(void *ptr, size_t size);

/* Free every kept buffer, reserved ones included (recap_empty_cache). A buffer whose free
 * fails stays kept, to be freed by a later call; the first failure is returned, its message
 * naming call. */
recap_status_t recap__pinned_release_all(const char *call);

/* Pin a buffer ahead of an OFFLOAD sleep (recap_pinned_reserve): when a kept buffer not reserved
 * holds bytes (bytes > 0) already, mark it reserved; else free the kept buffers not reserved (as a
 * take that pins anew does) and pin one of exactly bytes, kept and reserved. A reserved buffer
 * stays kept whatever the option says (recap__pinned_apply_option and a take that pins anew leave
 * it) until a take hands it out or recap__pinned_release_all frees it. Errors, nothing pinned:
 * host_alloc_pinned's status (RECAP_ERROR_OUT_OF_MEMORY when the host has none), with a message
 * naming call; RECAP_ERROR_OUT_OF_MEMORY without host memory for the list (the kept buffers not
 * reserved freed by then). */
recap_status_t recap__pinned_reserve(size_t bytes, const char *call);

/* The option's verdict at a sleep or a wake: when it is 0 (or the options cannot be read), free
 * every kept buffer but the reserved ones. A failure is logged as a warning naming call, the buffer
 * kept: the sleep or wake itself does not depend on it. */
void recap__pinned_apply_option(const char *call);

/* What is kept now: buffers and their bytes. */
void recap__pinned_kept(size_t *buffers, size_t *bytes);

/* Whether ptr is a kept buffer (recap_memory_check: a pool's copy must never be one). */
bool recap__pinned_is_kept(const void *ptr);

/* Forget every kept buffer without calling the device (the tests' reset: the fake's reset took
 * the pinned memory already). */
void recap__pinned_reset(void);

#endif /* RECAP_ALLOC_PINNED_CACHE_H */
