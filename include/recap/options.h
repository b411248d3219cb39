/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/options.h — the allocator's tunables, in one registry, read once from
 * RECAP_ALLOC_CONF ("key:value,key:value"); values set from code override it. See
 * docs/allocator.md.
 */
#ifndef RECAP_OPTIONS_H
#define RECAP_OPTIONS_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The option registry: X(name, kind, default, meaning). BYTES: a byte count, with an optional
 * binary unit (K, KB, KiB, M...). BOOL: true or false in any case, or 1 or 0 (read back as 1/0). */
#define RECAP_OPTION_MAP(X)                                                          \
  X(min_block_size, BYTES, 512,                                                      \
    "every request is rounded up to a multiple of this (a power of two)")            \
  X(small_size, BYTES, 1048576, "requests up to this size come from the small pool") \
  X(small_segment, BYTES, 2097152, "segment size of the small pool")                 \
  X(large_threshold, BYTES, 10485760,                                                \
    "requests below this (and above small_size) share large segments")               \
  X(large_segment, BYTES, 20971520,                                                  \
    "segment size for requests between small_size and large_threshold")              \
  X(round_large, BYTES, 2097152,                                                     \
    "own segments of requests >= large_threshold are rounded to this")               \
  X(max_split_size, BYTES, 0,                                                        \
    "0: no limit; else > large_segment: requests this large are never split")        \
  X(memory_cap, BYTES, 0,                                                            \
    "the allocator reserves at most this many bytes per device (0: no limit)")       \
  X(expandable_segments, BOOL, 0,                                                    \
    "on: segments on CUDA virtual memory that grow in place (recap/sleep.h)")        \
  X(offload_keep_pinned, BOOL, 0,                                                    \
    "on: a wake keeps its OFFLOAD pinned host buffer for the next sleep")            \
  X(measure_exec_memory, BOOL, 0,                                                    \
    "on: every instantiation measures its executable's device bytes (cudaMemGetInfo)")

/* Set an option from code, the value as in RECAP_ALLOC_CONF. NOT_FOUND: an unknown name;
 * INVALID_VALUE: a value not of the option's kind, or one that breaks the options' rules
 * (small_size > small_segment, say), the message saying which. */
RECAP_NODISCARD RECAP_API recap_status_t recap_option_set(const char *name, const char *value);
/* Same as recap_option_set with a number; a BOOL option takes 0 or 1. */
RECAP_NODISCARD RECAP_API recap_status_t recap_option_set_u64(const char *name, uint64_t value);
/* Read an option's current value (the environment is read first if it has not been). */
RECAP_NODISCARD RECAP_API recap_status_t recap_option_get(const char *name, uint64_t *value);
/* Parse a whole configuration string ("key:value,key:value"), as RECAP_ALLOC_CONF is parsed.
 * All or nothing: on a bad entry no option changes. */
RECAP_NODISCARD RECAP_API recap_status_t recap_options_parse(const char *conf);
/* Restore every option to its default and forget that the environment was read. */
RECAP_API void recap_options_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_OPTIONS_H */
