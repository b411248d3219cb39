/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl.c — the real NCCL table of the seam (nccl_seam.h): libnccl.so.2 loaded at first use.
 *
 * recap never links NCCL, so that everything else works on machines without it: load() opens
 * the library named by RECAP_NCCL_LIBRARY, or "libnccl.so.2" through the loader's search path,
 * fetches every function the table needs with dlsym, once per process (later calls answer from
 * the first result), and asks ncclGetVersion. NCCL's types come from <nccl.h> when the build
 * found it (RECAP_HAVE_NCCL_H); without it the table's load() says how to point the build at the
 * headers, and every other function gives the same answer.
 *
 * Errors of NCCL calls become recap statuses (nccl_status) with ncclGetErrorString's text.
 */
#include "device/nccl_seam.h"

#include <stdatomic.h>

#include "core/env.h"
#include "core/error.h"

/* The table in use: NULL means the real one. Tests install the fake's at reset. */
static _Atomic(const recap__nccl_ops_t *) installed;
static const recap__nccl_ops_t real_ops;

const recap__nccl_ops_t *recap__nccl(void) {
  const recap__nccl_ops_t *ops = atomic_load_explicit(&installed, memory_order_acquire);
  return ops ? ops : &real_ops;
}

void recap__nccl_install(const recap__nccl_ops_t *ops) {
  atomic_store_explicit(&installed, ops, memory_order_release);
}

#ifdef RECAP_HAVE_NCCL_H

#  include <dlfcn.h>
#  include <nccl.h>
#  include <pthread.h>
#  include <stdio.h>
#  include <string.h>

/* The functions fetched from the library, with nccl.h's signatures. */
typedef struct nccl_fns {
  ncclResult_t (*get_version)(int *);
  const char *(*get_error_string)(ncclResult_t);
  ncclResult_t (*comm_user_rank)(ncclComm_t, int *);
  ncclResult_t (*comm_count)(ncclComm_t, int *);
  ncclResult_t (*comm_cu_device)(ncclComm_t, int *);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  ncclResult_t (*mem_alloc)(void **, size_t);
  ncclResult_t (*mem_free)(void *);
  ncclResult_t (*comm_register)(ncclComm_t, void *, size_t, void **);
  ncclResult_t (*comm_deregister)(ncclComm_t, void *);
} nccl_fns_t;

/* What the one load found: the functions, or the failure every later call reports again. */
static struct {
  pthread_once_t once;
  nccl_fns_t fns;
  int version;
  recap_status_t status;
  char message[1024];
} loaded = {.once = PTHREAD_ONCE_INIT};

/* Each function's name and where its pointer goes. */
#  define NCCL_SYMBOLS(X)                   \
    X(ncclGetVersion, get_version)          \
    X(ncclGetErrorString, get_error_string) \
    X(ncclCommUserRank, comm_user_rank)     \
    X(ncclCommCount, comm_count)            \
    X(ncclCommCuDevice, comm_cu_device)     \
    X(ncclAllReduce, all_reduce)            \
    X(ncclAllGather, all_gather)            \
    X(ncclReduceScatter, reduce_scatter)    \
    X(ncclBroadcast, broadcast)             \
    X(ncclReduce, reduce)                   \
    X(ncclSend, send)                       \
    X(ncclRecv, recv)                       \
    X(ncclGroupStart, group_start)          \
    X(ncclGroupEnd, group_end)              \
    X(ncclMemAlloc, mem_alloc)              \
    X(ncclMemFree, mem_free)                \
    X(ncclCommRegister, comm_register)      \
    X(ncclCommDeregister, comm_deregister)

