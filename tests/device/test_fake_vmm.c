/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_vmm.c — the CPU fake's virtual memory management and pinned host memory, called
 * through its ops table with nothing above the seam involved: granularity, reserved ranges,
 * physical chunks counted against the device (mem_get_info exact, one free figure shared with
 * executables, raw allocations and the fake NCCL's buffers), maps, access and unmaps,
 * contents kept across unmap and map, CUDA's refusals, release of a mapped chunk, pinned host
 * memory and copies to and from it, injected faults that leave everything as it was, and reset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

enum { G = 64 * 1024 }; /* the granularity most tests configure */

static void reset_small(size_t capacity) {
  recap__fake_config_t cfg = {.vmm_granularity = G, .memory_per_device = capacity};
  recap__fake_reset(&cfg);
  recap_clear_last_error();
}

static size_t free_bytes(void) {
  size_t free_b = 0, total = 0;
  OK(ops->mem_get_info(&free_b, &total));
  return free_b;
}

static char *reserve(size_t size) {
  void *p = NULL;
  OK(ops->vmm_reserve(&p, size));
  return p;
}

static recap__vmm_handle_t create(size_t size) {
  recap__vmm_handle_t h = 0;
  OK(ops->vmm_create(&h, size));
  assert_int_not_equal(h, 0);
  return h;
}

/* Whether writing one byte at p kills a child process with SIGSEGV (or SIGBUS). */
static bool write_faults(char *p) {
  fflush(NULL);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* cmocka catches SIGSEGV in the test process; the child dies of it. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    *(volatile char *)p = 1;
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
}

/* The next call of kind fails: expr, that call, returns status. */
#define FAILS_ONCE(kind, expr, status) \
  do {                                 \
    recap__fake_fail_nth((kind), 1);   \
    EXPECT_STATUS((expr), (status));   \
  } while (0)

/* After the last release of a kind of resource: none live, no bytes, and the calls that made
 * (kind make) and released (kind release) them counted. */
static void expect_none_left(int64_t live, size_t bytes, recap__fake_fault_t make, uint64_t makes,
                             recap__fake_fault_t release, uint64_t releases) {
  assert_int_equal(live, 0);
  assert_int_equal(bytes, 0);
  assert_int_equal(recap__fake_now().calls[make], makes);
  assert_int_equal(recap__fake_now().calls[release], releases);
}

/* cuMemCreate of bytes refused for want of memory, with message; no handle made. */
static void create_refused(size_t bytes, const char *message) {
  recap__vmm_handle_t h = 7;
  EXPECT_STATUS(ops->vmm_create(&h, bytes), RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(h, 0);
  assert_last_error_has(message);
}

/* ---- granularity --------------------------------------------------------------------------- */

RECAP_TEST(granularity) {
  recap__fake_reset(NULL);
  size_t minimum = 0, recommended = 0;
  OK(ops->vmm_granularity(&minimum, &recommended));
  assert_int_equal(minimum, 2 * MiB);
  assert_int_equal(recommended, 2 * MiB);
  minimum = 0;
  OK(ops->vmm_granularity(&minimum, NULL));
  assert_int_equal(minimum, 2 * MiB);
  EXPECT_STATUS(ops->vmm_granularity(NULL, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemGetAllocationGranularity: minimum and recommended are both NULL");

  reset_small(0);
  OK(ops->vmm_granularity(&minimum, &recommended));
  assert_int_equal(minimum, G);
  assert_int_equal(recommended, G);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_GRANULARITY], 1);

  recap__fake_config_t cfg = {.vmm_unsupported = true};
  recap__fake_reset(&cfg);
  EXPECT_STATUS(ops->vmm_granularity(&minimum, NULL), RECAP_ERROR_NOT_SUPPORTED);
  assert_last_error_has("device 0 does not support CUDA virtual memory management");
  void *p = NULL;
  EXPECT_STATUS(ops->vmm_reserve(&p, 2 * MiB), RECAP_ERROR_NOT_SUPPORTED);
  recap__vmm_handle_t h = 0;
  EXPECT_STATUS(ops->vmm_create(&h, 2 * MiB), RECAP_ERROR_NOT_SUPPORTED);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
}

/* ---- ranges -------------------------------------------------------------------------------- */

RECAP_TEST(reserve_and_release_ranges) {
  reset_small(0);
  char *a = reserve(4 * G), *b = reserve(G);
  assert_int_equal((uintptr_t)a % G, 0);
  assert_int_equal((uintptr_t)b % G, 0);
  assert_true(b + G <= a || a + 4 * G <= b); /* distinct ranges */
  assert_int_equal(recap__fake_now().vmm_ranges_live, 2);
  assert_int_equal(recap__fake_now().vmm_bytes_reserved, 5 * G);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0); /* addresses are not memory */
  assert_true(write_faults(a));                           /* nothing usable behind them */

  void *p = &p;
  EXPECT_STATUS(ops->vmm_reserve(&p, G + 512), RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(p);
  assert_last_error_has(
      "cuMemAddressReserve: the size 0x10200 is not a multiple of device 0's "
      "minimum VMM granularity, 65536 bytes");
  EXPECT_STATUS(ops->vmm_reserve(&p, 0), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("the size is 0");
  EXPECT_STATUS(ops->vmm_reserve(NULL, G), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemAddressReserve: ptr is NULL");

  /* Only whole ranges, as vmm_reserve gave them. */
  EXPECT_STATUS(ops->vmm_release_range(a, 2 * G), RECAP_ERROR_CUDA);
  assert_last_error_has("CUDA_ERROR_INVALID_VALUE");
  assert_last_error_has("its size differs");
  EXPECT_STATUS(ops->vmm_release_range(a + G, G), RECAP_ERROR_CUDA);
  assert_last_error_has("is not a range vmm_reserve gave out");
  EXPECT_STATUS(ops->vmm_release_range(a + 1, G), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemAddressFree: the address 0x");
  assert_int_equal(recap__fake_now().vmm_ranges_live, 2);

  /* Not while something is mapped inside. */
  recap__vmm_handle_t h = create(G);
  OK(ops->vmm_map(a + 3 * G, G, h));
  EXPECT_STATUS(ops->vmm_release_range(a, 4 * G), RECAP_ERROR_CUDA);
  assert_last_error_has("still holds mappings; vmm_unmap them first");
  OK(ops->vmm_unmap(a + 3 * G, G));
  OK(ops->vmm_release(h));

  OK(ops->vmm_release_range(a, 4 * G));
  OK(ops->vmm_release_range(b, G));
  EXPECT_STATUS(ops->vmm_release_range(b, G), RECAP_ERROR_CUDA); /* twice */
  recap__fake_counters_t c = recap__fake_now();
  expect_none_left(c.vmm_ranges_live, c.vmm_bytes_reserved, RECAP__FAKE_FAULT_VMM_RESERVE, 5,
                   RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 7);
  assert_int_equal(c.vmm_chunks_live, 0);
}

/* ---- chunks and the device's memory -------------------------------------------------------- */

RECAP_TEST(chunks_count_against_the_device) {
  reset_small(1 * MiB);
  assert_int_equal(free_bytes(), 1 * MiB);
  recap__vmm_handle_t a = create(4 * G), b = create(8 * G);
  assert_int_not_equal(a, b);
  assert_int_equal(free_bytes(), 1 * MiB - 12 * G);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 12 * G);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 2);

  /* The device is full: both cuMemCreate and cudaMalloc see it. */
  create_refused(8 * G,
                 "cuMemCreate: out of memory (CUDA_ERROR_OUT_OF_MEMORY): tried to create "
                 "a chunk of 524288 bytes on fake device 0, which has 262144 bytes free");
  void *raw = NULL;
  EXPECT_STATUS(ops->raw_malloc(&raw, 5 * G), RECAP_ERROR_OUT_OF_MEMORY);
  OK(ops->raw_malloc(&raw, 4 * G));
  assert_int_equal(free_bytes(), 0);
  OK(ops->raw_free(raw));

  recap__vmm_handle_t h = 0;
  EXPECT_STATUS(ops->vmm_create(&h, G / 2), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemCreate: the size 0x8000 is not a multiple");
  EXPECT_STATUS(ops->vmm_create(NULL, G), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemCreate: handle is NULL");

  OK(ops->vmm_release(a));
  assert_int_equal(free_bytes(), 1 * MiB - 8 * G);
  EXPECT_STATUS(ops->vmm_release(a), RECAP_ERROR_CUDA);
  assert_last_error_has("cuMemRelease: invalid argument (CUDA_ERROR_INVALID_VALUE)");
  OK(ops->vmm_release(b));
  assert_int_equal(free_bytes(), 1 * MiB);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  /* Handles are never given out again. */
  recap__vmm_handle_t c = create(G);
  assert_true(c != a && c != b);
  OK(ops->vmm_release(c));
}

/* A chunk is the current device's: its bytes count there and nowhere else. */
RECAP_TEST(chunks_belong_to_the_current_device) {
  recap__fake_config_t cfg = {.device_count = 2, .vmm_granularity = G, .memory_per_device = MiB};
  recap__fake_reset(&cfg);
  OK(ops->set_device(1));
  recap__vmm_handle_t h = create(4 * G);
  assert_int_equal(free_bytes(), MiB - 4 * G);
  OK(ops->set_device(0));
  assert_int_equal(free_bytes(), MiB);
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.bytes_in_use[0], 0);
  assert_int_equal(c.bytes_in_use[1], 4 * G);
  OK(ops->vmm_release(h)); /* from another device: the handle names the chunk */
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
}

/* Everything that takes a device's memory takes it from the one free figure mem_get_info
 * reports: executables, chunks, raw allocations and the fake NCCL's buffers. A chunk that would
 * fit beside raw allocations alone does not fit beside an executable, so the device never holds
 * more than its capacity and free never exceeds total. */
RECAP_TEST(one_free_figure_for_everything) {
  enum { NODES = 4 * G / RECAP__FAKE_EXEC_BYTES_PER_NODE };
  reset_small(1 * MiB);
  const recap__nccl_ops_t *nccl = &recap__fake_nccl_ops;
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_t g = NULL, one = NULL;
  recap_cuda_graph_exec_t x = NULL, more = NULL;
  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < NODES; i++) recap__fake_stream_enqueue(s);
  OK(ops->stream_end_capture(s, &g));
  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  recap__fake_stream_enqueue(s);
  OK(ops->stream_end_capture(s, &one));
  OK(ops->graph_instantiate(&x, g));
  assert_int_equal(recap__fake_now().exec_bytes[0], 4 * G);
  assert_int_equal(free_bytes(), 1 * MiB - 4 * G);

  create_refused(
      16 * G,
      "cuMemCreate: out of memory (CUDA_ERROR_OUT_OF_MEMORY): tried to create a chunk of 1048576 "
      "bytes on fake device 0, which has 786432 bytes free of 1048576");
  recap__vmm_handle_t a = create(12 * G);
  size_t free_b = 1, total = 0;
  OK(ops->mem_get_info(&free_b, &total));
  assert_int_equal(free_b, 0);
  assert_int_equal(total, 1 * MiB);

  /* Full: every way of taking memory sees it. */
  recap__vmm_handle_t h = 0;
  EXPECT_STATUS(ops->vmm_create(&h, G), RECAP_ERROR_OUT_OF_MEMORY);
  assert_last_error_has(
      "a chunk of 65536 bytes on fake device 0, which has 0 bytes free of "
      "1048576");
  void *raw = NULL;
  EXPECT_STATUS(ops->raw_malloc(&raw, 1), RECAP_ERROR_OUT_OF_MEMORY);
  assert_last_error_has(
      "tried to allocate 1 bytes on fake device 0, which has 0 bytes free of "
      "1048576");
  void *buffer = NULL;
  EXPECT_STATUS(nccl->mem_alloc(&buffer, 512), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(buffer);
  assert_last_error_has(
      "ncclMemAlloc: unhandled system error (ncclSystemError): out of memory: tried to allocate "
      "512 bytes on fake device 0, which has 0 bytes free of 1048576");
  EXPECT_STATUS(ops->graph_instantiate(&more, one), RECAP_ERROR_OUT_OF_MEMORY);
  assert_last_error_has(
      "the executable of 1 nodes needs 4096 bytes of fake device 0, which has "
      "0 free");

  /* The fake NCCL's buffers count as raw allocations do, until they are freed. */
  OK(ops->vmm_release(a));
  assert_int_equal(free_bytes(), 12 * G);
  OK(nccl->mem_alloc(&buffer, 8 * G));
  assert_int_equal(free_bytes(), 4 * G);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 8 * G);
  EXPECT_STATUS(ops->vmm_create(&h, 8 * G), RECAP_ERROR_OUT_OF_MEMORY);
  OK(nccl->mem_free(buffer));
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);

  OK(ops->graph_exec_destroy(x));
  OK(ops->graph_destroy(g));
  OK(ops->graph_destroy(one));
  assert_int_equal(free_bytes(), 1 * MiB);
}

/* ---- mapping, access, contents ------------------------------------------------------------- */

RECAP_TEST(contents_survive_unmap_and_map) {
  reset_small(0);
  char *range = reserve(8 * G);
  recap__vmm_handle_t h = create(2 * G);

  OK(ops->vmm_map(range, 2 * G, h));
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 2 * G);
  assert_true(write_faults(range)); /* no access yet */
  OK(ops->vmm_set_access(range, 2 * G));
  for (size_t i = 0; i < 2 * G; i += 4096) range[i] = (char)(i / 4096 + 1);

  /* Mapped a second time elsewhere: the same bytes, both ways. */
  OK(ops->vmm_map(range + 4 * G, 2 * G, h));
  OK(ops->vmm_set_access(range + 4 * G, 2 * G));
  assert_int_equal(range[4 * G + 4096], 2);
  range[4 * G] = 42;
  assert_int_equal(range[0], 42);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 4 * G);

  /* Unmapped everywhere, the chunk keeps its contents; mapped again at a third place. */
  OK(ops->vmm_unmap(range, 2 * G));
  assert_true(write_faults(range)); /* reserved again, nothing behind it */
  OK(ops->vmm_unmap(range + 4 * G, 2 * G));
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  OK(ops->vmm_map(range + 2 * G, 2 * G, h));
  assert_true(write_faults(range + 2 * G)); /* a new mapping starts without access */
  OK(ops->vmm_set_access(range + 2 * G, 2 * G));
  assert_int_equal(range[2 * G], 42);
  for (size_t i = 4096; i < 2 * G; i += 4096)
    assert_int_equal(range[2 * G + i], (char)(i / 4096 + 1));

  /* Part of a chunk: its first bytes. */
  OK(ops->vmm_map(range + 6 * G, G, h));
  OK(ops->vmm_set_access(range + 6 * G, G));
  assert_int_equal(range[6 * G], 42);

  /* One unmap may take several whole mappings at once, side by side. */
  OK(ops->vmm_map(range + 4 * G, 2 * G, h));
  OK(ops->vmm_unmap(range + 2 * G, 5 * G));
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  OK(ops->vmm_release(h));
  OK(ops->vmm_release_range(range, 8 * G));
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.vmm_chunks_live, 0);
  assert_int_equal(c.bytes_in_use[0], 0);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_VMM_MAP], 5);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_VMM_UNMAP], 3);
  assert_int_equal(c.calls[RECAP__FAKE_FAULT_VMM_SET_ACCESS], 4);
}

