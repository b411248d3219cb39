/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_comm.c — the communicator of one rank (dp_comm.h): NCCL opened with dlopen, the unique id
 * handed from rank 0 to the others over TCP or through a file (examples/common/rendezvous.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "dp_comm.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "rendezvous.h"

typedef ncclResult_t (*get_unique_id_fn)(ncclUniqueId *id);
typedef ncclResult_t (*comm_init_rank_fn)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
typedef ncclResult_t (*comm_destroy_fn)(ncclComm_t comm);
typedef const char *(*error_string_fn)(ncclResult_t result);

static void *library;
static get_unique_id_fn get_unique_id;
static comm_init_rank_fn comm_init_rank;
static comm_destroy_fn comm_destroy;
static error_string_fn error_string;

static _Thread_local char message[1024];

static recap_nccl_comm_t failed(const char **error, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  *error = message;
  return NULL;
}

/* dlsym into a function pointer without the object-to-function cast C forbids. */
static int take(const char *name, void *fn, size_t size) {
  void *symbol = dlsym(library, name);
  if (!symbol) return -1;
  memcpy(fn, &symbol, size);
  return 0;
}

static int open_library(const char **error) {
  if (library) return 0;
  const char *path = getenv("RECAP_NCCL_LIBRARY");
  if (!path || !*path) path = "libnccl.so.2";
  library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    failed(error, "cannot open %s: %s", path, dlerror());
    return -1;
  }
  if (take("ncclGetUniqueId", &get_unique_id, sizeof get_unique_id) ||
      take("ncclCommInitRank", &comm_init_rank, sizeof comm_init_rank) ||
      take("ncclCommDestroy", &comm_destroy, sizeof comm_destroy) ||
      take("ncclGetErrorString", &error_string, sizeof error_string)) {
    failed(error, "%s lacks NCCL's functions (ncclGetUniqueId, ncclCommInitRank, ...)", path);
    dlclose(library);
    library = NULL;
    return -1;
  }
  return 0;
}

recap_nccl_comm_t dp_comm_create(const launch_env_t *env, const char *id_file, int wait_seconds,
                                 const char **error) {
  if (open_library(error)) return NULL;
  ncclUniqueId id;
  ncclResult_t r = ncclSuccess;
  if (env->rank == 0) {
    r = get_unique_id(&id);
    if (r != ncclSuccess) return failed(error, "ncclGetUniqueId: %s", error_string(r));
  }
  char why[sizeof message];
  if (rendezvous_share(env, id_file, &id, sizeof id, wait_seconds * 1000, why, sizeof why))
    return failed(error, "NCCL's unique id: %s", why);
  ncclComm_t comm = NULL;
  r = comm_init_rank(&comm, env->world, id, env->rank);
  if (r != ncclSuccess)
    return failed(error, "ncclCommInitRank(rank %d of %d): %s", env->rank, env->world,
                  error_string(r));
  return (recap_nccl_comm_t)comm;
}

void dp_comm_destroy(recap_nccl_comm_t comm) {
  if (comm && comm_destroy) comm_destroy((ncclComm_t)comm);
  if (library) dlclose(library);
  library = NULL;
}
