/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch_env.h — which rank this process is, read from the environment of the launcher that
 * started it, for examples that run one process per GPU (examples/dp_mlp).
 *
 * The first launcher whose rank or size variable is set (an empty value counts as unset) gives
 * the rank, the number of ranks and, where it has one, the rank on this node (which GPU):
 *
 *   1. recap's launch.sh   RECAP_DP_RANK, RECAP_DP_WORLD (one node: the local rank is the rank)
 *   2. torchrun            RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
 *   3. Open MPI (mpirun)   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   4. MPICH, Intel MPI    PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *   5. Slurm (srun)        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *
 * None set: rank 0 of 1. The chosen launcher's rank and size must both be set, numbers, and the
 * rank below the size; a local rank, when set, a number below the local size (when that is set)
 * and the size; else an error naming the variable and its value.
 *
 * Where rank 0 can be reached, for a TCP rendezvous:
 *   host  MASTER_ADDR; else under Slurm the first host of SLURM_STEP_NODELIST (else
 *         SLURM_JOB_NODELIST), where srun starts task 0; else 127.0.0.1 when every rank is on
 *         this node (the local size equals the size, or one rank); else none ("").
 *   port  RECAP_DP_PORT; else MASTER_PORT + 1 (torchrun's own store listens on MASTER_PORT);
 *         else under Slurm 30000 + SLURM_JOB_ID % 10000, so that jobs sharing a node differ;
 *         else 29501.
 */
#ifndef RECAP_EXAMPLE_LAUNCH_ENV_H
#define RECAP_EXAMPLE_LAUNCH_ENV_H

#include <stddef.h>

enum { LAUNCH_HOST_MAX = 256 };

typedef struct launch_env {
  int rank, world;
  int local_rank;             /* the rank on this node, -1 when the launcher gives none */
  int local_world;            /* ranks on this node, -1 when the launcher gives none */
  const char *launcher;       /* "launch.sh", "torchrun", "Open MPI", "MPICH", "Slurm" or "none" */
  char host[LAUNCH_HOST_MAX]; /* rank 0's host for a TCP rendezvous, "" when unknown */
  int port;                   /* its port */
} launch_env_t;

/* The environment's lookup: getenv, or a table in tests. NULL or "" means unset. */
typedef const char *(*launch_getenv_fn)(void *ctx, const char *name);

/* Fills *out from the environment `get` reads (NULL: the process's, getenv). Returns 0, or -1
 * with a message of one line in error[0..size). */
int launch_env_read(launch_env_t *out, launch_getenv_fn get, void *ctx, char *error, size_t size);

/* The first host of a Slurm node list: "node[01-04,07],gpu7" gives "node01", "a,b" gives "a",
 * "gpu[7]" gives "gpu7". Returns 0, or -1 when the list is empty or malformed (an unclosed or
 * empty bracket) or the host does not fit host[0..size). */
int launch_first_host(const char *nodelist, char *host, size_t size);

#endif /* RECAP_EXAMPLE_LAUNCH_ENV_H */