static void load_once(void) {
  const char *path = recap__env_text(RECAP__ENV_NCCL_LIBRARY);
  const char *tried = path ? path : "libnccl.so.2";
  const char *how = path ? "the library RECAP_NCCL_LIBRARY names"
                         : "libnccl.so.2 through the dynamic loader's search path";
  void *lib = dlopen(tried, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    loaded.status = RECAP_ERROR_NOT_FOUND;
    snprintf(loaded.message, sizeof loaded.message,
             "NCCL: could not load %s (%s): %s; install NCCL (the nvidia-nccl-cu13 wheel or the "
             "libnccl2 package) or set RECAP_NCCL_LIBRARY to the path of libnccl.so.2",
             how, tried, why ? why : "no reason given");
    return;
  }
  nccl_fns_t fns;
  memset(&fns, 0, sizeof fns);
#  define NCCL_FETCH(symbol, field)                                                        \
    {                                                                                      \
      void *p = dlsym(lib, #symbol);                                                       \
      if (!p) {                                                                            \
        const char *why = dlerror();                                                       \
        loaded.status = RECAP_ERROR_NOT_SUPPORTED;                                         \
        snprintf(loaded.message, sizeof loaded.message,                                    \
                 "NCCL: %s (%s) has no function " #symbol                                  \
                 " (%s); recap needs NCCL 2.19 or "                                        \
                 "newer",                                                                  \
                 tried, how, why ? why : "no reason given");                               \
        dlclose(lib);                                                                      \
        return;                                                                            \
      }                                                                                    \
      /* ISO C has no conversion from an object pointer to a function pointer: copy it. */ \
      memcpy(&fns.field, &p, sizeof p);                                                    \
    }
  NCCL_SYMBOLS(NCCL_FETCH)
#  undef NCCL_FETCH
  int version = 0;
  ncclResult_t r = fns.get_version(&version);
  if (r != ncclSuccess) {
    loaded.status = RECAP_ERROR_NOT_SUPPORTED;
    snprintf(loaded.message, sizeof loaded.message,
             "NCCL: ncclGetVersion of %s failed: %s (ncclResult_t %d)", tried,
             fns.get_error_string(r), (int)r);
    dlclose(lib);
    return;
  }
  /* The library stays loaded for the process's life: NCCL's own threads and the
   * communicators the caller made with it use it. */
  loaded.fns = fns;
  loaded.version = version;
  loaded.status = RECAP_SUCCESS;
}

static recap_status_t ensure_loaded(void) {
  pthread_once(&loaded.once, load_once);
  if (loaded.status != RECAP_SUCCESS) return recap__error(loaded.status, "%s", loaded.message);
  return RECAP_SUCCESS;
}

static recap_status_t real_load(int *version) {
  RECAP__ARG(version, "recap__nccl load: version is NULL");
  *version = 0;
  recap_status_t st = ensure_loaded();
  if (st == RECAP_SUCCESS) *version = loaded.version;
  return st;
}

/* The recap status of an NCCL failure of call: CUDA errors stay CUDA errors, argument and usage
 * errors are the caller's, the rest (system, internal, remote, timeout) are NCCL's. */
static recap_status_t nccl_status(ncclResult_t r, const char *call) {
  if (r == ncclSuccess) return RECAP_SUCCESS;
  recap_status_t st;
  switch (r) {
    case ncclUnhandledCudaError: st = RECAP_ERROR_CUDA; break;
    case ncclInvalidArgument: st = RECAP_ERROR_INVALID_ARGUMENT; break;
    case ncclInvalidUsage: st = RECAP_ERROR_INVALID_USAGE; break;
    /* System, internal, remote errors (and ncclTimeout of NCCL 2.29 and later, a name older
     * headers lack): NCCL's own. */
    default: st = RECAP_ERROR_INTERNAL; break;
  }
  if (r == ncclSystemError && strcmp(call, "ncclMemAlloc") == 0) st = RECAP_ERROR_OUT_OF_MEMORY;
  return recap__error(st, "%s failed: %s (ncclResult_t %d); NCCL_DEBUG=WARN makes NCCL say more",
                      call, loaded.fns.get_error_string(r), (int)r);
}

#  define LOADED_OR_RETURN()                \
    do {                                    \
      recap_status_t st_ = ensure_loaded(); \
      if (st_ != RECAP_SUCCESS) return st_; \
    } while (0)

static recap_status_t real_comm_info(recap__nccl_comm_t comm, int *rank, int *nranks, int *device) {
  LOADED_OR_RETURN();
  RECAP__ARG(comm, "ncclCommUserRank: comm is NULL");
  recap_status_t st = RECAP_SUCCESS;
  if (rank && (st = nccl_status(loaded.fns.comm_user_rank(comm, rank), "ncclCommUserRank")))
    return st;
  if (nranks && (st = nccl_status(loaded.fns.comm_count(comm, nranks), "ncclCommCount"))) return st;
  if (device && (st = nccl_status(loaded.fns.comm_cu_device(comm, device), "ncclCommCuDevice")))
    return st;
  return st;
}

static recap_status_t real_collective(const recap__coll_t *c, recap_stream_t stream) {
  LOADED_OR_RETURN();
  RECAP__ARG(c, "recap__nccl collective: c is NULL");
  cudaStream_t s = (cudaStream_t)stream;
  ncclDataType_t t = (ncclDataType_t)c->dtype;
  ncclRedOp_t op = (ncclRedOp_t)c->op;
  switch (c->kind) {
    case RECAP__COLL_ALL_REDUCE:
      return nccl_status(loaded.fns.all_reduce(c->send, c->recv, c->count, t, op, c->comm, s),
                         "ncclAllReduce");
    case RECAP__COLL_ALL_GATHER:
      return nccl_status(loaded.fns.all_gather(c->send, c->recv, c->count, t, c->comm, s),
                         "ncclAllGather");
    case RECAP__COLL_REDUCE_SCATTER:
      return nccl_status(loaded.fns.reduce_scatter(c->send, c->recv, c->count, t, op, c->comm, s),
                         "ncclReduceScatter");
    case RECAP__COLL_BROADCAST:
      return nccl_status(loaded.fns.broadcast(c->send, c->recv, c->count, t, c->root, c->comm, s),
                         "ncclBroadcast");
    case RECAP__COLL_REDUCE:
      return nccl_status(loaded.fns.reduce(c->send, c->recv, c->count, t, op, c->root, c->comm, s),
                         "ncclReduce");
    case RECAP__COLL_SEND:
      return nccl_status(loaded.fns.send(c->send, c->count, t, c->peer, c->comm, s), "ncclSend");
    case RECAP__COLL_RECV:
      return nccl_status(loaded.fns.recv(c->recv, c->count, t, c->peer, c->comm, s), "ncclRecv");
  }
  return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                      "recap__nccl collective: kind %d is not a collective", (int)c->kind);
}

