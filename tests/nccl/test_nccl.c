/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl.c — the NCCL layer (recap/nccl.h) on the CPU fake device with a recording NCCL
 * table of one rank: eager calls, what a capture records (fields, order, communicator indices,
 * group depth, hash), argument refusals, the refusal inside region bodies (the wrappers' and,
 * at the region's end, NCCL kernels enqueued directly), the warning for an NCCL with the graph
 * deadlock, the check of one rank, the replay policies, and failures of the seam's calls.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "device/nccl_seam.h"
#include "fake/fake.h"
#include "graph_util.h"
#include "harness.h"
#include "capture_util.h"
#include "nccl/nccl_internal.h"
#include "recap.h"

/* ------------------------------------------------------------------------------------------
 * A recording NCCL of one rank
 * ---------------------------------------------------------------------------------------- */

enum { MAX_CALLS = 64 };

static struct {
  int version;
  recap_status_t load_status;       /* what load answers */
  recap_status_t collective_status; /* what collective answers */
  int nranks;
  recap__coll_t calls[MAX_CALLS];
  recap_stream_t streams[MAX_CALLS];
  int call_count, loads, group_starts, group_ends;
} rec;

static recap_status_t rec_load(int *version) {
  rec.loads++;
  if (rec.load_status != RECAP_SUCCESS)
    return recap_set_last_error(rec.load_status, "recording NCCL: load refused");
  *version = rec.version;
  return RECAP_SUCCESS;
}

static recap_status_t rec_comm_info(recap__nccl_comm_t comm, int *rank, int *nranks, int *device) {
  (void)comm;
  *rank = 0;
  *nranks = rec.nranks;
  *device = 0;
  return RECAP_SUCCESS;
}

static recap_status_t rec_collective(const recap__coll_t *c, recap_stream_t stream) {
  if (rec.collective_status != RECAP_SUCCESS)
    return recap_set_last_error(rec.collective_status, "recording NCCL: collective refused");
  assert_true(rec.call_count < MAX_CALLS);
  rec.streams[rec.call_count] = stream;
  rec.calls[rec.call_count++] = *c;
  /* One rank: an all-gather is a copy (the check's exchange reads it back). */
  if (c->kind == RECAP__COLL_ALL_GATHER && c->dtype == RECAP_NCCL_UINT64)
    return recap__device()->memcpy_async(c->recv, c->send, c->count * 8, stream);
  return RECAP_SUCCESS;
}

static recap_status_t rec_group_start(void) {
  rec.group_starts++;
  return RECAP_SUCCESS;
}
static recap_status_t rec_group_end(void) {
  rec.group_ends++;
  return RECAP_SUCCESS;
}

static const recap__nccl_ops_t rec_ops = {
    .name = "recording",
    .load = rec_load,
    .comm_info = rec_comm_info,
    .collective = rec_collective,
    .group_start = rec_group_start,
    .group_end = rec_group_end,
};

/* Two distinct communicator handles (never dereferenced by recap nor by the table). */
static char comm_storage[2];
#define COMM0 ((recap_nccl_comm_t)(void *)&comm_storage[0])
#define COMM1 ((recap_nccl_comm_t)(void *)&comm_storage[1])

static void setup(void) {
  reset();
  memset(&rec, 0, sizeof rec);
  rec.version = 23203;
  rec.nranks = 1;
  recap__nccl_install(&rec_ops);
  recap__nccl_policy_forget();
  recap__nccl_warning_reset();
}

static void teardown(void) {
  recap__nccl_install(NULL);
  recap__nccl_policy_forget();
}

static void *device_buffer(recap_stream_t s, size_t bytes) {
  void *p = NULL;
  OK(recap_malloc(&p, bytes, s));
  return p;
}

/* The start of most tests: the setup, a stream, and a device buffer of bytes on it. */
static recap_stream_t setup_with_buffer(float **buf, size_t bytes) {
  setup();
  recap_stream_t s = recap__fake_stream_new();
  *buf = device_buffer(s, bytes);
  return s;
}

/* The end of a test of one graph: the graph and the buffer gone, the teardown. */
static void teardown_graph(recap_graph_t g, float *buf) {
  OK(recap_graph_destroy(g));
  OK(recap_free(buf));
  teardown();
}

/* Both streams' work done. */
static void complete_both(recap_stream_t s1, recap_stream_t s2) {
  recap__fake_stream_complete(s1);
  recap__fake_stream_complete(s2);
}

static size_t collectives(recap_graph_t g, recap_collective_t *out, size_t capacity,
                          uint64_t *hash) {
  for (size_t i = 0; i < capacity; i++) out[i] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  size_t count = 0;
  OK(recap_graph_collectives(g, out, capacity, &count, hash));
  return count;
}

/* ------------------------------------------------------------------------------------------
 * Tests
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_eager_calls_nccl_and_records_nothing) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 1024);
  OK(recap_nccl_all_reduce(buf, buf, 256, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_nccl_broadcast(buf, buf, 16, RECAP_NCCL_INT32, 0, COMM0, s));
  assert_int_equal(rec.call_count, 2);
  assert_int_equal(rec.calls[0].kind, RECAP__COLL_ALL_REDUCE);
  assert_int_equal(rec.calls[0].count, 256);
  assert_int_equal(rec.calls[0].dtype, 7);
  assert_int_equal(rec.calls[0].op, 0);
  assert_ptr_equal(rec.calls[0].comm, COMM0);
  assert_ptr_equal(rec.streams[0], s);
  assert_int_equal(rec.calls[1].kind, RECAP__COLL_BROADCAST);
  assert_int_equal(rec.calls[1].root, 0);
  assert_int_equal(rec.calls[1].op, -1);
  int version = 0;
  OK(recap_nccl_version(&version));
  assert_int_equal(version, 23203);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  size_t count = 99;
  uint64_t hash = 1;
  OK(recap_graph_collectives(g, NULL, 0, &count, &hash));
  assert_int_equal(count, 0);
  assert_true(hash == 0);
  teardown_graph(g, buf);
}

RECAP_TEST(test_enums_equal_nccls) {
  /* nccl.h: ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3, ncclInt64 4, ncclUint64 5,
   * ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9, ncclFloat8e4m3 10,
   * ncclFloat8e5m2 11; ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4. */
  assert_int_equal(RECAP_NCCL_UINT64, 5);
  assert_int_equal(RECAP_NCCL_FLOAT32, 7);
  assert_int_equal(RECAP_NCCL_BFLOAT16, 9);
  assert_int_equal(RECAP_NCCL_FLOAT8E5M2, 11);
  assert_int_equal(RECAP_NCCL_AVG, 4);
  assert_string_equal(recap_nccl_dtype_name(RECAP_NCCL_BFLOAT16), "bfloat16");
  assert_string_equal(recap_nccl_dtype_name((recap_nccl_dtype_t)12), "unknown");
  assert_string_equal(recap_nccl_op_name(RECAP_NCCL_MIN), "min");
  assert_string_equal(recap_nccl_op_name((recap_nccl_op_t)-1), "unknown");
  assert_string_equal(recap_collective_kind_name(RECAP_COLLECTIVE_REDUCE_SCATTER),
                      "reduce_scatter");
  assert_string_equal(recap_collective_kind_name((recap_collective_kind_t)7), "unknown");
}

