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
 * A site is a place where a node of the graph holds an address: an 8-byte word of a kernel's
 * argument buffer (a pointer argument, or a pointer inside a struct passed by value), the source
 * or destination of a copy node, the destination of a memset node. At capture end recap lists
 * every site once, with the address it holds, sorted by address; a rebind finds the sites of its
 * range by binary search and sets each node it touches once in the executable
 * (cudaGraphExec{Kernel,Memcpy,Memset}NodeSetParams): its cost grows with the sites it patches,
 * not with the graph.
 *
 * What the automatic scan (RECAP_REBIND_AUTO) may mistake, because it sees only 8-byte words:
 *  - a 64-bit scalar argument, or two packed 32-bit scalars, whose bits happen to equal an
 *    address in the range: it is patched as if it were a pointer;
 *  - pointers stored in device memory (an array of pointers passed as one pointer) are not
 *    seen: the pointer to the array is a site, what the array holds is not;
 *  - a one-past-the-end pointer that equals the next buffer's start belongs to that buffer (it
 *    moves with that buffer, not with the one it ends);
 *  - a pointer at an offset that is not a multiple of 8 in a packed struct is not seen;
 *  - a site inside a child graph node is refused (RECAP_ERROR_NOT_SUPPORTED).
 * Declaring avoids the guesses about extents: a declared buffer has the exact extent the caller
 * gives (not the allocator's block, which may be larger), a capture in RECAP_REBIND_DECLARED
 * mode refuses to rebind any undeclared range, and recap_graph_rebind_sites shows every site a
 * rebind would patch, so that a caller can check them (recap_graph_rebind's patched counts them).
 * docs/rebind.md says more.
 *
 * Input liveness (recap/liveness.h) follows rebinds: after one, replays check the new buffers,
 * and an old buffer no site points into any more may be freed.
 *
 * A graph is not thread safe: rebind it from one thread at a time, and not while another thread
 * replays or inspects it. A rebind is ordered with respect to the host, not to streams: a replay
 * already launched keeps the addresses it was launched with.
 */
#ifndef RECAP_REBIND_H
#define RECAP_REBIND_H

#include "core.h"
#include "graph.h"
#include "inspect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* During graph's capture (begun with rebind AUTO or DECLARED): declare [ptr, ptr + size) a
 * buffer the graph may be rebound away from. Any device memory: recap's, cudaMalloc's, an
 * interior range of either. The declaration is what a rebind of size 0 at ptr moves, and in
 * DECLARED mode the only ranges a rebind accepts. A rebind that moves a declared buffer whole
 * moves its declaration with it (the buffer can be rebound again from its new place). Errors: ptr NULL, size 0, a range that wraps or
 * overlaps a buffer declared before: RECAP_ERROR_INVALID_ARGUMENT; the graph not capturing, or
 * capturing with rebind OFF: RECAP_ERROR_INVALID_USAGE. */
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
 * [old_ptr, old_ptr + bytes) gets new_ptr + (address - old_ptr), in the executable (and, before
 * anything reads or instantiates it, in the kept template). All moves of the batch or none.
 * patched (may be NULL) gets, for each move, the sites it changed.
 * Errors (nothing changed):
 *  - RECAP_ERROR_INVALID_ARGUMENT: rebinds NULL or count 0; a bad rebinds[i].size; an old_ptr
 *    or new_ptr NULL; a range
 *    that wraps; size 0 where neither a declared buffer nor recap's allocation holds old_ptr; a
 *    new buffer of recap's allocator that is not allocated or holds fewer than size bytes from
 *    new_ptr (foreign memory, such as cudaMalloc's, is the caller's word); a new range that
 *    overlaps memory the graph uses, except what this batch moves: a declared buffer, a site's
 *    address, or the rest of a recap allocation holding a site's address that no declared
 *    buffer holds (declare buffers carved from one allocation); a new range in the graph's own
 *    pool that lies in a free block or meets a block the graph's capture allocated (a block
 *    of a shared pool that another graph allocated, such as its output, is accepted); two moves
 *    of the batch whose old or new ranges overlap; an old range no site points into; an old
 *    range inside memory the graph's capture allocated that was not declared; in DECLARED
 *    mode, an old range that is not inside a declared buffer.
 *  - RECAP_ERROR_INVALID_USAGE: the graph holds no capture (fresh, capturing, eager), or its
 *    capture had rebind OFF.
 *  - RECAP_ERROR_NOT_SUPPORTED: a site of the range lies inside a child graph node.
 *  - A device failure: its status (the message names the node and the CUDA call).
 * Messages name the move (its index and range) and the nodes concerned (index, type, kernel
 * name). A KEEP graph with no executable yet is instantiated first. */
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

/* The sites holding an address in [ptr, ptr + size) (size 0: as bytes 0 in recap_rebind_t), in
 * node order, then by offset: *count gets how many there are, and the first min(capacity,
 * *count) are written to sites, each element's size set first (RECAP_REBIND_SITE_INIT; sites
 * NULL with capacity 0 only counts). Lets a caller see what a rebind
 * would patch; a range no site points into gives *count 0. Errors as recap_graph_rebind's for
 * the graph and the range (size 0 without a declared buffer or allocation at ptr, a wrap);
 * RECAP_ERROR_INVALID_ARGUMENT for sites NULL with capacity > 0. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_rebind_sites(recap_graph_t graph,
                                                                  const void *ptr, size_t size,
                                                                  recap_rebind_site_t *sites,
                                                                  size_t capacity, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_REBIND_H */
