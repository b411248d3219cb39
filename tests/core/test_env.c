/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_env.c — recap's environment variables (src/core/env.h, docs/environment.md): good values
 * work, a value set from code wins, and a bad value of every variable gives the same warning
 * through the log, once, naming the variable, the value, what is accepted and what is used;
 * RECAP_ALLOC_CONF's booleans take true and false in any case, and 1 and 0.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "fake_util.h"
#include "graph/graph_internal.h"
#include "harness.h"
#include "recap.h"

/* ------------------------------------------------------------------------------------------
 * The log, captured
 * ---------------------------------------------------------------------------------------- */

static recap_test_log_t logged;

/* No RECAP_* variable set, and every flag and level to be read afresh. */
static void unset_every_variable(void) {
  for (int i = 0; i < RECAP__ENV_COUNT; i++) {
    unsetenv(recap__env_table[i].name);
    recap__env_set((recap__env_t)i, -1);
  }
}

/* No RECAP_* variable set, every flag and level read afresh, the log captured. */
static void fresh(void) {
  reset();
  unset_every_variable();
  recap_test_log_capture(&logged);
}

static void done(void) {
  recap_log_set(NULL, NULL);
  unset_every_variable();
  recap_options_reset();
}

/* The warning's one shape. */
static void expect_warning(recap__env_t var, const char *value, const char *detail,
                           const char *instead) {
  const recap__env_info_t *e = &recap__env_table[var];
  char expected[2048];
  if (detail)
    snprintf(expected, sizeof expected,
             "%s=\"%s\" is not valid (%s): accepted: %s; used instead: %s", e->name, value, detail,
             e->accepted, instead);
  else
    snprintf(expected, sizeof expected, "%s=\"%s\" is not valid: accepted: %s; used instead: %s",
             e->name, value, e->accepted, instead);
  if (logged.warnings != 1 || strcmp(logged.last_warning, expected) != 0)
    fail_msg("expected one warning \"%s\"; got %d, the last \"%s\"", expected, logged.warnings,
             logged.last_warning);
}

/* A flag's or level's value through the public function that reads it. */
static int public_value(recap__env_t var) {
  switch (var) {
    case RECAP__ENV_LOG: return (int)recap_log_level_get();
    case RECAP__ENV_DISABLE_GRAPHS: return !recap_graphs_enabled();
    case RECAP__ENV_ANNOTATIONS: return recap_annotations_enabled();
    case RECAP__ENV_LIVENESS_DEBUG: return recap_liveness_debug_enabled();
    default: break;
  }
  fail_msg("%s has no public reader in this test: add it to public_value",
           recap__env_table[var].name);
  return -1;
}

/* ------------------------------------------------------------------------------------------
 * Flags and levels
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(bad_flags_and_levels_warn_the_same_way) {
  int checked = 0;
  for (int i = 0; i < RECAP__ENV_COUNT; i++) {
    const recap__env_info_t *e = &recap__env_table[i];
    if (e->type == RECAP__ENV_TEXT) continue;
    fresh();
    setenv(e->name, "maybe", 1);
    assert_int_equal(public_value((recap__env_t)i), e->default_value);
    expect_warning((recap__env_t)i, "maybe", NULL, e->default_text);
    /* Read once: no second warning. */
    assert_int_equal(public_value((recap__env_t)i), e->default_value);
    assert_int_equal(logged.warnings, 1);
    checked++;
    done();
  }
  assert_int_equal(checked, 4);
}

RECAP_TEST(good_flags_and_levels) {
  fresh();
  static const recap__env_t flags[] = {RECAP__ENV_DISABLE_GRAPHS, RECAP__ENV_ANNOTATIONS,
                                       RECAP__ENV_LIVENESS_DEBUG};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    const char *name = recap__env_table[flags[i]].name;
    assert_int_equal(public_value(flags[i]), 0); /* unset: off */
    setenv(name, "1", 1);
    recap__env_set(flags[i], -1);
    assert_int_equal(public_value(flags[i]), 1);
    setenv(name, "0", 1);
    recap__env_set(flags[i], -1);
    assert_int_equal(public_value(flags[i]), 0);
    setenv(name, "", 1); /* empty: as unset */
    recap__env_set(flags[i], -1);
    assert_int_equal(public_value(flags[i]), 0);
    unsetenv(name);
    recap__env_set(flags[i], -1);
  }
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_WARN);
  setenv("RECAP_LOG", "ERROR", 1); /* any case */
  recap__env_set(RECAP__ENV_LOG, -1);
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_ERROR);
  setenv("RECAP_LOG", "debug", 1);
  recap__env_set(RECAP__ENV_LOG, -1);
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_DEBUG);
  setenv("RECAP_LOG", "none", 1);
  recap__env_set(RECAP__ENV_LOG, -1);
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_NONE);
  assert_int_equal(logged.warnings, 0);
  done();
}

