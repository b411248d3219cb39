/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cpp_layer.cpp — the C++ layer (include/recap/recap.hpp) on the CPU fake device: the
 * owners free what they own and nothing twice, moved-from owners are inert, failures throw
 * recap::error with the status and recap's message, a capture scope ends or discards its
 * capture, and replays, generators, regions and graph sets work through it.
 */
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "recap/recap.hpp"

/* cmocka.h declares its functions without C linkage: include it as C, before harness.h. */
#include <csetjmp>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
extern "C" {
#include <cmocka.h>
}
#include "harness.h"
#include "fake/fake.h"
#include "reset.h"

namespace {

/* A kernel of the fake that adds 1 to the int its first argument word points at: eagerly at
 * once, captured at each replay. */
void count_kernel(void *const *args, size_t) { ++*static_cast<int *>(args[0]); }

void launch_count(recap_stream_t stream, int *counter) {
  const void *args[] = {counter};
  recap__fake_launch_kernel_fn(stream, "count", count_kernel, args, 1);
}

bool capturing(recap_stream_t stream) {
  int flag = -1;
  recap::check(recap_stream_is_capturing(stream, &flag));
  return flag != 0;
}

/* The fake holds no graph and no executable, and the allocator's invariants hold. */
void expect_no_graphs_left() {
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  OK(recap_memory_check());
}

/* Run call, which must throw recap::error with `status`; returns its message. */
template <typename Call>
std::string expect_error(Call &&call, recap_status_t status) {
  try {
    call();
  } catch (const recap::error &e) {
    if (e.status() != status)
      fail_msg("threw %s, expected %s: %s", e.status_name(), recap_status_name(status), e.what());
    return e.what();
  }
  fail_msg("no recap::error thrown, expected %s", recap_status_name(status));
  return std::string();
}

/* A kernel of the fake that adds its second argument, a float taken by value (a 4-byte
 * parameter: the low half of its word), to the float its first argument points at. */
void add_kernel(void *const *args, size_t) {
  std::uint32_t bits = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(args[1]));
  float value;
  std::memcpy(&value, &bits, sizeof value);
  *static_cast<float *>(args[0]) += value;
}

void launch_add(recap_stream_t stream, float *to, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const void *args[] = {to, reinterpret_cast<const void *>(static_cast<std::uintptr_t>(bits))};
  recap__fake_launch_kernel_sized(stream, "add", add_kernel, args, 2, 1u << 1);
}

/* A graph holding one capture of launch_count on stream. */
recap::graph captured_graph(recap_stream_t stream, int *counter) {
  recap::graph g;
  g.capture(stream, [&](recap_stream_t s) { launch_count(s, counter); });
  return g;
}

} // namespace

RECAP_TEST(graph_is_destroyed_with_its_owner) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  {
    recap::graph g = captured_graph(s, &counter);
    assert_int_equal(recap__fake_now().live_execs, 1);
    assert_int_equal(g.state(), RECAP_GRAPH_STATE_INSTANTIATED);
  }
  expect_no_graphs_left();
}

RECAP_TEST(replay_runs_the_capture) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph g = captured_graph(s, &counter);
  assert_int_equal(counter, 0); /* captured, not run */
  assert_int_equal(g.node_count(), 1);
  g.replay(s);
  g.replay(s);
  recap__fake_stream_complete(s);
  assert_int_equal(counter, 2);
  assert_int_equal(recap__fake_now().graph_launches, 2);
}

RECAP_TEST(errors_carry_the_status_and_message) {
  recap_test_reset_graphs();
  recap::graph g;
  std::string message =
      expect_error([&] { g.replay(recap__fake_stream_new()); }, RECAP_ERROR_INVALID_USAGE);
  /* what() is the thread's last error at the failure, word for word. */
  assert_string_equal(message.c_str(), recap_last_error());
  assert_true(message.find("replay") != std::string::npos);
  assert_int_equal(recap_last_status(), RECAP_ERROR_INVALID_USAGE);
  /* recap::check throws for any failure, with the message recap_set_last_error left. */
  message = expect_error(
      [] { recap::check(recap_set_last_error(RECAP_ERROR_BUSY, "busy with %d things", 3)); },
      RECAP_ERROR_BUSY);
  assert_string_equal(message.c_str(), "busy with 3 things");
  recap::check(RECAP_SUCCESS); /* does nothing */
  try {
    recap::check(RECAP_ERROR_NOT_FOUND);
    fail_msg("no exception");
  } catch (const recap::error &e) {
    assert_string_equal(e.status_name(), "RECAP_ERROR_NOT_FOUND");
  }
}

