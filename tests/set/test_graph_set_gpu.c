/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_set_gpu.c — graph sets over sizes (recap/graph_set.h) on a real GPU, with a step
 * of cuBLAS and a kernel whose temporary comes from recap_malloc:
 *
 *   - each size's replay gives the eager step's outputs bit for bit, and a call for n between
 *     two sizes runs the next size up (padded);
 *   - the members share one pool: with sizes whose temporaries are smaller than the largest's,
 *     the pool reserves after every capture what it reserved after the largest one's, the same
 *     as a set of the largest size alone; the executables' bytes add up;
 *   - a background capture while the caller runs the same step eagerly on its own stream (the
 *     caller's stream never captures, the outputs equal the eager ones before and after every
 *     size is ready);
 *   - a generator drawing inside the step: a replay draws what an eager run at the same offset
 *     draws, and advances the offset as much.
 *
 * The step keeps one cuBLAS handle per stream (the set's capture stream is not the caller's).
 * Every test ends with gpu_finish: nothing left allocated, the set's pool gone.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "capture_util.h"
#include "cublas_util.h"
#include "gpu_util.h"
#include "recap/graph_set.h"

/* Columns of WIDTH floats: a size of n is n columns. With WIDTH 1024 the temporary of every
 * size below is over 1 MiB, so all of them come from the pool's large segments. */
#define WIDTH 1024
#define MAX_COLUMNS 1024
#define HANDLES 4
#define WORKSPACE_BYTES (4 * MiB)

/* ---- the model and its step ------------------------------------------------------------------ */

typedef struct slot {
  cudaStream_t stream;
  cublasHandle_t handle;
  void *workspace; /* cudaMalloc: outside recap, so no pool counts it */
  int bound;
} slot_t;

typedef struct model {
  float *w, *x, *out;          /* WIDTH x WIDTH, WIDTH x MAX_COLUMNS, WIDTH x MAX_COLUMNS */
  recap_generator_t generator; /* non-NULL: the step adds uniform noise drawn from it */
  pthread_mutex_t lock;        /* the caller's thread and the set's helper bind handles */
  slot_t slots[HANDLES];
} model_t;

static void model_init(model_t *m, cudaStream_t s) {
  memset(m, 0, sizeof *m);
  m->w = gpu_floats((size_t)WIDTH * WIDTH, s);
  m->x = gpu_floats((size_t)WIDTH * MAX_COLUMNS, s);
  m->out = gpu_floats((size_t)WIDTH * MAX_COLUMNS, s);
  /* Weights and inputs of varied values (not all equal: a wrong column would show). */
  size_t n = (size_t)WIDTH * MAX_COLUMNS;
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  uint32_t r = 12345u;
  for (size_t i = 0; i < n; i++) {
    r = r * 1664525u + 1013904223u;
    host[i] = (float)(r >> 8) / (float)(1u << 24) - 0.5f;
  }
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(m->x, host, n * sizeof *host, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(m->w, host + 7, (size_t)WIDTH * WIDTH * sizeof *host, cudaMemcpyHostToDevice));
  free(host);
  for (int i = 0; i < HANDLES; i++) {
    CUDA_OK(cudaMalloc(&m->slots[i].workspace, WORKSPACE_BYTES));
    CUBLAS_OK(cublasCreate(&m->slots[i].handle));
    CUBLAS_OK(cublasSetAtomicsMode(m->slots[i].handle, CUBLAS_ATOMICS_NOT_ALLOWED));
  }
  assert_int_equal(pthread_mutex_init(&m->lock, NULL), 0);
}

static void model_destroy(model_t *m) {
  CUDA_OK(cudaDeviceSynchronize());
  for (int i = 0; i < HANDLES; i++) {
    /* Back to the legacy stream first: the set's stream it may hold is gone. */
    CUBLAS_OK(cublasSetStream(m->slots[i].handle, NULL));
    CUBLAS_OK(cublasDestroy(m->slots[i].handle));
    CUDA_OK(cudaFree(m->slots[i].workspace));
  }
  OK(recap_free(m->w));
  OK(recap_free(m->x));
  OK(recap_free(m->out));
  pthread_mutex_destroy(&m->lock);
}

