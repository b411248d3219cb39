/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap.h — umbrella header of recap, PyTorch's CUDA graph system for C programs: one include
 * for the whole public surface. Each header under recap/ also compiles on its own.
 *
 *   recap/core.h      version, export macro, status codes and last error, logging, streams
 *   recap/options.h   the allocator's options
 *   recap/alloc.h     the caching allocator and its pools
 *   recap/graph.h     capture, replay, reset, the capture scope
 *   recap/inspect.h   what a captured graph holds
 *   recap/rng.h       random-number generators that stay right across replays
 *   recap/graphed.h   graphed callables
 *   recap/annotate.h  labels for captured nodes
 *   recap/liveness.h  checks that a graph's inputs are still alive
 *   recap/update.h    updating a graph's executable from a new capture
 *   recap/memory.h    what graphs cost in device memory, and capture budgets
 *   recap/sleep.h     pools that give their device memory back and take it again
 *   recap/graph_set.h one step over many sizes: bucketed graph sets, background capture
 */
#ifndef RECAP_H
#define RECAP_H

#include "recap/core.h"
#include "recap/options.h"
#include "recap/alloc.h"
#include "recap/graph.h"
#include "recap/inspect.h"
#include "recap/rng.h"
#include "recap/graphed.h"
#include "recap/annotate.h"
#include "recap/liveness.h"
#include "recap/rebind.h"
#include "recap/update.h"
#include "recap/region.h"
#include "recap/memory.h"
#include "recap/sleep.h"
#include "recap/graph_set.h"
#include "recap/nccl.h"

#endif /* RECAP_H */
