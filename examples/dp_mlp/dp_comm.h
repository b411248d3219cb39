/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_comm.h — this rank's NCCL communicator for the data-parallel example.
 *
 * recap wraps NCCL's collectives but neither creates nor destroys communicators: that is the
 * application's part. The example, like recap, does not link NCCL: it opens the library recap
 * loads (RECAP_NCCL_LIBRARY, else libnccl.so.2) and takes the three functions it needs.
 *
 * Rank 0 makes NCCL's unique id and hands it to the others (examples/common/rendezvous.h):
 * through `id_file` when one is given (written aside, then renamed, so no rank reads half of
 * it), else over TCP at env->host:env->port, where rank 0 listens; the others wait for it, for
 * at most `wait_seconds`. With one rank nothing is handed over.
 */
#ifndef DP_COMM_H
#define DP_COMM_H

#include "launch_env.h"
#include "recap.h"

/* On failure: a message in *error (a static buffer of the calling thread) and NULL. */
recap_nccl_comm_t dp_comm_create(const launch_env_t *env, const char *id_file, int wait_seconds,
                                 const char **error);
/* Destroys the communicator (NULL: nothing) and closes the library. */
void dp_comm_destroy(recap_nccl_comm_t comm);

#endif /* DP_COMM_H */
