/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_faults.c — a fault injected at each device call of sleep and of wake, leaving the pool
 * fully asleep or fully awake with the checker passing, the statistics unchanged and OFFLOAD
 * contents intact, and a wake that finds the device full (a part of test_sleep).
 */

#include "sleep_util.h"

/* ---- faults ---------------------------------------------------------------------------------- */

static const recap__fake_fault_t vmm_kinds[] = {
    RECAP__FAKE_FAULT_VMM_GRANULARITY,   RECAP__FAKE_FAULT_VMM_RESERVE,
    RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, RECAP__FAKE_FAULT_VMM_CREATE,
    RECAP__FAKE_FAULT_VMM_RELEASE,       RECAP__FAKE_FAULT_VMM_MAP,
    RECAP__FAKE_FAULT_VMM_UNMAP,         RECAP__FAKE_FAULT_VMM_SET_ACCESS,
    RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, RECAP__FAKE_FAULT_HOST_FREE_PINNED};
enum { KINDS = sizeof vmm_kinds / sizeof vmm_kinds[0] };

/* A started model (one run), and what a fault must leave as it was: its contents, the
 * statistics, the device's free memory while awake, and the pool's reserved bytes. */
typedef struct whole {
  model_t m;
  contents_t saved;
  recap_memory_stats_t st;
  size_t free_awake;
  int64_t reserved;
} whole_t;

static void whole_started(whole_t *w, int runs) {
  model_started(&w->m, runs);
  w->saved = contents_save(&w->m);
  w->st = stats_now();
  w->free_awake = device_free();
  w->reserved = pool_memory(w->m.pool).reserved_bytes;
}

/* What must hold after any failure or success: the pool is fully awake (every byte mapped, the
 * contents intact, nothing pinned) or fully asleep (nothing mapped but chunks a release kept),
 * the checker agrees, and the statistics did not move. */
static void expect_whole(const whole_t *w) {
  expect_checker_passes();
  expect_stats(&w->st);
  recap_pool_memory_t pm = pool_memory(w->m.pool);
  assert_int_equal(pm.reserved_bytes, w->reserved);
  if (pm.state == RECAP_POOL_AWAKE) {
    assert_int_equal(pm.sleeping_bytes, 0);
    assert_int_equal(pm.offloaded_bytes, 0);
    assert_int_equal(device_free(), w->free_awake);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, (size_t)w->reserved);
    assert_int_equal(recap__fake_now().pinned_live, 0);
    contents_expect(&w->saved, &w->m);
  } else {
    assert_int_equal(pm.sleeping_bytes, w->reserved);
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  }
}

/* A wake without faults: the pool is awake and whole again (DISCARD: once reloaded). */
static void whole_wakes(whole_t *w, int mode) {
  OK(recap_pool_wake(w->m.pool));
  assert_int_equal(state_of_pool(w->m.pool), RECAP_POOL_AWAKE);
  if (mode == RECAP_SLEEP_DISCARD) model_reload(&w->m);
  expect_whole(w);
}

/* The model and its saved contents go, and nothing is left on the device. */
static void whole_goes(whole_t *w) {
  contents_free(&w->saved);
  teardown(&w->m);
}

/* The ending of a fault test: a run matches the reference, and the model goes. */
static void whole_runs_and_goes(whole_t *w) {
  model_run(&w->m, 1);
  model_expect_reference(&w->m);
  whole_goes(w);
}

/* A fault at the k-th call of each kind during sleep, for k = 1, 2, ... until a sleep no longer
 * reaches it; then the same during wake. */
