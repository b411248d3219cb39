/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * view_fixture.c — the training-step-shaped graph of view_fixture.h, captured on the fake.
 */
#include <stdio.h>
#include <string.h>

#include "fake/fake.h"
#include "reset.h"
#include "view_fixture.h"
#include "liveness_util.h"

enum { LAYERS = 3 };

#define CHECK(call)                                           \
  do {                                                        \
    recap_status_t check_status_ = (call);                    \
    if (check_status_ != RECAP_SUCCESS) return check_status_; \
  } while (0)

static const char *const k_gather = "_Z12gather_batchPKfPKiPfi";
static const char *const k_gemm = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE";
static const char *const k_fwd = "_Z13bias_relu_fwdILi256EEvPfPKfii";
static const char *const k_bwd = "_Z13bias_relu_bwdILi256EEvPfPKfS0_ii";
static const char *const k_loss = "_Z21softmax_cross_entropyIfEvPKT_PKiPS0_i";
static const char *const k_adam = "_Z9adam_stepIfEvPT_PKS0_S1_S1_fi";
static const char *const k_reduce = "_ZN3cub18DeviceReduceKernelIfLi256EEEvPKT_PS1_i";
/* cuBLAS names its kernels with C linkage: they stay as they are. */
static const char *const k_cublas =
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_kernel";

static void *weights[LAYERS], *inputs, *labels;

static void launch(recap_stream_t s, const char *name, const void *a, const void *b) {
  const void *args[2] = {a, b};
  recap__fake_launch_kernel_args(s, name, args, a ? (b ? 2 : 1) : 0);
}

recap_status_t view_fixture_capture(recap_graph_t *graph) {
  recap_test_reset(NULL);
  recap_annotations_enable(1);
  recap_stream_t s = recap__fake_stream_new(), metrics = recap__fake_stream_new();
  recap_stream_t side[LAYERS];
  for (int i = 0; i < LAYERS; i++) {
    side[i] = recap__fake_stream_new();
    CHECK(recap_malloc(&weights[i], 64 << 10, s));
  }
  CHECK(recap_malloc(&inputs, 256 << 10, s));
  CHECK(recap_malloc(&labels, 4 << 10, s));

  CHECK(recap_graph_create(graph, RECAP_GRAPH_KEEP));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.check_input_liveness = 1;
  CHECK(recap_graph_capture_begin(*graph, &options, s));
  CHECK(recap_annotate_push("step", s));

  CHECK(recap_annotate_push("data", s));
  recap__fake_memset_async(s, inputs, 0, 256 << 10);
  launch(s, k_gather, inputs, labels);
  CHECK(recap_annotate_pop(s));

  CHECK(recap_annotate_push("forward", s));
  for (int i = 0; i < LAYERS; i++) {
    char label[16];
    snprintf(label, sizeof label, "layer%d", i);
    CHECK(recap_annotate_push(label, s));
    launch(s, k_gemm, weights[i], NULL);
    launch(s, k_fwd, NULL, NULL);
    CHECK(recap_annotate_pop(s));
  }
  CHECK(recap_annotate_pop(s));

  CHECK(recap_annotate_push("loss", s));
  launch(s, k_loss, labels, NULL);
  CHECK(recap_annotate_pop(s));
  if (!recap__fake_capture_join(metrics, s)) return RECAP_ERROR_INVALID_USAGE;
  CHECK(recap_annotate_push("metrics", metrics));
  launch(metrics, k_reduce, labels, NULL);
  CHECK(recap_annotate_pop(metrics));

  CHECK(recap_annotate_push("backward", s));
  recap__fake_memset_async(s, NULL, 0, 16 << 10); /* the gradient accumulator */
  for (int i = LAYERS - 1; i >= 0; i--) {
    char label[16];
    snprintf(label, sizeof label, "layer%d", i);
    CHECK(recap_annotate_push(label, s));
    launch(s, k_bwd, NULL, NULL);
    /* The weight gradient and the layer's Adam step on a side stream, beside the chain. */
    if (!recap__fake_capture_join(side[i], s)) return RECAP_ERROR_INVALID_USAGE;
    CHECK(recap_annotate_push("wgrad+adam", side[i]));
    launch(side[i], k_gemm, weights[i], NULL);
    launch(side[i], k_adam, weights[i], NULL);
    CHECK(recap_annotate_pop(side[i]));
    if (i > 0) launch(s, k_cublas, weights[i], NULL);
    CHECK(recap_annotate_pop(s));
  }
  CHECK(recap_annotate_pop(s));
  CHECK(recap_annotate_pop(s));
  CHECK(recap_graph_capture_end(*graph));
  recap_annotations_enable(-1);
  return RECAP_SUCCESS;
}

