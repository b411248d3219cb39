/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_nccl.c — the CPU fake's NCCL behind the NCCL seam (nccl_seam.h), for tests: cliques of
 * communicators whose ranks are threads, collectives that rendezvous and compute on the fake's
 * host memory, eagerly or as graph nodes, and the failures NCCL turns into hangs (mismatched
 * collectives, a communicator used on two streams at once) turned into messages. fake.h gives
 * the semantics tests rely on.
 *
 * Rendezvous: each rank numbers its collectives in the order it runs them. A round, per clique
 * and number, holds each arrived rank's call; the last to arrive checks that they agree, does
 * the arithmetic for every rank and marks the round done; the others wait on one condition
 * variable (with the timeout) and leave; the last to leave frees the round. Everything here is
 * guarded by one mutex of its own, never held together with the fake device's lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake/fake_state.h"

enum { MAX_RANKS = 64, DEFAULT_VERSION = 23203, DEFAULT_TIMEOUT_MS = 5000, ALIGN = 512 };
#define COMM_MAGIC 0x6e63636cu /* "nccl" */

/* NCCL's numbering (nccl.h): the dtypes and reduction operations. */
enum {
  DT_INT8,
  DT_UINT8,
  DT_INT32,
  DT_UINT32,
  DT_INT64,
  DT_UINT64,
  DT_FLOAT16,
  DT_FLOAT32,
  DT_FLOAT64,
  DT_BFLOAT16,
  DT_FP8_E4M3,
  DT_FP8_E5M2,
  DT_COUNT
};
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_AVG, OP_COUNT };

typedef struct fake_round {
  uint64_t seq;
  int arrived, departed;
  bool done;
  recap_status_t status;
  char message[400];
  recap__coll_t *calls; /* per rank */
  bool *present;
  struct fake_round *next;
} fake_round_t;

typedef struct fake_msg {
  void *data;
  size_t count;
  int dtype;
  struct fake_msg *next;
} fake_msg_t;

typedef struct fake_clique fake_clique_t;

struct ncclComm {
  uint32_t magic;
  fake_clique_t *clique;
  int rank;
  uint64_t seq;               /* collectives this rank has started */
  int busy;                   /* runs under way (waiting) */
  recap_stream_t busy_stream; /* the stream of the first of them */
  uint64_t busy_seq;
};

struct fake_clique {
  int nranks;
  struct ncclComm *ranks;
  fake_round_t *rounds;
  fake_msg_t **mail; /* nranks * nranks FIFOs, [from * nranks + to] */
  fake_clique_t *next;
};

typedef struct fake_alloc {
  void *ptr;
  size_t bytes;
  int device; /* the device whose memory it takes (recap__fake_memory_take) */
  struct fake_alloc *next;
} fake_alloc_t;

typedef struct fake_reg {
  struct ncclComm *comm;
  void *buffer;
  size_t bytes;
  struct fake_reg *next;
} fake_reg_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  fake_clique_t *cliques;
  fake_alloc_t *allocs;
  fake_reg_t *regs;
  int version;
  int timeout_ms;
  recap__fake_nccl_counters_t counters;
} nccl = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .changed = PTHREAD_COND_INITIALIZER,
          .version = DEFAULT_VERSION,
          .timeout_ms = DEFAULT_TIMEOUT_MS};

static _Thread_local int tl_group_depth;

/* ---- names ------------------------------------------------------------------------------ */

static const char *const kind_names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                         "broadcast",  "reduce",     "send",
                                         "recv"};
static const char *const call_names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                         "ncclBroadcast", "ncclReduce",    "ncclSend",
                                         "ncclRecv"};
static const char *const kernel_names[] = {"ncclDevKernel_AllReduce",     "ncclDevKernel_AllGather",
                                           "ncclDevKernel_ReduceScatter", "ncclDevKernel_Broadcast",
                                           "ncclDevKernel_Reduce",        "ncclDevKernel_SendRecv",
                                           "ncclDevKernel_SendRecv"};
static const char *const dtype_names[] = {"int8",    "uint8",    "int32",      "uint32",
                                          "int64",   "uint64",   "float16",    "float32",
                                          "float64", "bfloat16", "float8e4m3", "float8e5m2"};
static const char *const op_names[] = {"sum", "prod", "max", "min", "avg"};

static size_t dtype_size(int dtype) {
  static const size_t sizes[DT_COUNT] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < DT_COUNT ? sizes[dtype] : 0;
}

static bool reduces(recap__coll_kind_t kind) {
  return kind == RECAP__COLL_ALL_REDUCE || kind == RECAP__COLL_REDUCE_SCATTER ||
         kind == RECAP__COLL_REDUCE;
}

