/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_conformance.c — the scenarios that must behave the same on the CPU fake device and on
 * CUDA, run on the backend this program is linked with (backend.h): test_conformance on the
 * fake, test_conformance_gpu on a CUDA device. Each scenario file is a part of the program.
 */
#include "backend.h"

extern const recap_test_part_t conformance_alloc_stats_tests;
extern const recap_test_part_t conformance_liveness_tests;
extern const recap_test_part_t conformance_annotate_tests;

int main(int argc, char **argv) {
  const recap_test_part_t parts[] = {conformance_alloc_stats_tests, conformance_liveness_tests,
                                     conformance_annotate_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