RECAP_TEST(moved_from_owners_are_inert) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph a = captured_graph(s, &counter);
  recap_graph_t handle = a.get();
  recap::graph b = std::move(a);
  assert_null(a.get());
  assert_false(static_cast<bool>(a));
  assert_ptr_equal(b.get(), handle);
  assert_int_equal(recap__fake_now().live_execs, 1);
  /* The C API refuses a NULL handle: a moved-from owner's calls throw and change nothing. */
  expect_error([&] { a.replay(s); }, RECAP_ERROR_INVALID_ARGUMENT);
  b.replay(s);
  recap__fake_stream_complete(s);
  assert_int_equal(counter, 1);

  /* Move assignment frees the graph the target held. */
  recap::graph c = captured_graph(s, &counter);
  assert_int_equal(recap__fake_now().live_execs, 2);
  c = std::move(b);
  assert_int_equal(recap__fake_now().live_execs, 1);
  assert_ptr_equal(c.get(), handle);

  /* release() hands the handle over: the owner frees nothing after. */
  recap_graph_t released = c.release();
  assert_null(c.get());
  assert_int_equal(recap__fake_now().live_execs, 1);
  OK(recap_graph_destroy(released));
  expect_no_graphs_left();

  /* adopt() takes a graph made with the C API. */
  recap_graph_t raw = nullptr;
  OK(recap_graph_create(&raw, 0));
  {
    recap::graph adopted = recap::graph::adopt(raw);
    adopted.capture_begin(s);
    launch_count(s, &counter);
    adopted.capture_end();
    assert_int_equal(recap__fake_now().live_execs, 1);
  }
  expect_no_graphs_left();
}

RECAP_TEST(capture_ended_by_end) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph g;
  {
    recap::capture c(g, s);
    assert_true(c.open());
    assert_ptr_equal(c.stream(), s);
    assert_true(capturing(s));
    launch_count(s, &counter);
    c.end();
    assert_false(c.open());
    assert_false(capturing(s));
  }
  /* Leaving the scope after end() keeps the capture. */
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_INSTANTIATED);
  g.replay(s);
  recap__fake_stream_complete(s);
  assert_int_equal(counter, 1);
}

RECAP_TEST(capture_not_ended_is_discarded) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph g;
  {
    recap::capture c(g, s);
    launch_count(s, &counter);
  }
  assert_false(capturing(s));
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_FRESH);
  expect_no_graphs_left();
  /* The graph captures again. */
  g.capture(s, [&](recap_stream_t stream) { launch_count(stream, &counter); });
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_INSTANTIATED);
}

RECAP_TEST(capture_discarded_when_the_work_throws) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph g;
  try {
    g.capture(s, [&](recap_stream_t stream) {
      launch_count(stream, &counter);
      throw std::runtime_error("the work failed");
    });
    fail_msg("the work's exception did not come through");
  } catch (const std::runtime_error &e) {
    assert_string_equal(e.what(), "the work failed");
  }
  assert_false(capturing(s));
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_FRESH);
  expect_no_graphs_left();
  assert_int_equal(counter, 0);
}

RECAP_TEST(capture_end_failure_throws_and_leaves_the_graph_fresh) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  recap::graph g;
  {
    recap::capture c(g, s);
    recap__fake_capture_invalidate(s);
    expect_error([&] { c.end(); }, RECAP_ERROR_CAPTURE_INVALIDATED);
    assert_true(c.open());
  }
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_FRESH);
  assert_false(capturing(s));
  expect_no_graphs_left();
  /* A graph that holds a capture refuses another begin: the constructor throws. */
  int counter = 0;
  g.capture(s, [&](recap_stream_t stream) { launch_count(stream, &counter); });
  expect_error([&] { recap::capture again(g, s); }, RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(g.state(), RECAP_GRAPH_STATE_INSTANTIATED);
}