/* "all_reduce of 1024 float32 sum", "broadcast of 16 int32 from root 0", ... */
static void describe(char *out, size_t cap, const recap__coll_t *c) {
  const char *dt = c->dtype >= 0 && c->dtype < DT_COUNT ? dtype_names[c->dtype] : "?";
  int n = snprintf(out, cap, "%s of %zu %s", kind_names[c->kind], c->count, dt);
  if (n < 0 || (size_t)n >= cap) return;
  if (reduces(c->kind))
    n += snprintf(out + n, cap - (size_t)n, " %s",
                  c->op >= 0 && c->op < OP_COUNT ? op_names[c->op] : "?");
  if ((size_t)n >= cap) return;
  if (c->kind == RECAP__COLL_BROADCAST || c->kind == RECAP__COLL_REDUCE)
    snprintf(out + n, cap - (size_t)n, " %s root %d",
             c->kind == RECAP__COLL_BROADCAST ? "from" : "to", c->root);
}

/* ---- arithmetic ------------------------------------------------------------------------- */

#define FAKE_ACCUMULATE(T)                            \
  {                                                   \
    T *a = acc;                                       \
    const T *b = in;                                  \
    for (size_t i = 0; i < count; i++) {              \
      switch (op) {                                   \
        case OP_SUM:                                  \
        case OP_AVG: a[i] = (T)(a[i] + b[i]); break;  \
        case OP_PROD: a[i] = (T)(a[i] * b[i]); break; \
        case OP_MAX:                                  \
          if (b[i] > a[i]) a[i] = b[i];               \
          break;                                      \
        default:                                      \
          if (b[i] < a[i]) a[i] = b[i];               \
          break;                                      \
      }                                               \
    }                                                 \
  }                                                   \
  break

/* acc[i] = acc[i] op in[i] for count elements of dtype (one the fake reduces). */
static void accumulate(void *acc, const void *in, size_t count, int dtype, int op) {
  switch (dtype) {
    case DT_INT8: FAKE_ACCUMULATE(int8_t);
    case DT_UINT8: FAKE_ACCUMULATE(uint8_t);
    case DT_INT32: FAKE_ACCUMULATE(int32_t);
    case DT_UINT32: FAKE_ACCUMULATE(uint32_t);
    case DT_INT64: FAKE_ACCUMULATE(int64_t);
    case DT_UINT64: FAKE_ACCUMULATE(uint64_t);
    case DT_FLOAT32: FAKE_ACCUMULATE(float);
    case DT_FLOAT64: FAKE_ACCUMULATE(double);
    default: break;
  }
}

#define FAKE_DIVIDE(T)                                               \
  {                                                                  \
    T *a = acc;                                                      \
    for (size_t i = 0; i < count; i++) a[i] = (T)(a[i] / (T)nranks); \
  }                                                                  \
  break

static void divide(void *acc, size_t count, int dtype, int nranks) {
  switch (dtype) {
    case DT_INT8: FAKE_DIVIDE(int8_t);
    case DT_UINT8: FAKE_DIVIDE(uint8_t);
    case DT_INT32: FAKE_DIVIDE(int32_t);
    case DT_UINT32: FAKE_DIVIDE(uint32_t);
    case DT_INT64: FAKE_DIVIDE(int64_t);
    case DT_UINT64: FAKE_DIVIDE(uint64_t);
    case DT_FLOAT32: FAKE_DIVIDE(float);
    case DT_FLOAT64: FAKE_DIVIDE(double);
    default: break;
  }
}

/* The reduction over the ranks, in rank order, of `count` elements of each rank's send buffer
 * starting at element `first`, into a new buffer; NULL when out of host memory. */
static void *reduce_all(const recap__coll_t *calls, int nranks, size_t count) {
  const recap__coll_t *c0 = &calls[0];
  size_t bytes = count * dtype_size(c0->dtype);
  void *acc = malloc(bytes ? bytes : 1);
  if (!acc) return NULL;
  memcpy(acc, c0->send, bytes);
  for (int r = 1; r < nranks; r++) accumulate(acc, calls[r].send, count, c0->dtype, c0->op);
  if (c0->op == OP_AVG) divide(acc, count, c0->dtype, nranks);
  return acc;
}

/* Every rank of the round has arrived and agrees: compute every rank's result. The sends are
 * read in full before any receive is written, so buffers used in place work. */