RECAP_TEST(test_capture_records_in_order) {
  setup();
  rec.nranks = 1;
  recap_stream_t s = recap__fake_stream_new();
  float *buf = device_buffer(s, 4096);
  recap_graph_t g = graph_capturing(s, NULL);
  OK(recap_nccl_all_reduce(buf, buf, 1024, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM1, s));
  OK(recap_nccl_group_start());
  OK(recap_nccl_send(buf, 8, RECAP_NCCL_BFLOAT16, 0, COMM0, s));
  OK(recap_nccl_recv(buf, 8, RECAP_NCCL_BFLOAT16, 0, COMM0, s));
  OK(recap_nccl_group_end());
  OK(recap_nccl_all_gather(buf, buf, 4, RECAP_NCCL_INT64, COMM1, s));
  OK(recap_nccl_reduce_scatter(buf, buf, 2, RECAP_NCCL_FLOAT16, RECAP_NCCL_MAX, COMM0, s));
  OK(recap_nccl_reduce(buf, buf, 3, RECAP_NCCL_UINT8, RECAP_NCCL_PROD, 0, COMM1, s));
  OK(recap_graph_capture_end(g));
  assert_int_equal(rec.call_count, 6);
  assert_int_equal(rec.group_starts, 1);
  assert_int_equal(rec.group_ends, 1);

  recap_collective_t c[8];
  uint64_t hash = 0;
  assert_int_equal(collectives(g, c, 8, &hash), 6);
  assert_true(hash != 0);
  assert_int_equal(c[0].kind, RECAP_COLLECTIVE_ALL_REDUCE);
  assert_int_equal(c[0].comm_index, 0); /* COMM1 was used first */
  assert_int_equal(c[0].nranks, 1);
  assert_int_equal(c[0].count, 1024);
  assert_int_equal(c[0].dtype, RECAP_NCCL_FLOAT32);
  assert_int_equal(c[0].op, RECAP_NCCL_SUM);
  assert_int_equal(c[0].group, 0);
  assert_int_equal(c[1].kind, RECAP_COLLECTIVE_SEND);
  assert_int_equal(c[1].comm_index, 1);
  assert_int_equal(c[1].peer, 0);
  assert_int_equal(c[1].group, 1);
  assert_int_equal(c[1].op, -1);
  assert_int_equal(c[2].kind, RECAP_COLLECTIVE_RECV);
  assert_int_equal(c[2].group, 1);
  assert_int_equal(c[3].kind, RECAP_COLLECTIVE_ALL_GATHER);
  assert_int_equal(c[3].comm_index, 0);
  assert_int_equal(c[3].count, 4);
  assert_int_equal(c[4].kind, RECAP_COLLECTIVE_REDUCE_SCATTER);
  assert_int_equal(c[4].op, RECAP_NCCL_MAX);
  assert_int_equal(c[5].kind, RECAP_COLLECTIVE_REDUCE);
  assert_int_equal(c[5].root, 0);
  assert_int_equal(c[5].op, RECAP_NCCL_PROD);

  /* A smaller capacity gives the first entries and the whole count; size is checked. */
  size_t count = 0;
  assert_int_equal(collectives(g, c, 2, NULL), 6);
  c[0].size = 4;
  EXPECT_STATUS(recap_graph_collectives(g, c, 1, &count, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("out[0].size is 4");
  EXPECT_MESSAGE("RECAP_COLLECTIVE_INIT");
  EXPECT_STATUS(recap_graph_collectives(g, NULL, 1, &count, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("out is NULL and capacity is 1");

  /* The same collectives in another order: another hash. */
  recap_graph_t h = graph_capturing(s, NULL);
  OK(recap_nccl_all_gather(buf, buf, 4, RECAP_NCCL_INT64, COMM1, s));
  OK(recap_nccl_all_reduce(buf, buf, 1024, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM1, s));
  OK(recap_graph_capture_end(h));
  uint64_t other = 0;
  assert_int_equal(collectives(h, c, 8, &other), 2);
  assert_true(other != hash);
  /* A recapture records afresh. */
  OK(recap_graph_reset(h));
  OK(recap_graph_capture_begin(h, NULL, s));
  OK(recap_nccl_all_reduce(buf, buf, 1024, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM1, s));
  OK(recap_graph_capture_end(h));
  assert_int_equal(collectives(h, c, 8, NULL), 1);
  OK(recap_graph_destroy(h));
  teardown_graph(g, buf);
}

RECAP_TEST(test_argument_refusals) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 64);
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 4, (recap_nccl_dtype_t)12, RECAP_NCCL_SUM, COMM0,
                                      s),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_nccl_all_reduce: dtype 12 is not a recap_nccl_dtype_t");
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 4, RECAP_NCCL_FLOAT32, (recap_nccl_op_t)5, COMM0,
                                      s),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_nccl_all_reduce: op 5 is not a recap_nccl_op_t");
  EXPECT_STATUS(recap_nccl_broadcast(buf, buf, 4, RECAP_NCCL_FLOAT32, -1, COMM0, s),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("root -1 is negative");
  EXPECT_STATUS(recap_nccl_send(buf, 4, RECAP_NCCL_FLOAT32, 0, NULL, s),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_nccl_send: comm is NULL");
  EXPECT_STATUS(recap_nccl_group_end(), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no group is open on this thread");
  EXPECT_STATUS(recap_nccl_comm_policy(COMM0, (recap_nccl_policy_t)2),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("policy 2 is neither");
  assert_int_equal(rec.call_count, 0);
  assert_int_equal(rec.group_ends, 0);
  OK(recap_free(buf));
  teardown();
}

RECAP_TEST(test_refused_inside_region_body) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 64);
  recap_graph_t g = graph_capturing(s, NULL);
  region_opened(RECAP_REGION_IF, 1, 1, s);
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s),
                RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_nccl_all_reduce: the stream captures the body of a region 1 deep");
  EXPECT_MESSAGE("cudaErrorInvalidValue (pytorch #180960)");
  EXPECT_MESSAGE("before or after the region");
  assert_int_equal(rec.call_count, 0);
  /* The capture is unharmed: the region ends, a collective after it is recorded. */
  recap__fake_launch_kernel(s, "body_work");
  OK(recap_region_end(s));
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_graph_capture_end(g));
  recap_collective_t c[2];
  assert_int_equal(collectives(g, c, 2, NULL), 1);
  assert_int_equal(rec.call_count, 1);
  teardown_graph(g, buf);
}

