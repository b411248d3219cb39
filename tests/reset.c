/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reset.c — recap_test_reset(): the fake device's reset, then each layer's own reset, bottom
 * to top. It lives with the tests so that no layer of the library reaches up into another.
 */
#include "reset.h"

#include <stdlib.h>

#include "alloc/alloc_internal.h"
#include "alloc/reset.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "nccl/nccl_internal.h"
#include "recap.h"

void recap_test_reset(const recap__fake_config_t *cfg) {
  /* RECAP_TEST_DEVICE_BYTES gives a default-configured fake device that much memory: a VMM
   * segment reserves as many addresses as the device has memory, and under ThreadSanitizer or
   * valgrind a process cannot reserve several ranges of the default 64 GiB (tests/CMakeLists.txt
   * sets it for the threaded suites' VMM runs). */
  const char *bytes = getenv("RECAP_TEST_DEVICE_BYTES");
  recap__fake_config_t sized = {0};
  if (!cfg && bytes && *bytes) {
    sized.memory_per_device = (size_t)strtoull(bytes, NULL, 10);
    cfg = &sized;
  }
  recap__fake_reset(cfg);
  recap__alloc_reset();
  recap__side_streams_forget();
  recap__registry_clear();
  /* The replay policy's table keeps, per communicator, the event of its latest replay: an
   * event of the fake just reset, and a communicator address the next test's fake may hand
   * out again (a replay would then wait on a dead event). */
  recap__nccl_policy_forget();
  recap_options_reset();
}

void recap_test_reset_graphs(void) {
  recap_test_reset(NULL);
  recap__graphs_disabled_override(0);
  recap_log_set(NULL, NULL);
  recap_log_level_set(RECAP_LOG_LEVEL_WARN);
  recap_clear_last_error();
}