static recap_status_t compute(fake_round_t *r, int nranks) {
  const recap__coll_t *c0 = &r->calls[0];
  size_t esize = dtype_size(c0->dtype);
  size_t bytes = c0->count * esize;
  void *tmp = NULL;
  switch (c0->kind) {
    case RECAP__COLL_ALL_REDUCE:
    case RECAP__COLL_REDUCE: tmp = reduce_all(r->calls, nranks, c0->count); break;
    case RECAP__COLL_REDUCE_SCATTER:
      tmp = reduce_all(r->calls, nranks, c0->count * (size_t)nranks);
      break;
    case RECAP__COLL_ALL_GATHER:
      if ((tmp = malloc(bytes * (size_t)nranks + 1)))
        for (int i = 0; i < nranks; i++)
          memcpy((char *)tmp + (size_t)i * bytes, r->calls[i].send, bytes);
      break;
    case RECAP__COLL_BROADCAST:
      if ((tmp = malloc(bytes + 1))) memcpy(tmp, r->calls[c0->root].send, bytes);
      break;
    default: break;
  }
  if (!tmp) {
    snprintf(r->message, sizeof r->message,
             "fake NCCL: no host memory for the result of collective %llu",
             (unsigned long long)r->seq);
    return RECAP_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < nranks; i++) {
    void *recv = r->calls[i].recv;
    switch (c0->kind) {
      case RECAP__COLL_ALL_REDUCE:
      case RECAP__COLL_BROADCAST: memmove(recv, tmp, bytes); break;
      case RECAP__COLL_REDUCE:
        if (i == c0->root) memmove(recv, tmp, bytes);
        break;
      case RECAP__COLL_REDUCE_SCATTER: memmove(recv, (char *)tmp + (size_t)i * bytes, bytes); break;
      case RECAP__COLL_ALL_GATHER: memmove(recv, tmp, bytes * (size_t)nranks); break;
      default: break;
    }
  }
  free(tmp);
  return RECAP_SUCCESS;
}

/* ---- lookups (with nccl.lock held) ------------------------------------------------------ */

static struct ncclComm *comm_find(recap__nccl_comm_t comm) {
  for (fake_clique_t *q = nccl.cliques; q; q = q->next)
    if (comm >= q->ranks && comm < q->ranks + q->nranks) return comm;
  return NULL;
}

