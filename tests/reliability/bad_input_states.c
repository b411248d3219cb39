/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bad_input_states.c — the hand-written table of the bad-input matrix: public functions called
 * in a wrong state or with a wrong value (replay before capture, capture twice, end without
 * begin, free twice, set_seed during a capture, backward before forward...), each with its
 * documented status and, where it matters, its message. test_bad_input.c runs them.
 */
#include "bad_input.h"

/* ---- the wrong states and values ------------------------------------------------------------- */

/* A capture of one kernel on f->stream into g (begun and ended). */
static void captured(recap_graph_t g, recap_stream_t s) {
  MUST(recap_graph_capture_begin(g, NULL, s));
  recap__fake_launch_kernel(s, "bim_kernel");
  MUST(recap_graph_capture_end(g));
}

static int st_replay_before_capture(bim_fixture_t *f) {
  return recap_graph_replay(f->graph, f->stream);
}
static int st_replay_after_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_reset(f->graph));
  return recap_graph_replay(f->graph, f->stream);
}
static int st_replay_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_replay(f->graph, f->stream2);
}
static int st_capture_twice(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_capture_begin(f->graph, NULL, f->stream2);
}
static int st_capture_again_without_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_capture_begin(f->graph, NULL, f->stream);
}
static int st_capture_on_a_capturing_stream(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_graph_create(&f->graph_out, 0));
  return recap_graph_capture_begin(f->graph_out, NULL, f->stream);
}
static int st_capture_on_the_legacy_stream(bim_fixture_t *f) {
  return recap_graph_capture_begin(f->graph, NULL, NULL);
}
static int st_capture_options_bad_size(bim_fixture_t *f) {
  f->capture_options.size = 3;
  return recap_graph_capture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_capture_options_bad_mode(bim_fixture_t *f) {
  f->capture_options.mode = (recap_capture_mode_t)7;
  return recap_graph_capture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_end_without_begin(bim_fixture_t *f) { return recap_graph_capture_end(f->graph); }
static int st_end_twice(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_capture_end(f->graph);
}
static int st_end_after_a_failed_end(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  if (recap_graph_capture_end(f->graph) != RECAP_ERROR_CAPTURE_INVALIDATED) exit(10);
  return recap_graph_capture_end(f->graph);
}
static int st_end_after_reset_mid_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_graph_reset(f->graph));
  return recap_graph_capture_end(f->graph);
}
static int st_end_of_an_invalidated_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  return recap_graph_capture_end(f->graph);
}
static int st_create_with_unknown_flags(bim_fixture_t *f) {
  return recap_graph_create(&f->graph_out, 0x80u);
}
static int st_instantiate_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_instantiate(f->graph);
}
static int st_instantiate_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_instantiate(f->graph_out);
}
static int st_instantiate_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream));
  return recap_graph_instantiate(f->graph_out);
}
static int st_pool_before_capture(bim_fixture_t *f) {
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_pool_after_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_reset(f->graph));
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_pool_of_an_eager_scope(bim_fixture_t *f) {
  recap__graphs_disabled_override(1);
  MUST(recap_capture_scope_begin(f->graph, NULL, &f->stream_out));
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_raw_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_raw(f->graph, &f->cuda_graph_out);
}
static int st_raw_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_raw(f->graph_out, &f->cuda_graph_out);
}
static int st_raw_exec_before_instantiate(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  captured(f->graph_out, f->stream);
  return recap_graph_raw_exec(f->graph_out, &f->cuda_exec_out);
}
static int st_node_count_before_capture(bim_fixture_t *f) {
  return recap_graph_node_count(f->graph, &f->size_out);
}
static int st_debug_dump_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_debug_dump(f->graph, f->path);
}
static int st_inspect_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_inspect(f->graph, &f->info_out);
}
static int st_inspect_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_inspect(f->graph_out, &f->info_out);
}
static int st_scope_end_without_scope(bim_fixture_t *f) {
  return recap_capture_scope_end(f->graph);
}
static int st_scope_begin_on_a_captured_graph(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_capture_scope_begin(f->graph, NULL, &f->stream_out);
}
static int st_scope_options_bad_size(bim_fixture_t *f) {
  f->scope_options.size = 1;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_scope_options_bad_capture_size(bim_fixture_t *f) {
  f->scope_options.capture.size = 1;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_scope_options_bad_capture_mode(bim_fixture_t *f) {
  f->scope_options.capture.mode = (recap_capture_mode_t)9;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_empty_cache_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_empty_cache();
}

/* Calls from another thread while the fixture's thread captures in global mode. */
typedef struct other_thread_call {
  bim_fixture_t *f;
  int which;
  recap_status_t status;
  char message[512];
} other_thread_call_t;

static void *other_thread(void *arg) {
  other_thread_call_t *c = arg;
  switch (c->which) {
    case 0: c->status = recap_graph_destroy(c->f->graph); break;
    case 1: c->status = recap_graph_reset(c->f->graph); break;
    case 2: c->status = recap_graph_capture_end(c->f->graph); break;
    default: c->status = recap_capture_scope_end(c->f->graph); break;
  }
  snprintf(c->message, sizeof c->message, "%s", recap_last_error());
  return NULL;
}

/* The other thread's status, with its message made this thread's last error (recap's last error
 * is per thread), so that the usual checks apply to it. */
static int from_other_thread(bim_fixture_t *f, int which) {
  other_thread_call_t c = {.f = f, .which = which};
  pthread_t t;
  if (pthread_create(&t, NULL, other_thread, &c) != 0) exit(10);
  pthread_join(t, NULL);
  recap_clear_last_error();
  if (c.status != RECAP_SUCCESS && c.message[0]) recap__error(c.status, "%s", c.message);
  return c.status;
}
static int st_destroy_from_another_thread_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 0);
}
static int st_reset_from_another_thread_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 1);
}
static int st_end_from_another_thread(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 2);
}
static int st_scope_end_from_another_thread(bim_fixture_t *f) {
  MUST(recap_capture_scope_begin(f->graph, NULL, &f->stream_out));
  return from_other_thread(f, 3);
}