static void faults_at_each_call(void **unused) {
  (void)unused;
  for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
    whole_t w;
    whole_started(&w, 1);
    recap_pool_state_t asleep_state =
        mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
    int faults_hit = 0;
    /* Sleep. */
    for (int i = 0; i < KINDS; i++) {
      recap__fake_fault_t kind = vmm_kinds[i];
      for (uint64_t k = 1;; k++) {
        uint64_t calls = recap__fake_now().calls[kind];
        recap__fake_fail_nth(kind, k);
        recap_status_t s = recap_pool_sleep(w.m.pool, (recap_sleep_mode_t)mode);
        recap__fake_fail_nth(kind, 0);
        bool reached = recap__fake_now().calls[kind] - calls >= k;
        if (!reached) {
          OK(s);
          assert_int_equal(state_of_pool(w.m.pool), asleep_state);
          expect_whole(&w);
          OK(recap_pool_wake(w.m.pool));
          if (mode == RECAP_SLEEP_DISCARD) model_reload(&w.m);
          break;
        }
        faults_hit++;
        assert_int_not_equal(s, RECAP_SUCCESS);
        EXPECT_MESSAGE("recap_pool_sleep:");
        if (state_of_pool(w.m.pool) == RECAP_POOL_AWAKE) {
          expect_whole(&w);
        } else {
          /* Only a release fails after the point of no return: the pool sleeps, and the chunk
           * it kept goes at the wake. */
          assert_int_equal(kind, RECAP__FAKE_FAULT_VMM_RELEASE);
          EXPECT_MESSAGE("is asleep, but 1 of its physical chunks");
          assert_int_equal(state_of_pool(w.m.pool), asleep_state);
          expect_whole(&w);
          assert_true(device_free() > w.free_awake);
          whole_wakes(&w, mode);
        }
      }
    }
    /* Wake. */
    for (int i = 0; i < KINDS; i++) {
      recap__fake_fault_t kind = vmm_kinds[i];
      for (uint64_t k = 1;; k++) {
        OK(recap_pool_sleep(w.m.pool, (recap_sleep_mode_t)mode));
        void *host = offload_host(w.m.pool);
        size_t free_asleep = device_free();
        uint64_t calls = recap__fake_now().calls[kind];
        recap_test_log_t log;
        recap_test_log_capture(&log);
        recap__fake_fail_nth(kind, k);
        recap_status_t s = recap_pool_wake(w.m.pool);
        recap__fake_fail_nth(kind, 0);
        recap_test_log_stop();
        bool reached = recap__fake_now().calls[kind] - calls >= k;
        if (s == RECAP_SUCCESS && reached) {
          /* The pinned copy's free, after the restore: the pool is awake, the buffer kept
           * for a later free (a_wake_whose_pinned_free_fails_stays_awake), which this is. */
          assert_int_equal(kind, RECAP__FAKE_FAULT_HOST_FREE_PINNED);
          assert_int_equal(mode, RECAP_SLEEP_OFFLOAD);
          faults_hit++;
          assert_int_equal(log.warnings, 1);
          assert_non_null(strstr(log.last_warning, "is awake, but its pinned host copy"));
          assert_int_equal(recap__fake_now().pinned_live, 1);
          assert_true(recap__pinned_is_kept(host));
          recap__alloc_lock();
          OK(recap__pinned_release_all("the test"));
          recap__alloc_unlock();
          expect_whole(&w);
          continue;
        }
        if (s == RECAP_SUCCESS) {
          assert_false(reached);
          if (mode == RECAP_SLEEP_DISCARD) model_reload(&w.m);
          expect_whole(&w);
          break;
        }
        assert_true(reached);
        faults_hit++;
        EXPECT_MESSAGE("recap_pool_wake:");
        assert_int_equal(state_of_pool(w.m.pool), asleep_state);
        assert_int_equal(device_free(), free_asleep);
        assert_int_equal(pool_memory(w.m.pool).offloaded_bytes,
                         mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
        expect_whole(&w);
        whole_wakes(&w, mode);
      }
    }
    /* Unmaps and releases of two segments' chunks, creates, maps and accesses of the wake's,
     * and the pinned buffer's allocation and free. */
    assert_true(faults_hit >= (mode == RECAP_SLEEP_OFFLOAD ? 12 : 10));
    model_run(&w.m, 1);
    model_reload(&w.m);
    whole_goes(&w);
  }
}

/* A chunk a sleep could not release is released by the wake; should that fail too, the pool
 * stays asleep and a later wake releases it. */