static void deadline_in(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* ---- running one call (the eager call, or a node at a launch) --------------------------- */

static fake_round_t *round_get(fake_clique_t *q, uint64_t seq) {
  for (fake_round_t *r = q->rounds; r; r = r->next)
    if (r->seq == seq) return r;
  fake_round_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->calls = calloc((size_t)q->nranks, sizeof *r->calls);
  r->present = calloc((size_t)q->nranks, sizeof *r->present);
  if (!r->calls || !r->present) {
    free(r->calls);
    free(r->present);
    free(r);
    return NULL;
  }
  r->seq = seq;
  r->next = q->rounds;
  q->rounds = r;
  return r;
}

static void round_free(fake_clique_t *q, fake_round_t *r) {
  fake_round_t **link = &q->rounds;
  while (*link != r) link = &(*link)->next;
  *link = r->next;
  free(r->calls);
  free(r->present);
  free(r);
}

/* The last rank arrived: check that every rank's call agrees with rank 0's, then compute. */
static void round_complete(fake_round_t *r, int nranks) {
  const recap__coll_t *c0 = &r->calls[0];
  for (int i = 1; i < nranks; i++) {
    const recap__coll_t *ci = &r->calls[i];
    bool same = ci->kind == c0->kind && ci->count == c0->count && ci->dtype == c0->dtype &&
                (!reduces(c0->kind) || ci->op == c0->op) &&
                ((c0->kind != RECAP__COLL_BROADCAST && c0->kind != RECAP__COLL_REDUCE) ||
                 ci->root == c0->root);
    if (!same) {
      char a[128], b[128];
      describe(a, sizeof a, c0);
      describe(b, sizeof b, ci);
      snprintf(r->message, sizeof r->message,
               "fake NCCL: collective %llu differs across ranks: rank 0's is %s; rank %d's is "
               "%s; every rank must issue the same collectives in the same order",
               (unsigned long long)r->seq, a, i, b);
      r->status = RECAP_ERROR_INVALID_USAGE;
      r->done = true;
      return;
    }
  }
  r->status = compute(r, nranks);
  r->done = true;
}

static recap_status_t run_collective(struct ncclComm *comm, const recap__coll_t *c, char *message,
                                     size_t cap) {
  fake_clique_t *q = comm->clique;
  uint64_t seq = comm->seq++;
  fake_round_t *r = round_get(q, seq);
  if (!r) {
    snprintf(message, cap, "fake NCCL: no host memory for collective %llu",
             (unsigned long long)seq);
    return RECAP_ERROR_OUT_OF_MEMORY;
  }
  r->calls[comm->rank] = *c;
  r->present[comm->rank] = true;
  comm->busy_seq = seq;
  if (++r->arrived == q->nranks) {
    round_complete(r, q->nranks);
    pthread_cond_broadcast(&nccl.changed);
  }
  struct timespec deadline;
  deadline_in(&deadline, nccl.timeout_ms);
  nccl.counters.waiting++;
  while (!r->done) {
    if (pthread_cond_timedwait(&nccl.changed, &nccl.lock, &deadline) == ETIMEDOUT && !r->done) {
      char what[128], missing[256] = "";
      describe(what, sizeof what, c);
      size_t used = 0;
      int absent = 0;
      for (int i = 0; i < q->nranks && used < sizeof missing; i++)
        if (!r->present[i]) {
          absent++;
          used +=
              (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", i);
        }
      snprintf(message, cap,
               "fake NCCL: rank %d waited %d ms for collective %llu (%s); %s %s never reached "
               "it (a rank that issues fewer collectives, or others, hangs NCCL)",
               comm->rank, nccl.timeout_ms, (unsigned long long)seq, what,
               absent == 1 ? "rank" : "ranks", missing);
      r->present[comm->rank] = false;
      if (--r->arrived == 0) round_free(q, r);
      nccl.counters.waiting--;
      return RECAP_ERROR_INTERNAL;
    }
  }
  nccl.counters.waiting--;
  recap_status_t st = r->status;
  if (st != RECAP_SUCCESS) snprintf(message, cap, "%s", r->message);
  if (++r->departed == q->nranks) round_free(q, r);
  return st;
}

static recap_status_t run_send(struct ncclComm *comm, const recap__coll_t *c, char *message,
                               size_t cap) {
  fake_clique_t *q = comm->clique;
  size_t bytes = c->count * dtype_size(c->dtype);
  fake_msg_t *m = calloc(1, sizeof *m);
  void *data = malloc(bytes ? bytes : 1);
  if (!m || !data) {
    free(m);
    free(data);
    snprintf(message, cap, "fake NCCL: no host memory for a send of %zu bytes", bytes);
    return RECAP_ERROR_OUT_OF_MEMORY;
  }
  memcpy(data, c->send, bytes);
  m->data = data;
  m->count = c->count;
  m->dtype = c->dtype;
  fake_msg_t **tail = &q->mail[comm->rank * q->nranks + c->peer];
  while (*tail) tail = &(*tail)->next;
  *tail = m;
  nccl.counters.sends++;
  pthread_cond_broadcast(&nccl.changed);
  return RECAP_SUCCESS;
}

static recap_status_t run_recv(struct ncclComm *comm, const recap__coll_t *c, char *message,
                               size_t cap) {
  fake_clique_t *q = comm->clique;
  fake_msg_t **head = &q->mail[c->peer * q->nranks + comm->rank];
  struct timespec deadline;
  deadline_in(&deadline, nccl.timeout_ms);
  nccl.counters.waiting++;
  while (!*head) {
    if (pthread_cond_timedwait(&nccl.changed, &nccl.lock, &deadline) == ETIMEDOUT && !*head) {
      nccl.counters.waiting--;
      snprintf(message, cap,
               "fake NCCL: rank %d waited %d ms for a message from rank %d (recv of %zu %s); "
               "rank %d never sent it",
               comm->rank, nccl.timeout_ms, c->peer, c->count, dtype_names[c->dtype], c->peer);
      return RECAP_ERROR_INTERNAL;
    }
  }
  nccl.counters.waiting--;
  fake_msg_t *m = *head;
  *head = m->next;
  recap_status_t st = RECAP_SUCCESS;
  if (m->count != c->count || m->dtype != c->dtype) {
    snprintf(message, cap,
             "fake NCCL: rank %d's send to rank %d is %zu %s; rank %d's recv from rank %d is %zu "
             "%s; a send and its recv must agree",
             c->peer, comm->rank, m->count, dtype_names[m->dtype], comm->rank, c->peer, c->count,
             dtype_names[c->dtype]);
    st = RECAP_ERROR_INVALID_USAGE;
  } else {
    memcpy(c->recv, m->data, c->count * dtype_size(c->dtype));
    nccl.counters.recvs++;
  }
  free(m->data);
  free(m);
  return st;
}

/* Run c on stream now, in the calling thread, without the fake device's lock. */
static recap_status_t run(const recap__coll_t *c, recap_stream_t stream, char *message,
                          size_t cap) {
  pthread_mutex_lock(&nccl.lock);
  struct ncclComm *comm = comm_find(c->comm);
  recap_status_t st = RECAP_SUCCESS;
  if (!comm) {
    snprintf(message, cap,
             "fake NCCL: communicator %p is not a live fake communicator (a reset freed it?)",
             (void *)c->comm);
    st = RECAP_ERROR_INVALID_ARGUMENT;
  } else if (comm->busy > 0 && comm->busy_stream != stream) {
    char what[128];
    describe(what, sizeof what, c);
    snprintf(message, cap,
             "fake NCCL: concurrent use of a communicator on two streams: rank %d's "
             "communicator %p began %s on stream %p while its collective %llu still runs on "
             "stream %p; NCCL would deadlock (vllm #52504): serialise the work that shares it",
             comm->rank, (void *)comm, what, (void *)stream, (unsigned long long)comm->busy_seq,
             (void *)comm->busy_stream);
    st = RECAP_ERROR_INVALID_USAGE;
  } else {
    if (comm->busy++ == 0) comm->busy_stream = stream;
    switch (c->kind) {
      case RECAP__COLL_SEND: st = run_send(comm, c, message, cap); break;
      case RECAP__COLL_RECV: st = run_recv(comm, c, message, cap); break;
      default:
        st = run_collective(comm, c, message, cap);
        if (st == RECAP_SUCCESS) nccl.counters.collectives++;
        break;
    }
    if (--comm->busy == 0) comm->busy_stream = NULL;
  }
  if (st != RECAP_SUCCESS) nccl.counters.failures++;
  pthread_mutex_unlock(&nccl.lock);
  return st;
}

/* A node's argument words (fake.h): send, recv, count, kind | dtype << 8 | op << 16, peer + 1 |
 * (root + 1) << 32, comm. */
enum { WORDS = 6 };

static void pack(const recap__coll_t *c, const void *words[WORDS]) {
  words[0] = c->send;
  words[1] = c->recv;
  words[2] = (const void *)(uintptr_t)c->count;
  words[3] = (const void *)(uintptr_t)((unsigned)c->kind | (unsigned)c->dtype << 8 |
                                       (unsigned)c->op << 16);
  words[4] = (const void *)(uintptr_t)((uint64_t)(uint32_t)(c->peer + 1) |
                                       (uint64_t)(uint32_t)(c->root + 1) << 32);
  words[5] = (const void *)c->comm;
}

static void unpack(void *const *words, recap__coll_t *c) {
  uintptr_t meta = (uintptr_t)words[3];
  uint64_t ends = (uint64_t)(uintptr_t)words[4];
  c->send = words[0];
  c->recv = words[1];
  c->count = (size_t)(uintptr_t)words[2];
  c->kind = (recap__coll_kind_t)(meta & 0xff);
  c->dtype = (int)((meta >> 8) & 0xff);
  c->op = (int)((meta >> 16) & 0xff);
  c->peer = (int)(uint32_t)(ends & 0xffffffffu) - 1;
  c->root = (int)(uint32_t)(ends >> 32) - 1;
  c->comm = (recap__nccl_comm_t)words[5];
}

static recap_status_t run_node(void *const *words, size_t n, char *message, size_t cap) {
  if (n != WORDS) {
    snprintf(message, cap, "fake NCCL: a collective node with %zu argument words, not %d", n,
             (int)WORDS);
    return RECAP_ERROR_INTERNAL;
  }
  recap__coll_t c;
  unpack(words, &c);
  return run(&c, recap__fake_tl_launch_stream, message, cap);
}

/* ---- fault injection -------------------------------------------------------------------- */

/* Count a call of kind; true (with its number in *nth) when an armed fault fails it. */
static bool injected(recap__fake_fault_t kind, uint64_t *nth) {
  pthread_mutex_lock(&recap__fake.lock);
  bool fail = recap__fake_count_call(kind);
  *nth = recap__fake.calls[kind];
  pthread_mutex_unlock(&recap__fake.lock);
  return fail;
}

/* As injected; when the call fails, *error is the failure: "<failure>: fault injected by the
 * fake NCCL into <what> call N" with status code. */
static bool injected_error(recap__fake_fault_t kind, recap_status_t code, const char *failure,
                           const char *what, recap_status_t *error) {
  uint64_t nth;
  if (!injected(kind, &nth)) return false;
  *error = recap__error(code, "%s: fault injected by the fake NCCL into %s call %llu", failure,
                        what, (unsigned long long)nth);
  return true;
}

/* ---- the table -------------------------------------------------------------------------- */

static recap_status_t fake_load(int *version) {
  RECAP__ARG(version, "recap__nccl load: version is NULL");
  *version = 0;
  recap_status_t fault;
  if (injected_error(RECAP__FAKE_FAULT_NCCL_LOAD, RECAP_ERROR_NOT_FOUND,
                     "NCCL: could not load libnccl.so.2 through the dynamic loader's search path "
                     "(libnccl.so.2)",
                     "load", &fault))
    return fault;
  pthread_mutex_lock(&nccl.lock);
  *version = nccl.version;
  nccl.counters.loads++;
  pthread_mutex_unlock(&nccl.lock);
  return RECAP_SUCCESS;
}

static recap_status_t fake_comm_info(recap__nccl_comm_t comm, int *rank, int *nranks, int *device) {
  pthread_mutex_lock(&nccl.lock);
  struct ncclComm *c = comm_find(comm);
  int r = c ? c->rank : 0, n = c ? c->clique->nranks : 0;
  pthread_mutex_unlock(&nccl.lock);
  if (!c)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "ncclCommUserRank: invalid argument (ncclInvalidArgument): comm %p is not "
                        "a live fake communicator",
                        (void *)comm);
  if (rank) *rank = r;
  if (nranks) *nranks = n;
  if (device) {
    pthread_mutex_lock(&recap__fake.lock);
    int count = recap__fake.device_count;
    pthread_mutex_unlock(&recap__fake.lock);
    *device = count > 0 ? r % count : 0;
  }
  return RECAP_SUCCESS;
}

/* The checks NCCL makes of the arguments before it enqueues anything. */
static recap_status_t check(const recap__coll_t *c, const char *call) {
  pthread_mutex_lock(&nccl.lock);
  struct ncclComm *comm = comm_find(c->comm);
  int nranks = comm ? comm->clique->nranks : 0;
  pthread_mutex_unlock(&nccl.lock);
  if (!comm)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): comm %p is not a live fake "
                        "communicator",
                        call, (void *)c->comm);
  if (dtype_size(c->dtype) == 0)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): dtype %d is not an "
                        "ncclDataType_t",
                        call, c->dtype);
  if (reduces(c->kind) && (c->op < 0 || c->op >= OP_COUNT))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): op %d is not an ncclRedOp_t",
                        call, c->op);
  if (reduces(c->kind) && (c->dtype == DT_FLOAT16 || c->dtype >= DT_BFLOAT16))
    return recap__error(RECAP_ERROR_NOT_SUPPORTED,
                        "%s: the fake NCCL does not reduce %s (it reduces integers, float32 and "
                        "float64)",
                        call, dtype_names[c->dtype]);
  bool rooted = c->kind == RECAP__COLL_BROADCAST || c->kind == RECAP__COLL_REDUCE;
  bool p2p = c->kind == RECAP__COLL_SEND || c->kind == RECAP__COLL_RECV;
  if (rooted && (c->root < 0 || c->root >= nranks))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): root %d is not a rank of "
                        "the communicator's %d",
                        call, c->root, nranks);
  if (p2p && (c->peer < 0 || c->peer >= nranks))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): peer %d is not a rank of "
                        "the communicator's %d",
                        call, c->peer, nranks);
  bool needs_send = c->kind != RECAP__COLL_RECV, needs_recv = c->kind != RECAP__COLL_SEND;
  if (c->count > 0 && ((needs_send && !c->send) || (needs_recv && !c->recv)))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s: invalid argument (ncclInvalidArgument): a buffer is NULL with count "
                        "%zu",
                        call, c->count);
  return RECAP_SUCCESS;
}