static int st_free_twice(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_free(p);
}
static int st_free_a_foreign_pointer(bim_fixture_t *f) { return recap_free(f->foreign_storage); }
static int st_free_an_interior_pointer(bim_fixture_t *f) {
  return recap_free((char *)f->block + 16);
}
static int st_record_stream_of_a_freed_block(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_record_stream(p, f->stream2);
}
static int st_record_stream_of_a_foreign_pointer(bim_fixture_t *f) {
  return recap_record_stream(f->foreign_storage, f->stream2);
}
static int st_block_info_of_a_freed_block(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_block_info(p, &f->block_info);
}
static int st_malloc_an_impossible_size(bim_fixture_t *f) {
  return recap_malloc(&f->ptr_out, SIZE_MAX, f->stream);
}
static int st_malloc_over_the_memory_cap(bim_fixture_t *f) {
  MUST(recap_option_set("memory_cap", "4MiB"));
  return recap_malloc(&f->ptr_out, 16 * MiB, f->stream);
}
static int st_release_an_unknown_pool(bim_fixture_t *f) { return recap_pool_release(f->pool); }
static int st_release_a_pool_twice(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_GLOBAL)) exit(10);
  MUST(recap_pool_route_begin(f->pool, f->stream2));
  MUST(recap_pool_route_end(f->pool));
  recap__fake_capture_end(f->stream2);
  MUST(recap_pool_release(f->pool));
  return recap_pool_release(f->pool);
}
static int st_route_a_stream_that_does_not_capture(bim_fixture_t *f) {
  return recap_pool_route_begin(f->pool, f->stream2);
}
static int st_route_to_the_default_pool(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_GLOBAL)) exit(10);
  recap_pool_id_t default_pool = {0, 0};
  int s = recap_pool_route_begin(default_pool, f->stream2);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_route_a_pool_routed_to_another_capture(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  MUST(recap_pool_route_begin(f->pool, f->stream));
  int s = recap_pool_route_begin(f->pool, f->stream2);
  MUST(recap_pool_route_end(f->pool));
  MUST(recap_pool_release(f->pool));
  recap__fake_capture_end(f->stream);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_route_end_of_a_pool_not_routed(bim_fixture_t *f) {
  return recap_pool_route_end(f->pool);
}
static int st_sleep_with_an_unknown_mode(bim_fixture_t *f) {
  return recap_pool_sleep(f->pool, (recap_sleep_mode_t)7);
}
static int st_sleep_all_with_an_unknown_mode(bim_fixture_t *f) {
  (void)f;
  return recap_sleep((recap_sleep_mode_t)-1);
}
static int st_sleep_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_sleep(f->pool, RECAP_SLEEP_OFFLOAD);
}
static int st_wake_an_unknown_pool(bim_fixture_t *f) { return recap_pool_wake(f->pool); }
static int st_state_of_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_state(f->pool, &f->pool_state_out);
}
/* The fixture's blocks are in classic segments of the default pool. */
static int st_sleep_a_pool_of_classic_segments(bim_fixture_t *f) {
  (void)f;
  recap_pool_id_t default_pool = {0, 0};
  return recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD);
}
static int st_sleep_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap_pool_id_t default_pool = {0, 0};
  return recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD);
}
static int st_pinned_reserve_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_pinned_reserve(4096);
}
static int st_pinned_reserve_beyond_the_host(bim_fixture_t *f) {
  (void)f;
  return recap_pinned_reserve(SIZE_MAX);
}
static int st_pool_memory_of_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_memory(f->pool, &f->pool_memory);
}
static int st_pool_memory_bad_size(bim_fixture_t *f) {
  f->pool_memory.size = sizeof f->pool_memory + 8;
  return recap_pool_memory(f->pool, &f->pool_memory);
}
static int st_graph_memory_of_a_fresh_graph(bim_fixture_t *f) {
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_during_recapture(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_recapture_begin(f->graph, NULL, f->stream));
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_bad_size(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  f->graph_memory.size = 8;
  return recap_graph_memory(f->graph, &f->graph_memory);
}
/* A budget smaller than one segment: the capture's first allocation is refused. */
static int st_malloc_over_the_capture_budget(bim_fixture_t *f) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = 1;
  MUST(recap_graph_capture_begin(f->graph, &o, f->stream));
  return recap_malloc(&f->ptr_out, 512, f->stream);
}
static int st_end_of_a_capture_over_its_budget(bim_fixture_t *f) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = 1;
  MUST(recap_graph_capture_begin(f->graph, &o, f->stream));
  if (recap_malloc(&f->ptr_out, 512, f->stream) != RECAP_ERROR_OUT_OF_MEMORY) exit(10);
  recap__fake_launch_kernel(f->stream, "bim_kernel");
  return recap_graph_capture_end(f->graph);
}
static int st_stats_of_a_device_out_of_range(bim_fixture_t *f) {
  return recap_memory_stats(1 << 20, &f->stats);
}
static int st_reset_peak_of_a_device_out_of_range(bim_fixture_t *f) {
  (void)f;
  return recap_memory_reset_peak(-5);
}
static int st_snapshot_of_a_device_out_of_range(bim_fixture_t *f) {
  return recap_memory_snapshot_json(-2, &f->string_out);
}
static int st_option_unknown(bim_fixture_t *f) {
  (void)f;
  return recap_option_set("no_such_option", "1");
}
static int st_option_bad_value(bim_fixture_t *f) {
  (void)f;
  return recap_option_set("small_size", "banana");
}
static int st_option_breaking_a_rule(bim_fixture_t *f) {
  (void)f;
  return recap_option_set_u64("small_size", 64 * MiB);
}
static int st_option_get_unknown(bim_fixture_t *f) {
  return recap_option_get("no_such_option", &f->u64_out);
}
static int st_options_parse_bad_entry(bim_fixture_t *f) {
  (void)f;
  return recap_options_parse("max_split_size:1MiB,small_segment:");
}