static void a_kept_chunk_is_released_at_the_wake(void **unused) {
  (void)unused;
  whole_t w;
  whole_started(&w, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_sleep(w.m.pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("is asleep, but 1 of its physical chunks");
  EXPECT_MESSAGE("recap_pool_wake releases them");
  assert_int_equal(state_of_pool(w.m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  int64_t live = recap__fake_now().vmm_chunks_live;
  assert_int_equal(live, 1);
  expect_checker_passes();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  EXPECT_STATUS(recap_pool_wake(w.m.pool), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("could not be released now either");
  assert_int_equal(state_of_pool(w.m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  expect_checker_passes();
  OK(recap_pool_wake(w.m.pool));
  assert_int_equal(device_free(), w.free_awake);
  contents_expect(&w.saved, &w.m);
  expect_checker_passes();
  whole_goes(&w);
}

/* A sleep whose unmap fails and whose roll-back cannot map everything back goes forward: the
 * pool is fully asleep (nothing mapped, every handle released), the error says so, and the
 * next wake restores it (OFFLOAD: the copy was taken before the unmaps). A third fault, a
 * release of that forward pass, leaves a handle for the wake, which releases it first. */
static void a_sleep_whose_roll_back_fails_goes_forward(void **unused) {
  (void)unused;
  for (int third = 0; third <= 1; third++) {
    for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
      whole_t w;
      whole_started(&w, 1);
      int mapped;
      assert_true(listed_chunks(w.m.pool, &mapped) >= 2);
      recap_pool_state_t asleep_state =
          mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
      recap_test_log_t log;
      recap_test_log_capture(&log);
      /* The second chunk's unmap fails, then the map back of the first. */
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 2);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 1);
      if (third) recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
      recap_status_t s = recap_pool_sleep(w.m.pool, (recap_sleep_mode_t)mode);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 0);
      recap_test_log_stop();
      EXPECT_STATUS(s, RECAP_ERROR_CUDA);
      EXPECT_MESSAGE("recap_pool_sleep: unmapping the chunk at");
      EXPECT_MESSAGE("fault injected by the fake device into VMM unmap call");
      EXPECT_MESSAGE(
          "and the roll-back failed too: the chunks unmapped before it could not all "
          "be mapped back");
      EXPECT_MESSAGE(mode == RECAP_SLEEP_OFFLOAD
                         ? "So the pool is asleep instead (its blocks in use were copied to "
                           "pinned host memory first: the wake restores them); wake it "
                           "(recap_pool_wake) to use it"
                         : "So the pool is asleep instead (RECAP_SLEEP_DISCARD: its blocks' "
                           "contents are dropped); wake it (recap_pool_wake) to use it");
      assert_int_equal(log.errors, 1 + third); /* the map back, and the release */
      assert_int_equal(state_of_pool(w.m.pool), asleep_state);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
      assert_int_equal(recap__fake_now().vmm_chunks_live, third);
      assert_int_equal(listed_chunks(w.m.pool, &mapped), third);
      assert_int_equal(mapped, 0);
      if (!third) assert_int_equal(device_free(), w.free_awake + (size_t)w.reserved);
      recap_pool_memory_t pm = pool_memory(w.m.pool);
      assert_int_equal(pm.sleeping_bytes, w.reserved);
      assert_int_equal(pm.offloaded_bytes, mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
      expect_whole(&w);
      EXPECT_STATUS(recap_graph_replay(w.m.graph, w.m.stream), RECAP_ERROR_POOL_ASLEEP);
      /* The next wake works. */
      whole_wakes(&w, mode);
      whole_runs_and_goes(&w);
    }
  }
}

/* A wake whose map of a later chunk fails and whose undo cannot unmap an earlier chunk keeps
 * that chunk listed, mapped: the pool stays asleep, the checker passes, and the next wake
 * unmaps it first and succeeds. The same for a chunk whose access and then unmap fail. */
static void a_wake_whose_undo_cannot_unmap_retries(void **unused) {
  (void)unused;
  for (int access = 0; access <= 1; access++) {
    for (int mode = RECAP_SLEEP_DISCARD; mode <= RECAP_SLEEP_OFFLOAD; mode++) {
      whole_t w;
      whole_started(&w, 1);
      recap_pool_state_t asleep_state =
          mode == RECAP_SLEEP_OFFLOAD ? RECAP_POOL_ASLEEP_OFFLOADED : RECAP_POOL_ASLEEP_DISCARDED;
      OK(recap_pool_sleep(w.m.pool, (recap_sleep_mode_t)mode));
      size_t free_asleep = device_free();
      recap_test_log_t log;
      recap_test_log_capture(&log);
      if (access) {
        /* The first chunk's access fails, then its unmap: wake_undo unmaps it (the second
         * unmap call) and nothing stays. */
        recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 1);
      } else {
        /* The second chunk's map fails, then wake_undo's unmap of the first. */
        recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 2);
      }
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 1);
      recap_status_t s = recap_pool_wake(w.m.pool);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 0);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
      recap_test_log_stop();
      EXPECT_STATUS(s, RECAP_ERROR_CUDA);
      EXPECT_MESSAGE("recap_pool_wake: mapping a chunk of");
      assert_int_equal(state_of_pool(w.m.pool), asleep_state);
      assert_int_equal(pool_memory(w.m.pool).offloaded_bytes,
                       mode == RECAP_SLEEP_OFFLOAD ? model_in_use : 0);
      int mapped;
      if (access) {
        EXPECT_MESSAGE("Nothing of it is mapped; the pool stays asleep");
        assert_int_equal(log.errors, 0);
        assert_int_equal(listed_chunks(w.m.pool, &mapped), 0);
        assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
        assert_int_equal(device_free(), free_asleep);
      } else {
        EXPECT_MESSAGE("The pool stays asleep; 1 chunk(s) of this wake (");
        EXPECT_MESSAGE(
            "could not be given back (the log says why), and the next wake gives "
            "them back first");
        assert_int_equal(log.errors, 1);
        assert_non_null(strstr(log.last, "it stays mapped until the next wake gives it back"));
        assert_int_equal(listed_chunks(w.m.pool, &mapped), 1);
        assert_int_equal(mapped, 1);
        assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
        assert_true(recap__fake_now().vmm_bytes_mapped > 0);
      }
      expect_checker_passes();
      expect_stats(&w.st);
      /* The next wake, faults gone, gives back what was left and restores the pool. */
      whole_wakes(&w, mode);
      whole_runs_and_goes(&w);
    }
  }
}