static recap_status_t fake_collective(const recap__coll_t *c, recap_stream_t stream) {
  RECAP__ARG(c, "recap__nccl collective: c is NULL");
  RECAP__ARG((int)c->kind >= 0 && c->kind <= RECAP__COLL_RECV,
             "recap__nccl collective: kind %d is not a collective", (int)c->kind);
  const char *call = call_names[c->kind];
  recap_status_t st = check(c, call);
  if (st != RECAP_SUCCESS) return st;
  fake_failure_t f = {0};
  bool eager = false;
  pthread_mutex_lock(&recap__fake.lock);
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_NCCL_COLLECTIVE);
  fake_stream_t *s = recap__fake_stream_of(stream);
  if (inject) {
    recap__fake_note(&f, RECAP_ERROR_INTERNAL,
                     "%s: unhandled system error (ncclSystemError): fault injected by the fake "
                     "NCCL into collective call %llu",
                     call,
                     (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_NCCL_COLLECTIVE]);
  } else if (!s) {
    recap__fake_note_bad_stream(&f, call, stream);
  } else if (recap__fake_enqueue(&f, s, call, RECAP_NODE_KERNEL, kernel_names[c->kind], 1,
                                 &eager) == RECAP_SUCCESS &&
             !eager) {
    /* Captured: a node that runs the collective at each launch. */
    fake_node_t *node = &s->capture->graph->nodes.v[s->tail - 1];
    const void *words[WORDS];
    pack(c, words);
    if (!(node->args = malloc(sizeof words))) {
      recap__fake_note(&f, RECAP_ERROR_CUDA,
                       "%s: out of memory (cudaErrorMemoryAllocation): no host memory for the "
                       "arguments of a node of capture %llu",
                       call, (unsigned long long)s->capture->id);
    } else {
      memcpy(node->args, words, sizeof words);
      node->arg_count = WORDS;
      node->unlocked = run_node;
    }
  }
  st = recap__fake_unlock_and_report(&f);
  if (st != RECAP_SUCCESS || !eager) return st;
  char message[400] = "";
  st = run(c, stream, message, sizeof message);
  if (st != RECAP_SUCCESS) return recap__error(st, "%s: %s", call, message);
  return RECAP_SUCCESS;
}