RECAP_TEST(capture_scope_uses_the_side_stream) {
  recap_test_reset_graphs();
  int counter = 0;
  recap::graph g;
  recap_stream_t used = nullptr;
  g.capture_scope([&](recap_stream_t stream) {
    used = stream;
    assert_true(capturing(stream));
    launch_count(stream, &counter);
  });
  assert_non_null(used);
  assert_false(capturing(used));
  assert_int_equal(g.node_count(), 1);

  /* A scope object not ended discards its capture, as the C scope's graph reset does. */
  recap::graph h;
  {
    recap::capture scope(h);
    assert_ptr_equal(scope.stream(), used);
    launch_count(scope.stream(), &counter);
  }
  assert_int_equal(h.state(), RECAP_GRAPH_STATE_FRESH);
  assert_false(capturing(used));

  /* Options as the C struct, from its INIT macro: a stream of the caller's. */
  recap_scope_options_t options = recap::scope_options();
  options.stream = recap__fake_stream_new();
  h.capture_scope([&](recap_stream_t stream) { assert_ptr_equal(stream, options.stream); },
                  options);
  g.replay(used);
  recap__fake_stream_complete(used);
  assert_int_equal(counter, 1);
}

RECAP_TEST(generator_owns_its_state) {
  recap_test_reset_graphs();
  size_t before = recap__fake_now().bytes_in_use[0];
  {
    recap::generator gen(42);
    assert_true(recap__fake_now().bytes_in_use[0] > before);
    assert_int_equal(gen.seed(), 42);
    gen.set_offset(8);
    assert_int_equal(gen.offset(), 8);
    gen.set_seed(7);
    assert_int_equal(gen.seed(), 7);
    assert_int_equal(gen.offset(), 0);
    expect_error([&] { gen.set_offset(3); }, RECAP_ERROR_INVALID_ARGUMENT);

    recap::generator moved = std::move(gen);
    assert_null(gen.get());
    assert_int_equal(moved.seed(), 7);
    recap_philox_state_t state = moved.philox_state(4, recap__fake_stream_new());
    assert_int_equal(state.seed, 7);
    assert_int_equal(moved.offset(), 4);
  }
  assert_int_equal(recap__fake_now().bytes_in_use[0], before);
}

RECAP_TEST(region_scope_closes_its_region) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0;
  recap::graph g;
  g.capture(s, [&](recap_stream_t stream) {
    recap::condition cond(1, stream);
    recap::region r(RECAP_REGION_IF, cond, stream);
    launch_count(stream, &counter);
    r.end();
    /* end() twice: no region open here any more. */
    expect_error([&] { r.end(); }, RECAP_ERROR_INVALID_USAGE);
  });
  g.replay(s);
  recap__fake_stream_complete(s);
  assert_int_equal(counter, 1);

  /* An exception unwinding through an open region: the region closes, the capture goes. */
  recap::graph h;
  try {
    h.capture(s, [&](recap_stream_t stream) {
      recap::condition cond(0, stream);
      recap::region r(RECAP_REGION_WHILE, cond, stream);
      launch_count(stream, &counter);
      throw std::runtime_error("inside the region");
    });
    fail_msg("the exception did not come through");
  } catch (const std::runtime_error &) {
  }
  assert_int_equal(h.state(), RECAP_GRAPH_STATE_FRESH);
  assert_false(capturing(s));
  g = recap::graph();
  expect_no_graphs_left();
}