/* The handle bound to stream, or a free one bound now (the stream may be capturing). */
static recap_status_t handle_for(model_t *m, cudaStream_t stream, cublasHandle_t *handle) {
  recap_status_t st = RECAP_ERROR_BUSY;
  pthread_mutex_lock(&m->lock);
  for (int i = 0; i < HANDLES && st != RECAP_SUCCESS; i++)
    if (m->slots[i].bound && m->slots[i].stream == stream) {
      *handle = m->slots[i].handle;
      st = RECAP_SUCCESS;
    }
  for (int i = 0; i < HANDLES && st != RECAP_SUCCESS; i++) {
    if (m->slots[i].bound) continue;
    if (cublasSetStream(m->slots[i].handle, stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(m->slots[i].handle, m->slots[i].workspace, WORKSPACE_BYTES) !=
            CUBLAS_STATUS_SUCCESS)
      break;
    m->slots[i].stream = stream;
    m->slots[i].bound = 1;
    *handle = m->slots[i].handle;
    st = RECAP_SUCCESS;
  }
  pthread_mutex_unlock(&m->lock);
  if (st != RECAP_SUCCESS)
    return recap_set_last_error(RECAP_ERROR_BUSY, "set step: no cuBLAS handle for stream %p",
                                (void *)stream);
  return st;
}

/* out[:, :size] = W x[:, :size] + 1 (+ uniform noise), through a temporary from recap_malloc. */
static recap_status_t step(size_t size, recap_stream_t stream, void *user_data) {
  model_t *m = user_data;
  static const float one = 1.0f, zero = 0.0f;
  cublasHandle_t blas;
  recap_status_t st = handle_for(m, stream, &blas);
  if (st != RECAP_SUCCESS) return st;
  size_t n = (size_t)WIDTH * size;
  float *t = NULL;
  st = recap_malloc((void **)&t, n * sizeof(float), stream);
  if (st != RECAP_SUCCESS) return st;
  if (cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, WIDTH, (int)size, WIDTH, &one, m->w, WIDTH, m->x,
                  WIDTH, &zero, t, WIDTH) != CUBLAS_STATUS_SUCCESS)
    st = recap_set_last_error(RECAP_ERROR_CUDA, "set step: cublasSgemm of size %zu failed", size);
  if (st == RECAP_SUCCESS && recap_test_add_scalar(m->out, t, n, 1.0f, stream) != cudaSuccess)
    st = recap_set_last_error(RECAP_ERROR_CUDA, "set step: the add kernel failed");
  if (st == RECAP_SUCCESS && m->generator) {
    /* The noise goes through the temporary: drawn, then added to out. */
    st = recap_rng_uniform(m->generator, t, n, stream);
    if (st == RECAP_SUCCESS && recap_test_add(m->out, m->out, t, n, stream) != cudaSuccess)
      st = recap_set_last_error(RECAP_ERROR_CUDA, "set step: the noise kernel failed");
  }
  /* Not OK(): the step may run on the set's helper thread, where a test must not fail. */
  recap_status_t freed = recap_free(t);
  return st != RECAP_SUCCESS ? st : freed;
}

/* Every handle runs the step eagerly for every size on s, so that none makes its first GEMM
 * (where cuBLAS may initialise the handle) inside a capture; cuBLAS loads the kernels of every
 * shape here too. Ends with no handle bound and the device idle. */