static recap_status_t fake_group_start(void) {
  tl_group_depth++;
  pthread_mutex_lock(&nccl.lock);
  nccl.counters.group_starts++;
  pthread_mutex_unlock(&nccl.lock);
  return RECAP_SUCCESS;
}

static recap_status_t fake_group_end(void) {
  if (tl_group_depth == 0)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "ncclGroupEnd: invalid usage (ncclInvalidUsage): no ncclGroupStart of "
                        "this thread is open");
  tl_group_depth--;
  pthread_mutex_lock(&nccl.lock);
  nccl.counters.group_ends++;
  pthread_mutex_unlock(&nccl.lock);
  return RECAP_SUCCESS;
}

/* One resource more (sign 1) or one less (sign -1): its live count, their bytes, and the count
 * of the calls that made or ended one. Lock held. */
static void tally(int64_t *live, size_t *live_bytes, uint64_t *calls, int sign, size_t bytes) {
  *live += sign;
  if (sign > 0)
    *live_bytes += bytes;
  else
    *live_bytes -= bytes;
  (*calls)++;
}

static recap_status_t fake_mem_alloc(void **ptr, size_t bytes) {
  RECAP__ARG(ptr, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  uint64_t nth;
  if (injected(RECAP__FAKE_FAULT_NCCL_MEM_ALLOC, &nth))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "ncclMemAlloc: unhandled system error (ncclSystemError): fault injected "
                        "by the fake NCCL into mem_alloc call %llu (%zu bytes)",
                        (unsigned long long)nth, bytes);
  /* ncclMemAlloc takes device memory, so the fake device's capacity bounds it as it bounds
   * cudaMalloc, and mem_get_info shows it. */
  int device;
  size_t free_bytes, total;
  if (!recap__fake_memory_take(bytes, &device, &free_bytes, &total))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "ncclMemAlloc: unhandled system error (ncclSystemError): out of memory: "
                        "tried to allocate %zu bytes on fake device %d, which has %zu bytes free "
                        "of %zu",
                        bytes, device, free_bytes, total);
  size_t rounded = bytes > SIZE_MAX - (ALIGN - 1) ? 0 : (bytes + ALIGN - 1) / ALIGN * ALIGN;
  fake_alloc_t *a = malloc(sizeof *a);
  void *p = bytes && !rounded ? NULL : aligned_alloc(ALIGN, rounded ? rounded : ALIGN);
  if (!a || !p) {
    free(a);
    free(p);
    recap__fake_memory_give(device, bytes);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "ncclMemAlloc: unhandled system error (ncclSystemError): no host memory "
                        "for %zu bytes in the fake NCCL",
                        bytes);
  }
  a->ptr = p;
  a->bytes = bytes;
  a->device = device;
  pthread_mutex_lock(&nccl.lock);
  a->next = nccl.allocs;
  nccl.allocs = a;
  tally(&nccl.counters.mem_live, &nccl.counters.mem_bytes, &nccl.counters.mem_allocs, 1, bytes);
  pthread_mutex_unlock(&nccl.lock);
  *ptr = p;
  return RECAP_SUCCESS;
}