RECAP_TEST(map_refusals) {
  reset_small(0);
  char *range = reserve(4 * G), *other = reserve(4 * G);
  recap__vmm_handle_t h = create(2 * G);
  OK(ops->vmm_map(range + G, G, h));

  EXPECT_STATUS(ops->vmm_map(range, 2 * G, h), RECAP_ERROR_CUDA);
  assert_last_error_has("cuMemMap: invalid argument (CUDA_ERROR_INVALID_VALUE)");
  assert_last_error_has("overlaps a mapping; vmm_unmap it first");
  EXPECT_STATUS(ops->vmm_map(range + 3 * G, 2 * G, h), RECAP_ERROR_CUDA);
  assert_last_error_has("is not inside one range reserved by vmm_reserve");
  if (other == range + 4 * G || range == other + 4 * G) {
    /* Two adjacent ranges are still two: a map may not span them. */
    char *low = other < range ? other : range;
    EXPECT_STATUS(ops->vmm_map(low + 3 * G, 2 * G, h), RECAP_ERROR_CUDA);
  }
  EXPECT_STATUS(ops->vmm_map(range + 2 * G, 4 * G, h), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_STATUS(ops->vmm_map(range, 4 * G, h), RECAP_ERROR_NOT_SUPPORTED);
  assert_last_error_has("CUDA_ERROR_NOT_SUPPORTED");
  assert_last_error_has("bytes asked of chunk");
  EXPECT_STATUS(ops->vmm_map(range + 2 * G, G, h + 1000), RECAP_ERROR_CUDA);
  assert_last_error_has("is not a chunk of the fake");
  EXPECT_STATUS(ops->vmm_map(range + 2 * G + 4096, G, h), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemMap: the address 0x");
  EXPECT_STATUS(ops->vmm_map(range + 2 * G, G + 4096, h), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemMap: the size 0x11000 is not a multiple");
  EXPECT_STATUS(ops->vmm_map(range + 2 * G, G, 0), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemMap: the handle is 0, which vmm_create never gives out");
  EXPECT_STATUS(ops->vmm_release(0), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemRelease: the handle is 0");
  EXPECT_STATUS(ops->vmm_map(NULL, G, h), RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("cuMemMap: the address is NULL");
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, G);

  /* Unmaps take whole mappings and nothing unmapped. */
  OK(ops->vmm_unmap(range + G, G));
  OK(ops->vmm_map(range, 2 * G, h));
  EXPECT_STATUS(ops->vmm_unmap(range, G), RECAP_ERROR_CUDA);
  assert_last_error_has("cuMemUnmap: invalid argument (CUDA_ERROR_INVALID_VALUE)");
  assert_last_error_has("cuts a mapping; unmap whole mappings only");
  EXPECT_STATUS(ops->vmm_unmap(range, 3 * G), RECAP_ERROR_CUDA);
  assert_last_error_has("covers addresses that are not mapped");
  EXPECT_STATUS(ops->vmm_set_access(range, 3 * G), RECAP_ERROR_CUDA);
  assert_last_error_has("cuMemSetAccess: invalid argument (CUDA_ERROR_INVALID_VALUE)");
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 2 * G);
  OK(ops->vmm_set_access(range, 2 * G));
  range[0] = 5; /* the refusals changed nothing */
  OK(ops->vmm_unmap(range, 2 * G));
  OK(ops->vmm_release(h));
  OK(ops->vmm_release_range(range, 4 * G));
  OK(ops->vmm_release_range(other, 4 * G));
}

/* As on CUDA, a chunk released while mapped lives on behind its mappings. */
RECAP_TEST(release_while_mapped) {
  reset_small(1 * MiB);
  char *range = reserve(4 * G);
  recap__vmm_handle_t h = create(2 * G);
  OK(ops->vmm_map(range, 2 * G, h));
  OK(ops->vmm_map(range + 2 * G, 2 * G, h));
  OK(ops->vmm_set_access(range, 4 * G));
  range[7] = 9;
  OK(ops->vmm_release(h));
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  assert_int_equal(free_bytes(), 1 * MiB - 2 * G);
  assert_int_equal(range[2 * G + 7], 9);

  EXPECT_STATUS(ops->vmm_map(range, 2 * G, h), RECAP_ERROR_CUDA); /* the handle is gone */
  assert_last_error_has("never made by vmm_create, or released");
  EXPECT_STATUS(ops->vmm_release(h), RECAP_ERROR_CUDA);

  OK(ops->vmm_unmap(range, 2 * G));
  assert_int_equal(free_bytes(), 1 * MiB - 2 * G); /* one mapping left */
  assert_int_equal(range[2 * G + 7], 9);
  OK(ops->vmm_unmap(range + 2 * G, 2 * G));
  assert_int_equal(free_bytes(), 1 * MiB);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  OK(ops->vmm_release_range(range, 4 * G));
}

/* ---- pinned host memory -------------------------------------------------------------------- */

RECAP_TEST(pinned_host_memory) {
  reset_small(1 * MiB);
  recap_stream_t s = recap__fake_stream_new();
  void *host = NULL;
  OK(ops->host_alloc_pinned(&host, 1000));
  assert_non_null(host);
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.pinned_live, 1);
  assert_int_equal(c.pinned_bytes, 1000);
  assert_int_equal(c.bytes_in_use[0], 0); /* host memory, not the device's */

  /* Device to host and back, through mapped device memory. */
  char *range = reserve(G);
  recap__vmm_handle_t h = create(G);
  OK(ops->vmm_map(range, G, h));
  OK(ops->vmm_set_access(range, G));
  memset(range, 0x5a, 1000);
  OK(ops->memcpy_async(host, range, 1000, s));
  assert_int_equal(((unsigned char *)host)[999], 0x5a);
  memset(host, 0x11, 1000);
  OK(ops->memcpy_async(range + 100, host, 1000, s));
  assert_int_equal((unsigned char)range[99], 0x5a);
  assert_int_equal((unsigned char)range[100], 0x11);
  assert_int_equal(recap__fake_now().eager_copies, 2);

  void *p = &p;
  EXPECT_STATUS(ops->host_alloc_pinned(&p, 0), RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(p);
  assert_last_error_has("cudaHostAlloc: size is 0");
  EXPECT_STATUS(ops->host_alloc_pinned(NULL, 8), RECAP_ERROR_INVALID_ARGUMENT);
  char stack;
  EXPECT_STATUS(ops->host_free_pinned(&stack), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaFreeHost: invalid argument (cudaErrorInvalidValue)");
  EXPECT_MESSAGE_POINTER(&stack);
  OK(ops->host_free_pinned(NULL));

  /* A global capture forbids both, and is invalidated by them, as by cudaMalloc. */
  recap_stream_t cs = recap__fake_stream_new();
  assert_int_not_equal(recap__fake_capture_begin(cs, RECAP__CAPTURE_MODE_GLOBAL), 0);
  EXPECT_STATUS(ops->host_alloc_pinned(&p, 8), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_last_error_has("cudaHostAlloc");
  EXPECT_STATUS(ops->host_free_pinned(host), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(cs));
  assert_int_equal(recap__fake_now().pinned_live, 1);

  OK(ops->host_free_pinned(host));
  EXPECT_STATUS(ops->host_free_pinned(host), RECAP_ERROR_CUDA); /* twice */
  c = recap__fake_now();
  expect_none_left(c.pinned_live, c.pinned_bytes, RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, 4,
                   RECAP__FAKE_FAULT_HOST_FREE_PINNED, 4);
}

/* The cuMem* calls are no stream work: a global capture allows them and stays intact. */
RECAP_TEST(captures_allow_vmm) {
  reset_small(0);
  char *range = reserve(G);
  recap_stream_t cs = recap__fake_stream_new();
  assert_int_not_equal(recap__fake_capture_begin(cs, RECAP__CAPTURE_MODE_GLOBAL), 0);
  recap__vmm_handle_t h = create(G);
  OK(ops->vmm_map(range, G, h));
  OK(ops->vmm_set_access(range, G));
  range[0] = 1;
  OK(ops->vmm_unmap(range, G));
  OK(ops->vmm_release(h));
  assert_int_equal(capture_status(cs, NULL), RECAP__CAPTURE_ACTIVE);
  assert_true(recap__fake_capture_end(cs));
  OK(ops->vmm_release_range(range, G));
}

/* ---- faults -------------------------------------------------------------------------------- */

RECAP_TEST(faults_change_nothing) {
  reset_small(1 * MiB);
  char *range = reserve(4 * G);
  recap__vmm_handle_t h = create(2 * G), spare = create(G);
  OK(ops->vmm_map(range, 2 * G, h));
  OK(ops->vmm_set_access(range, 2 * G));
  range[0] = 3;
  void *host = NULL;
  OK(ops->host_alloc_pinned(&host, 64));
  recap__fake_counters_t before = recap__fake_now();

  size_t g = 0;
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_GRANULARITY, ops->vmm_granularity(&g, NULL), RECAP_ERROR_CUDA);
  assert_last_error_has(
      "cuMemGetAllocationGranularity: unknown error (cudaErrorUnknown): fault "
      "injected by the fake device into VMM granularity call 1");
  assert_int_equal(g, 0);

  void *p = &p;
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_RESERVE, ops->vmm_reserve(&p, G), RECAP_ERROR_CUDA);
  assert_null(p);
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, ops->vmm_release_range(range, 4 * G),
             RECAP_ERROR_CUDA);
  assert_last_error_has("fault injected");
  recap__vmm_handle_t x = 5;
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_CREATE, ops->vmm_create(&x, G), RECAP_ERROR_OUT_OF_MEMORY);
  assert_last_error_has(
      "cuMemCreate: out of memory: fault injected by the fake device into VMM "
      "chunk creation call");
  assert_int_equal(x, 0);
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_RELEASE, ops->vmm_release(spare), RECAP_ERROR_CUDA);
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_MAP, ops->vmm_map(range + 2 * G, G, spare), RECAP_ERROR_CUDA);
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_UNMAP, ops->vmm_unmap(range, 2 * G), RECAP_ERROR_CUDA);
  FAILS_ONCE(RECAP__FAKE_FAULT_VMM_SET_ACCESS, ops->vmm_set_access(range, 2 * G), RECAP_ERROR_CUDA);
  FAILS_ONCE(RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, ops->host_alloc_pinned(&p, 8),
             RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  FAILS_ONCE(RECAP__FAKE_FAULT_HOST_FREE_PINNED, ops->host_free_pinned(host), RECAP_ERROR_CUDA);

  recap__fake_counters_t after = recap__fake_now();
  assert_int_equal(after.vmm_chunks_live, before.vmm_chunks_live);
  assert_int_equal(after.vmm_bytes_mapped, before.vmm_bytes_mapped);
  assert_int_equal(after.vmm_ranges_live, before.vmm_ranges_live);
  assert_int_equal(after.vmm_bytes_reserved, before.vmm_bytes_reserved);
  assert_int_equal(after.pinned_live, before.pinned_live);
  assert_int_equal(after.bytes_in_use[0], before.bytes_in_use[0]);
  assert_int_equal(range[0], 3); /* still mapped, still accessible */

  /* Everything still works, and the failed ones count as calls. */
  OK(ops->vmm_map(range + 2 * G, G, spare));
  OK(ops->vmm_unmap(range, 3 * G));
  OK(ops->vmm_release(spare));
  OK(ops->vmm_release(h));
  OK(ops->vmm_release_range(range, 4 * G));
  OK(ops->host_free_pinned(host));
  after = recap__fake_now();
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_VMM_MAP],
                   before.calls[RECAP__FAKE_FAULT_VMM_MAP] + 2);
  assert_int_equal(after.vmm_chunks_live, 0);
  assert_int_equal(after.bytes_in_use[0], 0);
}

