/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reset.c — recap_test_reset(): the fake device's reset, then each layer's own reset, bottom
 * to top. It lives with the tests so that no layer of the library reaches up into another.
 */
#include "reset.h"

#include "alloc/alloc_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "recap.h"

void recap_test_reset(const recap__fake_config_t *cfg) {
  recap__fake_reset(cfg);
  recap__alloc_reset();
  recap__side_streams_forget();
  recap__registry_clear();
  recap_options_reset();
}