/* A capture into f->graph on f->stream that uses f->gen. */
static void capture_using_the_generator(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_generator_philox_state(f->gen, 4, f->stream, &f->philox));
}
static int st_set_seed_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_seed_set(f->gen, 42);
}
static int st_set_offset_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_offset_set(f->gen, 8);
}
static int st_get_offset_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_offset_get(f->gen, &f->u64_out);
}
static int st_set_offset_not_a_multiple_of_4(bim_fixture_t *f) {
  return recap_generator_offset_set(f->gen, 6);
}
static int st_generator_in_two_captures_at_once(bim_fixture_t *f) {
  capture_using_the_generator(f);
  MUST(recap_graph_create(&f->graph_out, 0));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream2));
  return recap_generator_philox_state(f->gen, 4, f->stream2, &f->philox);
}
static int st_philox_state_in_a_foreign_capture(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  int s = recap_generator_philox_state(f->gen, 4, f->stream2, &f->philox);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_philox_state_in_an_invalidated_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  return recap_generator_philox_state(f->gen, 4, f->stream, &f->philox);
}
/* Embedding a graph that draws from a generator another capture under way uses. */
static int st_replay_of_a_random_graph_inside_a_capture(bim_fixture_t *f) {
  recap_philox_state_t st;
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream2));
  MUST(recap_generator_philox_state(f->gen, 4, f->stream2, &st));
  MUST(recap_graph_capture_end(f->graph_out));
  capture_using_the_generator(f);
  MUST(recap_graph_create(&f->graph_out2, 0));
  MUST(recap_graph_capture_begin(f->graph_out2, NULL, f->stream2));
  return recap_graph_replay(f->graph_out, f->stream2);
}
static int st_randint_empty_range(bim_fixture_t *f) {
  return recap_rng_randint(f->gen, (int32_t *)f->floats, 4, 5, 5, f->stream);
}
static int st_dropout_p_one(bim_fixture_t *f) {
  return recap_rng_dropout(f->gen, f->floats, f->floats, NULL, 4, 1.0f, f->stream);
}
static int st_normal_negative_stddev(bim_fixture_t *f) {
  return recap_rng_normal(f->gen, f->floats, 4, 0.0f, -1.0f, f->stream);
}

