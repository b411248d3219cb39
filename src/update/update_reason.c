/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_reason.c — the names of recap_update_reason_t, for messages, logs and statistics.
 */
#include "recap/update.h"

const char *recap_update_reason_name(recap_update_reason_t reason) {
  /* Indexed by the enum; the static assert keeps the table and the enum the same length. */
  static const char *const names[] = {
      "none",
      "topology_changed",
      "node_type_changed",
      "function_changed",
      "parameters_changed",
      "not_supported",
      "unsupported_function_change",
      "attributes_changed",
      "refused_other",
      "no_executable",
      "policy_never",
      "policy_failures",
      "policy_slower",
      "no_origin",
      "policy_measure",
  };
  _Static_assert(sizeof names / sizeof names[0] == RECAP_UPDATE_REASON_COUNT,
                 "one name per recap_update_reason_t");
  if ((unsigned)reason >= (unsigned)RECAP_UPDATE_REASON_COUNT) return "unknown";
  return names[reason];
}
