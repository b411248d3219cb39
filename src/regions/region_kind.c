/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region_kind.c — the names of region kinds (recap/region.h), as inspection and messages show
 * them. A file of its own: inspect.c and regions.c both name kinds, and regions.c names node
 * types (inspect.c), so the names living in either would make the two call each other.
 */
#include "recap/region.h"

const char *recap_region_kind_name(recap_region_kind_t kind) {
  switch (kind) {
    case RECAP_REGION_WHILE: return "while";
    case RECAP_REGION_IF: return "if";
    case RECAP_REGION_IF_ELSE: return "if_else";
    case RECAP_REGION_SWITCH: return "switch";
  }
  return "unknown";
}
