/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch_env.c — this process's rank from its launcher's environment, and where rank 0 can be
 * reached (launch_env.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "launch_env.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_args.h"

enum { DEFAULT_PORT = 29501, SLURM_PORT_BASE = 30000, SLURM_PORT_SPAN = 10000 };

/* A launcher's variables; a NULL name is one the launcher does not set. */
typedef struct launcher {
  const char *name;
  const char *rank, *world, *local_rank, *local_world;
} launcher_t;

static const launcher_t launchers[] = {
    {"launch.sh", "RECAP_DP_RANK", "RECAP_DP_WORLD", NULL, NULL},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
};

typedef struct reader {
  launch_getenv_fn get;
  void *ctx;
  char *error;
  size_t size;
} reader_t;

static const char *process_getenv(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

/* The variable's value; NULL when unset or empty. */
static const char *value(const reader_t *r, const char *name) {
  if (!name) return NULL;
  const char *v = r->get(r->ctx, name);
  return v && *v ? v : NULL;
}

static int fail(const reader_t *r, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(r->error, r->size, format, args);
  va_end(args);
  return -1;
}

/* An integer variable in [min, max]; *out unchanged when unset. */
static int number(const reader_t *r, const char *name, long min, long max, int *out) {
  const char *v = value(r, name);
  if (!v) return 0;
  if (!example_parse_int(v, min, max, out))
    return fail(r, "%s=\"%s\" is not a number from %ld to %ld", name, v, min, max);
  return 0;
}

static int read_ranks(const reader_t *r, const launcher_t *l, launch_env_t *out) {
  const char *rank = value(r, l->rank), *world = value(r, l->world);
  if (!rank || !world)
    return fail(r, "%s=\"%s\" is set but %s is not (%s sets both)", rank ? l->rank : l->world,
                rank ? rank : world, rank ? l->world : l->rank, l->name);
  if (number(r, l->world, 1, 1000000, &out->world) || number(r, l->rank, 0, 999999, &out->rank))
    return -1;
  if (out->rank >= out->world)
    return fail(r, "%s=%d is not below %s=%d", l->rank, out->rank, l->world, out->world);
  if (number(r, l->local_world, 1, out->world, &out->local_world) ||
      number(r, l->local_rank, 0, out->world - 1, &out->local_rank))
    return -1;
  if (out->local_world > 0 && out->local_rank >= out->local_world)
    return fail(r, "%s=%d is not below %s=%d", l->local_rank, out->local_rank, l->local_world,
                out->local_world);
  /* launch.sh starts every rank on this node, rank r on GPU r. */
  if (!l->local_rank) {
    out->local_rank = out->rank;
    out->local_world = out->world;
  }
  return 0;
}

static int read_host_and_port(const reader_t *r, const launch_env_t *env, launch_env_t *out) {
  const char *master = value(r, "MASTER_ADDR");
  const char *nodelist = value(r, "SLURM_STEP_NODELIST");
  if (!nodelist) nodelist = value(r, "SLURM_JOB_NODELIST");
  const bool slurm = !strcmp(env->launcher, "Slurm");
  if (master) {
    if (strlen(master) >= sizeof out->host)
      return fail(r, "MASTER_ADDR is longer than %zu characters", sizeof out->host - 1);
    strcpy(out->host, master);
  } else if (slurm && nodelist) {
    if (launch_first_host(nodelist, out->host, sizeof out->host))
      return fail(r, "%s=\"%s\" is not a Slurm node list",
                  value(r, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST",
                  nodelist);
  } else if (env->world == 1 || env->local_world == env->world) {
    strcpy(out->host, "127.0.0.1");
  }

  int job = -1, master_port = -1;
  out->port = DEFAULT_PORT;
  if (number(r, "MASTER_PORT", 1, 65534, &master_port)) return -1;
  if (slurm && number(r, "SLURM_JOB_ID", 0, 2147483647L, &job)) return -1;
  if (master_port > 0)
    out->port = master_port + 1;
  else if (job >= 0)
    out->port = SLURM_PORT_BASE + job % SLURM_PORT_SPAN;
  return number(r, "RECAP_DP_PORT", 1, 65535, &out->port);
}

int launch_env_read(launch_env_t *out, launch_getenv_fn get, void *ctx, char *error, size_t size) {
  const reader_t r = {get ? get : process_getenv, ctx, error, size};
  launch_env_t env = {
      .rank = 0, .world = 1, .local_rank = -1, .local_world = -1, .launcher = "none"};
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    const launcher_t *l = &launchers[i];
    if (!value(&r, l->rank) && !value(&r, l->world)) continue;
    env.launcher = l->name;
    if (read_ranks(&r, l, &env)) return -1;
    break;
  }
  if (read_host_and_port(&r, &env, &env)) return -1;
  *out = env;
  return 0;
}

/* Appends s[0..n) to host[*used..size), keeping room for the terminator. */
static bool append(char *host, size_t size, size_t *used, const char *s, size_t n) {
  if (*used + n >= size) return false;
  memcpy(host + *used, s, n);
  *used += n;
  host[*used] = '\0';
  return true;
}

int launch_first_host(const char *nodelist, char *host, size_t size) {
  if (!nodelist || !host || size == 0) return -1;
  size_t used = 0;
  host[0] = '\0';
  const char *p = nodelist;
  while (*p && *p != ',') {
    if (*p == ']') return -1;
    if (*p != '[') {
      if (!append(host, size, &used, p, 1)) return -1;
      p++;
      continue;
    }
    /* A bracket of numbers and ranges, "[01-04,07]": its first number, as written. */
    const char *first = ++p;
    while (isdigit((unsigned char)*p)) p++;
    if (p == first || (*p != ',' && *p != '-' && *p != ']')) return -1;
    if (!append(host, size, &used, first, (size_t)(p - first))) return -1;
    while (*p && *p != ']' && *p != '[') p++;
    if (*p != ']') return -1;
    p++;
  }
  return used > 0 ? 0 : -1;
}
