/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_bad_input.c — the bad-input matrix: every public function called with NULL pointers,
 * destroyed and foreign handles, and every wrong state, on the CPU fake device.
 *
 * Two tables make the matrix. The generated one (bad_input_cases.inc, written at build time by
 * cmake/GenBadInputMatrix.cmake from the public headers) has, for every public function, one case
 * per pointer parameter passed NULL and, for every recap handle parameter, one with a destroyed
 * handle and one with a foreign one (an object on the stack cast to the handle type); a new
 * public function gets its cases without anyone writing them, and one the generator cannot
 * handle fails the build. The hand-written one (bad_input_states.c) has the wrong states and
 * wrong values:
 * replay before capture, capture twice, end without begin, instantiate without KEEP, free twice,
 * release an unknown pool, set_seed during a capture, backward before forward...
 *
 * Each case runs in a child process of its own, on a fresh fake device and a fixture holding a
 * live object of every kind, so that a crash is reported as that case's failure (with its name)
 * and the others still run. A case passes when the call returns the documented status, a
 * failure leaves a non-empty recap_last_error() with recap_last_status() equal to the status,
 * and afterwards, once everything is destroyed and the cache emptied, the allocator's checker
 * passes and nothing is left: no device memory, capture, graph or executable, and no event
 * outside the allocator's cache.
 *
 * Destroyed handles are use after free by definition: recap clears a handle's magic word when it
 * destroys it and refuses it afterwards, reliably only while the memory is not reused. Under
 * AddressSanitizer (which reports the read itself, as it should) and when
 * RECAP_BAD_INPUT_SKIP_DESTROYED=1 (valgrind) those cases are skipped.
 */
#include "bad_input.h"

/* A graph set's step that enqueues one kernel. */
static recap_status_t bim_step(size_t size, recap_stream_t stream, void *user_data) {
  (void)size;
  (void)user_data;
  recap__fake_stream_enqueue(stream);
  return RECAP_SUCCESS;
}

static void bim_log(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  (void)user_data;
}

/* A graph captured with one kernel that takes the parameter "n" (an int32). */
static recap_graph_t bim_param_graph(recap_stream_t stream, recap_param_t *param) {
  recap_graph_t g;
  MUST(recap_graph_create(&g, 0));
  MUST(recap_graph_capture_begin(g, NULL, stream));
  int32_t n;
  MUST(recap_graph_param_int32(g, "n", 1, &n, param));
  const void *args[1] = {(const void *)(uintptr_t)(uint32_t)n};
  recap__fake_launch_kernel_sized(stream, "takes_n", NULL, args, 1, 1u);
  MUST(recap_graph_capture_end(g));
  return g;
}