RECAP_TEST(test_direct_nccl_kernel_in_body_refused_at_region_end) {
  setup();
  for (int host = 0; host < 2; host++) {
    recap_stream_t s = recap__fake_stream_new();
    recap_capture_options_t o = regions_options(host);
    recap_graph_t g = graph_capturing(s, &o);
    recap_cond_t cond = region_opened(RECAP_REGION_IF, 1, 1, s);
    recap__fake_launch_kernel(s, "body_work");
    /* NCCL's name as such on one path, C++-mangled (as cuFuncGetName may give it) on the other. */
    const char *name = host ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
                            : "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K";
    recap__fake_launch_kernel(s, name);
    EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("recap_region_end: branch 0 of the if region opened 1 deep holds node 1");
    char text[160];
    snprintf(text, sizeof text, "kernel %s, an NCCL collective", name);
    EXPECT_MESSAGE(text);
    EXPECT_MESSAGE("(pytorch #180960)");
    EXPECT_MESSAGE("the graph is fresh again");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
    assert_int_equal(capturing(s), 0);
    /* Names that only contain "nccl" elsewhere are the caller's kernels. */
    OK(recap_graph_capture_begin(g, &o, s));
    OK(recap_cond_create(&cond, 1, s));
    OK(recap_region_begin(RECAP_REGION_IF, cond, 1, s));
    recap__fake_launch_kernel(s, "_Z9my_ncclv");
    recap__fake_launch_kernel(s, "scale_after_nccl");
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    OK(recap_graph_destroy(g));
  }
  teardown();
}

