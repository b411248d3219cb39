/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device-probe — says which device backend recap uses, how many CUDA devices it sees, and
 * whether recap's own kernels run on each (a build whose CUDA architectures leave a GPU out is
 * refused with a message naming the GPU's compute capability).
 *
 *     recap-device-probe [--help]
 *
 * Exit status: 0 when every device runs recap's kernels, 2 when there is no NVIDIA driver or no
 * device, 1 on any other failure. Uses recap's public API, and the CUDA runtime to pick each
 * device.
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdio.h>

#include "recap.h"

/* Draws a few numbers on the device with recap's generator: the first launch of one of recap's
 * kernels, which is where a build without an image for this GPU is found. */
static recap_status_t run_a_kernel(int device) {
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    fprintf(stderr, "device %d: cudaSetDevice: %s\n", device, cudaGetErrorString(err));
    return RECAP_ERROR_CUDA;
  }
  recap_generator_t generator = NULL;
  float *values = NULL;
  recap_status_t status = recap_generator_create(&generator, 42);
  if (status == RECAP_SUCCESS) status = recap_malloc((void **)&values, 256 * sizeof(float), NULL);
  if (status == RECAP_SUCCESS) status = recap_rng_uniform(generator, values, 256, NULL);
  if (status == RECAP_SUCCESS && (err = cudaDeviceSynchronize()) != cudaSuccess) {
    fprintf(stderr, "device %d: cudaDeviceSynchronize: %s\n", device, cudaGetErrorString(err));
    status = RECAP_ERROR_CUDA;
  }
  /* The cleanup's own status would hide the cause; the cause is what this probe reports. */
  if (values) (void)recap_free(values);
  if (generator) (void)recap_generator_destroy(generator);
  return status;
}

int main(int argc, char **argv) {
  static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    printf(
        "usage: %s [--help]\n"
        "Says which device backend recap uses, how many CUDA devices it sees, and whether\n"
        "recap's kernels run on each. Exit status: 0 they do, 2 no device, 1 otherwise.\n",
        argv[0]);
    return c == 'h' ? 0 : 1;
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0], argv[optind]);
    return 1;
  }

  printf("recap %s, device backend: %s\n", recap_version_string(), recap_device_backend());
  int count = 0;
  recap_status_t status = recap_device_count(&count);
  if (status == RECAP_ERROR_NO_DEVICE) {
    fprintf(stderr, "recap: no CUDA device: %s\n", recap_last_error());
    return 2;
  }
  if (status != RECAP_SUCCESS) {
    fprintf(stderr, "recap: %s: %s\n", recap_status_name(status), recap_last_error());
    return 1;
  }
  printf("devices: %d\n", count);
  int failed = 0;
  for (int device = 0; device < count; device++) {
    status = run_a_kernel(device);
    if (status == RECAP_SUCCESS) {
      printf("device %d: recap's kernels run\n", device);
    } else {
      fprintf(stderr, "device %d: %s: %s\n", device, recap_status_name(status), recap_last_error());
      failed = 1;
    }
  }
  return failed;
}