static int st_backward_before_forward(bim_fixture_t *f) {
  return recap_graphed_backward(f->graphed, f->grad_outputs, f->stream, &f->buffers_out);
}
static int st_backward_without_a_backward_function(bim_fixture_t *f) {
  f->descs[0].backward = NULL;
  MUST(recap_graphed_create(f->graphed_out, f->descs, 1, NULL));
  MUST(recap_graphed_forward(f->graphed_out[0], 1, f->inputs, f->stream, &f->buffers_out));
  return recap_graphed_backward(f->graphed_out[0], f->grad_outputs, f->stream, &f->buffers_out);
}
static int st_forward_with_an_input_of_another_size(bim_fixture_t *f) {
  recap_buffer_t other = {f->block, 16};
  return recap_graphed_forward(f->graphed, 1, &other, f->stream, &f->buffers_out);
}
static int st_forward_before_create(bim_fixture_t *f) {
  f->descs[0].forward = NULL; /* create fails and leaves the handle NULL */
  if (recap_graphed_create(f->graphed_out, f->descs, 1, NULL) == RECAP_SUCCESS) exit(10);
  return recap_graphed_forward(f->graphed_out[0], 1, f->inputs, f->stream, &f->buffers_out);
}
static int st_graphed_create_no_callables(bim_fixture_t *f) {
  return recap_graphed_create(f->graphed_out, f->descs, 0, NULL);
}
static int st_graphed_create_no_forward(bim_fixture_t *f) {
  f->descs[0].forward = NULL;
  return recap_graphed_create(f->graphed_out, f->descs, 1, NULL);
}
static int st_graphed_create_no_sample_inputs(bim_fixture_t *f) {
  f->descs[0].sample_inputs = NULL;
  return recap_graphed_create(f->graphed_out, f->descs, 1, NULL);
}
static int st_graphed_options_bad_size(bim_fixture_t *f) {
  f->graphed_options.size = 2;
  return recap_graphed_create(f->graphed_out, f->descs, 1, &f->graphed_options);
}
static int st_graphed_options_negative_warmup(bim_fixture_t *f) {
  f->graphed_options.warmup_iters = -1;
  return recap_graphed_create(f->graphed_out, f->descs, 1, &f->graphed_options);
}