recap_status_t view_fixture_release(recap_graph_t graph) {
  recap_status_t status = recap_graph_destroy(graph);
  for (int i = 0; i < LAYERS; i++) {
    recap_status_t s = recap_free(weights[i]);
    if (status == RECAP_SUCCESS) status = s;
  }
  recap_status_t a = recap_free(inputs), b = recap_free(labels);
  return status != RECAP_SUCCESS ? status : a != RECAP_SUCCESS ? a : b;
}

int view_fixture_model(recap_graph_t graph, int plausible, recap_view_graph_t *view, char *err,
                       size_t err_size) {
  recap_graph_info_t *info = NULL;
  recap_status_t status = recap_graph_inspect(graph, &info);
  if (status != RECAP_SUCCESS) {
    snprintf(err, err_size, "recap_graph_inspect: %s", recap_last_error());
    return -1;
  }
  int rc = recap_view_from_info(view, info, err, err_size);
  recap_graph_info_free(info);
  if (rc != 0) return -1;
  const recap_liveness_input_t *inputs_read = NULL;
  size_t input_count = 0;
  recap_pool_id_t pool;
  status = liveness_inputs_of(graph, &inputs_read, &input_count);
  if (status == RECAP_SUCCESS) status = recap_graph_pool(graph, &pool);
  if (status != RECAP_SUCCESS) {
    snprintf(err, err_size, "%s", recap_last_error());
    recap_view_graph_free(view);
    return -1;
  }
  char text[64];
  snprintf(text, sizeof text, "{%llu, %llu}", (unsigned long long)pool.a,
           (unsigned long long)pool.b);
  if (recap_view_add_liveness(view, inputs_read, input_count, err, err_size) != 0 ||
      recap_view_set_string(&view->pool, text) != 0) {
    recap_view_graph_free(view);
    return -1;
  }
  if (!plausible) return 0;
  /* What the real kernels of such a step would launch, by name, and the sizes of the memsets
   * (the fake records neither). */
  static const uint64_t memset_bytes[] = {256 << 10, 16 << 10};
  size_t memsets = 0;
  for (size_t i = 0; i < view->count; i++)
    if (strcmp(view->nodes[i].type, "memset") == 0 && memsets < 2)
      view->nodes[i].bytes = memset_bytes[memsets++];
  static const struct {
    const char *name;
    unsigned grid, block;
  } shapes[] = {{"gather_batch", 64, 256},           {"cutlass::Kernel", 32, 128},
                {"bias_relu_fwd", 512, 256},         {"bias_relu_bwd", 512, 256},
                {"softmax_cross_entropy", 2, 256},   {"adam_step", 256, 256},
                {"cub::DeviceReduceKernel", 1, 256}, {"sm90_xmma", 16, 384}};
  for (size_t i = 0; i < view->count; i++) {
    recap_view_node_t *n = &view->nodes[i];
    for (size_t k = 0; n->pretty_name && k < sizeof shapes / sizeof shapes[0]; k++) {
      if (!strstr(n->pretty_name, shapes[k].name)) continue;
      n->grid[0] = shapes[k].grid;
      n->block[0] = shapes[k].block;
      if (k == 1) n->grid[1] = 4;
      if (k == 1) n->shared_bytes = 48 << 10;
    }
  }
  return 0;
}
