/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_applier.c — the CPU fake device's model of graph parameters applied on the GPU: the
 * driver's answer on device-updatable kernel nodes, and recap's applier kernel
 * (src/device/applier_kernels.cu), which runs here as a kernel node of the executable being
 * launched and writes the values of the ring slot of its replay into that executable's
 * device-updatable nodes, as cudaGraphKernelNodeUpdatesApply does. The table and the ring are
 * fake device and pinned memory, that is host memory, laid out as applier_launch.h says.
 * graph_launch refuses an executable with device-updatable nodes that was not uploaded since
 * its instantiation or since a host set of one of them, and graph_exec_update refuses graphs
 * that hold them (fake_capture.c, fake_patch.c).
 */
#include <stdint.h>
#include <string.h>

#include "device/applier_launch.h"
#include "fake/fake_state.h"

void recap__fake_applier_reset(void) {
  recap__fake.params_device_unsupported = false;
  recap__fake.applier_runs = 0;
}

void recap__fake_params_device_supported(bool supported) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.params_device_unsupported = !supported;
  pthread_mutex_unlock(&recap__fake.lock);
}

uint64_t recap__fake_applier_runs(void) {
  pthread_mutex_lock(&recap__fake.lock);
  uint64_t n = recap__fake.applier_runs;
  pthread_mutex_unlock(&recap__fake.lock);
  return n;
}

recap_status_t recap__fake_op_params_device_supported(bool *supported) {
  RECAP__ARG(supported, "params_device_supported: supported is NULL");
  pthread_mutex_lock(&recap__fake.lock);
  *supported = !recap__fake.params_device_unsupported;
  pthread_mutex_unlock(&recap__fake.lock);
  return RECAP_SUCCESS;
}

bool recap__fake_exec_device_nodes(const fake_exec_t *x, bool *host_set) {
  bool any = false;
  *host_set = false;
  for (size_t i = 0; i < x->nodes.count; i++) {
    any |= x->nodes.v[i].device_updatable;
    *host_set |= x->nodes.v[i].device_updatable && x->nodes.v[i].host_set;
  }
  return any;
}

/* The device-updatable node of x whose handle is `handle`, or NULL. */
static fake_node_t *device_node(fake_exec_t *x, uint64_t handle) {
  for (size_t i = 0; i < x->nodes.count; i++)
    if (x->nodes.v[i].handle == handle && x->nodes.v[i].device_updatable) return &x->nodes.v[i];
  return NULL;
}

/* Record the applier's first error in the ring, as the kernel does. */
static void applier_error(recap__applier_ring_t *ring, uint32_t error, uint32_t detail) {
  if (ring->error != RECAP__APPLIER_OK) return;
  ring->error = error;
  ring->detail = detail;
}

/* The applier kernel: run with the fake's lock held, inside graph_launch. */
static void applier_run(void *const *args, size_t n) {
  if (n != 1 || !args[0]) return;
  recap__applier_table_t *t = args[0];
  fake_exec_t *x = recap__fake_running_exec();
  if (!x) return; /* only a graph runs it; a capture never runs it eagerly */
  recap__fake.applier_runs++;
  const uint64_t replay = t->replays;
  const uint64_t slot = replay % RECAP__APPLIER_SLOTS;
  recap__applier_ring_t *ring = t->ring;
  if (ring->published[slot] != replay + 1) {
    applier_error(ring, RECAP__APPLIER_OUT_OF_STEP, (uint32_t)replay);
  } else {
    const unsigned char *values = recap__applier_slot(ring, t->slot_bytes, slot);
    for (uint32_t i = 0; i < t->count; i++) {
      const recap__applier_entry_t *e = &t->entries[i];
      fake_node_t *node = device_node(x, e->node);
      /* The fake's parameters lie in 8-byte slots (fake_state.h): the entry's offset names a
       * slot and a place in it. */
      size_t k = e->offset / 8;
      if (!node || k >= node->arg_count || e->offset % 8 + e->size > 8 ||
          e->value + e->size > t->slot_bytes) {
        applier_error(ring, RECAP__APPLIER_UPDATE_FAILED, 1 /* cudaErrorInvalidValue */);
        break;
      }
      memcpy((unsigned char *)&node->args[k] + e->offset % 8, values + e->value, e->size);
    }
  }
  t->replays = replay + 1;
  ring->applied[slot] = replay + 1;
}

recap_status_t recap__fake_op_params_apply_launch(recap_stream_t stream,
                                                  struct recap__applier_table *table) {
  RECAP__ARG(table, "recap_params_apply_kernel: table is NULL");
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_LAUNCH);
  pthread_mutex_unlock(&recap__fake.lock);
  if (inject)
    return recap__error(RECAP_ERROR_CUDA,
                        "recap_params_apply_kernel<<<1, %d>>>: unknown error (cudaErrorUnknown): "
                        "fault injected by the fake device",
                        (int)RECAP__APPLIER_THREADS);
  const void *args[1] = {table};
  recap__fake_launch_kernel_fn(stream, "recap_params_apply_kernel", applier_run, args, 1);
  return RECAP_SUCCESS;
}

/* The source applier (recap_params_source_kernel): the value the graph's own work wrote into
 * the sites, and the grids and whether the nodes run. */
static void source_run(void *const *args, size_t n) {
  if (n != 1 || !args[0]) return;
  const recap__source_table_t *t = args[0];
  fake_exec_t *x = recap__fake_running_exec();
  if (!x) return;
  recap__fake.applier_runs++;
  uint64_t value = 0;
  memcpy(&value, t->value, t->bytes);
  int64_t count = t->bytes == 4 ? (int64_t)(int32_t)(uint32_t)value : (int64_t)value;
  int64_t blocks = t->per_block && count > 0 ? (count + t->per_block - 1) / t->per_block : 0;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;
  for (uint32_t i = 0; i < t->count; i++) {
    const recap__source_entry_t *e = &t->entries[i];
    fake_node_t *node = device_node(x, e->node);
    if (!node) {
      if (t->status) applier_error(t->status, RECAP__APPLIER_UPDATE_FAILED, 1);
      return;
    }
    if (e->offset == RECAP__SOURCE_GRID) {
      node->grid[0] = blocks > 0 ? (unsigned)blocks : 1u;
      node->grid[1] = e->grid_y;
      node->grid[2] = e->grid_z;
      if (e->enabled != (blocks > 0)) { /* as the kernel: set only when it changes */
        t->entries[i].enabled = blocks > 0;
        node->disabled = blocks == 0;
      }
      continue;
    }
    size_t k = e->offset / 8;
    if (k >= node->arg_count || e->offset % 8 + e->size > 8) {
      if (t->status) applier_error(t->status, RECAP__APPLIER_UPDATE_FAILED, 1);
      return;
    }
    memcpy((unsigned char *)&node->args[k] + e->offset % 8, &value, e->size);
  }
}

recap_status_t recap__fake_op_params_source_launch(recap_stream_t stream,
                                                   struct recap__source_table *table) {
  RECAP__ARG(table, "recap_params_source_kernel: table is NULL");
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_LAUNCH);
  pthread_mutex_unlock(&recap__fake.lock);
  if (inject)
    return recap__error(RECAP_ERROR_CUDA,
                        "recap_params_source_kernel<<<1, 1>>>: unknown error (cudaErrorUnknown): "
                        "fault injected by the fake device");
  const void *args[1] = {table};
  recap__fake_launch_kernel_fn(stream, "recap_params_source_kernel", source_run, args, 1);
  return RECAP_SUCCESS;
}
