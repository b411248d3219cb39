/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_fault.c — fault injection in the CPU fake device: the nth call of a kind fails, the way
 * CUDA reports a failure, so that tests reach every error path of the layers above.
 */
#include "fake/fake_state.h"

bool recap__fake_count_call(recap__fake_fault_t kind) {
  recap__fake.calls[kind]++;
  if (recap__fake.fail_countdown[kind] == 0) return false;
  return --recap__fake.fail_countdown[kind] == 0;
}

recap_status_t recap__fake_note_injected(fake_failure_t *f, const char *call,
                                         recap__fake_fault_t kind, const char *what) {
  return recap__fake_note(f, RECAP_ERROR_CUDA,
                          "%s: unknown error (cudaErrorUnknown): fault injected by the fake "
                          "device into %s call %llu",
                          call, what, (unsigned long long)recap__fake.calls[kind]);
}

bool recap__fake_op_enter(fake_failure_t *f, recap__fake_fault_t kind, const char *call,
                          const char *what) {
  pthread_mutex_lock(&recap__fake.lock);
  if (!recap__fake_count_call(kind)) return false;
  recap__fake_note_injected(f, call, kind, what);
  return true;
}

void recap__fake_fail_nth(recap__fake_fault_t kind, uint64_t nth) {
  if ((int)kind < 0 || kind >= RECAP__FAKE_FAULT_KINDS) return;
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.fail_countdown[kind] = nth;
  pthread_mutex_unlock(&recap__fake.lock);
}