static int st_annotate_pop_without_push(bim_fixture_t *f) {
  recap_annotations_enable(1);
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_annotate_pop(f->stream);
}
static int st_annotate_empty_label(bim_fixture_t *f) { return recap_annotate_push("", f->stream); }
static int st_annotate_label_too_long(bim_fixture_t *f) {
  static char label[RECAP_ANNOTATION_MAX_LENGTH + 2];
  memset(label, 'a', sizeof label - 1);
  return recap_annotate_push(label, f->stream);
}
static int st_liveness_inputs_without_liveness(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_liveness_inputs(f->graph, f->liveness_out, 1, &f->size_out);
}
static int st_check_inputs_without_liveness(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_check_inputs(f->graph);
}

static int st_recapture_of_a_fresh_graph(bim_fixture_t *f) {
  return recap_graph_recapture_begin(f->graph, NULL, f->stream);
}
static int st_replay_during_recapture(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_recapture_begin(f->graph, NULL, f->stream));
  return recap_graph_replay(f->graph, f->stream2);
}
static int st_recapture_into_another_pool(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  f->capture_options.pool = f->pool;
  return recap_graph_recapture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_update_policy_negative_slowdown(bim_fixture_t *f) {
  f->update_policy.max_slowdown = -1;
  return recap_graph_update_policy_set(f->graph, &f->update_policy);
}
static int st_update_stats_bad_size(bim_fixture_t *f) {
  f->update_stats.size = 1;
  return recap_graph_update_stats(f->graph, &f->update_stats);
}

#define STATE(fn, name, status) \
  { #name, #fn, BIM_state, RECAP_##status, st_##name, NULL }
#define STATE_MSG(fn, name, status, needle) \
  { #name, #fn, BIM_state, RECAP_##status, st_##name, needle }

const bim_case_t bim_state_cases[] = {
    STATE_MSG(recap_graph_replay, replay_before_capture, ERROR_INVALID_USAGE,
              "nothing was captured"),
    STATE(recap_graph_replay, replay_after_reset, ERROR_INVALID_USAGE),
    STATE(recap_graph_replay, replay_during_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_begin, capture_twice, ERROR_INVALID_USAGE, "already under way"),
    STATE_MSG(recap_graph_capture_begin, capture_again_without_reset, ERROR_INVALID_USAGE,
              "recap_graph_reset"),
    STATE(recap_graph_capture_begin, capture_on_a_capturing_stream, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_begin, capture_on_the_legacy_stream, ERROR_INVALID_USAGE,
              "legacy default stream"),
    STATE(recap_graph_capture_begin, capture_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graph_capture_begin, capture_options_bad_mode, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graph_capture_end, end_without_begin, ERROR_INVALID_USAGE,
              "no capture is under way"),
    STATE(recap_graph_capture_end, end_twice, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_end, end_after_a_failed_end, ERROR_INVALID_USAGE,
              "no capture is under way"),
    STATE(recap_graph_capture_end, end_after_reset_mid_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_end, end_of_an_invalidated_capture, ERROR_CAPTURE_INVALIDATED,
              "invalidated"),
    STATE(recap_graph_create, create_with_unknown_flags, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graph_instantiate, instantiate_without_keep, ERROR_INVALID_USAGE,
              "RECAP_GRAPH_KEEP"),
    STATE(recap_graph_instantiate, instantiate_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_instantiate, instantiate_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_pool, pool_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_pool, pool_after_reset, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_pool, pool_of_an_eager_scope, ERROR_INVALID_USAGE, "ran eagerly"),
    STATE(recap_graph_raw, raw_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_raw, raw_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_raw_exec, raw_exec_before_instantiate, ERROR_INVALID_USAGE),
    STATE(recap_graph_node_count, node_count_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_debug_dump, debug_dump_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_inspect, inspect_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_inspect, inspect_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_end, scope_end_without_scope, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_begin, scope_begin_on_a_captured_graph, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_begin, scope_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_capture_scope_begin, scope_options_bad_capture_size, ERROR_INVALID_ARGUMENT,
              "options->capture.size"),
    STATE(recap_capture_scope_begin, scope_options_bad_capture_mode, ERROR_INVALID_ARGUMENT),
    STATE(recap_empty_cache, empty_cache_during_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_sleep, sleep_with_an_unknown_mode, ERROR_INVALID_ARGUMENT,
              "RECAP_SLEEP_OFFLOAD"),
    STATE_MSG(recap_sleep, sleep_all_with_an_unknown_mode, ERROR_INVALID_ARGUMENT,
              "not a recap_sleep_mode_t"),
    STATE_MSG(recap_pool_sleep, sleep_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_wake, wake_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_state, state_of_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_sleep, sleep_a_pool_of_classic_segments, ERROR_NOT_SUPPORTED,
              "expandable_segments"),
    STATE_MSG(recap_pool_sleep, sleep_during_capture, ERROR_INVALID_USAGE,
              "a capture is under way"),
    STATE_MSG(recap_pinned_reserve, pinned_reserve_during_capture, ERROR_INVALID_USAGE,
              "a capture is under way"),
    STATE_MSG(recap_pinned_reserve, pinned_reserve_beyond_the_host, ERROR_OUT_OF_MEMORY,
              "nothing was pinned"),
    STATE_MSG(recap_graph_recapture_begin, recapture_of_a_fresh_graph, ERROR_INVALID_USAGE,
              "holds no capture to replace"),
    STATE_MSG(recap_graph_replay, replay_during_recapture, ERROR_INVALID_USAGE, "being recaptured"),
    STATE_MSG(recap_graph_recapture_begin, recapture_into_another_pool, ERROR_INVALID_ARGUMENT,
              "not the graph's pool"),
    STATE_MSG(recap_graph_update_policy_set, update_policy_negative_slowdown,
              ERROR_INVALID_ARGUMENT, "max_slowdown"),
    STATE_MSG(recap_graph_update_stats, update_stats_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_UPDATE_STATS_INIT"),
    STATE_MSG(recap_graph_destroy, destroy_from_another_thread_during_capture, ERROR_BUSY,
              "WrongThread"),
    STATE_MSG(recap_graph_reset, reset_from_another_thread_during_capture, ERROR_INVALID_USAGE,
              "WrongThread"),
    STATE_MSG(recap_graph_capture_end, end_from_another_thread, ERROR_INVALID_USAGE, "WrongThread"),
    STATE_MSG(recap_capture_scope_end, scope_end_from_another_thread, ERROR_INVALID_USAGE,
              "WrongThread"),
    STATE_MSG(recap_free, free_twice, ERROR_INVALID_ARGUMENT, "already freed"),
    STATE(recap_free, free_a_foreign_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_free, free_an_interior_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_record_stream, record_stream_of_a_freed_block, ERROR_INVALID_ARGUMENT),
    STATE(recap_record_stream, record_stream_of_a_foreign_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_block_info, block_info_of_a_freed_block, ERROR_INVALID_ARGUMENT),
    STATE(recap_malloc, malloc_an_impossible_size, ERROR_OUT_OF_MEMORY),
    STATE_MSG(recap_malloc, malloc_over_the_memory_cap, ERROR_OUT_OF_MEMORY, "memory_cap"),
    STATE(recap_pool_release, release_an_unknown_pool, ERROR_INVALID_USAGE),
    STATE(recap_pool_release, release_a_pool_twice, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_route_begin, route_a_stream_that_does_not_capture, ERROR_INVALID_USAGE,
              "not capturing"),
    STATE(recap_pool_route_begin, route_to_the_default_pool, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_pool_route_begin, route_a_pool_routed_to_another_capture, ERROR_INVALID_USAGE,
              "already routed"),
    STATE(recap_pool_route_end, route_end_of_a_pool_not_routed, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_memory, pool_memory_of_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_memory, pool_memory_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_POOL_MEMORY_INIT"),
    STATE_MSG(recap_graph_memory, graph_memory_of_a_fresh_graph, ERROR_INVALID_USAGE,
              "holds no capture (it is fresh)"),
    STATE_MSG(recap_graph_memory, graph_memory_during_capture, ERROR_INVALID_USAGE,
              "its first capture is under way"),
    STATE_MSG(recap_graph_memory, graph_memory_during_recapture, ERROR_INVALID_USAGE,
              "being recaptured"),
    STATE_MSG(recap_graph_memory, graph_memory_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_GRAPH_MEMORY_INIT"),
    STATE_MSG(recap_malloc, malloc_over_the_capture_budget, ERROR_OUT_OF_MEMORY,
              "would be exceeded by 2097151 bytes"),
    STATE_MSG(recap_graph_capture_end, end_of_a_capture_over_its_budget, ERROR_OUT_OF_MEMORY,
              "budget refused 1 allocation, so the capture was thrown away"),
    STATE(recap_memory_stats, stats_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_memory_reset_peak, reset_peak_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_memory_snapshot_json, snapshot_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_option_set, option_unknown, ERROR_NOT_FOUND),
    STATE(recap_option_set, option_bad_value, ERROR_INVALID_VALUE),
    STATE(recap_option_set_u64, option_breaking_a_rule, ERROR_INVALID_VALUE),
    STATE(recap_option_get, option_get_unknown, ERROR_NOT_FOUND),
    STATE(recap_options_parse, options_parse_bad_entry, ERROR_INVALID_VALUE),
    STATE(recap_generator_seed_set, set_seed_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_set, set_offset_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_get, get_offset_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_set, set_offset_not_a_multiple_of_4, ERROR_INVALID_ARGUMENT),
    STATE(recap_generator_philox_state, generator_in_two_captures_at_once, ERROR_INVALID_USAGE),
    STATE(recap_generator_philox_state, philox_state_in_a_foreign_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_philox_state, philox_state_in_an_invalidated_capture,
          ERROR_CAPTURE_INVALIDATED),
    STATE(recap_graph_replay, replay_of_a_random_graph_inside_a_capture, ERROR_INVALID_USAGE),
    STATE(recap_rng_randint, randint_empty_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_rng_dropout, dropout_p_one, ERROR_INVALID_ARGUMENT),
    STATE(recap_rng_normal, normal_negative_stddev, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graphed_backward, backward_before_forward, ERROR_INVALID_USAGE,
              "forward first"),
    STATE(recap_graphed_backward, backward_without_a_backward_function, ERROR_INVALID_USAGE),
    STATE(recap_graphed_forward, forward_with_an_input_of_another_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_forward, forward_before_create, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_callables, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_forward, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_sample_inputs, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_options_negative_warmup, ERROR_INVALID_ARGUMENT),
    STATE(recap_annotate_pop, annotate_pop_without_push, ERROR_INVALID_USAGE),
    STATE(recap_annotate_push, annotate_empty_label, ERROR_INVALID_ARGUMENT),
    STATE(recap_annotate_push, annotate_label_too_long, ERROR_INVALID_ARGUMENT),
    STATE(recap_graph_liveness_inputs, liveness_inputs_without_liveness, ERROR_INVALID_USAGE),
    STATE(recap_graph_check_inputs, check_inputs_without_liveness, ERROR_INVALID_USAGE),
};

const size_t bim_state_case_count = sizeof bim_state_cases / sizeof bim_state_cases[0];
