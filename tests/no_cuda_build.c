/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * no_cuda_build.c — what a program gets from a recap built without CUDA (RECAP_CUDA=OFF): the
 * backend "none", and RECAP_ERROR_NO_DEVICE from the first call that needs a device, the status
 * a machine without a driver gets, with a message naming the build option. Built only in such a
 * build, linked against the shared library as a user's program is, without the fake.
 */
#include <recap.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void expect_no_cuda(const char *call, recap_status_t status) {
  const char *message = recap_last_error();
  if (status != RECAP_ERROR_NO_DEVICE || strstr(message, "built without CUDA") == NULL ||
      strstr(message, "RECAP_CUDA=ON") == NULL) {
    fprintf(stderr, "FAIL: %s gave %s: %s\n", call, recap_status_name(status), message);
    failures++;
    return;
  }
  printf("%s: %s: %s\n", call, recap_status_name(status), message);
}

int main(void) {
  const char *backend = recap_device_backend();
  if (strcmp(backend, "none") != 0) {
    fprintf(stderr, "FAIL: recap_device_backend() is \"%s\", not \"none\"\n", backend);
    failures++;
  }

  int count = -1;
  expect_no_cuda("recap_device_count", recap_device_count(&count));
  if (count != 0) {
    fprintf(stderr, "FAIL: recap_device_count left the count at %d, not 0\n", count);
    failures++;
  }

  void *ptr = NULL;
  expect_no_cuda("recap_malloc", recap_malloc(&ptr, 256, NULL));
  if (ptr != NULL) {
    fprintf(stderr, "FAIL: recap_malloc gave %p\n", ptr);
    failures++;
  }

  return failures == 0 ? 0 : 1;
}