static recap_status_t fake_mem_free(void *ptr) {
  if (!ptr) return RECAP_SUCCESS;
  pthread_mutex_lock(&nccl.lock);
  fake_alloc_t **link = &nccl.allocs;
  while (*link && (*link)->ptr != ptr) link = &(*link)->next;
  fake_alloc_t *a = *link;
  if (a) {
    *link = a->next;
    tally(&nccl.counters.mem_live, &nccl.counters.mem_bytes, &nccl.counters.mem_frees, -1,
          a->bytes);
  }
  pthread_mutex_unlock(&nccl.lock);
  if (!a)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "ncclMemFree: invalid argument (ncclInvalidArgument): %p was not handed "
                        "out by ncclMemAlloc of the fake NCCL (or was freed already)",
                        ptr);
  recap__fake_memory_give(a->device, a->bytes);
  free(a->ptr);
  free(a);
  return RECAP_SUCCESS;
}

static recap_status_t fake_comm_register(recap__nccl_comm_t comm, void *buffer, size_t bytes,
                                         void **handle) {
  RECAP__ARG(handle, "ncclCommRegister: handle is NULL");
  *handle = NULL;
  recap_status_t fault;
  if (injected_error(RECAP__FAKE_FAULT_NCCL_REGISTER, RECAP_ERROR_INTERNAL,
                     "ncclCommRegister: unhandled system error (ncclSystemError)", "register",
                     &fault))
    return fault;
  RECAP__ARG(buffer && bytes > 0,
             "ncclCommRegister: invalid argument (ncclInvalidArgument): buffer %p of %zu bytes",
             buffer, bytes);
  fake_reg_t *g = malloc(sizeof *g);
  if (!g)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "ncclCommRegister: no host memory for a registration in the fake NCCL");
  pthread_mutex_lock(&nccl.lock);
  struct ncclComm *c = comm_find(comm);
  if (c) {
    g->comm = c;
    g->buffer = buffer;
    g->bytes = bytes;
    g->next = nccl.regs;
    nccl.regs = g;
    tally(&nccl.counters.registered_live, &nccl.counters.registered_bytes, &nccl.counters.registers,
          1, bytes);
  }
  pthread_mutex_unlock(&nccl.lock);
  if (!c) {
    free(g);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "ncclCommRegister: invalid argument (ncclInvalidArgument): comm %p is not "
                        "a live fake communicator",
                        (void *)comm);
  }
  *handle = g;
  return RECAP_SUCCESS;
}

