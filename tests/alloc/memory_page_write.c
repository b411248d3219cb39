/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_page_write — writes the memory page (recap_memory_html) of a state built on the CPU
 * fake device, for the headless-browser test (memory_page_browser.cmake):
 *
 *     memory_page_write OUT.html
 *
 * The state: the default pool with an allocated block and one waiting on another stream, the
 * pool of a graph holding a block, and the pool of a second graph drawn asleep (its state and a
 * VMM segment set by hand, as test_memory_page does, and put back after the page is written).
 * Exit status: 0 on success, 1 on a failure (said on standard error), 2 for a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "recap.h"
#include "reset.h"

#define TRY(expr)                                                                \
  do {                                                                           \
    recap_status_t try_status_ = (expr);                                         \
    if (try_status_ != RECAP_SUCCESS) {                                          \
      fprintf(stderr, "memory_page_write: %s: %s\n", #expr, recap_last_error()); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* A graph of one kernel whose capture allocates `bytes` and keeps them; its pool in *pool. */
static recap_graph_t graph_holding(recap_stream_t s, size_t bytes, void **block,
                                   recap_pool_id_t *pool) {
  recap_graph_t graph;
  TRY(recap_graph_create(&graph, 0));
  TRY(recap_graph_capture_begin(graph, NULL, s));
  TRY(recap_malloc(block, bytes, s));
  recap__fake_launch_kernel(s, "k");
  TRY(recap_graph_capture_end(graph));
  TRY(recap_graph_pool(graph, pool));
  return graph;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: memory_page_write OUT.html\n");
    return 2;
  }
  recap_test_reset(NULL);
  recap_stream_t s = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  void *a, *waiting, *held, *sleeping;
  TRY(recap_malloc(&a, 1000, s));
  TRY(recap_malloc(&waiting, 8 << 10, s));
  recap__fake_stream_enqueue(s2); /* s2 has work that reads the block */
  TRY(recap_record_stream(waiting, s2));
  TRY(recap_free(waiting));
  recap_pool_id_t held_pool, asleep_pool;
  recap_graph_t g1 = graph_holding(s, 8 << 10, &held, &held_pool);
  recap_graph_t g2 = graph_holding(s, 3 << 20, &sleeping, &asleep_pool);

  recap__pool_t *pool = recap__alloc.devices[0]->private_pools;
  while (pool && !recap__pool_id_equal(pool->id, asleep_pool)) pool = pool->next;
  if (!pool || !pool->segments) {
    fprintf(stderr, "memory_page_write: the second graph's pool is not on device 0\n");
    return 1;
  }
  recap__segment_t *seg = pool->segments;
  pool->state = 2; /* RECAP_POOL_ASLEEP_OFFLOADED */
  pool->sleeping_bytes = (int64_t)seg->size;
  seg->vmm = true;
  seg->va_size = (size_t)80 << 30;
  recap_status_t written = recap_memory_html(argv[1]);
  pool->state = 0;
  pool->sleeping_bytes = 0;
  seg->vmm = false;
  seg->va_size = 0;
  TRY(written);

  TRY(recap_graph_destroy(g1));
  TRY(recap_graph_destroy(g2));
  TRY(recap_free(a));
  TRY(recap_free(held));
  TRY(recap_free(sleeping));
  TRY(recap_memory_check());
  return 0;
}