static void model_warm(model_t *m, const size_t *sizes, size_t count, cudaStream_t s) {
  for (int slot = 0; slot < HANDLES; slot++) {
    CUDA_OK(cudaStreamSynchronize(s));
    for (int i = 0; i < HANDLES; i++) m->slots[i].bound = 0;
    CUBLAS_OK(cublasSetStream(m->slots[slot].handle, s));
    CUBLAS_OK(cublasSetWorkspace(m->slots[slot].handle, m->slots[slot].workspace, WORKSPACE_BYTES));
    m->slots[slot].stream = s;
    m->slots[slot].bound = 1;
    for (size_t i = 0; i < count; i++) OK(step(sizes[i], s, m));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  for (int i = 0; i < HANDLES; i++) m->slots[i].bound = 0;
}

/* out's first `size` columns, on the host (malloc'ed), read in order on s. Neither a device
 * synchronisation nor a copy on the legacy stream: either could meet the set's helper stream
 * while it captures. */
static float *read_out(const model_t *m, size_t size, cudaStream_t s) {
  size_t bytes = (size_t)WIDTH * size * sizeof(float);
  float *host = malloc(bytes);
  if (!host) fail_msg("out of host memory");
  CUDA_OK(cudaMemcpyAsync(host, m->out, bytes, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  return host;
}

static void expect_same(const float *eager, const float *got, size_t size, const char *what) {
  size_t n = (size_t)WIDTH * size;
  if (memcmp(eager, got, n * sizeof(float)) == 0) return;
  size_t i = 0;
  while (eager[i] == got[i]) i++;
  fail_msg("%s, size %zu: element %zu is %.9g, the eager step's %.9g", what, size, i,
           (double)got[i], (double)eager[i]);
}

/* The eager step's outputs for size, on s (read back, then out cleared). */
static float *eager_out(model_t *m, size_t size, cudaStream_t s) {
  OK(step(size, s, m));
  float *host = read_out(m, size, s);
  gpu_set(m->out, (size_t)WIDTH * MAX_COLUMNS, 0.0f, s);
  return host;
}

static recap_graph_set_t make_set(model_t *m, const size_t *sizes, size_t count,
                                  recap_set_capture_t capture) {
  recap_graph_set_t set = graph_set_of(step, m, sizes, count, capture);
  assert_non_null(set);
  return set;
}

static recap_graph_set_info_t set_info(recap_graph_set_t set) {
  recap_graph_set_info_t info = RECAP_GRAPH_SET_INFO_INIT;
  OK(recap_graph_set_info(set, &info));
  return info;
}

static recap_graph_set_member_t member_of(recap_graph_set_t set, size_t size) {
  recap_graph_set_member_t member = RECAP_GRAPH_SET_MEMBER_INIT;
  OK(recap_graph_set_member(set, size, &member));
  return member;
}

static void expect_ready(recap_graph_set_t set, size_t size) {
  recap_graph_set_member_t member = member_of(set, size);
  if (member.state != RECAP_MEMBER_READY)
    fail_msg("size %zu: state %d, %s: %s", size, (int)member.state,
             recap_status_name(member.status), member.message);
  assert_non_null(member.graph);
}

/* ---- tests ------------------------------------------------------------------------------------ */

/* Every size captured up front replays the eager step's outputs bit for bit; n between sizes
 * runs the next size up, whose first n columns are the eager ones. */
RECAP_TEST(replay_equals_eager_for_each_size) {
  cudaStream_t s = gpu_begin_stream();
  model_t m;
  model_init(&m, s);
  static const size_t sizes[] = {1, 3, 8, 40, 256, 1024};
  const size_t count = sizeof sizes / sizeof sizes[0];
  model_warm(&m, sizes, count, s);
  float *eager[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < count; i++) eager[i] = eager_out(&m, sizes[i], s);

  recap_graph_set_t set = make_set(&m, sizes, count, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_info_t info = set_info(set);
  assert_int_equal(info.members, count);
  assert_int_equal(info.ready, count);
  for (size_t i = 0; i < count; i++) {
    expect_ready(set, sizes[i]);
    size_t padded = 0;
    int graphed = 0;
    OK(recap_graph_set_run(set, sizes[i], s, &padded, &graphed));
    assert_int_equal(padded, sizes[i]);
    assert_int_equal(graphed, 1);
    float *got = read_out(&m, sizes[i], s);
    expect_same(eager[i], got, sizes[i], "replay");
    free(got);
    gpu_set(m.out, (size_t)WIDTH * MAX_COLUMNS, 0.0f, s);
  }
  /* n = 30 runs size 40: its first 30 columns are the eager size-40 step's. */
  size_t padded = 0;
  int graphed = 0;
  OK(recap_graph_set_run(set, 30, s, &padded, &graphed));
  assert_int_equal(padded, 40);
  assert_int_equal(graphed, 1);
  float *got = read_out(&m, 30, s);
  expect_same(eager[3], got, 30, "padded replay");
  free(got);
  for (size_t i = 0; i < count; i++)
    assert_int_equal(member_of(set, sizes[i]).replays, i == 3 ? 2 : 1);

  recap_pool_id_t pool = set_info(set).pool;
  OK(recap_graph_set_destroy(set));
  for (size_t i = 0; i < count; i++) free(eager[i]);
  model_destroy(&m);
  gpu_finish_stream(s, &pool, 1);
}

/* Sizes captured largest first into one pool: every member holds the set's pool, and the pool
 * reserves after all captures what it reserved after the largest one, as much as a set of the
 * largest size alone; the set's executable bytes are the members' sum. */
RECAP_TEST(members_share_one_pool) {
  cudaStream_t s = gpu_begin_stream();
  OK(recap_option_set("measure_exec_memory", "1")); /* the members' executables are summed */
  model_t m;
  model_init(&m, s);
  /* Temporaries of 4, 3, 2 and 1.25 MiB: each fits in the largest one's memory. */
  static const size_t sizes[] = {320, 512, 768, 1024};
  const size_t count = sizeof sizes / sizeof sizes[0];
  model_warm(&m, sizes, count, s);

  /* LAZY: the first call for a size captures it, so the pool can be read in between. */
  recap_graph_set_t set = make_set(&m, sizes, count, RECAP_SET_CAPTURE_LAZY);
  assert_int_equal(set_info(set).ready, 0);
  int graphed = 0;
  OK(recap_graph_set_run(set, 1024, s, NULL, &graphed));
  assert_int_equal(graphed, 1);
  recap_graph_set_info_t after_largest = set_info(set);
  assert_int_equal(after_largest.ready, 1);
  assert_true(after_largest.pool_reserved_bytes >= (int64_t)(4 * MiB));
  for (size_t i = 0; i < count - 1; i++) {
    OK(recap_graph_set_run(set, sizes[i], s, NULL, &graphed));
    assert_int_equal(graphed, 1);
  }
  recap_graph_set_info_t after_all = set_info(set);
  assert_int_equal(after_all.ready, count);
  assert_int_equal(after_all.pool_reserved_bytes, after_largest.pool_reserved_bytes);

  int64_t exec_sum = 0;
  for (size_t i = 0; i < count; i++) {
    recap_graph_set_member_t member = member_of(set, sizes[i]);
    recap_pool_id_t pool;
    OK(recap_graph_pool(member.graph, &pool));
    assert_true(pool.a == after_all.pool.a && pool.b == after_all.pool.b);
    assert_int_equal(member.captures, 1);
    assert_true(member.nodes >= 2);
    exec_sum += member.exec_bytes;
  }
  assert_int_equal(after_all.exec_bytes, exec_sum);
  recap_pool_id_t pool = after_all.pool;
  OK(recap_graph_set_destroy(set));
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_empty_cache());
  gpu_expect_pool_gone(pool);

  /* The largest size alone reserves as much. */
  static const size_t largest[] = {1024};
  set = make_set(&m, largest, 1, RECAP_SET_CAPTURE_UPFRONT);
  recap_graph_set_info_t alone = set_info(set);
  assert_int_equal(alone.ready, 1);
  assert_int_equal(alone.pool_reserved_bytes, after_all.pool_reserved_bytes);
  recap_pool_id_t alone_pool = alone.pool;
  OK(recap_graph_set_destroy(set));

  model_destroy(&m);
  CUDA_OK(cudaStreamDestroy(s));
  recap_pool_id_t pools[] = {pool, alone_pool};
  gpu_finish(pools, 2);
}

/* The set's helper captures every size while the caller runs the step eagerly through the set
 * on its own stream: the caller's stream never captures, calls never wait, and every output,
 * eager or replayed, is the eager step's. */
RECAP_TEST(background_capture_beside_eager_work) {
  cudaStream_t s = gpu_begin_stream();
  model_t m;
  model_init(&m, s);
  static const size_t sizes[] = {16, 32, 64, 128, 256, 512, 768, 1024};
  /* Under a CUDA tool every eager call is slow, and the background capture finishes only after
   * many of them (racecheck ran out of 420 s with eight sizes): three sizes there. */
  const size_t count = gpu_under_tool() ? 3 : sizeof sizes / sizeof sizes[0];
  model_warm(&m, sizes, count, s);
  float *eager[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < count; i++) eager[i] = eager_out(&m, sizes[i], s);

  recap_graph_set_t set = make_set(&m, sizes, count, RECAP_SET_CAPTURE_BACKGROUND);
  long calls = 0, replays = 0;
  for (int round = 0;; round++) {
    recap_graph_set_info_t info = set_info(set);
    int done = info.pending == 0 && info.capturing == 0;
    for (size_t i = 0; i < count; i++) {
      size_t k = (i + (size_t)round) % count;
      int graphed = 0;
      size_t padded = 0;
      OK(recap_graph_set_run(set, sizes[k], s, &padded, &graphed));
      assert_int_equal(padded, sizes[k]);
      enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
      CUDA_OK(cudaStreamIsCapturing(s, &capturing));
      assert_int_equal(capturing, cudaStreamCaptureStatusNone);
      float *got = read_out(&m, sizes[k], s);
      expect_same(eager[k], got, sizes[k],
                  graphed ? "replay during the background capture"
                          : "eager call during the background capture");
      free(got);
      calls++;
      replays += graphed;
    }
    if (done) break;
    if (round > 100000) fail_msg("the background capture did not finish");
  }
  OK(recap_graph_set_wait(set));
  recap_graph_set_info_t info = set_info(set);
  assert_int_equal(info.ready, count);
  assert_int_equal(info.pending + info.capturing + info.failed, 0);
  assert_true(info.all_ready_seconds > 0);
  assert_true(info.first_ready_seconds > 0 && info.first_ready_seconds <= info.all_ready_seconds);
  assert_int_equal(info.replays, (uint64_t)replays);
  assert_int_equal(info.eager_runs, (uint64_t)(calls - replays));
  /* Once every size is ready, every call replays. */
  for (size_t i = 0; i < count; i++) {
    int graphed = 0;
    OK(recap_graph_set_run(set, sizes[i], s, NULL, &graphed));
    assert_int_equal(graphed, 1);
    float *got = read_out(&m, sizes[i], s);
    expect_same(eager[i], got, sizes[i], "replay after the background capture");
    free(got);
  }
  recap_pool_id_t pool = info.pool;
  OK(recap_graph_set_destroy(set));
  for (size_t i = 0; i < count; i++) free(eager[i]);
  model_destroy(&m);
  gpu_finish_stream(s, &pool, 1);
}

/* A step that draws from a generator: each member's replay draws what the eager step draws at
 * the same offset, and moves the offset as far. */
RECAP_TEST(generator_in_step_draws_as_eager) {
  cudaStream_t s = gpu_begin_stream();
  model_t m;
  model_init(&m, s);
  OK(recap_generator_create(&m.generator, 2024));
  static const size_t sizes[] = {2, 64, 1024};
  const size_t count = sizeof sizes / sizeof sizes[0];
  model_warm(&m, sizes, count, s); /* the random kernel loads here too */

  recap_graph_set_t set = make_set(&m, sizes, count, RECAP_SET_CAPTURE_UPFRONT);
  for (size_t i = 0; i < count; i++) {
    expect_ready(set, sizes[i]);
    uint64_t before = 0, after_eager = 0, after_replay = 0;
    OK(recap_generator_offset_get(m.generator, &before));
    float *eager = eager_out(&m, sizes[i], s);
    OK(recap_generator_offset_get(m.generator, &after_eager));
    assert_true(after_eager > before);
    OK(recap_generator_offset_set(m.generator, before));
    int graphed = 0;
    OK(recap_graph_set_run(set, sizes[i], s, NULL, &graphed));
    assert_int_equal(graphed, 1);
    float *got = read_out(&m, sizes[i], s);
    expect_same(eager, got, sizes[i], "replay with a generator");
    OK(recap_generator_offset_get(m.generator, &after_replay));
    assert_int_equal(after_replay, after_eager);
    /* The next replay draws new numbers. */
    gpu_set(m.out, (size_t)WIDTH * MAX_COLUMNS, 0.0f, s);
    OK(recap_graph_set_run(set, sizes[i], s, NULL, &graphed));
    float *again = read_out(&m, sizes[i], s);
    assert_true(memcmp(again, got, (size_t)WIDTH * sizes[i] * sizeof(float)) != 0);
    free(again);
    free(got);
    free(eager);
    gpu_set(m.out, (size_t)WIDTH * MAX_COLUMNS, 0.0f, s);
  }
  recap_pool_id_t pool = set_info(set).pool;
  OK(recap_graph_set_destroy(set));
  OK(recap_generator_destroy(m.generator));
  model_destroy(&m);
  gpu_finish_stream(s, &pool, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(replay_equals_eager_for_each_size),
    cmocka_unit_test(members_share_one_pool),
    cmocka_unit_test(background_capture_beside_eager_work),
    cmocka_unit_test(generator_in_step_draws_as_eager),
};
RECAP_TEST_MAIN(tests)
