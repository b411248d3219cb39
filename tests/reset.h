/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reset.h — the test-wide reset: a fresh fake device and fresh state in every layer above it.
 */
#ifndef RECAP_TEST_RESET_H
#define RECAP_TEST_RESET_H

#include "fake/fake.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reset the fake device with cfg (NULL: defaults) and install it, then reset each layer on its
 * own: the allocator (its pools, cached blocks and statistics, dropped without calling the
 * device, whose memory the fake took back), the graph layer's side streams (freed with the
 * fake), the capture registry (the captures the reset ended are gone) and the options. Every
 * CPU test starts with this. */
void recap_test_reset(const recap__fake_config_t *cfg);

/* recap_test_reset(NULL), then what the graph tests start from whatever the environment says:
 * graphs enabled (the kill switch overridden), the stderr logger at level warn, no last error.
 * For C++ programs too, which cannot include the library's internal headers. */
void recap_test_reset_graphs(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_RESET_H */