/* ---- reset --------------------------------------------------------------------------------- */

RECAP_TEST(reset_gives_everything_back) {
  reset_small(1 * MiB);
  char *range = reserve(4 * G);
  recap__vmm_handle_t h = create(2 * G);
  (void)create(G);
  OK(ops->vmm_map(range, 2 * G, h));
  OK(ops->vmm_release(h));
  void *host = NULL;
  OK(ops->host_alloc_pinned(&host, 64));
  recap__fake_reset(NULL);
  recap__fake_counters_t c = recap__fake_now();
  const struct {
    const char *name;
    uint64_t value;
  } left[] = {{"vmm_chunks_live", (uint64_t)c.vmm_chunks_live},
              {"vmm_bytes_mapped", c.vmm_bytes_mapped},
              {"vmm_ranges_live", (uint64_t)c.vmm_ranges_live},
              {"vmm_bytes_reserved", c.vmm_bytes_reserved},
              {"pinned_live", (uint64_t)c.pinned_live},
              {"pinned_bytes", c.pinned_bytes},
              {"bytes_in_use[0]", c.bytes_in_use[0]}};
  for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
    if (left[i].value != 0)
      fail_msg("%s is %llu after the reset", left[i].name, (unsigned long long)left[i].value);
  /* A handle from before the reset names nothing. */
  EXPECT_STATUS(ops->vmm_release(h), RECAP_ERROR_CUDA);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(granularity),
    cmocka_unit_test(reserve_and_release_ranges),
    cmocka_unit_test(chunks_count_against_the_device),
    cmocka_unit_test(chunks_belong_to_the_current_device),
    cmocka_unit_test(one_free_figure_for_everything),
    cmocka_unit_test(contents_survive_unmap_and_map),
    cmocka_unit_test(map_refusals),
    cmocka_unit_test(release_while_mapped),
    cmocka_unit_test(pinned_host_memory),
    cmocka_unit_test(captures_allow_vmm),
    cmocka_unit_test(faults_change_nothing),
    cmocka_unit_test(reset_gives_everything_back),
};
RECAP_TEST_MAIN(tests)
