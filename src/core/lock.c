/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock.c — the contended halves of the lean lock (lock.h): a short spin, then a sleep.
 */
#include "core/lock.h"

#include <sched.h>

#if defined(__linux__)
#  include <linux/futex.h>
#  include <sys/syscall.h>
#  include <unistd.h>
#endif

/* Critical sections are a few hundred instructions: a waiter that spins this long usually gets
 * the lock without a system call; one that does not would waste its core. */
enum { SPINS = 100 };

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Sleep while the word still reads `value` (a wake, a signal or a changed word ends it). */
static void sleep_on(recap__lock_t *l, int value) {
#if defined(__linux__)
  syscall(SYS_futex, (int *)&l->state, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
  (void)l;
  (void)value;
  sched_yield();
#endif
}

void recap__lock_wait(recap__lock_t *l) {
  for (int i = 0; i < SPINS; i++) {
    /* Read before writing: spinning on a compare-and-swap would take the cache line from the
     * holder at every try. */
    if (atomic_load_explicit(&l->state, memory_order_relaxed) == 0) {
      int expected = 0;
      if (atomic_compare_exchange_weak_explicit(&l->state, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed))
        return;
    }
    cpu_relax();
  }
  /* Mark the lock contended (2) whenever taking it, so that its holder's release wakes the
   * next sleeper; a thread that takes it this way may have marked it needlessly, which costs
   * one spurious wake, never a missed one. */
  while (atomic_exchange_explicit(&l->state, 2, memory_order_acquire) != 0) sleep_on(l, 2);
}

void recap__lock_wake(recap__lock_t *l) {
#if defined(__linux__)
  syscall(SYS_futex, (int *)&l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
  (void)l;
#endif
}
