/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_refusal.c — the words both seams use to refuse a virtual memory size or address that is
 * not a nonzero multiple of the device's minimum granularity (device.h, recap__vmm_refuse), so
 * that a caller tested on the fake reads on a GPU the message its tests checked. A file of its
 * own at the bottom of the device layer: both seams call it, and it calls nothing of recap.
 */
#include <stdio.h>
#include <string.h>

#include "device/device.h"

bool recap__vmm_refuse(char *buf, size_t size, const char *call, const char *what, uintptr_t value,
                       size_t granularity, int device) {
  if (value != 0 && granularity != 0 && value % granularity == 0) return false;
  if (value == 0)
    snprintf(buf, size,
             "%s: the %s is %s; give a nonzero multiple of device %d's minimum VMM "
             "granularity, %zu bytes (vmm_granularity)",
             call, what, strcmp(what, "address") == 0 ? "NULL" : "0", device, granularity);
  else
    snprintf(buf, size,
             "%s: the %s 0x%jx is not a multiple of device %d's minimum VMM granularity, "
             "%zu bytes (vmm_granularity); round it up to one",
             call, what, (uintmax_t)value, device, granularity);
  return true;
}
