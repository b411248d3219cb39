/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/update.h — updating a captured graph's executable in place from a new capture of the
 * same step (cudaGraphExecUpdate), and why an update did not happen.
 */
#ifndef RECAP_UPDATE_H
#define RECAP_UPDATE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a recapture's new template was not applied to the executable in place (NONE: it was).
 * The first reasons after NONE are the driver's (cudaGraphExecUpdateResult), then recap's. */
typedef enum recap_update_reason {
  RECAP_UPDATE_REASON_NONE = 0, /* updated in place */
  RECAP_UPDATE_REASON_TOPOLOGY_CHANGED,
  RECAP_UPDATE_REASON_NODE_TYPE_CHANGED,
  RECAP_UPDATE_REASON_FUNCTION_CHANGED,
  RECAP_UPDATE_REASON_PARAMETERS_CHANGED,
  RECAP_UPDATE_REASON_NOT_SUPPORTED,
  RECAP_UPDATE_REASON_UNSUPPORTED_FUNCTION_CHANGE,
  RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED,
  RECAP_UPDATE_REASON_REFUSED_OTHER,   /* the driver refused for another reason */
  RECAP_UPDATE_REASON_NO_EXECUTABLE,   /* there was no executable to update */
  RECAP_UPDATE_REASON_POLICY_NEVER,    /* policy: always instantiate */
  RECAP_UPDATE_REASON_POLICY_FAILURES, /* policy: K consecutive refusals */
  RECAP_UPDATE_REASON_POLICY_SLOWER,   /* policy: updated replays measured slower */
  RECAP_UPDATE_REASON_COUNT
} recap_update_reason_t;

/* "none", "topology_changed", ... (the enumerator's name after RECAP_UPDATE_REASON_, in lower
 * case); "unknown" out of range. The string is static. */
RECAP_API const char *recap_update_reason_name(recap_update_reason_t reason);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_UPDATE_H */