static recap_status_t fake_comm_deregister(recap__nccl_comm_t comm, void *handle) {
  pthread_mutex_lock(&nccl.lock);
  fake_reg_t **link = &nccl.regs;
  while (*link && (void *)*link != handle) link = &(*link)->next;
  fake_reg_t *g = *link;
  bool ok = g && g->comm == comm;
  if (ok) {
    *link = g->next;
    tally(&nccl.counters.registered_live, &nccl.counters.registered_bytes,
          &nccl.counters.deregisters, -1, g->bytes);
  }
  pthread_mutex_unlock(&nccl.lock);
  if (!ok)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "ncclCommDeregister: invalid argument (ncclInvalidArgument): handle %p is "
                        "not a live registration of comm %p in the fake NCCL",
                        handle, (void *)comm);
  free(g);
  return RECAP_SUCCESS;
}

const recap__nccl_ops_t recap__fake_nccl_ops = {
    .name = "fake",
    .load = fake_load,
    .comm_info = fake_comm_info,
    .collective = fake_collective,
    .group_start = fake_group_start,
    .group_end = fake_group_end,
    .mem_alloc = fake_mem_alloc,
    .mem_free = fake_mem_free,
    .comm_register = fake_comm_register,
    .comm_deregister = fake_comm_deregister,
};

/* ---- test controls ---------------------------------------------------------------------- */

recap_status_t recap__fake_nccl_comms(int nranks, recap__nccl_comm_t comms[]) {
  RECAP__ARG(comms, "recap__fake_nccl_comms: comms is NULL");
  RECAP__ARG(nranks >= 1 && nranks <= MAX_RANKS,
             "recap__fake_nccl_comms: nranks %d is not between 1 and %d", nranks, (int)MAX_RANKS);
  fake_clique_t *q = calloc(1, sizeof *q);
  if (q) {
    q->ranks = calloc((size_t)nranks, sizeof *q->ranks);
    q->mail = calloc((size_t)nranks * (size_t)nranks, sizeof *q->mail);
  }
  if (!q || !q->ranks || !q->mail) {
    if (q) free(q->ranks), free(q->mail);
    free(q);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap__fake_nccl_comms: no host memory for %d ranks", nranks);
  }
  q->nranks = nranks;
  for (int i = 0; i < nranks; i++) {
    q->ranks[i].magic = COMM_MAGIC;
    q->ranks[i].clique = q;
    q->ranks[i].rank = i;
    comms[i] = &q->ranks[i];
  }
  pthread_mutex_lock(&nccl.lock);
  q->next = nccl.cliques;
  nccl.cliques = q;
  pthread_mutex_unlock(&nccl.lock);
  return RECAP_SUCCESS;
}

void recap__fake_nccl_version(int version) {
  pthread_mutex_lock(&nccl.lock);
  nccl.version = version > 0 ? version : DEFAULT_VERSION;
  pthread_mutex_unlock(&nccl.lock);
}

void recap__fake_nccl_timeout_ms(int ms) {
  pthread_mutex_lock(&nccl.lock);
  nccl.timeout_ms = ms > 0 ? ms : DEFAULT_TIMEOUT_MS;
  pthread_mutex_unlock(&nccl.lock);
}

recap__fake_nccl_counters_t recap__fake_nccl_now(void) {
  pthread_mutex_lock(&nccl.lock);
  recap__fake_nccl_counters_t c = nccl.counters;
  pthread_mutex_unlock(&nccl.lock);
  return c;
}

void recap__fake_nccl_reset(void) {
  pthread_mutex_lock(&nccl.lock);
  for (fake_clique_t *q = nccl.cliques, *next; q; q = next) {
    next = q->next;
    while (q->rounds) round_free(q, q->rounds);
    for (int i = 0; i < q->nranks * q->nranks; i++)
      for (fake_msg_t *m = q->mail[i], *mn; m; m = mn) {
        mn = m->next;
        free(m->data);
        free(m);
      }
    free(q->mail);
    free(q->ranks);
    free(q);
  }
  nccl.cliques = NULL;
  for (fake_alloc_t *a = nccl.allocs, *next; a; a = next) {
    next = a->next;
    free(a->ptr);
    free(a);
  }
  nccl.allocs = NULL;
  for (fake_reg_t *g = nccl.regs, *next; g; g = next) {
    next = g->next;
    free(g);
  }
  nccl.regs = NULL;
  nccl.version = DEFAULT_VERSION;
  nccl.timeout_ms = DEFAULT_TIMEOUT_MS;
  memset(&nccl.counters, 0, sizeof nccl.counters);
  pthread_mutex_unlock(&nccl.lock);
  tl_group_depth = 0;
  recap__nccl_install(&recap__fake_nccl_ops);
}