/* Sets the three switches from code (-1: from the environment again). */
static void switches_set(int graphs_disabled, int annotations, int liveness_debug) {
  recap__graphs_disabled_override(graphs_disabled);
  recap_annotations_enable(annotations);
  recap_liveness_debug_enable(liveness_debug);
}

static void expect_switches(int graphs_disabled, int annotations, int liveness_debug) {
  assert_int_equal(!recap_graphs_enabled(), graphs_disabled);
  assert_int_equal(recap_annotations_enabled(), annotations);
  assert_int_equal(recap_liveness_debug_enabled(), liveness_debug);
}

/* A value set from code wins over the environment; -1 follows the environment again. */
RECAP_TEST(code_overrides_the_environment) {
  fresh();
  setenv("RECAP_DISABLE_GRAPHS", "1", 1);
  setenv("RECAP_ANNOTATIONS", "0", 1);
  setenv("RECAP_LIVENESS_DEBUG", "1", 1);
  setenv("RECAP_LOG", "none", 1);
  switches_set(0, 1, 0);
  recap_log_level_set(RECAP_LOG_LEVEL_INFO);
  expect_switches(0, 1, 0);
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_INFO);
  switches_set(-1, -1, -1);
  expect_switches(1, 0, 1);
  assert_int_equal(logged.warnings, 0);
  done();
}

/* The log's own variable: its warning goes through the log it configures. */
RECAP_TEST(bad_log_level_with_the_stderr_logger) {
  fresh();
  setenv("RECAP_LOG", "loud", 1);
  recap_log_set(NULL, NULL); /* the stderr logger must not recurse either */
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_WARN);
  recap_test_log_capture(&logged);
  assert_int_equal(recap_log_level_get(), RECAP_LOG_LEVEL_WARN);
  assert_int_equal(logged.warnings, 0); /* warned once, to stderr */
  done();
}

/* ------------------------------------------------------------------------------------------
 * Text variables
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(bad_alloc_conf_warns_the_same_way) {
  fresh();
  options_from_alloc_conf("small_segment:lots");
  uint64_t value = 0;
  EXPECT_STATUS(recap_option_get("small_segment", &value), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("RECAP_ALLOC_CONF: option small_segment has value 'lots'");
  expect_warning(RECAP__ENV_ALLOC_CONF, "small_segment:lots",
                 "option small_segment has value 'lots', which is not a byte count (a number, "
                 "optionally with K, M or G, KiB, MiB or GiB)",
                 "no options: every allocation fails with RECAP_ERROR_INVALID_VALUE until "
                 "recap_options_reset()");
  /* Warned once per reading; the error stays. */
  EXPECT_STATUS(recap_option_get("small_segment", &value), RECAP_ERROR_INVALID_VALUE);
  assert_int_equal(logged.warnings, 1);
  /* A good value, read again after the reset. */
  options_from_alloc_conf("small_segment:4MiB");
  assert_int_equal(option_now("small_segment"), 4 * MiB);
  assert_int_equal(logged.warnings, 1);
  done();
}

/* The booleans of RECAP_ALLOC_CONF take PyTorch's spelling (expandable_segments:True) as well
 * as 1 and 0; the kind is the option's, so a byte count refuses the same words. */
RECAP_TEST(alloc_conf_booleans_take_true_and_false) {
  fresh();
  static const char *const on[] = {"True", "true", "TRUE", "tRUe", "1"};
  static const char *const off[] = {"False", "false", "FALSE", "fAlSe", "0"};
  char conf[128];
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    snprintf(conf, sizeof conf, "expandable_segments:%s, offload_keep_pinned : %s", on[i], on[i]);
    options_from_alloc_conf(conf);
    assert_int_equal(option_now("expandable_segments"), 1);
    assert_int_equal(option_now("offload_keep_pinned"), 1);
    /* Every spelling of off turns it off again, from the environment and from code. */
    snprintf(conf, sizeof conf, "expandable_segments:%s", off[i]);
    OK(recap_options_parse(conf));
    assert_int_equal(option_now("expandable_segments"), 0);
    OK(recap_option_set("offload_keep_pinned", off[i]));
    assert_int_equal(option_now("offload_keep_pinned"), 0);
    OK(recap_option_set("offload_keep_pinned", on[i]));
    assert_int_equal(option_now("offload_keep_pinned"), 1);
  }
  options_from_alloc_conf(NULL);
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
    snprintf(conf, sizeof conf, "expandable_segments:%s", off[i]);
    options_from_alloc_conf(conf);
    assert_int_equal(option_now("expandable_segments"), 0);
  }
  assert_int_equal(logged.warnings, 0);
  done();
}