RECAP_TEST(test_old_version_warns_once) {
  setup();
  rec.version = 22703;
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new();
  float *buf = device_buffer(s, 64);
  /* Eager collectives do not warn: the deadlock is one of graphs. */
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  assert_int_equal(log.warnings, 0);
  for (int i = 0; i < 2; i++) {
    recap_graph_t g = graph_capturing(s, NULL);
    recap__fake_launch_kernel(s, "work");
    OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
    OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
    OK(recap_graph_capture_end(g));
    OK(recap_graph_destroy(g));
  }
  assert_int_equal(log.warnings, 1);
  EXPECT_CONTAINS(log.last_warning, "NCCL 2.27.3 has the graph deadlock of vllm #52504",
                  "fixed in NCCL 2.30.4");
  /* The fixed version does not warn. */
  recap__nccl_warning_reset();
  rec.version = 23004;
  recap_graph_t g = graph_capturing(s, NULL);
  recap__fake_launch_kernel(s, "work");
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_destroy(g));
  assert_int_equal(log.warnings, 1);
  recap_test_log_stop();
  OK(recap_free(buf));
  teardown();
}

/* The check's stream is made on the current device: a check from another device makes a stream
 * (and a buffer) there, and the one of the first device goes. */
RECAP_TEST(test_check_stream_follows_the_device) {
  recap__fake_config_t two = {.device_count = 2};
  recap_test_reset(&two);
  memset(&rec, 0, sizeof rec);
  rec.version = 23203;
  rec.nranks = 1;
  recap__nccl_install(&rec_ops);
  recap__nccl_policy_forget();
  float *buf;
  recap_stream_t s = recap__fake_stream_new();
  buf = device_buffer(s, 64);
  recap_graph_t g = graph_capturing(s, NULL);
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_graph_capture_end(g));
  rec.call_count = 0;
  const recap__device_ops_t *dev = recap__device();
  recap__fake_counters_t before = recap__fake_now();
  OK(recap_graph_check_collectives(g, COMM0));
  OK(dev->set_device(1));
  OK(recap_graph_check_collectives(g, COMM0));
  OK(recap_graph_check_collectives(g, COMM0));
  OK(dev->set_device(0));
  recap__fake_counters_t after = recap__fake_now();
  assert_int_equal(rec.call_count, 3);
  assert_ptr_not_equal(rec.streams[1], rec.streams[0]);
  assert_ptr_equal(rec.streams[2], rec.streams[1]);
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_STREAM_CREATE] -
                       before.calls[RECAP__FAKE_FAULT_STREAM_CREATE],
                   2);
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_RAW_MALLOC] -
                       before.calls[RECAP__FAKE_FAULT_RAW_MALLOC],
                   2);
  /* Device 0's buffer was given back when the check moved to device 1. */
  assert_int_equal(after.bytes_in_use[0], before.bytes_in_use[0]);
  OK(recap_graph_destroy(g));
  OK(recap_free(buf));
  expect_quiet();
  teardown();
}

RECAP_TEST(test_check_one_rank) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 64);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_check_collectives(g, COMM0), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_check_collectives: the graph holds no capture");
  assert_int_equal(rec.call_count, 0);
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  EXPECT_STATUS(recap_graph_check_collectives(g, COMM0), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_capture_end(g));
  rec.call_count = 0;
  OK(recap_graph_check_collectives(g, COMM0));
  /* One exchange of (count, hash) when the ranks agree. */
  assert_int_equal(rec.call_count, 1);
  assert_int_equal(rec.calls[0].kind, RECAP__COLL_ALL_GATHER);
  assert_int_equal(rec.calls[0].count, 2);
  assert_int_equal(rec.calls[0].dtype, RECAP_NCCL_UINT64);
  assert_ptr_equal(rec.calls[0].comm, COMM0);
  assert_ptr_not_equal(rec.streams[0], s); /* its own stream */
  /* A communicator the graph never used passes too (nothing to compare); its exchange runs on
   * a check stream of its own, so that two communicators' checks enqueued in different orders
   * on different ranks cannot wait for each other. */
  OK(recap_graph_check_collectives(g, COMM1));
  assert_int_equal(rec.call_count, 2);
  assert_ptr_equal(rec.calls[1].comm, COMM1);
  assert_ptr_not_equal(rec.streams[1], rec.streams[0]);
  assert_ptr_not_equal(rec.streams[1], s);
  /* A failing exchange is the check's failure, and leaves nothing behind. */
  rec.collective_status = RECAP_ERROR_CUDA;
  EXPECT_STATUS(recap_graph_check_collectives(g, COMM0), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("recording NCCL: collective refused");
  rec.collective_status = RECAP_SUCCESS;
  OK(recap_graph_destroy(g));
  OK(recap_free(buf));
  expect_quiet();
  teardown();
}

