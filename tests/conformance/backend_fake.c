/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_fake.c — the conformance scenarios' device (backend.h) as the CPU fake device: its
 * memory is host memory, its streams run their work at once, and it counts the bytes in use
 * exactly.
 */
#include <string.h>

#include "backend.h"
#include "fake_util.h"

void backend_begin(void) { reset(); }

recap_stream_t backend_stream(void) { return recap__fake_stream_new(); }

/* The fake's streams live until its next reset. */
void backend_stream_destroy(recap_stream_t stream) { (void)stream; }

void backend_sync(void) {}

void backend_memset(void *p, int value, size_t bytes, recap_stream_t stream) {
  recap__fake_memset_async(stream, p, value, bytes);
}

void backend_to_host(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

bool backend_vmm_segments_on(void) { return vmm_segments_on(); }

size_t backend_device_used(void) { return (size_t)recap__fake_now().bytes_in_use[0]; }

void backend_expect_device_grew(size_t before, size_t now, size_t grown) {
  assert_int_equal(now, before + grown);
}
