/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * applier_launch.h — the layout shared by the parameters applied on the GPU (src/rebind/
 * params_device.c), recap's applier kernel (src/device/applier_kernels.cu) and the CPU fake's
 * model of it: a table in device memory that names, for every site of every parameter, the
 * device-updatable kernel node and where the value goes, and a ring of value slots in pinned
 * host memory that the host publishes into before each replay.
 *
 * Why a ring: the host sets values for replay n while the GPU may still be running replay
 * n - 1, whose applier must not see them. Replay n reads slot n % slots, so the host can run
 * up to `slots` replays ahead of the GPU; it waits (rarely) for the slot's previous replay to
 * have been applied before it publishes over it. The device counts the replays it applied in
 * the table, the host the replays it published: both advance once per replay.
 * Shared by C and CUDA.
 */
#ifndef RECAP_APPLIER_LAUNCH_H
#define RECAP_APPLIER_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "recap/core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RECAP__APPLIER_SLOTS = 256,     /* replays the host may run ahead of the GPU */
  RECAP__APPLIER_THREADS = 64,    /* the appliers' one block, and the updates of one driver call */
  RECAP__APPLIER_MAX_VALUES = 256 /* parameters of one graph (8 bytes each in a slot) */
};

/* The applier's error word (pinned host memory), 0 while all is well: what went wrong first. */
enum {
  RECAP__APPLIER_OK = 0,
  RECAP__APPLIER_OUT_OF_STEP = 1,  /* the slot held no values for this replay */
  RECAP__APPLIER_UPDATE_FAILED = 2 /* cudaGraphKernelNodeUpdatesApply failed (code in `detail`) */
};

/* One site: `size` bytes at `offset` of the kernel parameters of device node `node`
 * (cudaGraphDeviceNode_t) take the value at byte `value` of a slot. */
typedef struct recap__applier_entry {
  uint64_t node;
  uint32_t offset, size, value, reserved;
} recap__applier_entry_t;

/* The pinned host memory the host and the applier share. */
typedef struct recap__applier_ring {
  uint64_t published[RECAP__APPLIER_SLOTS]; /* 1 + the replay whose values the slot holds */
  uint64_t applied[RECAP__APPLIER_SLOTS];   /* 1 + the replay the applier took them for */
  uint32_t error, detail;                   /* RECAP__APPLIER_*, and the CUDA error or replay */
  /* slots of slot_bytes each follow (8-byte aligned). */
} recap__applier_ring_t;

/* The device memory the applier reads, its argument: allocated when the capture begins (the
 * kernel node takes its address), filled by the host at capture end; `replays` is written by
 * the applier. */
typedef struct recap__applier_table {
  uint64_t replays;                /* replays applied, the device's count */
  recap__applier_ring_t *ring;     /* pinned host memory, read and written through the mapping */
  recap__applier_entry_t *entries; /* device memory, count of them */
  uint32_t count, slot_bytes;
} recap__applier_table_t;

/* A parameter whose value the GPU decides (recap_graph_param_device): its source applier,
 * captured where the parameter was declared, reads `bytes` at `value` (device memory the
 * graph's own work wrote) and writes them at each site; with per_block, each node holding it
 * also gets grid.x = ceil(value / per_block) and is enabled, or is disabled while the value is
 * 0 or less. An entry is a site (offset, size) or, offset RECAP__SOURCE_GRID, a node's grid. */
#define RECAP__SOURCE_GRID UINT32_MAX

typedef struct recap__source_entry {
  uint64_t node;           /* cudaGraphDeviceNode_t */
  uint32_t offset, size;   /* a site; offset RECAP__SOURCE_GRID: the node's grid */
  uint32_t grid_y, grid_z; /* grid entries: the captured grid's other dimensions */
  uint32_t enabled;        /* grid entries: whether the node runs now (the applier keeps it) */
  uint32_t reserved;
} recap__source_entry_t;

typedef struct recap__source_table {
  const void *value;              /* device memory */
  recap__applier_ring_t *status;  /* pinned host memory: its error words (NULL: none yet) */
  recap__source_entry_t *entries; /* device memory, count of them */
  uint32_t count, bytes, per_block, is_signed;
} recap__source_table_t;

#ifdef __CUDACC__
#  define RECAP__APPLIER_FN __host__ __device__ static inline
#else
#  define RECAP__APPLIER_FN static inline
#endif

/* The first byte of slot `slot`. */
RECAP__APPLIER_FN unsigned char *recap__applier_slot(recap__applier_ring_t *ring,
                                                     uint32_t slot_bytes, uint64_t slot) {
  return (unsigned char *)(ring + 1) + slot * slot_bytes;
}

/* Bytes of a ring with slots of slot_bytes. */
static inline size_t recap__applier_ring_bytes(uint32_t slot_bytes) {
  return sizeof(recap__applier_ring_t) + (size_t)RECAP__APPLIER_SLOTS * slot_bytes;
}

#ifdef __cplusplus
}
#endif

#endif /* RECAP_APPLIER_LAUNCH_H */