static void bim_setup(bim_fixture_t *f) {
  memset(f, 0, sizeof *f);
  recap_test_reset(NULL);
  recap__graphs_disabled_override(0);
  f->stream = recap__fake_stream_new();
  f->stream2 = recap__fake_stream_new();
  MUST(recap_graph_create(&f->graph, 0));
  MUST(recap_generator_create(&f->gen, 7));
  MUST(recap_malloc(&f->block, 1024, f->stream));
  MUST(recap_malloc((void **)&f->floats, 64 * sizeof(float), f->stream));
  MUST(recap_memory_snapshot_json(-1, &f->string));
  f->path = "bad_input.dot";
  f->pool = recap_pool_handle();
  f->capture_options = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  f->update_policy = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  f->update_stats = (recap_update_stats_t)RECAP_UPDATE_STATS_INIT;
  f->graph_memory = (recap_graph_memory_t)RECAP_GRAPH_MEMORY_INIT;
  f->pool_memory = (recap_pool_memory_t)RECAP_POOL_MEMORY_INIT;
  f->scope_options = (recap_scope_options_t)RECAP_SCOPE_OPTIONS_INIT;
  f->graphed_options = (recap_graphed_options_t)RECAP_GRAPHED_OPTIONS_INIT;
  f->cond_compare = (recap_cond_compare_t)RECAP_COND_COMPARE_INIT;
  f->loop = (recap_loop_t)RECAP_LOOP_INIT;
  static const int requires_grad[1] = {1};
  f->inputs[0] = (recap_buffer_t){f->x, sizeof f->x};
  f->grad_outputs[0] = (recap_buffer_t){f->gx, sizeof f->gx};
  f->descs[0] = (recap_callable_desc_t){.size = sizeof(recap_callable_desc_t),
                                        .forward = plain_forward,
                                        .backward = plain_backward,
                                        .input_count = 1,
                                        .sample_inputs = f->inputs,
                                        .requires_grad = requires_grad,
                                        .output_count = 1};
  MUST(recap_graphed_create(&f->graphed, f->descs, 1, NULL));
  f->rebinds[0] = (recap_rebind_t){sizeof(recap_rebind_t), f->block, f->floats, 16};
  f->rebind_sites[0] = (recap_rebind_site_t)RECAP_REBIND_SITE_INIT;
  f->liveness_out[0] = (recap_liveness_input_t)RECAP_LIVENESS_INPUT_INIT;
  f->block_info = (recap_block_info_t)RECAP_BLOCK_INFO_INIT;
  f->stats = (recap_memory_stats_t)RECAP_MEMORY_STATS_INIT;
  f->heap_info = calloc(1, sizeof *f->heap_info);
  if (!f->heap_info) exit(10);
  static const size_t set_sizes[2] = {1, 4};
  f->graph_set_options = (recap_graph_set_options_t)RECAP_GRAPH_SET_OPTIONS_INIT;
  f->graph_set_options.sizes = set_sizes;
  f->graph_set_options.size_count = 2;
  f->graph_set_options.capture = RECAP_SET_CAPTURE_LAZY;
  f->set_member = (recap_graph_set_member_t)RECAP_GRAPH_SET_MEMBER_INIT;
  f->set_info = (recap_graph_set_info_t)RECAP_GRAPH_SET_INFO_INIT;
  f->collectives[0] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  MUST(recap_graph_set_create(&f->graph_set, bim_step, f, &f->graph_set_options));
  f->param_graph = bim_param_graph(f->stream, &f->param);
  f->param_value = 3;
  f->param_values[0] = (recap_param_value_t){f->param, &f->param_value};
  f->param_info = (recap_param_info_t)RECAP_PARAM_INFO_INIT;
  f->param_sites[0] = (recap_param_site_t)RECAP_PARAM_SITE_INIT;
  f->shape[0] = f->shape[1] = f->shape[2] = 1;
  /* The destroyed handles last, so that nothing made after them reuses their memory. */
  MUST(recap_graph_create(&f->dead_recap_graph_t, RECAP_GRAPH_KEEP));
  MUST(recap_graph_destroy(f->dead_recap_graph_t));
  MUST(recap_generator_create(&f->dead_recap_generator_t, 1));
  MUST(recap_generator_destroy(f->dead_recap_generator_t));
  MUST(recap_graphed_create(&f->dead_recap_graphed_t, f->descs, 1, NULL));
  MUST(recap_graphed_destroy(f->dead_recap_graphed_t));
  MUST(recap_graph_set_create(&f->dead_recap_graph_set_t, bim_step, f, &f->graph_set_options));
  MUST(recap_graph_set_destroy(f->dead_recap_graph_set_t));
  MUST(recap_graph_destroy(bim_param_graph(f->stream, &f->dead_recap_param_t)));
  memset(f->foreign_storage, 0x5a, sizeof f->foreign_storage);
  f->foreign = f->foreign_storage;
  recap_clear_last_error();
}

/* Release everything the fixture and the case made, then check that nothing is left. Returns
 * NULL when all is well, or what is wrong. */
static const char *bim_teardown(bim_fixture_t *f) {
  static char why[1024];
  recap_log_set(NULL, NULL);
  recap_graphed_destroy(f->graphed);
  recap_graphed_destroy(f->graphed_out[0]);
  recap_graph_set_destroy(f->graph_set);
  recap_graph_set_destroy(f->graph_set_out);
  recap_graph_destroy(f->param_graph);
  recap_graph_destroy(f->graph);
  recap_graph_destroy(f->graph_out);
  recap_graph_destroy(f->graph_out2);
  recap_generator_destroy(f->gen);
  recap_generator_destroy(f->gen_out);
  recap_free(f->block);
  recap_free(f->floats);
  recap_free(f->ptr_out);
  recap_string_free(f->string);
  recap_string_free(f->string_out);
  recap_graph_info_free(f->heap_info);
  recap_graph_info_free(f->info_out);
  recap_annotations_enable(-1);
  recap__fake_stream_complete(f->stream);
  recap__fake_stream_complete(f->stream2);
  recap__fake_stream_complete(NULL);
  recap_status_t s = recap_empty_cache();
  if (s != RECAP_SUCCESS) {
    snprintf(why, sizeof why, "recap_empty_cache: %s: %s", recap_status_name(s),
             recap_last_error());
    return why;
  }
  if (recap_memory_check() != RECAP_SUCCESS) {
    snprintf(why, sizeof why, "checker: %s", recap_last_error());
    return why;
  }
  if (recap__registry_count() != 0) return "a capture is still registered";
  if (recap__fake_now().bytes_in_use[0] != 0) {
    snprintf(why, sizeof why, "%zu bytes of device memory are still held",
             recap__fake_now().bytes_in_use[0]);
    return why;
  }
  if (recap__fake_now().live_graphs != 0 || recap__fake_now().live_execs != 0) {
    snprintf(why, sizeof why, "%lld graphs and %lld executables are still alive",
             (long long)recap__fake_now().live_graphs, (long long)recap__fake_now().live_execs);
    return why;
  }
  const recap__device_state_t *d = recap__alloc.devices[0];
  int64_t cached = d ? (int64_t)d->spare_count : 0;
  size_t pending = d ? d->pending_count : 0;
  if (pending != 0 || recap__fake_now().live_events != cached) {
    snprintf(why, sizeof why,
             "%lld events alive, %lld of them in the allocator's cache, %zu pending",
             (long long)recap__fake_now().live_events, (long long)cached, pending);
    return why;
  }
  return NULL;
}

