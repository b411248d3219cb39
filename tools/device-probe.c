/*
 * device-probe — says which device backend recap uses and how many CUDA devices it sees.
 *
 * Exit status: 0 with at least one device, 2 when there is no NVIDIA driver or no device,
 * 1 on any other failure. Uses the public API only.
 */
#include <stdio.h>

#include "recap.h"

int main(void) {
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
  return 0;
}