/* A graph of one all-reduce on COMM0, captured on s. */
static recap_graph_t collective_graph(recap_stream_t s, float *buf) {
  recap_graph_t g = graph_capturing(s, NULL);
  recap__fake_launch_kernel(s, "work");
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_graph_capture_end(g));
  return g;
}

/* Calls of the seam's stream_wait_event so far (the policy's waits on the device). */
static uint64_t wait_calls(void) {
  return recap__fake_now().calls[RECAP__FAKE_FAULT_STREAM_WAIT_EVENT];
}

RECAP_TEST(test_policies) {
  setup();
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  float *buf = device_buffer(s1, 64);
  recap__fake_stream_complete(s1);
  recap_graph_t g1 = collective_graph(s1, buf), g2 = collective_graph(s2, buf);
  const recap__device_ops_t *dev = recap__device();
  recap__event_t before, after;
  OK(dev->event_create(&before));
  OK(dev->event_create(&after));
  bool done = true;

  /* REFUSE_OVERLAP: g2 on s2 while g1's replay on s1 is pending is BUSY and launches nothing. */
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_REFUSE_OVERLAP));
  recap__fake_launch_kernel(s1, "before");
  OK(dev->event_record(before, s1));
  OK(recap_graph_replay(g1, s1));
  OK(recap_graph_replay(g1, s1)); /* the same stream passes */
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g2, s2), RECAP_ERROR_BUSY);
  EXPECT_MESSAGE("recap_graph_replay: the graph uses NCCL communicator");
  EXPECT_MESSAGE_POINTER(COMM0);
  EXPECT_MESSAGE_POINTER(s1);
  EXPECT_MESSAGE_POINTER(s2);
  EXPECT_MESSAGE("(vllm #52504)");
  EXPECT_MESSAGE("RECAP_NCCL_REFUSE_OVERLAP");
  assert_int_equal(recap__fake_now().graph_launches, launches);
  OK(dev->event_query(before, &done));
  assert_false(done);
  /* The check's exchange is ordered the same way: refused while s1's replay is pending. */
  int calls = rec.call_count;
  EXPECT_STATUS(recap_graph_check_collectives(g1, COMM0), RECAP_ERROR_BUSY);
  EXPECT_MESSAGE("recap_graph_check_collectives: the graph uses NCCL communicator");
  EXPECT_MESSAGE("this exchange on stream");
  assert_int_equal(rec.call_count, calls);
  /* Once s1 finished, s2 may replay. */
  recap__fake_stream_complete(s1);
  OK(recap_graph_replay(g2, s2));

  /* SERIALIZE (the default after a forget): the replay on s1 is ordered after s2's on the
   * device. The host does not wait: s2's work before its replay is still pending; s1 finishing
   * finishes it, through the wait, and nothing of s2 after the replay's event. */
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_SERIALIZE));
  recap__fake_launch_kernel(s2, "before");
  OK(dev->event_record(before, s2));
  OK(recap_graph_replay(g2, s2));
  uint64_t waits = wait_calls();
  OK(recap_graph_replay(g1, s1));
  assert_int_equal(wait_calls(), waits + 1);
  OK(dev->event_query(before, &done));
  assert_false(done);
  recap__fake_launch_kernel(s2, "after");
  OK(dev->event_record(after, s2));
  recap__fake_stream_complete(s1);
  OK(dev->event_query(before, &done));
  assert_true(done);
  OK(dev->event_query(after, &done));
  assert_false(done);
  recap__fake_stream_complete(s2);

  /* A wait that cannot be enqueued: the host waits for the event instead, and the replay
   * succeeds without leaving the wait's failure as the thread's last error. */
  recap__fake_launch_kernel(s1, "before");
  OK(dev->event_record(before, s1));
  OK(recap_graph_replay(g1, s1));
  recap__fake_launch_kernel(s1, "after");
  OK(dev->event_record(after, s1));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, 1);
  recap_clear_last_error();
  waits = wait_calls();
  OK(recap_graph_replay(g2, s2));
  assert_int_equal(wait_calls(), waits + 1);
  assert_int_equal(recap_last_status(), RECAP_SUCCESS);
  OK(dev->event_query(before, &done));
  assert_true(done); /* at once: the host waited */
  OK(dev->event_query(after, &done));
  assert_false(done); /* for the event, not the whole stream */
  complete_both(s1, s2);

  /* Both failing: the replay fails with the host wait's error and launches nothing. s2 (the
   * latest replay's stream) capturing makes the event's host wait fail. */
  OK(recap_graph_replay(g2, s2));
  assert_int_not_equal(recap__fake_capture_begin(s2, RECAP__CAPTURE_MODE_RELAXED), 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, 1);
  launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g1, s1), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaEventSynchronize");
  assert_int_equal(recap__fake_now().graph_launches, launches);
  assert_false(recap__fake_capture_end(s2));
  recap__fake_stream_complete(s2);

  /* A replay on a capturing stream (a child graph of the capture) is ordered on the host: a
   * wait there for the event, recorded outside the capture, would invalidate the capture. */
  recap__fake_launch_kernel(s2, "before");
  OK(dev->event_record(before, s2));
  OK(recap_graph_replay(g2, s2));
  assert_int_not_equal(recap__fake_capture_begin(s1, RECAP__CAPTURE_MODE_RELAXED), 0);
  waits = wait_calls();
  OK(recap_graph_replay(g1, s1));
  assert_int_equal(wait_calls(), waits);
  OK(dev->event_query(before, &done));
  assert_true(done);
  recap__capture_status_t capture = RECAP__CAPTURE_NONE;
  OK(dev->stream_capture_info(s1, &capture, NULL));
  assert_int_equal(capture, RECAP__CAPTURE_ACTIVE);
  assert_true(recap__fake_capture_end(s1));
  recap__fake_stream_complete(s2);
  OK(recap_graph_replay(g1, s1));

  /* SERIALIZE: the check's exchange, on its own stream, is ordered after the latest replay (on
   * s1) the same way: its stream waits for the replay's event, and the exchange's own host wait
   * for its stream finishes s1's work up to that event, not beyond. */
  recap__fake_launch_kernel(s1, "before");
  OK(dev->event_record(before, s1));
  OK(recap_graph_replay(g1, s1));
  recap__fake_launch_kernel(s1, "after");
  OK(dev->event_record(after, s1));
  OK(dev->event_query(before, &done));
  assert_false(done);
  waits = wait_calls();
  int calls_before = rec.call_count;
  OK(recap_graph_check_collectives(g1, COMM0));
  assert_int_equal(wait_calls(), waits + 1);
  assert_int_equal(rec.call_count, calls_before + 1);
  assert_ptr_not_equal(rec.streams[calls_before], s1);
  OK(dev->event_query(before, &done));
  assert_true(done);
  OK(dev->event_query(after, &done));
  assert_false(done);
  /* The check's wait failing: the host waits for the event instead. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, 1);
  recap_clear_last_error();
  OK(recap_graph_check_collectives(g1, COMM0));
  assert_int_equal(wait_calls(), waits + 2);
  assert_int_equal(recap_last_status(), RECAP_SUCCESS);
  OK(dev->event_query(after, &done));
  assert_false(done);
  /* Both failing: the check fails with the host wait's error before any communication. */
  assert_int_not_equal(recap__fake_capture_begin(s1, RECAP__CAPTURE_MODE_RELAXED), 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, 1);
  calls_before = rec.call_count;
  EXPECT_STATUS(recap_graph_check_collectives(g1, COMM0), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaEventSynchronize");
  assert_int_equal(rec.call_count, calls_before);
  assert_false(recap__fake_capture_end(s1));
  complete_both(s1, s2);

  /* A graph without collectives is not held back. */
  recap_graph_t plain = graph_capturing(s2, NULL);
  recap__fake_launch_kernel(s2, "plain");
  OK(recap_graph_capture_end(plain));
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_REFUSE_OVERLAP));
  OK(recap_graph_replay(g1, s1));
  OK(recap_graph_replay(plain, s2));
  EXPECT_STATUS(recap_graph_replay(g2, s2), RECAP_ERROR_BUSY);
  complete_both(s1, s2);
  OK(dev->event_destroy(before));
  OK(dev->event_destroy(after));
  OK(recap_graph_destroy(plain));
  OK(recap_graph_destroy(g1));
  teardown_graph(g2, buf);
}