RECAP_TEST(a_bad_boolean_says_it_wants_one) {
  fresh();
  static const char *const bad[] = {"yes", "on", "2", "1K", "truee", "T", "", "-1"};
  uint64_t value = 7;
  char conf[128], detail[256];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(conf, sizeof conf, "expandable_segments:%s", bad[i]);
    options_from_alloc_conf(conf);
    logged.warnings = 0;
    EXPECT_STATUS(recap_option_get("expandable_segments", &value), RECAP_ERROR_INVALID_VALUE);
    snprintf(detail, sizeof detail,
             "option expandable_segments has value '%s', which is not a boolean (true or false "
             "in any case, or 1 or 0)",
             bad[i]);
    char message[512];
    snprintf(message, sizeof message, "RECAP_ALLOC_CONF: %s", detail);
    assert_string_equal(recap_last_error(), message);
    expect_warning(RECAP__ENV_ALLOC_CONF, conf, detail,
                   "no options: every allocation fails with RECAP_ERROR_INVALID_VALUE until "
                   "recap_options_reset()");
  }
  options_from_alloc_conf(NULL);

  /* From code: the same words, and nothing changes. */
  EXPECT_STATUS(recap_option_set("offload_keep_pinned", "yes"), RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(recap_last_error(),
                      "recap_option_set: option offload_keep_pinned has value 'yes', which is not "
                      "a boolean (true or false in any case, or 1 or 0)");
  EXPECT_STATUS(recap_options_parse("offload_keep_pinned:1,expandable_segments:enabled"),
                RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(recap_last_error(),
                      "recap_options_parse: option expandable_segments has value 'enabled', which "
                      "is not a boolean (true or false in any case, or 1 or 0)");
  assert_int_equal(option_now("offload_keep_pinned"), 0);
  EXPECT_STATUS(recap_option_set_u64("expandable_segments", 2), RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(recap_last_error(),
                      "recap_option_set(expandable_segments=2): expandable_segments must be 0 "
                      "(off) or 1 (on)");
  assert_int_equal(option_now("expandable_segments"), 0);

  /* A byte count is not a boolean: True is no size. */
  EXPECT_STATUS(recap_option_set("memory_cap", "True"), RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(recap_last_error(),
                      "recap_option_set: option memory_cap has value 'True', which is not a byte "
                      "count (a number, optionally with K, M or G, KiB, MiB or GiB)");
  done();
}

#ifdef RECAP_FAULT_INJECTION
bool recap__cuda_fail_nth(const char *kind, uint64_t nth); /* src/device/cuda.c */
#endif

/* RECAP_FAIL exists in Debug builds only (RECAP_FAULT_INJECTION). */
RECAP_TEST(bad_fail_entry_warns_the_same_way) {
#ifdef RECAP_FAULT_INJECTION
  fresh();
  setenv("RECAP_FAIL", "malloc:2,bogus:1", 1);
  /* The first use of fault injection reads the variable. */
  assert_true(recap__cuda_fail_nth("malloc", 0));
  expect_warning(RECAP__ENV_FAIL, "malloc:2,bogus:1", "the entry \"bogus:1\"",
                 "the other entries, without this one");
  done();
#else
  skip();
#endif
}

/* ------------------------------------------------------------------------------------------
 * The documentation lists the table
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(every_variable_is_documented) {
  FILE *f = fopen(RECAP_SOURCE_DIR "/docs/environment.md", "rb");
  assert_non_null(f);
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  static const char *const types[] = {"flag", "level", "text"};
  for (int i = 0; i < RECAP__ENV_COUNT; i++) {
    const recap__env_info_t *e = &recap__env_table[i];
    char row[256];
    snprintf(row, sizeof row, "| `%s` | %s | `%s` |", e->name, types[e->type], e->default_text);
    if (!strstr(text, row)) fail_msg("docs/environment.md has no row beginning \"%s\"", row);
  }
  assert_non_null(strstr(text, "`RECAP_UNDER_TOOL=1`"));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(bad_flags_and_levels_warn_the_same_way),
    cmocka_unit_test(good_flags_and_levels),
    cmocka_unit_test(code_overrides_the_environment),
    cmocka_unit_test(bad_log_level_with_the_stderr_logger),
    cmocka_unit_test(bad_alloc_conf_warns_the_same_way),
    cmocka_unit_test(alloc_conf_booleans_take_true_and_false),
    cmocka_unit_test(a_bad_boolean_says_it_wants_one),
    cmocka_unit_test(bad_fail_entry_warns_the_same_way),
    cmocka_unit_test(every_variable_is_documented),
};
RECAP_TEST_MAIN(tests)
