/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c — a user's program, public API only: print the version and count the devices.
 * Having no device (or no driver) is fine here; any other failure is not.
 */
#include <recap.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  printf("recap %s (backend %s)\n", recap_version_string(), recap_device_backend());

#ifdef EXPECTED_VERSION
  if (strcmp(recap_version_string(), EXPECTED_VERSION) != 0) {
    fprintf(stderr, "library says %s, package says %s\n", recap_version_string(), EXPECTED_VERSION);
    return 1;
  }
#endif
  if (recap_version() != RECAP_VERSION_HEX) {
    fprintf(stderr, "library version %x differs from header version %x\n", recap_version(),
            (unsigned)RECAP_VERSION_HEX);
    return 1;
  }

  int count = 0;
  recap_status_t status = recap_device_count(&count);
  if (status == RECAP_SUCCESS) {
    printf("%d CUDA device(s)\n", count);
  } else if (status == RECAP_ERROR_NO_DEVICE) {
    printf("no CUDA device: %s\n", recap_last_error());
  } else {
    fprintf(stderr, "recap_device_count: %s: %s\n", recap_status_name(status), recap_last_error());
    return 1;
  }
  return 0;
}