RECAP_TEST(test_seam_failures) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 64);
  rec.load_status = RECAP_ERROR_NOT_FOUND;
  int version = 5;
  EXPECT_STATUS(recap_nccl_version(&version), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(version, 0);
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s),
                RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("recording NCCL: load refused");
  EXPECT_STATUS(recap_nccl_group_start(), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(rec.group_starts, 0);
  rec.load_status = RECAP_SUCCESS;
  /* A collective NCCL refuses during a capture is not recorded, and the capture goes on. */
  recap_graph_t g = graph_capturing(s, NULL);
  rec.collective_status = RECAP_ERROR_CUDA;
  EXPECT_STATUS(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s),
                RECAP_ERROR_CUDA);
  rec.collective_status = RECAP_SUCCESS;
  OK(recap_nccl_all_gather(buf, buf, 2, RECAP_NCCL_FLOAT32, COMM0, s));
  OK(recap_graph_capture_end(g));
  recap_collective_t c[2];
  assert_int_equal(collectives(g, c, 2, NULL), 1);
  assert_int_equal(c[0].kind, RECAP_COLLECTIVE_ALL_GATHER);
  OK(recap_graph_destroy(g));
  /* The check's own stream and buffer failing fail the check, and leave nothing behind. */
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_nccl_all_gather(buf, buf, 2, RECAP_NCCL_FLOAT32, COMM0, s));
  OK(recap_graph_capture_end(g));
  rec.call_count = 0;
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_CREATE, 1);
  assert_int_not_equal(recap_graph_check_collectives(g, COMM0), RECAP_SUCCESS);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 1);
  assert_int_not_equal(recap_graph_check_collectives(g, COMM0), RECAP_SUCCESS);
  assert_int_equal(rec.call_count, 0);
  OK(recap_graph_check_collectives(g, COMM0));
  assert_int_equal(rec.call_count, 1);
  /* The communicator keeps the check's stream and buffer: the next checks make neither, and
   * use the same stream. */
  recap__fake_counters_t before = recap__fake_now();
  OK(recap_graph_check_collectives(g, COMM0));
  OK(recap_graph_check_collectives(g, COMM0));
  recap__fake_counters_t after = recap__fake_now();
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_STREAM_CREATE],
                   before.calls[RECAP__FAKE_FAULT_STREAM_CREATE]);
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_RAW_MALLOC],
                   before.calls[RECAP__FAKE_FAULT_RAW_MALLOC]);
  assert_int_equal(rec.call_count, 3);
  assert_ptr_equal(rec.streams[1], rec.streams[0]);
  assert_ptr_equal(rec.streams[2], rec.streams[0]);
  assert_ptr_not_equal(rec.streams[0], s);
  /* The policy's event failing to record: the next replay on another stream is refused under
   * REFUSE_OVERLAP even after the first stream finished (nothing says it did), and waits for
   * the whole stream under SERIALIZE. */
  recap_stream_t s2 = recap__fake_stream_new();
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_REFUSE_OVERLAP));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 1);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  EXPECT_STATUS(recap_graph_replay(g, s2), RECAP_ERROR_BUSY);
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_SERIALIZE));
  OK(recap_graph_replay(g, s2));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_RECORD, 1);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s2));
  recap__fake_stream_complete(s);
  recap__fake_stream_complete(s2);
  OK(recap_graph_destroy(g));
  expect_quiet();
  OK(recap_free(buf));
  teardown();
}

