/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/memory.h — what graphs cost in device memory, per graph and per pool, and the budget
 * that keeps a capture from taking more.
 *
 * A captured graph costs the device two things: the segments of its pool, which hold the
 * addresses its nodes baked in (shared with every graph captured into the same pool), and the
 * memory the driver gives its executable. recap counts the first exactly; the second it
 * measures with cudaMemGetInfo around each instantiation. docs/memory.md gives the contract:
 *
 *     recap_graph_memory_t m = RECAP_GRAPH_MEMORY_INIT;
 *     recap_graph_memory(graph, &m);
 *     printf("pool %lld B (peak %lld B during the capture), executable %lld B, %zu nodes\n",
 *            (long long)m.pool_reserved_bytes, (long long)m.capture_peak_bytes,
 *            (long long)m.exec_bytes, m.nodes);
 *
 * A capture given a budget (recap_capture_options_t.budget_bytes, recap/graph.h) fails cleanly
 * instead of growing its pool past it: the recap_malloc that would need it fails with
 * RECAP_ERROR_OUT_OF_MEMORY, before any device allocation, and so does the capture's end.
 *
 * Both result structs may grow at their end: start them from their _INIT macro, which sets
 * `size`; recap fills the fields up to `size` and leaves the rest alone.
 */
#ifndef RECAP_MEMORY_H
#define RECAP_MEMORY_H

#include "core.h"
#include "alloc.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Per graph
 * ---------------------------------------------------------------------------------------- */

typedef struct recap_graph_memory {
  size_t size;          /* sizeof(recap_graph_memory_t), set by RECAP_GRAPH_MEMORY_INIT */
  recap_pool_id_t pool; /* the pool of the capture the graph holds */
  /* The pool's bytes now (recap_pool_memory's reserved and allocated bytes): the device memory
   * its segments hold, shared by every graph captured into the pool and by blocks still
   * allocated from it. */
  int64_t pool_reserved_bytes;
  int64_t pool_allocated_bytes;
  /* The highest allocated bytes of the pool while the graph's capture ran, from its begin to
   * its end: what the capture needed at once, blocks the pool held already (another graph's
   * outputs) included. */
  int64_t capture_peak_bytes;
  /* The reserved bytes the pool gained during that capture: the segments the capture added.
   * A capture into a pool that other graphs grew before may add none. */
  int64_t capture_reserved_bytes;
  /* Device bytes the executable holds (for a graph that runs as a host loop of regions, every
   * executable of its program), measured as the drop of cudaMemGetInfo's free bytes across each
   * instantiation: device memory another thread or process allocates or frees meanwhile skews
   * it, and memory the driver takes later (at the first launch or upload) is not in it. 0 while
   * no executable exists (a RECAP_GRAPH_KEEP graph not yet instantiated). An executable updated
   * in place by a recapture keeps its measure. */
  int64_t exec_bytes;
  size_t nodes;          /* recap_graph_node_count's count */
  uint64_t budget_bytes; /* the budget the held capture ran under (0: none) */
} recap_graph_memory_t;

#define RECAP_GRAPH_MEMORY_INIT \
  { sizeof(recap_graph_memory_t), {0, 0}, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info for the capture graph holds (captured, or instantiated). info->size must lie
 * between the size of the struct's first version (ends at budget_bytes) and this library's
 * (RECAP_ERROR_INVALID_ARGUMENT otherwise, naming RECAP_GRAPH_MEMORY_INIT). A graph that holds
 * no capture (fresh, capturing for the first time, or run eagerly) and one being recaptured
 * are RECAP_ERROR_INVALID_USAGE; *info is then untouched. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_memory(recap_graph_t graph,
                                                            recap_graph_memory_t *info);

/* ------------------------------------------------------------------------------------------
 * Per pool
 * ---------------------------------------------------------------------------------------- */

typedef struct recap_pool_memory {
  size_t size; /* sizeof(recap_pool_memory_t), set by RECAP_POOL_MEMORY_INIT */
  /* Graphs holding the pool: a graph holds the pool of its capture from capture_begin until
   * it is reset or destroyed, or the capture fails. */
  int graphs;
  int references;          /* graphs and recap_pool_route_begin callers holding the pool */
  int64_t reserved_bytes;  /* bytes of the pool's segments */
  int64_t allocated_bytes; /* bytes of its blocks in use */
  /* The highest allocated bytes during the latest capture routed to the pool (while one runs,
   * so far), and the highest of every capture routed to it since the pool was made. */
  int64_t capture_peak_bytes;
  int64_t capture_peak_max_bytes;
  int64_t exec_bytes; /* the exec_bytes of the graphs holding the pool, summed */
  int64_t nodes;      /* their nodes, summed */
  /* The budget of the capture routed to the pool now (0: none, or no capture), and the
   * allocations the budget of the latest capture refused. */
  uint64_t budget_bytes;
  uint64_t budget_refusals;
  /* Segments on CUDA virtual memory (the expandable_segments option), which can sleep
   * (recap/sleep.h), and the virtual bytes they hold reserved. */
  int64_t vmm_segments;
  int64_t vmm_reserved_va_bytes;
  int state;               /* a recap_pool_state_t (recap/sleep.h) */
  int64_t sleeping_bytes;  /* physical bytes given back to the device while asleep; 0 awake */
  int64_t offloaded_bytes; /* bytes kept in pinned host memory while asleep after OFFLOAD */
  int routed;              /* 1 while a capture routes allocations to it; 0 for the default */
  int64_t segments;        /* segments the pool holds */
  /* Bytes of freed blocks that still wait before reuse (on the events of streams named with
   * recap_record_stream or, freed during a capture, for those streams to leave every capture):
   * out of allocated_bytes since recap_free, in reserved_bytes until reusable, and their
   * segment cannot go back to the driver meanwhile. */
  int64_t waiting_bytes;
} recap_pool_memory_t;

#define RECAP_POOL_MEMORY_INIT \
  { sizeof(recap_pool_memory_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info for pool on the current device. The default pool {0,0} is answered too (no graph
 * holds it and no capture routes to it: those fields are 0). A private pool that does not
 * exist (before its first capture, or once its memory went back to the driver) is
 * RECAP_ERROR_NOT_FOUND; a bad info->size is RECAP_ERROR_INVALID_ARGUMENT (naming
 * RECAP_POOL_MEMORY_INIT; the first version ends at budget_refusals). *info is untouched on
 * failure. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_memory(recap_pool_id_t pool,
                                                           recap_pool_memory_t *info);

/* ------------------------------------------------------------------------------------------
 * The memory page
 * ---------------------------------------------------------------------------------------- */

/* Write a self-contained HTML page of recap's device memory now to path (created or replaced):
 * totals at the top, then per device a table of its pools (state, VMM or classic segments,
 * reserved / allocated / waiting bytes, the graphs holding each and what they cost, the budget)
 * and per pool a bar per segment, its blocks drawn to scale and coloured allocated / waiting /
 * free; an asleep pool is greyed and badged. Every device recap has used is on it. The page
 * needs no network and no script. The allocator's lock is held only while its state is copied,
 * not while the page is written. RECAP_ERROR_IO when the file cannot be written (a partial
 * file is removed); RECAP_ERROR_OUT_OF_MEMORY when the host has no memory for the copy or the
 * text. docs/memory.md, "The memory page", says what each part shows. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_html(const char *path);

/* The same page as recap_memory_html, into *html (NUL-terminated; free it with
 * recap_string_free). *html is NULL on failure: RECAP_ERROR_OUT_OF_MEMORY when the host has no
 * memory for the copy or the text. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_html_string(char **html);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_MEMORY_H */
