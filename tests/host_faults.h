/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host_faults.h — a host allocator for tests, installed behind recap's host-memory seam
 * (src/core/host.h): it counts recap's host allocations, keeps a count of the blocks alive, and
 * makes the nth allocation fail, so that every out-of-host-memory path of the library can be
 * reached. It allocates through the C library, so memory recap took before it was installed
 * may be freed through it, and the other way round.
 */
#ifndef RECAP_TEST_HOST_FAULTS_H
#define RECAP_TEST_HOST_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Install the counting allocator (idempotent); recap_test_host_faults_remove puts the C
 * library's back. */
void recap_test_host_faults_install(void);
void recap_test_host_faults_remove(void);

/* The nth allocation (malloc, calloc or realloc; 1-based, counted from now) returns NULL;
 * 0 disarms. Counting starts over at every call. */
void recap_test_host_fail_nth(uint64_t nth);

/* Allocations counted since the last recap_test_host_fail_nth, and whether the armed one
 * failed. */
uint64_t recap_test_host_calls(void);
bool recap_test_host_failed(void);

/* Blocks allocated through the counting allocator and not yet freed through it, since it was
 * installed (frees of blocks allocated before count too, so install before recap holds any). */
int64_t recap_test_host_live(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_HOST_FAULTS_H */