/* A KEEP graph capturing on s: an all-reduce of 16 on COMM0, an all-gather of 4 on COMM1. */
static recap_graph_t embeddable_graph(recap_stream_t s, float *buf) {
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s));
  OK(recap_nccl_all_gather(buf, buf, 4, RECAP_NCCL_INT64, COMM1, s));
  OK(recap_graph_capture_end(g));
  return g;
}

/* A replay inside another capture embeds the graph: the outer record holds its collectives, in
 * order among the outer capture's own, with the fingerprint of the same work captured directly;
 * a graph embedding the outer one in turn holds them too; the outer replays follow the
 * communicators' policies; a failed embedding leaves the record as it was. */
RECAP_TEST(test_embedded_collectives_join_the_outer_record) {
  float *buf;
  recap_stream_t s = setup_with_buffer(&buf, 4096);
  recap_stream_t s2 = recap__fake_stream_new(), s3 = recap__fake_stream_new();
  recap__fake_stream_complete(s);
  recap_graph_t inner = embeddable_graph(s, buf);
  int calls = rec.call_count;
  recap_graph_t outer;
  OK(recap_graph_create(&outer, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  OK(recap_nccl_reduce(buf, buf, 3, RECAP_NCCL_UINT8, RECAP_NCCL_PROD, 0, COMM1, s2));
  OK(recap_graph_replay(inner, s2));
  OK(recap_nccl_all_reduce(buf, buf, 8, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s2));
  OK(recap_graph_capture_end(outer));
  /* The embedding called NCCL for nothing: the node is a copy of what inner recorded. */
  assert_int_equal(rec.call_count, calls + 2);

  recap_collective_t c[8];
  uint64_t hash = 0;
  assert_int_equal(collectives(outer, c, 8, &hash), 4);
  assert_int_equal(c[0].kind, RECAP_COLLECTIVE_REDUCE);
  assert_int_equal(c[0].comm_index, 0); /* COMM1, used first by the outer capture */
  assert_int_equal(c[1].kind, RECAP_COLLECTIVE_ALL_REDUCE);
  assert_int_equal(c[1].count, 16);
  assert_int_equal(c[1].comm_index, 1); /* COMM0 */
  assert_int_equal(c[2].kind, RECAP_COLLECTIVE_ALL_GATHER);
  assert_int_equal(c[2].comm_index, 0);
  assert_int_equal(c[3].kind, RECAP_COLLECTIVE_ALL_REDUCE);
  assert_int_equal(c[3].count, 8);
  assert_int_equal(c[3].comm_index, 1);
  /* The same work captured directly has the same fingerprint. */
  recap_graph_t direct = graph_capturing(s3, NULL);
  OK(recap_nccl_reduce(buf, buf, 3, RECAP_NCCL_UINT8, RECAP_NCCL_PROD, 0, COMM1, s3));
  OK(recap_nccl_all_reduce(buf, buf, 16, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s3));
  OK(recap_nccl_all_gather(buf, buf, 4, RECAP_NCCL_INT64, COMM1, s3));
  OK(recap_nccl_all_reduce(buf, buf, 8, RECAP_NCCL_FLOAT32, RECAP_NCCL_SUM, COMM0, s3));
  OK(recap_graph_capture_end(direct));
  uint64_t direct_hash = 0;
  assert_int_equal(collectives(direct, c, 8, &direct_hash), 4);
  assert_true(direct_hash == hash);
  OK(recap_graph_destroy(direct));
  /* One rank: the check passes on both communicators. */
  OK(recap_graph_check_collectives(outer, COMM0));
  OK(recap_graph_check_collectives(outer, COMM1));

  /* Nesting: the outermost graph holds the same entries. */
  recap_graph_t outermost = graph_capturing(s3, NULL);
  OK(recap_graph_replay(outer, s3));
  OK(recap_graph_capture_end(outermost));
  uint64_t outermost_hash = 0;
  assert_int_equal(collectives(outermost, c, 8, &outermost_hash), 4);
  assert_true(outermost_hash == hash);

  /* The outer replay follows COMM0's policy as inner's would: while it is pending on s2, inner
   * on s is refused under REFUSE_OVERLAP, and so is the outer graph on s after inner there. */
  OK(recap_nccl_comm_policy(COMM0, RECAP_NCCL_REFUSE_OVERLAP));
  recap__fake_launch_kernel(s2, "before");
  OK(recap_graph_replay(outer, s2));
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(inner, s), RECAP_ERROR_BUSY);
  EXPECT_MESSAGE("RECAP_NCCL_REFUSE_OVERLAP");
  assert_int_equal(recap__fake_now().graph_launches, launches);
  complete_both(s, s2);
  OK(recap_graph_replay(inner, s));
  EXPECT_STATUS(recap_graph_replay(outer, s2), RECAP_ERROR_BUSY);
  complete_both(s, s2);
  OK(recap_graph_replay(outer, s2));
  recap__fake_stream_complete(s2);

  /* A failed child node leaves the capture's record as it was (none attached). */
  recap_graph_t failed = graph_capturing(s3, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s3), RECAP_ERROR_CUDA);
  assert_null(recap__nccl_graph_find(failed));
  OK(recap_nccl_reduce(buf, buf, 3, RECAP_NCCL_UINT8, RECAP_NCCL_PROD, 0, COMM1, s3));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_CHILD, 1);
  EXPECT_STATUS(recap_graph_replay(inner, s3), RECAP_ERROR_CUDA);
  OK(recap_graph_capture_end(failed));
  assert_int_equal(collectives(failed, c, 8, NULL), 1);
  const recap__nccl_graph_t *record = recap__nccl_graph_find(failed);
  assert_int_equal(record->comm_count, 1);

  OK(recap_graph_destroy(failed));
  OK(recap_graph_destroy(outermost));
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(inner));
  OK(recap_free(buf));
  expect_quiet();
  teardown();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_eager_calls_nccl_and_records_nothing),
    cmocka_unit_test(test_enums_equal_nccls),
    cmocka_unit_test(test_capture_records_in_order),
    cmocka_unit_test(test_argument_refusals),
    cmocka_unit_test(test_refused_inside_region_body),
    cmocka_unit_test(test_direct_nccl_kernel_in_body_refused_at_region_end),
    cmocka_unit_test(test_old_version_warns_once),
    cmocka_unit_test(test_check_stream_follows_the_device),
    cmocka_unit_test(test_check_one_rank),
    cmocka_unit_test(test_policies),
    cmocka_unit_test(test_seam_failures),
    cmocka_unit_test(test_embedded_collectives_join_the_outer_record),
};
RECAP_TEST_MAIN(tests)
