/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/memory.h — what graphs cost in device memory, per graph and per pool, the memory
 * page, and the budget that keeps a capture from taking more. See docs/memory.md.
 */
#ifndef RECAP_MEMORY_H
#define RECAP_MEMORY_H

#include "core.h"
#include "alloc.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Per graph ------------------------------------------------------------------------------- */

typedef struct recap_graph_memory {
  size_t size;          /* sizeof(recap_graph_memory_t), set by RECAP_GRAPH_MEMORY_INIT */
  recap_pool_id_t pool; /* the pool of the capture the graph holds */
  /* The pool's bytes now, shared by every graph captured into it (docs/memory.md). */
  int64_t pool_reserved_bytes;
  int64_t pool_allocated_bytes;
  /* The pool's highest allocated bytes during the capture, and the reserved bytes it added. */
  int64_t capture_peak_bytes;
  int64_t capture_reserved_bytes;
  /* Device bytes its executables hold, measured at instantiation (another thread's or
   * process's allocations skew it; docs/memory.md, "The executable's bytes"); 0 while none;
   * -1 when not measured (no budget, and the option measure_exec_memory off: the default). */
  int64_t exec_bytes;
  size_t nodes;          /* recap_graph_node_count's count */
  uint64_t budget_bytes; /* the budget the held capture ran under (0: none) */
} recap_graph_memory_t;

#define RECAP_GRAPH_MEMORY_INIT \
  { sizeof(recap_graph_memory_t), {0, 0}, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info (from RECAP_GRAPH_MEMORY_INIT; the first version ends at budget_bytes) for the
 * capture graph holds. A graph that holds no capture, or is being recaptured, is
 * RECAP_ERROR_INVALID_USAGE, *info untouched. */
RECAP_NODISCARD RECAP_API recap_status_t recap_graph_memory(recap_graph_t graph,
                                                            recap_graph_memory_t *info);

/* ---- Per pool -------------------------------------------------------------------------------- */

typedef struct recap_pool_memory {
  size_t size;             /* sizeof(recap_pool_memory_t), set by RECAP_POOL_MEMORY_INIT */
  int graphs;              /* graphs holding the pool (from capture_begin to reset or failure) */
  int references;          /* graphs and recap_pool_route_begin callers holding the pool */
  int64_t reserved_bytes;  /* bytes of the pool's segments */
  int64_t allocated_bytes; /* bytes of its blocks in use */
  /* The highest allocated bytes of the latest capture routed to the pool, and of all. */
  int64_t capture_peak_bytes;
  int64_t capture_peak_max_bytes;
  int64_t exec_bytes; /* the exec_bytes of the graphs holding the pool, summed */
  int64_t nodes;      /* their nodes, summed */
  /* The budget of the capture routed to it now (0: none), and the latest one's refusals. */
  uint64_t budget_bytes;
  uint64_t budget_refusals;
  /* Segments on CUDA virtual memory (they can sleep), and the addresses they reserve. */
  int64_t vmm_segments;
  int64_t vmm_reserved_va_bytes;
  int state;               /* a recap_pool_state_t (recap/sleep.h) */
  int64_t sleeping_bytes;  /* physical bytes given back to the device while asleep; 0 awake */
  int64_t offloaded_bytes; /* bytes kept in pinned host memory while asleep after OFFLOAD */
  int routed;              /* 1 while a capture routes allocations to it; 0 for the default */
  int64_t segments;        /* segments the pool holds */
  /* Freed blocks still waiting before reuse (recap_record_stream's streams, or a capture):
   * out of allocated_bytes, still in reserved_bytes (docs/allocator.md). */
  int64_t waiting_bytes;
} recap_pool_memory_t;

#define RECAP_POOL_MEMORY_INIT \
  { sizeof(recap_pool_memory_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info (from RECAP_POOL_MEMORY_INIT; the first version ends at budget_refusals) for
 * pool on the current device, the default pool {0,0} included. A private pool that does not
 * exist (yet, or any more) is RECAP_ERROR_NOT_FOUND, *info untouched. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_memory(recap_pool_id_t pool,
                                                           recap_pool_memory_t *info);

/* ---- The memory page ------------------------------------------------------------------------- */

/* Write a self-contained HTML page of recap's device memory now to path (created or replaced):
 * per device its pools, segments and blocks drawn to scale, the graphs holding each pool and
 * what they cost, sleep state (docs/memory.md, "The memory page"). RECAP_ERROR_IO when the file
 * cannot be written (a partial file is removed); RECAP_ERROR_OUT_OF_MEMORY without host memory. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_html(const char *path);

/* The same page as recap_memory_html, into *html (NUL-terminated; free it with
 * recap_string_free). *html is NULL on failure: RECAP_ERROR_OUT_OF_MEMORY when the host has no
 * memory for the copy or the text. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_html_string(char **html);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_MEMORY_H */
