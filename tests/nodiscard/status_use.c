/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * status_use.c — compiled, never run, by check.cmake: with DROP_STATUS defined it drops
 * recap_malloc's status, which RECAP_NODISCARD must turn into a warning; without it, it checks
 * the status and must compile cleanly under the same flags.
 */
#include "recap.h"

int allocate(void **p);

int allocate(void **p) {
#ifdef DROP_STATUS
  recap_malloc(p, 512, NULL);
  return 0;
#else
  return recap_malloc(p, 512, NULL) == RECAP_SUCCESS ? 0 : 1;
#endif
}
