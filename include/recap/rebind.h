/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/rebind.h — point a captured graph at new buffers, with no copy and no recapture:
 * a rebind patches the sites (kernel argument words, copy and memset addresses) holding an
 * address in the ranges it moves. See docs/rebind.md.
 */
#ifndef RECAP_REBIND_H
#define RECAP_REBIND_H

#include "core.h"
#include "graph.h"
#include "inspect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* During graph's capture (rebind AUTO or DECLARED): declare [ptr, ptr + size) a buffer, what a
 * rebind of bytes 0 at ptr moves (in DECLARED mode, the only ranges it accepts). INVALID_ARGUMENT:
 * ptr NULL, size 0, a range that wraps or overlaps an earlier one; INVALID_USAGE: not capturing,
 * or rebind OFF. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_declare_buffer(recap_graph_t graph,
                                                                    const void *ptr, size_t size);

/* One move of a rebind batch. Start from RECAP_REBIND_INIT (the first version ends at bytes). */
typedef struct recap_rebind {
  size_t size;         /* sizeof(recap_rebind_t), set by RECAP_REBIND_INIT */
  const void *old_ptr; /* where the graph points now: the start of the range to move */
  void *new_ptr;       /* the new buffer */
  size_t bytes;        /* bytes from old_ptr; 0: the declared buffer holding old_ptr (from
                          old_ptr to its end), else recap's allocation holding old_ptr (from
                          old_ptr to its end) */
} recap_rebind_t;

#define RECAP_REBIND_INIT \
  { sizeof(recap_rebind_t), NULL, NULL, 0 }

/* Every site holding an address in [old_ptr, old_ptr + bytes) gets new_ptr + (address -
 * old_ptr): all moves or none; patched (may be NULL) gets each move's count of sites. From one
 * thread at a time, not during another's replay; a replay already launched keeps its addresses.
 * Refusals change nothing (docs/rebind.md): INVALID_ARGUMENT (a bad or overlapping range or
 * buffer), INVALID_USAGE (no capture, or rebind OFF), NOT_SUPPORTED (a site in a child graph). */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_rebind(recap_graph_t graph,
                                                            const recap_rebind_t *rebinds,
                                                            size_t count, size_t *patched);

/* One site holding an address. Start each element from RECAP_REBIND_SITE_INIT (the first
 * version ends at declared). */
typedef struct recap_rebind_site {
  size_t size;            /* sizeof(recap_rebind_site_t), set by RECAP_REBIND_SITE_INIT */
  size_t node;            /* node index, in recap_graph_inspect's order */
  recap_node_type_t type; /* RECAP_NODE_KERNEL, RECAP_NODE_MEMCPY or RECAP_NODE_MEMSET */
  uint32_t param;         /* kernel: the index of the parameter holding the word; else 0 */
  size_t offset;          /* kernel: the word's byte offset in the argument buffer; else 0 */
  const void *value;      /* the address it holds now */
  int declared;           /* 1: the address lies inside a declared buffer */
} recap_rebind_site_t;

#define RECAP_REBIND_SITE_INIT \
  { sizeof(recap_rebind_site_t), 0, RECAP_NODE_KERNEL, 0, 0, NULL, 0 }

/* What a rebind of [ptr, ptr + size) would patch (size 0: as bytes 0 above), in node order:
 * *count gets how many, sites the first min(capacity, *count) (NULL and 0: count only). Errors
 * as recap_graph_rebind's. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_rebind_sites(recap_graph_t graph,
                                                                  const void *ptr, size_t size,
                                                                  recap_rebind_site_t *sites,
                                                                  size_t capacity, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_REBIND_H */
