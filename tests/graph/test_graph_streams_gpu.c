/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_streams_gpu.c — recap graphs on a real device beyond one stream: streams joined to
 * a capture, capture modes across threads, the raw CUDA handles and KEEP graphs, events inside
 * graphs, CUDA's multi-stream samples with host nodes, inspection and the capture scope.
 *
 * Capture, replay, errors, invalidated captures, out of memory and pools are in
 * test_graph_gpu.c. The scenarios follow the names of PyTorch's CUDA graph tests (test_cuda.py)
 * and of CUDA's graph samples; the code and the expected values are recap's own. Buffers are
 * small (4 KiB) and every value is checked exactly on the host. Each test ends with the
 * allocator's checker, and where it freed everything, with no pool and no device memory left in
 * recap.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>

#include "gpu_util.h"
#include "graph_gpu_util.h"
#include "capture_util.h"
#include "inspect_util.h"

/* ------------------------------------------------------------------------------------------
 * Streams joined to a capture
 * ---------------------------------------------------------------------------------------- */

/* A block used by a side stream inside the capture and freed there is held back until the
 * capture ends: it is not handed out again within the capture. */
RECAP_TEST(record_stream_inside_capture) {
  cudaStream_t s = gpu_begin_stream(), side = gpu_stream();
  cudaEvent_t fork = gpu_event(), join = gpu_event();
  float *x = gpu_floats_set(N, 2.0f, s);
  recap_graph_t g = graph_capturing(s, NULL);
  float *a = gpu_floats(N, s);
  float *b = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(a, x, N, 1.0f, s));
  gpu_join(side, s, fork);
  CUDA_OK(recap_test_add_scalar(b, a, N, 10.0f, side));
  OK(recap_record_stream(a, side));
  gpu_join(s, side, join);
  OK(recap_free(a));
  float *c = gpu_floats(N, s);
  assert_ptr_not_equal(c, a); /* held back: the side stream used it */
  CUDA_OK(recap_test_add_scalar(c, b, N, 100.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  gpu_check_allocator();

  OK(recap_graph_replay(g, s));
  gpu_expect_all(b, N, 13.0f);
  gpu_expect_all(c, N, 113.0f);
  gpu_set(x, N, 0.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(c, N, 111.0f);

  OK(recap_graph_destroy(g));
  FREE_ALL(b, c, x);
  GPU_DESTROY_EVENTS(fork, join);
  GPU_DESTROY_STREAMS(s, side);
  gpu_finish(&pool, 1);
}

/* Allocations on a side stream joined to the capture by an event come from the graph's pool. */
RECAP_TEST(allocator_follows_side_stream) {
  cudaStream_t s = gpu_begin_stream(), side = gpu_stream();
  cudaEvent_t fork = gpu_event(), join = gpu_event();
  float *x = gpu_floats_set(N, 1.0f, s);
  recap_pool_memory_t default_before = pool_info(DEFAULT_POOL);
  recap_graph_t g = graph_capturing(s, NULL);
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(pool_info(pool).routed, 1);
  gpu_join(side, s, fork);
  float *d = gpu_floats(N, side);
  assert_int_equal(pool_info(pool).allocated_bytes, (int64_t)(N * sizeof(float)));
  assert_int_equal(pool_info(DEFAULT_POOL).allocated_bytes, default_before.allocated_bytes);
  CUDA_OK(recap_test_add_scalar(d, x, N, 3.0f, side));
  gpu_join(s, side, join);
  float *out = gpu_floats(N, s);
  assert_int_equal(pool_info(pool).allocated_bytes, (int64_t)(2 * N * sizeof(float)));
  CUDA_OK(recap_test_add_scalar(out, d, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  assert_int_equal(pool_info(pool).routed, 0);
  assert_int_equal(pool_info(DEFAULT_POOL).allocated_bytes, default_before.allocated_bytes);
  /* After the capture the side stream allocates from the default pool again. */
  float *eager = gpu_floats(N, side);
  assert_int_equal(pool_info(pool).allocated_bytes, (int64_t)(2 * N * sizeof(float)));
  OK(recap_free(eager));

  OK(recap_graph_replay(g, s));
  gpu_expect_all(d, N, 4.0f);
  gpu_expect_all(out, N, 5.0f);

  OK(recap_graph_destroy(g));
  FREE_ALL(d, out, x);
  GPU_DESTROY_EVENTS(fork, join);
  GPU_DESTROY_STREAMS(s, side);
  gpu_finish(&pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * Capture modes
 * ---------------------------------------------------------------------------------------- */

typedef struct malloc_job {
  cudaError_t err;
  void *ptr;
} malloc_job_t;

static void *malloc_in_thread(void *arg) {
  malloc_job_t *job = arg;
  job->err = cudaSetDevice(0);
  if (job->err == cudaSuccess) job->err = cudaMalloc(&job->ptr, 1 * MiB);
  (void)cudaGetLastError();
  return NULL;
}

/* A capture in `mode` while another thread (and, in relaxed mode, this one) calls cudaMalloc:
 * the capture stays valid. */
static void capture_with_foreign_malloc(recap_capture_mode_t mode) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats_set(N, 1.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = capture_options(DEFAULT_POOL, mode);
  OK(recap_graph_capture_begin(g, &o, s));
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  malloc_job_t job = {cudaErrorUnknown, NULL};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, malloc_in_thread, &job), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  void *own = NULL;
  cudaError_t own_err = cudaSuccess;
  if (mode == RECAP_CAPTURE_MODE_RELAXED) {
    own_err = cudaMalloc(&own, 1 * MiB);
    (void)cudaGetLastError();
  }
  float *y = gpu_floats(N, s); /* recap's own allocation in this mode */
  CUDA_OK(recap_test_add_scalar(y, x, N, 1.0f, s));
  recap_status_t end = recap_graph_capture_end(g);
  /* Free the raw allocations before any assertion can end the test. */
  if (job.ptr) CUDA_OK(cudaFree(job.ptr));
  if (own) CUDA_OK(cudaFree(own));
  CUDA_OK(job.err);
  CUDA_OK(own_err);
  OK(end);
  recap_pool_id_t pool = pool_of(g);

  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 2.0f);
  gpu_expect_all(y, N, 3.0f);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(y, N, 4.0f);

  gpu_finish_graph(g, s, pool, (void *[]){y, x}, 2);
}

/* Two threads capture at once in thread-local mode, each into its own graph and pool, each
 * allocating inside its capture; both replays are right and the pools stay apart. */
typedef struct capture_thread_job {
  cudaStream_t stream;
  recap_graph_t graph;
  float value;
  float *out; /* allocated inside the capture */
  pthread_barrier_t *barrier;
  recap_status_t status;
} capture_thread_job_t;

static void *capture_in_thread(void *arg) {
  capture_thread_job_t *job = arg;
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  job->status = recap_graph_capture_begin(job->graph, &opts, job->stream);
  pthread_barrier_wait(job->barrier); /* both captures are under way from here */
  if (job->status == RECAP_SUCCESS)
    job->status = recap_malloc((void **)&job->out, N * sizeof(float), job->stream);
  if (job->status == RECAP_SUCCESS && recap_test_fill(job->out, N, job->value, job->stream))
    job->status = RECAP_ERROR_CUDA;
  if (job->status == RECAP_SUCCESS &&
      recap_test_add_scalar(job->out, job->out, N, 1.0f, job->stream))
    job->status = RECAP_ERROR_CUDA;
  pthread_barrier_wait(job->barrier);
  recap_status_t end = recap_graph_capture_end(job->graph);
  if (job->status == RECAP_SUCCESS) job->status = end;
  return NULL;
}

RECAP_TEST(two_thread_local_captures_at_once) {
  gpu_begin();
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  capture_thread_job_t jobs[2];
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) {
    jobs[i] = (capture_thread_job_t){.stream = gpu_stream(),
                                     .value = 10.0f * (float)(i + 1),
                                     .barrier = &barrier};
    OK(recap_graph_create(&jobs[i].graph, 0));
    assert_int_equal(pthread_create(&threads[i], NULL, capture_in_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&barrier);
  recap_pool_id_t pools[2];
  for (int i = 0; i < 2; i++) {
    if (jobs[i].status != RECAP_SUCCESS)
      fail_msg("capture %d: %s: %s", i, recap_status_name(jobs[i].status), recap_last_error());
    pools[i] = pool_of(jobs[i].graph);
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    OK(recap_pool_memory(pools[i], &info));
    assert_int_equal(info.allocated_bytes, (int64_t)(N * sizeof(float))); /* its own output */
  }
  assert_false(pools[0].a == pools[1].a && pools[0].b == pools[1].b);
  for (int i = 0; i < 2; i++) {
    OK(recap_graph_replay(jobs[i].graph, jobs[i].stream));
    gpu_expect_all(jobs[i].out, N, jobs[i].value + 1.0f);
  }
  for (int i = 0; i < 2; i++) {
    OK(recap_graph_destroy(jobs[i].graph));
    OK(recap_free(jobs[i].out));
    CUDA_OK(cudaStreamDestroy(jobs[i].stream));
  }
  gpu_finish(pools, 2);
}

RECAP_TEST(thread_local_capture_ignores_other_threads) {
  capture_with_foreign_malloc(RECAP_CAPTURE_MODE_THREAD_LOCAL);
}

RECAP_TEST(relaxed_capture_allows_cuda_malloc) {
  capture_with_foreign_malloc(RECAP_CAPTURE_MODE_RELAXED);
}

/* ------------------------------------------------------------------------------------------
 * Raw handles, KEEP graphs and instantiation
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(raw_graph_with_and_without_keep) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats(N, s);
  recap_graph_t kept, plain;
  OK(recap_graph_create(&kept, RECAP_GRAPH_KEEP));
  OK(recap_graph_create(&plain, 0));
  recap_cuda_graph_t raw = (recap_cuda_graph_t)0x1;
  EXPECT_STATUS(recap_graph_raw(kept, &raw), RECAP_ERROR_INVALID_USAGE); /* nothing captured */
  assert_null(raw);

  OK(recap_graph_capture_begin(kept, NULL, s));
  CUDA_OK(recap_test_fill(x, N, 1.0f, s));
  CUDA_OK(recap_test_scale(x, N, 3.0f, s));
  OK(recap_graph_capture_end(kept));
  OK(recap_graph_capture_begin(plain, NULL, s));
  CUDA_OK(recap_test_fill(x, N, 2.0f, s));
  OK(recap_graph_capture_end(plain));
  recap_pool_id_t pools[] = {pool_of(kept), pool_of(plain)};

  OK(recap_graph_raw(kept, &raw));
  assert_non_null(raw);
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes((cudaGraph_t)raw, NULL, &nodes));
  assert_int_equal(nodes, 2);
  raw = (recap_cuda_graph_t)0x1;
  EXPECT_STATUS(recap_graph_raw(plain, &raw), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("RECAP_GRAPH_KEEP");
  assert_null(raw);

  OK(recap_graph_replay(kept, s));
  gpu_expect_all(x, N, 3.0f);
  OK(recap_graph_replay(plain, s));
  gpu_expect_all(x, N, 2.0f);

  DESTROY_GRAPHS(kept, plain);
  OK(recap_free(x));
  gpu_finish_stream(s, pools, 2);
}

RECAP_TEST(raw_exec_before_and_after_instantiate) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats_set(N, 0.0f, s);
  recap_graph_t kept, plain;
  OK(recap_graph_create(&kept, RECAP_GRAPH_KEEP));
  OK(recap_graph_create(&plain, 0));
  OK(recap_graph_capture_begin(kept, NULL, s));
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  OK(recap_graph_capture_end(kept));

  /* KEEP: not instantiated by capture_end. */
  recap_cuda_graph_exec_t exec = (recap_cuda_graph_exec_t)0x1;
  EXPECT_STATUS(recap_graph_raw_exec(kept, &exec), RECAP_ERROR_INVALID_USAGE);
  assert_null(exec);
  OK(recap_graph_instantiate(kept));
  OK(recap_graph_raw_exec(kept, &exec));
  assert_non_null(exec);
  /* The executable is an ordinary CUDA one. */
  CUDA_OK(cudaGraphLaunch((cudaGraphExec_t)exec, s));
  gpu_expect_all(x, N, 1.0f);
  OK(recap_graph_replay(kept, s));
  gpu_expect_all(x, N, 2.0f);

  /* Without KEEP, capture_end instantiated it. */
  OK(recap_graph_capture_begin(plain, NULL, s));
  CUDA_OK(recap_test_scale(x, N, 5.0f, s));
  OK(recap_graph_capture_end(plain));
  exec = NULL;
  OK(recap_graph_raw_exec(plain, &exec));
  assert_non_null(exec);
  CUDA_OK(cudaGraphLaunch((cudaGraphExec_t)exec, s));
  gpu_expect_all(x, N, 10.0f);

  recap_pool_id_t pools[] = {pool_of(kept), pool_of(plain)};
  DESTROY_GRAPHS(kept, plain);
  OK(recap_free(x));
  gpu_finish_stream(s, pools, 2);
}

RECAP_TEST(repeated_instantiate_and_replay) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats_set(N, 0.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  float *tmp = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(tmp, x, N, 1.0f, s));
  CUDA_OK(recap_test_add_scalar(x, tmp, N, 0.0f, s));
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);

  OK(recap_graph_replay(g, s)); /* instantiates on first use */
  gpu_expect_all(x, N, 1.0f);
  float expected = 1.0f;
  for (int round = 0; round < 3; round++) {
    OK(recap_graph_instantiate(g));
    for (int i = 0; i < 2; i++) {
      OK(recap_graph_replay(g, s));
      expected += 1.0f;
    }
    gpu_expect_all(x, N, expected);
  }
  assert_true(expected == 7.0f);
  /* The template is still there after all of it. */
  recap_cuda_graph_t raw = NULL;
  OK(recap_graph_raw(g, &raw));
  assert_non_null(raw);

  gpu_finish_graph(g, s, pool, (void *[]){x}, 1);
}

/* ------------------------------------------------------------------------------------------
 * Events inside graphs
 * ---------------------------------------------------------------------------------------- */

/* An event recorded inside one graph (external record) and waited on inside another (external
 * wait) orders the two graphs' replays on two streams. */
RECAP_TEST(external_events_between_graphs) {
  cudaStream_t s1 = gpu_begin_stream(), s2 = gpu_stream();
  cudaEvent_t produced = gpu_event();
  float *buf = gpu_floats(N, s1), *out = gpu_floats(N, s2);
  gpu_set(buf, N, 0.0f, s1);
  gpu_set(out, N, -1.0f, s2);
  recap_graph_t producer, consumer;
  OK(recap_graph_create(&producer, 0));
  OK(recap_graph_create(&consumer, 0));

  OK(recap_graph_capture_begin(producer, NULL, s1));
  CUDA_OK(recap_test_spin(SPIN_NS, s1)); /* the consumer would overtake without the event */
  CUDA_OK(recap_test_add_scalar(buf, buf, N, 1.0f, s1));
  CUDA_OK(cudaEventRecordWithFlags(produced, s1, cudaEventRecordExternal));
  OK(recap_graph_capture_end(producer));

  OK(recap_graph_capture_begin(consumer, NULL, s2));
  CUDA_OK(cudaStreamWaitEvent(s2, produced, cudaEventWaitExternal));
  CUDA_OK(recap_test_add_scalar(out, buf, N, 0.0f, s2));
  OK(recap_graph_capture_end(consumer));
  recap_pool_id_t pools[] = {pool_of(producer), pool_of(consumer)};

  for (int round = 1; round <= 3; round++) {
    OK(recap_graph_replay(producer, s1));
    OK(recap_graph_replay(consumer, s2));
    CUDA_OK(cudaStreamSynchronize(s2));
    gpu_expect_all(out, N, (float)round);
    gpu_expect_all(buf, N, (float)round);
  }

  DESTROY_GRAPHS(producer, consumer);
  FREE_ALL(buf, out);
  CUDA_OK(cudaEventDestroy(produced));
  GPU_DESTROY_STREAMS(s1, s2);
  gpu_finish(pools, 2);
}

/* Timing events recorded inside a graph (external records) time its replay. */
RECAP_TEST(event_timing_inside_graph) {
  cudaStream_t s = gpu_begin_stream();
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  float *x = gpu_floats_set(N, 0.0f, s);
  recap_graph_t g = graph_capturing(s, NULL);
  CUDA_OK(cudaEventRecordWithFlags(start, s, cudaEventRecordExternal));
  CUDA_OK(recap_test_spin(2ull * 1000 * 1000, s)); /* 2 ms */
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  CUDA_OK(cudaEventRecordWithFlags(stop, s, cudaEventRecordExternal));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);

  OK(recap_graph_replay(g, s));
  CUDA_OK(cudaStreamSynchronize(s));
  float ms = 0.0f;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  assert_true(ms > 0.0f);
  assert_true(ms >= 1.5f); /* the 2 ms spin lies between the two records */
  gpu_expect_all(x, N, 1.0f);

  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  GPU_DESTROY_EVENTS(start, stop);
  gpu_finish_stream(s, &pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * After CUDA's graph samples
 * ---------------------------------------------------------------------------------------- */

static void CUDART_CB count_call(void *user_data) { atomic_fetch_add((atomic_int *)user_data, 1); }

/* Three streams forked from and joined to the capturing one by events, then a host function
 * node: the host function runs once per replay, never at capture. */
RECAP_TEST(multi_stream_capture_with_host_node) {
  cudaStream_t s = gpu_begin_stream(), s1 = gpu_stream(), s2 = gpu_stream();
  cudaEvent_t fork = gpu_event(), join1 = gpu_event(), join2 = gpu_event();
  float *a = gpu_floats(N, s), *b = gpu_floats(N, s), *c = gpu_floats(N, s);
  atomic_int calls = 0;
  recap_graph_t g = graph_capturing(s, NULL);
  gpu_join(s1, s, fork);
  CUDA_OK(cudaStreamWaitEvent(s2, fork, 0));
  CUDA_OK(recap_test_fill(a, N, 1.0f, s1));
  CUDA_OK(recap_test_fill(b, N, 2.0f, s2));
  CUDA_OK(recap_test_scale(b, N, 4.0f, s2));
  gpu_join(s, s1, join1);
  gpu_join(s, s2, join2);
  CUDA_OK(recap_test_add(c, a, b, N, s));
  CUDA_OK(cudaLaunchHostFunc(s, count_call, &calls));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 5);
  CUDA_OK(cudaDeviceSynchronize());
  assert_int_equal(atomic_load(&calls), 0);

  for (int replay = 1; replay <= 3; replay++) {
    gpu_set(c, N, 0.0f, s);
    OK(recap_graph_replay(g, s));
    CUDA_OK(cudaStreamSynchronize(s));
    assert_int_equal(atomic_load(&calls), replay);
    gpu_expect_all(c, N, 9.0f);
  }

  OK(recap_graph_destroy(g));
  FREE_ALL(a, b, c);
  GPU_DESTROY_EVENTS(fork, join1, join2);
  GPU_DESTROY_STREAMS(s, s1, s2);
  gpu_finish(&pool, 1);
}

/* Copy in, memset, kernels, copy out: what the graph computes on replay equals what the same
 * work computes eagerly. */
static void pipeline(cudaStream_t s, const float *h_in, float *h_out, float *d_in, float *d_tmp) {
  CUDA_OK(cudaMemcpyAsync(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaMemsetAsync(d_tmp, 0, N * sizeof(float), s));
  CUDA_OK(recap_test_add_scalar(d_tmp, d_in, N, 3.0f, s));
  CUDA_OK(recap_test_scale(d_tmp, N, 2.0f, s));
  CUDA_OK(recap_test_axpy(d_tmp, d_in, N, 0.5f, s));
  CUDA_OK(cudaMemcpyAsync(h_out, d_tmp, N * sizeof(float), cudaMemcpyDeviceToHost, s));
}

RECAP_TEST(kernel_memcpy_memset_pipeline) {
  cudaStream_t s = gpu_begin_stream();
  float *h_in = NULL, *h_out = NULL;
  CUDA_OK(cudaMallocHost((void **)&h_in, N * sizeof(float)));
  CUDA_OK(cudaMallocHost((void **)&h_out, N * sizeof(float)));
  float *eager = malloc(N * sizeof(float));
  assert_non_null(eager);
  float *d_in = gpu_floats(N, s), *d_tmp = gpu_floats(N, s);
  for (size_t i = 0; i < N; i++) h_in[i] = (float)i;

  pipeline(s, h_in, h_out, d_in, d_tmp);
  CUDA_OK(cudaStreamSynchronize(s));
  memcpy(eager, h_out, N * sizeof(float));
  for (size_t i = 0; i < N; i++) assert_true(eager[i] == 2.5f * (float)i + 6.0f);

  memset(h_out, 0, N * sizeof(float));
  recap_graph_t g = graph_capturing(s, NULL);
  pipeline(s, h_in, h_out, d_in, d_tmp);
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t i = 0; i < N; i++) assert_true(h_out[i] == 0.0f); /* nothing ran at capture */

  OK(recap_graph_replay(g, s));
  CUDA_OK(cudaStreamSynchronize(s));
  assert_memory_equal(h_out, eager, N * sizeof(float));
  /* New input in the same host buffer: the replay reads it. */
  for (size_t i = 0; i < N; i++) h_in[i] = 2.0f * (float)i;
  OK(recap_graph_replay(g, s));
  CUDA_OK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < N; i++) assert_true(h_out[i] == 5.0f * (float)i + 6.0f);

  OK(recap_graph_destroy(g));
  FREE_ALL(d_in, d_tmp);
  free(eager);
  CUDA_OK(cudaFreeHost(h_in));
  CUDA_OK(cudaFreeHost(h_out));
  gpu_finish_stream(s, &pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * Inspection
 * ---------------------------------------------------------------------------------------- */

static bool contains_index(const size_t *items, size_t count, size_t wanted) {
  for (size_t i = 0; i < count; i++)
    if (items[i] == wanted) return true;
  return false;
}

static size_t find_node(const recap_graph_info_t *info, recap_node_type_t type) {
  size_t found = info->node_count;
  for (size_t i = 0; i < info->node_count; i++) {
    if (info->nodes[i].type != type) continue;
    if (found != info->node_count) fail_msg("two %s nodes", recap_node_type_name(type));
    found = i;
  }
  if (found == info->node_count) fail_msg("no %s node", recap_node_type_name(type));
  return found;
}

RECAP_TEST(inspect_kernel_memset_memcpy) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats(N, s);     /* 4096 bytes */
  float *y = gpu_floats(N / 4, s); /* 1024 bytes */
  float *z = gpu_floats(N / 2, s); /* 2048 bytes */
  gpu_set(y, N / 4, 5.0f, s);
  gpu_set(z, N / 2, 5.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  CUDA_OK(recap_test_fill_shaped(x, N, 1.5f, 4, 64, s));
  CUDA_OK(cudaMemsetAsync(y, 0, (N / 4) * sizeof(float), s));
  CUDA_OK(cudaMemcpyAsync(z, x, (N / 2) * sizeof(float), cudaMemcpyDeviceToDevice, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);

  recap_graph_info_t *info = inspect(g);
  assert_non_null(info);
  assert_true(info->node_count >= 3);
  size_t kernel = find_node(info, RECAP_NODE_KERNEL);
  size_t memset_node = find_node(info, RECAP_NODE_MEMSET);
  size_t memcpy_node = find_node(info, RECAP_NODE_MEMCPY);

  const recap_graph_node_t *k = &info->nodes[kernel];
  assert_non_null(k->kernel_name);
  if (!strstr(k->kernel_name, RECAP_TEST_FILL_KERNEL_NAME))
    fail_msg("kernel name \"%s\" does not contain %s", k->kernel_name, RECAP_TEST_FILL_KERNEL_NAME);
  assert_int_equal(k->grid[0], 4);
  assert_int_equal(k->grid[1], 1);
  assert_int_equal(k->grid[2], 1);
  assert_int_equal(k->block[0], 64);
  assert_int_equal(k->block[1], 1);
  assert_int_equal(k->block[2], 1);
  assert_int_equal(k->shared_bytes, 0);
  assert_int_equal(info->nodes[memset_node].bytes, (N / 4) * sizeof(float));
  assert_int_equal(info->nodes[memcpy_node].bytes, (N / 2) * sizeof(float));
  assert_null(info->nodes[memset_node].kernel_name);
  assert_null(info->nodes[memcpy_node].kernel_name);

  /* Edges: each dependency is matched by a dependent, and the count is the edge count. */
  size_t dependencies = 0, dependents = 0;
  for (size_t i = 0; i < info->node_count; i++) {
    const recap_graph_node_t *node = &info->nodes[i];
    dependencies += node->dependency_count;
    dependents += node->dependent_count;
    for (size_t j = 0; j < node->dependency_count; j++) {
      size_t d = node->dependencies[j];
      assert_true(d < info->node_count);
      assert_true(contains_index(info->nodes[d].dependents, info->nodes[d].dependent_count, i));
    }
    for (size_t j = 0; j < node->dependent_count; j++) {
      size_t d = node->dependents[j];
      assert_true(d < info->node_count);
      assert_true(contains_index(info->nodes[d].dependencies, info->nodes[d].dependency_count, i));
    }
  }
  assert_int_equal(dependencies, info->edge_count);
  assert_int_equal(dependents, info->edge_count);
  /* One stream: kernel -> memset -> memcpy. */
  assert_int_equal(info->nodes[kernel].dependency_count, 0);
  assert_true(contains_index(info->nodes[memset_node].dependencies,
                             info->nodes[memset_node].dependency_count, kernel));
  assert_true(contains_index(info->nodes[memcpy_node].dependencies,
                             info->nodes[memcpy_node].dependency_count, memset_node));

  char *json = info_json(info);
  assert_non_null(json);
  EXPECT_CONTAINS(json, "\"type\":\"kernel\"", "\"type\":\"memset\"", "\"type\":\"memcpy\"");
  assert_non_null(strstr(json, RECAP_TEST_FILL_KERNEL_NAME));
  EXPECT_CONTAINS(json, "\"grid\":[4,1,1]", "\"block\":[64,1,1]", "\"bytes\":1024",
                  "\"bytes\":2048");
  recap_string_free(json);
  recap_graph_info_free(info);

  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 1.5f);
  gpu_expect_all(y, N / 4, 0.0f);
  gpu_expect_all(z, N / 2, 1.5f);

  gpu_finish_graph(g, s, pool, (void *[]){x, y, z}, 3);
}

/* ------------------------------------------------------------------------------------------
 * The capture scope
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(capture_scope_side_stream) {
  cudaStream_t s = gpu_begin_stream();
  float *x = gpu_floats_set(N, 2.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_stream_t scope = NULL;
  OK(recap_capture_scope_begin(g, NULL, &scope));
  assert_non_null(scope);
  assert_int_equal(is_capturing(scope), 1);
  assert_int_equal(is_capturing(s), 0);
  float *y = gpu_floats(N, scope); /* the graph's pool */
  CUDA_OK(recap_test_add_scalar(y, x, N, 1.0f, scope));
  CUDA_OK(recap_test_scale(y, N, 3.0f, scope));
  OK(recap_capture_scope_end(g));
  assert_int_equal(is_capturing(scope), 0);
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(pool_info(pool).allocated_bytes, (int64_t)(N * sizeof(float)));
  gpu_expect_all(x, N, 2.0f);

  OK(recap_graph_replay(g, scope));
  gpu_expect_all(y, N, 9.0f);
  gpu_set(x, N, 0.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(y, N, 3.0f);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE); /* no scope open */

  /* The same side stream serves the next scope. */
  recap_graph_t h;
  OK(recap_graph_create(&h, 0));
  recap_stream_t again = NULL;
  OK(recap_capture_scope_begin(h, NULL, &again));
  assert_ptr_equal(again, scope);
  CUDA_OK(recap_test_fill(x, N, 7.0f, again));
  OK(recap_capture_scope_end(h));
  recap_pool_id_t pool_h = pool_of(h);
  OK(recap_graph_replay(h, again));
  gpu_expect_all(x, N, 7.0f);

  DESTROY_GRAPHS(g, h);
  FREE_ALL(y, x);
  CUDA_OK(cudaStreamDestroy(s));
  recap_pool_id_t pools[] = {pool, pool_h};
  gpu_finish(pools, 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(record_stream_inside_capture),
    cmocka_unit_test(allocator_follows_side_stream),
    cmocka_unit_test(two_thread_local_captures_at_once),
    cmocka_unit_test(thread_local_capture_ignores_other_threads),
    cmocka_unit_test(relaxed_capture_allows_cuda_malloc),
    cmocka_unit_test(raw_graph_with_and_without_keep),
    cmocka_unit_test(raw_exec_before_and_after_instantiate),
    cmocka_unit_test(repeated_instantiate_and_replay),
    cmocka_unit_test(external_events_between_graphs),
    cmocka_unit_test(event_timing_inside_graph),
    cmocka_unit_test(multi_stream_capture_with_host_node),
    cmocka_unit_test(kernel_memcpy_memset_pipeline),
    cmocka_unit_test(inspect_kernel_memset_memcpy),
    cmocka_unit_test(capture_scope_side_stream),
};
RECAP_TEST_MAIN(tests)
