/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reset.h — the tests' reset of the allocator (reset.c).
 */
#ifndef RECAP_ALLOC_RESET_H
#define RECAP_ALLOC_RESET_H

/* Drop every piece of allocator state without calling the device (tests, after the fake was
 * reset). */
void recap__alloc_reset(void);

#endif /* RECAP_ALLOC_RESET_H */
