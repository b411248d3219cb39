/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp_comm.c — the communicator of one rank (dp_comm.h): NCCL opened with dlopen, the unique id
 * handed from rank 0 to the others through a file.
 */
#define _POSIX_C_SOURCE 200809L

#include "dp_comm.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

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

static int write_id(const ncclUniqueId *id, const char *path, const char **error) {
  char aside[4096];
  snprintf(aside, sizeof aside, "%s.partial", path);
  FILE *f = fopen(aside, "wb");
  if (!f) {
    failed(error, "cannot write %s: %s", aside, strerror(errno));
    return -1;
  }
  const int ok = fwrite(id, sizeof *id, 1, f) == 1;
  if (fclose(f) != 0 || !ok || rename(aside, path) != 0) {
    failed(error, "cannot write %s: %s", path, strerror(errno));
    remove(aside);
    return -1;
  }
  return 0;
}

static int read_id(ncclUniqueId *id, const char *path, int wait_seconds, const char **error) {
  const struct timespec pause = {0, 10 * 1000 * 1000};
  for (long waited_ms = 0;; waited_ms += 10) {
    FILE *f = fopen(path, "rb");
    if (f) {
      const int ok = fread(id, sizeof *id, 1, f) == 1;
      fclose(f);
      if (ok) return 0;
      failed(error, "%s is shorter than an NCCL unique id (%zu bytes)", path, sizeof *id);
      return -1;
    }
    if (waited_ms >= (long)wait_seconds * 1000) {
      failed(error, "rank 0 wrote no NCCL unique id to %s within %d s: is rank 0 running?", path,
             wait_seconds);
      return -1;
    }
    nanosleep(&pause, NULL);
  }
}

recap_nccl_comm_t dp_comm_create(int rank, int world, const char *id_file, int wait_seconds,
                                 const char **error) {
  if (open_library(error)) return NULL;
  ncclUniqueId id;
  ncclResult_t r = ncclSuccess;
  if (rank == 0) {
    r = get_unique_id(&id);
    if (r != ncclSuccess) return failed(error, "ncclGetUniqueId: %s", error_string(r));
    if (world > 1 && write_id(&id, id_file, error)) return NULL;
  } else if (read_id(&id, id_file, wait_seconds, error)) {
    return NULL;
  }
  ncclComm_t comm = NULL;
  r = comm_init_rank(&comm, world, id, rank);
  if (r != ncclSuccess)
    return failed(error, "ncclCommInitRank(rank %d of %d): %s", rank, world, error_string(r));
  return (recap_nccl_comm_t)comm;
}

void dp_comm_destroy(recap_nccl_comm_t comm) {
  if (comm && comm_destroy) comm_destroy((ncclComm_t)comm);
  if (library) dlclose(library);
  library = NULL;
}