/* The generated NULL, destroyed and foreign cases (BIM_null... are the kinds above). */
/* The deprecated names kept in the public headers are public functions too, with their cases. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "bad_input_cases.inc"
#pragma GCC diagnostic pop

/* ---- known bugs ------------------------------------------------------------------------------
 * Cases that fail today because of a bug in recap, each with what is wrong. They are run and
 * reported as XFAIL; once one passes (XPASS), the test fails until it is taken off this list. */

typedef struct bim_known_bug {
  const char *name;
  const char *why;
} bim_known_bug_t;

static const bim_known_bug_t bim_known_bugs[] = {
    {NULL, NULL},
};

static const char *known_bug(const char *name) {
  for (size_t i = 0; bim_known_bugs[i].name; i++)
    if (strcmp(bim_known_bugs[i].name, name) == 0) return bim_known_bugs[i].why;
  return NULL;
}

/* ---- the runner -------------------------------------------------------------------------------- */

/* In the child: run one case, return its verdict as an exit code. */
static int run_case(const bim_case_t *c) {
  bim_fixture_t f;
  bim_setup(&f);
  recap_clear_last_error();
  int got = c->run(&f);
  if (c->expect != BIM_NO_STATUS) {
    if (got != c->expect) {
      fprintf(stderr, "    returned %s, expected %s (last error: \"%s\")\n",
              recap_status_name((recap_status_t)got), recap_status_name((recap_status_t)c->expect),
              recap_last_error());
      return 1;
    }
    if (got != RECAP_SUCCESS) {
      if (recap_last_error()[0] == '\0') {
        fprintf(stderr, "    returned %s with an empty recap_last_error()\n",
                recap_status_name((recap_status_t)got));
        return 2;
      }
      if ((int)recap_last_status() != got) {
        fprintf(stderr, "    returned %s but recap_last_status() is %s (\"%s\")\n",
                recap_status_name((recap_status_t)got), recap_status_name(recap_last_status()),
                recap_last_error());
        return 3;
      }
      if (c->needle && !strstr(recap_last_error(), c->needle)) {
        fprintf(stderr, "    the message does not mention \"%s\": %s\n", c->needle,
                recap_last_error());
        return 5;
      }
    }
  }
  const char *left = bim_teardown(&f);
  if (left) {
    fprintf(stderr, "    after the case and cleanup: %s\n", left);
    return 4;
  }
  return 0;
}

typedef struct bim_tally {
  int run, passed, failed, skipped, xfail, xpass;
} bim_tally_t;

