/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock.h — a lean mutual-exclusion lock for the allocator's one lock.
 *
 * recap_malloc and recap_free each take the allocator's lock once, and the pair of them costs
 * a few dozen nanoseconds (the target is at most 60 ns), so the lock's own cost is a large part
 * of it. A pthread_mutex_t pays for what recap does not use (its kinds, robustness, owner and count
 * checks: about fifty instructions per lock and unlock in glibc); recap never waits on a
 * condition variable with this lock, so a lock of one atomic word does: taking it free is one
 * compare-and-swap, giving it back one exchange. A contended lock spins briefly (the critical
 * sections are short), then sleeps in the kernel (a futex on Linux; elsewhere the thread
 * yields), so a thread that holds it while descheduled does not burn the other cores.
 *
 * The word is 0 when free, 1 when held, 2 when held and another thread may sleep on it
 * (Drepper's "Futexes are tricky", mutex 2): the holder wakes one sleeper only when it saw 2.
 * The acquire and release orderings make it a mutex to the memory model, and to ThreadSanitizer,
 * which sees the atomics.
 */
#ifndef RECAP_CORE_LOCK_H
#define RECAP_CORE_LOCK_H

#include <stdatomic.h>

#include "core/assert.h"

typedef struct recap__lock {
  _Atomic int state; /* 0 free, 1 held, 2 held with sleepers possible */
} recap__lock_t;

#define RECAP__LOCK_INIT \
  { 0 }

/* The contended halves (lock.c): spin, then sleep until the lock is had; wake one sleeper. */
void recap__lock_wait(recap__lock_t *l);
void recap__lock_wake(recap__lock_t *l);

static inline void recap__lock_acquire(recap__lock_t *l) {
  int expected = 0;
  if (RECAP__LIKELY(atomic_compare_exchange_strong_explicit(&l->state, &expected, 1,
                                                            memory_order_acquire,
                                                            memory_order_relaxed)))
    return;
  recap__lock_wait(l);
}

static inline void recap__lock_release(recap__lock_t *l) {
  if (RECAP__UNLIKELY(atomic_exchange_explicit(&l->state, 0, memory_order_release) == 2))
    recap__lock_wake(l);
}

#endif /* RECAP_CORE_LOCK_H */