/* A wake whose restore succeeded but whose pinned copy cannot be freed leaves the pool awake
 * with its contents; a warning says the buffer stays kept, and recap_empty_cache frees it. */
static void a_wake_whose_pinned_free_fails_stays_awake(void **unused) {
  (void)unused;
  whole_t w;
  whole_started(&w, 1);
  OK(recap_pool_sleep(w.m.pool, RECAP_SLEEP_OFFLOAD));
  void *host = offload_host(w.m.pool);
  assert_non_null(host);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 1);
  recap_status_t s = recap_pool_wake(w.m.pool);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_HOST_FREE_PINNED, 0);
  recap_test_log_stop();
  OK(s);
  assert_int_equal(state_of_pool(w.m.pool), RECAP_POOL_AWAKE);
  assert_int_equal(log.warnings, 1);
  char needle[200];
  snprintf(needle, sizeof needle,
           "recap_pool_wake: pool {%llu,%llu} is awake, but its pinned host copy (%lld bytes) "
           "could not be freed: freeing %lld bytes of pinned host memory failed (",
           (unsigned long long)w.m.pool.a, (unsigned long long)w.m.pool.b, (long long)model_in_use,
           (long long)model_in_use);
  assert_non_null(strstr(log.last_warning, needle));
  assert_non_null(
      strstr(log.last_warning, "the buffer stays kept, and the next recap_empty_cache frees it"));
  contents_expect(&w.saved, &w.m);
  assert_int_equal(recap__fake_now().pinned_live, 1);
  assert_true(recap__pinned_is_kept(host));
  /* recap_empty_cache frees it (its release of kept buffers, without the cached memory the
   * checks below count): no pinned memory is lost. */
  recap__alloc_lock();
  OK(recap__pinned_release_all("recap_empty_cache"));
  recap__alloc_unlock();
  assert_int_equal(recap__fake_now().pinned_live, 0);
  expect_whole(&w);
  whole_runs_and_goes(&w);
}

/* ---- out of memory at the wake --------------------------------------------------------------- */

static void wake_out_of_memory(void **unused) {
  (void)unused;
  reset_expandable(64 * MiB);
  model_t m;
  model_make(&m);
  model_run(&m, 1);
  contents_t saved = contents_save(&m);
  int64_t reserved = pool_memory(m.pool).reserved_bytes;
  OK(recap_pool_sleep(m.pool, RECAP_SLEEP_OFFLOAD));
  /* Another user takes the memory the pool gave back, and leaves less than the pool needs. */
  size_t free_asleep = device_free();
  assert_true(free_asleep >= (size_t)reserved);
  void *other = NULL;
  size_t taken = free_asleep - (size_t)reserved + 2 * MiB;
  OK(recap__device()->raw_malloc(&other, taken));
  memset(other, 0xab, taken); /* it is usable memory */
  size_t free_now = device_free();
  EXPECT_STATUS(recap_pool_wake(m.pool), RECAP_ERROR_OUT_OF_MEMORY);
  char needle[160];
  snprintf(needle, sizeof needle, "recap_pool_wake: out of device memory on device 0: waking pool");
  EXPECT_MESSAGE(needle);
  snprintf(needle, sizeof needle, "needs %lld bytes", (long long)reserved);
  EXPECT_MESSAGE(needle);
  snprintf(needle, sizeof needle, "the device has %zu bytes free of %zu", free_now,
           (size_t)64 * MiB);
  EXPECT_MESSAGE(needle);
  EXPECT_MESSAGE("the pool stays asleep");
  assert_int_equal(state_of_pool(m.pool), RECAP_POOL_ASLEEP_OFFLOADED);
  assert_int_equal(device_free(), free_now);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  expect_checker_passes();
  OK(recap__device()->raw_free(other));
  OK(recap_pool_wake(m.pool));
  contents_expect(&saved, &m);
  model_run(&m, 1);
  model_expect_reference(&m);
  expect_checker_passes();
  model_goes(&m, &saved);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(faults_at_each_call),
    cmocka_unit_test(a_kept_chunk_is_released_at_the_wake),
    cmocka_unit_test(a_sleep_whose_roll_back_fails_goes_forward),
    cmocka_unit_test(a_wake_whose_undo_cannot_unmap_retries),
    cmocka_unit_test(a_wake_whose_pinned_free_fails_stays_awake),
    cmocka_unit_test(wake_out_of_memory),
};
const recap_test_part_t sleep_fault_tests = RECAP_TEST_PART(tests);
