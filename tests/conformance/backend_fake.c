/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_fake.c — the conformance scenarios' device (backend.h) as the CPU fake device: its
 * memory is host memory, its streams run their work at once, and it counts the bytes in use
 * exactly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "fake_util.h"

void backend_begin(void) { reset(); }

/* The kernels' arguments are 8-byte words: pointers, counts, and floats by their bits. */
static void *word_of_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return (void *)(uintptr_t)bits;
}

static float float_of_word(const void *word) {
  uint32_t bits = (uint32_t)(uintptr_t)word;
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static void fill_kernel(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  float *p = args[0];
  for (size_t i = 0; i < (size_t)(uintptr_t)args[1]; i++) p[i] = float_of_word(args[2]);
}

static void add_scalar_kernel(void *const *args, size_t n) {
  assert_int_equal(n, 4);
  float *out = args[0];
  const float *in = args[1];
  for (size_t i = 0; i < (size_t)(uintptr_t)args[2]; i++) out[i] = in[i] + float_of_word(args[3]);
}

static void add_kernel(void *const *args, size_t n) {
  assert_int_equal(n, 4);
  float *out = args[0];
  const float *a = args[1], *b = args[2];
  for (size_t i = 0; i < (size_t)(uintptr_t)args[3]; i++) out[i] = a[i] + b[i];
}

static void axpy_kernel(void *const *args, size_t n) {
  assert_int_equal(n, 4);
  float *y = args[0];
  const float *x = args[1];
  for (size_t i = 0; i < (size_t)(uintptr_t)args[2]; i++) y[i] += float_of_word(args[3]) * x[i];
}

void backend_fill(float *p, size_t n, float value, recap_stream_t stream) {
  const void *args[3] = {p, (void *)(uintptr_t)n, word_of_float(value)};
  recap__fake_launch_kernel_fn(stream, "recap_test_fill_kernel", fill_kernel, args, 3);
}

void backend_tagged(float *p, size_t n, unsigned tag, recap_stream_t stream) {
  /* The fake keeps a kernel's name as given: one string per tag, alive for the program. */
  static const char *const names[] = {"recap_test_fill_kernel#0",  "recap_test_fill_kernel#1",
                                      "recap_test_fill_kernel#2",  "recap_test_fill_kernel#3",
                                      "recap_test_fill_kernel#4",  "recap_test_fill_kernel#5",
                                      "recap_test_fill_kernel#6",  "recap_test_fill_kernel#7",
                                      "recap_test_fill_kernel#8",  "recap_test_fill_kernel#9",
                                      "recap_test_fill_kernel#10", "recap_test_fill_kernel#11",
                                      "recap_test_fill_kernel#12", "recap_test_fill_kernel#13",
                                      "recap_test_fill_kernel#14", "recap_test_fill_kernel#15"};
  assert_true(tag < sizeof names / sizeof names[0]);
  const void *args[3] = {p, (void *)(uintptr_t)n, word_of_float((float)tag)};
  recap__fake_launch_kernel_fn(stream, names[tag], fill_kernel, args, 3);
}

unsigned backend_node_tag(const recap_graph_node_t *node) {
  const char *hash = node->kernel_name ? strchr(node->kernel_name, '#') : NULL;
  return hash ? (unsigned)strtoul(hash + 1, NULL, 10) : 0;
}

void backend_add_scalar(float *out, const float *in, size_t n, float value, recap_stream_t stream) {
  const void *args[4] = {out, in, (void *)(uintptr_t)n, word_of_float(value)};
  recap__fake_launch_kernel_fn(stream, BACKEND_ADD_SCALAR_KERNEL, add_scalar_kernel, args, 4);
}

void backend_add(float *out, const float *a, const float *b, size_t n, recap_stream_t stream) {
  const void *args[4] = {out, a, b, (void *)(uintptr_t)n};
  recap__fake_launch_kernel_fn(stream, BACKEND_ADD_KERNEL, add_kernel, args, 4);
}

void backend_axpy(float *y, const float *x, size_t n, float alpha, recap_stream_t stream) {
  const void *args[4] = {y, x, (void *)(uintptr_t)n, word_of_float(alpha)};
  recap__fake_launch_kernel_fn(stream, "recap_test_axpy_kernel", axpy_kernel, args, 4);
}

uint64_t backend_graph_launches(void) { return recap__fake_now().graph_launches; }

void backend_expect_launched(uint64_t before, uint64_t launched) {
  assert_int_equal(recap__fake_now().graph_launches, before + launched);
}

void backend_expect_nothing_left(void) {
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

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