static recap_status_t real_group_start(void) {
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.group_start(), "ncclGroupStart");
}

static recap_status_t real_group_end(void) {
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.group_end(), "ncclGroupEnd");
}

static recap_status_t real_mem_alloc(void **ptr, size_t bytes) {
  RECAP__ARG(ptr, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.mem_alloc(ptr, bytes), "ncclMemAlloc");
}

static recap_status_t real_mem_free(void *ptr) {
  if (!ptr) return RECAP_SUCCESS;
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.mem_free(ptr), "ncclMemFree");
}

static recap_status_t real_comm_register(recap__nccl_comm_t comm, void *buffer, size_t bytes,
                                         void **handle) {
  RECAP__ARG(handle, "ncclCommRegister: handle is NULL");
  *handle = NULL;
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.comm_register(comm, buffer, bytes, handle), "ncclCommRegister");
}

static recap_status_t real_comm_deregister(recap__nccl_comm_t comm, void *handle) {
  LOADED_OR_RETURN();
  return nccl_status(loaded.fns.comm_deregister(comm, handle), "ncclCommDeregister");
}

#else /* !RECAP_HAVE_NCCL_H */

/* Built without NCCL's headers: every call says so, and how to build with them. */
static recap_status_t without_headers(void) {
  return recap__error(
      RECAP_ERROR_NOT_SUPPORTED,
      "NCCL: recap was built without NCCL's headers (nccl.h was not found when it was "
      "configured); install them (pip install nvidia-nccl-cu13, or the libnccl-dev package) or "
      "point the build at them with -DNCCL_ROOT=<dir with include/nccl.h> or "
      "-DNCCL_INCLUDE_DIR=<dir>, then rebuild recap");
}

static recap_status_t real_load(int *version) {
  if (version) *version = 0;
  return without_headers();
}

static recap_status_t real_comm_info(recap__nccl_comm_t comm, int *rank, int *nranks, int *device) {
  (void)comm, (void)rank, (void)nranks, (void)device;
  return without_headers();
}

static recap_status_t real_collective(const recap__coll_t *c, recap_stream_t stream) {
  (void)c, (void)stream;
  return without_headers();
}

static recap_status_t real_group_start(void) { return without_headers(); }
static recap_status_t real_group_end(void) { return without_headers(); }

static recap_status_t real_mem_alloc(void **ptr, size_t bytes) {
  (void)bytes;
  if (ptr) *ptr = NULL;
  return without_headers();
}

static recap_status_t real_mem_free(void *ptr) {
  (void)ptr;
  return without_headers();
}

static recap_status_t real_comm_register(recap__nccl_comm_t comm, void *buffer, size_t bytes,
                                         void **handle) {
  (void)comm, (void)buffer, (void)bytes;
  if (handle) *handle = NULL;
  return without_headers();
}

static recap_status_t real_comm_deregister(recap__nccl_comm_t comm, void *handle) {
  (void)comm, (void)handle;
  return without_headers();
}

#endif /* RECAP_HAVE_NCCL_H */

static const recap__nccl_ops_t real_ops = {
    .name = "nccl",
    .load = real_load,
    .comm_info = real_comm_info,
    .collective = real_collective,
    .group_start = real_group_start,
    .group_end = real_group_end,
    .mem_alloc = real_mem_alloc,
    .mem_free = real_mem_free,
    .comm_register = real_comm_register,
    .comm_deregister = real_comm_deregister,
};