static void run_in_child(const bim_case_t *c, bim_tally_t *t) {
  fflush(stdout);
  fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) fail_msg("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) fail_msg("fork: %s", strerror(errno));
  if (pid == 0) {
    /* cmocka catches crashes to report them as test failures and go on; in the child a crash
     * must end the process, so that the parent sees it. What the child says goes to the parent,
     * which prints it under the case's verdict. */
    static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) signal(signals[i], SIG_DFL);
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    setenv("LIBC_FATAL_STDERR_", "1", 1); /* glibc's own aborts write to stderr, not the tty */
    alarm(30);                            /* a hang is a failure too */
    exit(run_case(c));
  }
  close(fds[1]);
  /* Keep the first part of what the child says; read the rest away so it never blocks. */
  char said[8192], sink[4096];
  size_t n = 0;
  for (;;) {
    char *to = n < sizeof said - 1 ? said + n : sink;
    size_t room = n < sizeof said - 1 ? sizeof said - 1 - n : sizeof sink;
    ssize_t r = read(fds[0], to, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (to != sink) n += (size_t)r;
  }
  said[n] = '\0';
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  t->run++;
  bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  const char *bug = known_bug(c->name);
  char verdict[128];
  if (WIFSIGNALED(wstatus))
    snprintf(verdict, sizeof verdict, "crashed (signal %d, %s)", WTERMSIG(wstatus),
             strsignal(WTERMSIG(wstatus)));
  else
    snprintf(verdict, sizeof verdict, "failed (exit %d)", WEXITSTATUS(wstatus));
  if (ok && !bug) {
    t->passed++;
  } else if (ok && bug) {
    t->xpass++;
    printf("XPASS %s: now passes; take it off bim_known_bugs (%s)\n", c->name, bug);
  } else if (bug) {
    t->xfail++;
    printf("XFAIL %s: %s (a known bug, listed below)\n", c->name, verdict);
  } else {
    t->failed++;
    printf("FAIL  %s: %s\n%s", c->name, verdict, said);
  }
}

static bool skip_destroyed(void) {
  const char *env = getenv("RECAP_BAD_INPUT_SKIP_DESTROYED");
  return BIM_ASAN || (env && strcmp(env, "1") == 0);
}

/* Count the public functions a list of cases touches. */
static void mark_functions(const bim_case_t *cases, size_t n, bool *covered) {
  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < nf; j++)
      if (strcmp(cases[i].function, bim_public_functions[j]) == 0) covered[j] = true;
}

RECAP_TEST(bad_input_matrix) {
  bim_tally_t t = {0, 0, 0, 0, 0, 0};
  size_t ngen = sizeof bim_generated_cases / sizeof bim_generated_cases[0];
  size_t nstate = bim_state_case_count;
  const char *only = getenv("RECAP_BAD_INPUT_CASE"); /* run one case by name, for debugging */
  bool skip = skip_destroyed();
  for (size_t i = 0; i < ngen; i++) {
    if (only && strcmp(only, bim_generated_cases[i].name) != 0) continue;
    if (skip && bim_generated_cases[i].kind == BIM_destroyed) {
      t.skipped++;
      continue;
    }
    run_in_child(&bim_generated_cases[i], &t);
  }
  for (size_t i = 0; i < nstate; i++) {
    if (only && strcmp(only, bim_state_cases[i].name) != 0) continue;
    run_in_child(&bim_state_cases[i], &t);
  }

  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  bool covered[sizeof bim_public_functions / sizeof bim_public_functions[0]] = {false};
  mark_functions(bim_generated_cases, ngen, covered);
  mark_functions(bim_state_cases, nstate, covered);
  int functions = 0;
  for (size_t j = 0; j < nf; j++) functions += covered[j];
  printf(
      "bad-input matrix: %d cases over %d functions (%zu generated from the headers, %zu "
      "states and values; %zu public functions in all)\n",
      t.run, functions, ngen, nstate, nf);
  printf("bad-input matrix: %d passed, %d failed, %d known bugs (xfail), %d xpass, %d skipped%s\n",
         t.passed, t.failed, t.xfail, t.xpass, t.skipped,
         t.skipped ? " (destroyed handles: use after free under AddressSanitizer or valgrind)"
                   : "");
  /* Each known bug once, with what is wrong. */
  for (size_t i = 0; bim_known_bugs[i].name; i++) {
    bool first = true;
    for (size_t j = 0; j < i && first; j++) first = bim_known_bugs[j].why != bim_known_bugs[i].why;
    if (first) printf("known bug: %s\n", bim_known_bugs[i].why);
  }
  if (t.failed || t.xpass) fail_msg("%d cases failed, %d known bugs now pass", t.failed, t.xpass);
}

/* Every hand-written case names a public function, so the count above means something. */
RECAP_TEST(state_cases_name_public_functions) {
  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  for (size_t i = 0; i < bim_state_case_count; i++) {
    bool found = false;
    for (size_t j = 0; j < nf && !found; j++)
      found = strcmp(bim_state_cases[i].function, bim_public_functions[j]) == 0;
    if (!found)
      fail_msg("case %s names %s, which is not a public function", bim_state_cases[i].name,
               bim_state_cases[i].function);
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(state_cases_name_public_functions),
    cmocka_unit_test(bad_input_matrix),
};
RECAP_TEST_MAIN(tests)