RECAP_TEST(graph_set_runs_a_cpp_step) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  int counter = 0, steps = 0;
  bool fail_recap = false, fail_other = false;
  const size_t sizes[] = {4, 8};
  recap_graph_set_options_t options = recap::graph_set_options();
  options.sizes = sizes;
  options.size_count = 2;
  {
    recap::graph_set set(
        [&](size_t, recap_stream_t stream) {
          steps++;
          if (fail_recap) recap::check(recap_set_last_error(RECAP_ERROR_IO, "disk gone"));
          if (fail_other) throw std::logic_error("not recap's");
          launch_count(stream, &counter);
        },
        options);
    assert_int_equal(steps, 2); /* both captured up front */
    assert_int_equal(recap__fake_now().live_execs, 2);
    assert_int_equal(set.sizes().size(), 2);
    assert_int_equal(set.bucket(5), 8);

    recap::run_result run = set.run(5, s);
    assert_int_equal(run.padded, 8);
    assert_true(run.graphed);
    assert_int_equal(steps, 2);
    recap__fake_stream_complete(s);
    assert_int_equal(counter, 1);
    assert_int_equal(set.member(8).replays, 1);

    /* Above the largest size the step runs eagerly; its exceptions come back as recap::error. */
    fail_recap = true;
    std::string message = expect_error([&] { set.run(9, s); }, RECAP_ERROR_IO);
    assert_string_equal(message.c_str(), "disk gone");
    fail_recap = false;
    fail_other = true;
    message = expect_error([&] { set.run(9, s); }, RECAP_ERROR_INVALID_USAGE);
    assert_true(message.find("not recap's") != std::string::npos);
    fail_other = false;

    /* Moving keeps the step where the set calls it. */
    recap::graph_set moved = std::move(set);
    assert_null(set.get());
    run = moved.run(10, s);
    assert_false(run.graphed);
    assert_int_equal(run.padded, 10);
    assert_int_equal(moved.info().overflow_runs, 3);
  }
  expect_no_graphs_left();

  /* A step returning a status: a failure fails the member's capture, not the set's creation. */
  recap::graph_set refusing(
      [](size_t size, recap_stream_t) {
        return size == 8 ? recap_set_last_error(RECAP_ERROR_NOT_SUPPORTED, "no 8") : RECAP_SUCCESS;
      },
      options);
  assert_int_equal(refusing.member(8).state, RECAP_MEMBER_FAILED);
  assert_int_equal(refusing.member(4).state, RECAP_MEMBER_READY);
  expect_error([&] { refusing.member(5); }, RECAP_ERROR_NOT_FOUND);
}

/* A parameter declared through the graph, set through its handle: the replays add each value
 * set, and the handle reads it back; a set on a parameter of no capture throws. */
RECAP_TEST(parameters_through_the_graph) {
  recap_test_reset_graphs();
  recap_stream_t s = recap__fake_stream_new();
  float total = 0.0f;
  recap::graph g;
  recap::param<float> step;
  g.capture(s, [&](recap_stream_t stream) {
    float placeholder = g.declare_param("step", 0.5f, &step);
    launch_add(stream, &total, placeholder);
  });
  assert_true(static_cast<bool>(step));
  assert_true(step.value() == 0.5f);
  g.replay(s);
  step.set(2.25f);
  g.replay(s);
  recap__fake_stream_complete(s);
  assert_true(total == 2.75f);
  assert_true(step.value() == 2.25f);
  recap::param<float> none;
  expect_error([&] { none.set(1.0f); }, RECAP_ERROR_INVALID_ARGUMENT);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(graph_is_destroyed_with_its_owner),
    cmocka_unit_test(replay_runs_the_capture),
    cmocka_unit_test(errors_carry_the_status_and_message),
    cmocka_unit_test(moved_from_owners_are_inert),
    cmocka_unit_test(capture_ended_by_end),
    cmocka_unit_test(capture_not_ended_is_discarded),
    cmocka_unit_test(capture_discarded_when_the_work_throws),
    cmocka_unit_test(capture_end_failure_throws_and_leaves_the_graph_fresh),
    cmocka_unit_test(capture_scope_uses_the_side_stream),
    cmocka_unit_test(generator_owns_its_state),
    cmocka_unit_test(region_scope_closes_its_region),
    cmocka_unit_test(graph_set_runs_a_cpp_step),
    cmocka_unit_test(parameters_through_the_graph),
};

RECAP_TEST_MAIN(tests)
