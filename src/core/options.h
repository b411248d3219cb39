/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * options.h — the allocator's reading of the option registry (include/recap/options.h).
 */
#ifndef RECAP_CORE_OPTIONS_H
#define RECAP_CORE_OPTIONS_H

#include <stdatomic.h>
#include <stdint.h>

#include "recap/options.h"

typedef struct recap__options {
#define RECAP_X_FIELD(name, kind, def, text) uint64_t name;
  RECAP_OPTION_MAP(RECAP_X_FIELD)
#undef RECAP_X_FIELD
} recap__options_t;

/* Copy the current options into *out, reading RECAP_ALLOC_CONF first if it has not been read.
 * Fails with RECAP_ERROR_INVALID_VALUE (the message names the entry) if the environment is bad;
 * it then stays bad, so every allocation reports it, until the options are set from code. */
recap_status_t recap__options_get(recap__options_t *out);

/* A number that changes whenever the options may have changed; 0 until the environment was
 * read successfully. Lets the allocator keep a copy and skip the registry's lock. Inline, one
 * load: recap_malloc and recap_free read it on every call. */
extern _Atomic uint64_t recap__options_stamp;
static inline uint64_t recap__options_version(void) {
  return atomic_load_explicit(&recap__options_stamp, memory_order_acquire);
}

#endif /* RECAP_CORE_OPTIONS_H */
