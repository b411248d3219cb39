/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/rebind.h — point a captured graph at new buffers: no copy, no recapture.
 *
 *     recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
 *     o.rebind = RECAP_REBIND_AUTO;                  // or DECLARED, with declare_buffer below
 *     recap_graph_capture_begin(g, &o, stream);
 *     step(stream, in_a, out);                       // kernels, copies, memsets, cuBLAS...
 *     recap_graph_capture_end(g);
 *     recap_graph_replay(g, stream);                 // reads in_a
 *     recap_rebind_t r = RECAP_REBIND_INIT;
 *     r.old_ptr = in_a; r.new_ptr = in_b;            // bytes 0: in_a's allocation
 *     recap_graph_rebind(g, &r, 1, NULL);            // or &patched: the sites changed
 *     recap_graph_replay(g, stream);                 // reads in_b, as if captured on it
 *
 * A site is a place where a node holds an address: an 8-byte word of a kernel's arguments, the
 * source or destination of a copy, the destination of a memset. A rebind patches the sites of
 * its ranges in the executable; its cost grows with the sites it patches, not with the graph.
 * RECAP_REBIND_AUTO finds sites by scanning 8-byte words, so a 64-bit scalar equal to an address
 * moves as a pointer and pointers stored in device memory do not move; RECAP_REBIND_DECLARED
 * rebinds only buffers declared during the capture (docs/rebind.md, "What the automatic scan may
 * mistake"). Input liveness (recap/liveness.h) follows rebinds.
 *
 * Rebind a graph from one thread at a time, not while another replays or inspects it. A rebind
 * is ordered with the host, not with streams: a replay already launched keeps its addresses.
 */
#ifndef RECAP_REBIND_H
#define RECAP_REBIND_H

#include "core.h"
#include "graph.h"
#include "inspect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* During graph's capture (rebind AUTO or DECLARED): declare [ptr, ptr + size) a buffer the
 * graph may be rebound away from (any device memory). It is what a rebind of bytes 0 at ptr
 * moves, and in DECLARED mode the only ranges a rebind accepts; it moves with its buffer.
 * INVALID_ARGUMENT: ptr NULL, size 0, a range that wraps or overlaps an earlier declaration;
 * INVALID_USAGE: the graph not capturing, or rebind OFF. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_declare_buffer(recap_graph_t graph,
                                                                    const void *ptr, size_t size);

/* One move of a rebind batch. Start from RECAP_REBIND_INIT (docs/api.md, "Versioned structs";
 * the first version ends at bytes). */
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

/* Point the captured graph at new buffers: every site holding an address in
 * [old_ptr, old_ptr + bytes) gets new_ptr + (address - old_ptr), in the executable (and in the
 * kept template). All moves of the batch or none; patched (may be NULL) gets, per move, the
 * sites it changed. A KEEP graph with no executable yet is instantiated first. Errors, nothing
 * changed, each message naming the move and the nodes (docs/rebind.md, "Refusals"):
 * INVALID_ARGUMENT (a NULL, a bad size, a range that wraps or that no site points into, a new
 * buffer too small or overlapping memory the graph uses, overlapping moves, an undeclared range
 * in DECLARED mode), INVALID_USAGE (no capture, or rebind OFF), NOT_SUPPORTED (a site inside a
 * child graph), or a device failure. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_rebind(recap_graph_t graph,
                                                            const recap_rebind_t *rebinds,
                                                            size_t count, size_t *patched);

/* One site: a place where the graph holds an address (recap_graph_rebind_sites). Start each
 * element from RECAP_REBIND_SITE_INIT (the first version ends at declared). */
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

/* The sites holding an address in [ptr, ptr + size) (size 0: as bytes 0 in recap_rebind_t),
 * in node order, then by offset: what a rebind would patch. *count gets how many; the first
 * min(capacity, *count) go to sites, each element started from RECAP_REBIND_SITE_INIT (sites NULL
 * with capacity 0 only counts). Errors as recap_graph_rebind's for the graph and the range. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_rebind_sites(recap_graph_t graph,
                                                                  const void *ptr, size_t size,
                                                                  recap_rebind_site_t *sites,
                                                                  size_t capacity, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_REBIND_H */
