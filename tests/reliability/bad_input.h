/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bad_input.h — what the two sources of test_bad_input share: the fixture holding one live
 * object of every kind, a case of the matrix, and the setup step that must succeed.
 */
#ifndef RECAP_TEST_BAD_INPUT_H
#define RECAP_TEST_BAD_INPUT_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

#if defined(__SANITIZE_ADDRESS__)
#  define BIM_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define BIM_ASAN 1
#  endif
#endif
#ifndef BIM_ASAN
#  define BIM_ASAN 0
#endif

/* The "expected status" of a call that returns none: it must only not crash. */
#define BIM_NO_STATUS (-1)

typedef enum bim_kind { BIM_null, BIM_destroyed, BIM_foreign, BIM_state } bim_kind_t;

/* ---- the fixture: one live object of every kind --------------------------------------------- */

typedef struct bim_fixture {
  recap_stream_t stream, stream2;
  recap_graph_t graph; /* fresh, flags 0 */
  recap_generator_t gen;
  recap_graphed_t graphed; /* one callable, forward and backward, captured */
  void *block;             /* 1 KiB from recap_malloc */
  float *floats;           /* 64 floats from recap_malloc */
  uint8_t mask[64];
  char *string; /* a string recap allocated (a snapshot) */
  const char *path;
  recap_pool_id_t pool; /* a fresh pool id, never used */
  recap_capture_options_t capture_options;
  recap_scope_options_t scope_options;
  recap_graphed_options_t graphed_options;
  recap_callable_desc_t descs[1];
  float x[64], gx[64]; /* the callable's input and output gradient ("device" memory: host) */
  recap_buffer_t inputs[1], grad_outputs[1];
  recap_graph_info_t info;       /* an empty info, for recap_graph_info_json */
  recap_graph_info_t *heap_info; /* one recap_graph_info_free may take */
  recap_update_policy_t update_policy;
  recap_update_stats_t update_stats;
  recap_graph_memory_t graph_memory;
  recap_pool_memory_t pool_memory;
  recap_rebind_t rebinds[1]; /* a move of block to floats */
  recap_rebind_site_t rebind_sites[1];
  recap_graph_set_t graph_set; /* sizes 1 and 4, LAZY: nothing captured */
  recap_graph_set_options_t graph_set_options;
  recap_graph_set_member_t set_member;
  recap_graph_set_info_t set_info;
  recap_collective_t collectives[1];
  recap_graph_t param_graph; /* captured with one parameter, f->param */
  recap_param_t param;
  int32_t param_value;
  recap_param_value_t param_values[1];
  recap_param_info_t param_info;
  recap_param_site_t param_sites[1];
  unsigned shape[3];

  /* What calls hand back; everything here is released at the end of a case. */
  recap_graph_t graph_out, graph_out2;
  recap_graph_t borrowed_graph, borrowed_graph2; /* owned by a graphed callable */
  recap_generator_t gen_out;
  recap_graphed_t graphed_out[1];
  recap_graph_set_t graph_set_out;
  recap_param_t param_out;
  recap_stream_t stream_out;
  void *ptr_out;
  size_t size_out;
  uint64_t u64_out;
  int int_out;
  char *string_out;
  recap_pool_id_t pool_out;
  recap_graph_state_t graph_state_out;
  recap_pool_state_t pool_state_out;
  recap_pool_info_t pool_info;
  recap_block_info_t block_info;
  recap_memory_stats_t stats;
  const recap_buffer_t *buffers_out;
  recap_cuda_graph_t cuda_graph_out;
  recap_cuda_graph_exec_t cuda_exec_out;
  recap_graph_info_t *info_out;
  recap_philox_state_t philox;
  recap_liveness_input_t liveness_out[1];
  recap_cond_t cond, cond_out;
  recap_cond_compare_t cond_compare;
  recap_loop_t loop;

  /* Handles that were destroyed, and storage on the stack posing as a handle. */
  recap_graph_t dead_recap_graph_t;
  recap_generator_t dead_recap_generator_t;
  recap_graphed_t dead_recap_graphed_t;
  recap_graph_set_t dead_recap_graph_set_t;
  recap_param_t dead_recap_param_t; /* of a graph destroyed since */
  void *foreign;
  _Alignas(16) unsigned char foreign_storage[1024];
} bim_fixture_t;

typedef struct bim_case {
  const char *name;
  const char *function; /* the public function under test */
  bim_kind_t kind;
  int expect; /* a recap_status_t, or BIM_NO_STATUS */
  int (*run)(bim_fixture_t *f);
  const char *needle; /* the message must contain it, when set */
} bim_case_t;

/* A setup step inside a child: it must succeed, or the case cannot say anything. */
#define MUST(expr)                                                                             \
  do {                                                                                         \
    recap_status_t must_s_ = (expr);                                                           \
    if (must_s_ != RECAP_SUCCESS) {                                                            \
      fprintf(stderr, "    setup step %s failed: %s: %s\n", #expr, recap_status_name(must_s_), \
              recap_last_error());                                                             \
      exit(10);                                                                                \
    }                                                                                          \
  } while (0)

/* The hand-written cases of wrong states and values (bad_input_states.c). */
extern const bim_case_t bim_state_cases[];
extern const size_t bim_state_case_count;

#endif /* RECAP_TEST_BAD_INPUT_H */
