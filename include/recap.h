/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap.h — umbrella header of recap, PyTorch's CUDA graph system for C programs: one include
 * for the whole public surface; each header under recap/ also compiles alone. See docs/api.md.
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
#include "recap/params.h"
#include "recap/update.h"
#include "recap/region.h"
#include "recap/memory.h"
#include "recap/sleep.h"
#include "recap/graph_set.h"
#include "recap/nccl.h"

#endif /* RECAP_H */
