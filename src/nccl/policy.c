/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy.c — how replays of graphs that share a communicator order themselves
 * (recap_nccl_comm_policy).
 *
 * NCCL runs a communicator's collectives in the order they were enqueued, one stream at a time;
 * two graphs using one communicator replayed on two streams can interleave their collectives
 * differently on different ranks and hang (vllm #52504). recap keeps, per communicator, the
 * stream and an event of the latest replay of a graph that used it. A replay on another stream
 * is ordered after that event (SERIALIZE) or refused while it is pending (REFUSE_OVERLAP).
 *
 * SERIALIZE orders on the device: the replay's stream waits for the event
 * (stream_wait_event), and the host goes on. Where that wait cannot be enqueued the host waits
 * for the event instead; where there is no event (its record failed) it waits for the whole
 * stream of the latest replay; and on a capturing stream it waits on the host too, since a
 * capture may not depend on work recorded outside it (cudaErrorStreamCaptureIsolation would
 * invalidate the capture). The check's exchange (fingerprint.c) is admitted the same way, on
 * its own stream. The communicator's lock is held from the check to the event's record, so
 * that two threads replaying at once cannot both pass the check before either recorded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "device/device.h"
#include "nccl/nccl_internal.h"

typedef struct recap__nccl_comm_state {
  recap__nccl_comm_t comm;
  _Atomic int policy;     /* a recap_nccl_policy_t */
  pthread_mutex_t replay; /* held from a replay's check to its record */
  recap_stream_t last_stream;
  bool has_last;        /* a replay launched: last_stream is meaningful */
  recap__event_t event; /* recorded after the latest replay (NULL: not made yet) */
  bool event_valid;     /* the record succeeded: event marks the latest replay's end */
  /* The check's exchange (fingerprint.c): its stream, made on check_device at the first check,
   * and its device buffer, kept for the next checks under the replay lock. */
  recap_stream_t check_stream;
  int check_device;
  void *check_buffer;
  size_t check_bytes;
  struct recap__nccl_comm_state *next; /* the table's list */
} comm_state_t;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static comm_state_t *table;

/* The state of comm, made on first use (NULL: out of host memory). */
static comm_state_t *state_of(recap__nccl_comm_t comm) {
  pthread_mutex_lock(&table_lock);
  comm_state_t *c = table;
  while (c && c->comm != comm) c = c->next;
  if (!c && (c = recap__host_calloc(1, sizeof *c)) != NULL) {
    c->comm = comm;
    atomic_init(&c->policy, RECAP_NCCL_SERIALIZE);
    pthread_mutex_init(&c->replay, NULL);
    c->next = table;
    table = c;
  }
  pthread_mutex_unlock(&table_lock);
  return c;
}

recap_status_t recap_nccl_comm_policy(recap_nccl_comm_t comm, recap_nccl_policy_t policy) {
  RECAP__ARG(comm != NULL, "recap_nccl_comm_policy: comm is NULL");
  RECAP__ARG(policy == RECAP_NCCL_SERIALIZE || policy == RECAP_NCCL_REFUSE_OVERLAP,
             "recap_nccl_comm_policy: policy %d is neither RECAP_NCCL_SERIALIZE nor "
             "RECAP_NCCL_REFUSE_OVERLAP",
             (int)policy);
  comm_state_t *c = state_of(comm);
  if (!c)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_nccl_comm_policy: out of host memory");
  atomic_store(&c->policy, (int)policy);
  return RECAP_SUCCESS;
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (comm_state_t *const *)a, y = (uintptr_t) * (comm_state_t *const *)b;
  return x < y ? -1 : x > y;
}

/* The states of comms into *a, sorted by address (the order their locks are taken in, so
 * that two replays sharing several communicators cannot deadlock): in a's own room when they
 * fit (a replay's host cost is the point of a graph), else in memory of their own. */
static recap_status_t states(recap__nccl_comm_t *comms, size_t count, recap__nccl_admission_t *a) {
  comm_state_t **s =
      count <= RECAP__NCCL_STACK_STATES ? a->stack : recap__host_calloc(count, sizeof *s);
  if (!s) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_replay: out of host memory");
  for (size_t i = 0; i < count; i++)
    if (!(s[i] = state_of(comms[i]))) {
      if (s != a->stack) recap__host_free(s);
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_replay: out of host memory");
    }
  if (count > 1) qsort(s, count, sizeof *s, by_address);
  a->states = s;
  a->count = count;
  return RECAP_SUCCESS;
}

static void admission_clear(recap__nccl_admission_t *a) {
  if (a->states && a->states != a->stack) recap__host_free(a->states);
  a->states = NULL;
  a->count = 0;
}

/* Under SERIALIZE, with c's lock held and c's event valid: order stream after the latest
 * replay, on the device when possible. A failed capture query or stream wait is not the
 * caller's failure while the host wait that replaces it succeeds: the thread's last error is
 * left as it was. */
static recap_status_t serialize(comm_state_t *c, recap_stream_t stream) {
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap__capture_status_t capture = RECAP__CAPTURE_NONE;
  if (dev->stream_capture_info(stream, &capture, NULL) == RECAP_SUCCESS &&
      capture == RECAP__CAPTURE_NONE && dev->stream_wait_event(stream, c->event) == RECAP_SUCCESS)
    return RECAP_SUCCESS;
  RECAP__CHECK(dev->event_synchronize(c->event));
  recap__error_restore(&saved);
  return RECAP_SUCCESS;
}

/* With c's lock held: whether a replay on stream may start now, ordered after the latest one
 * under SERIALIZE. */
static recap_status_t admit(comm_state_t *c, recap_stream_t stream, const char *function) {
  if (!c->has_last || c->last_stream == stream) return RECAP_SUCCESS;
  const recap__device_ops_t *dev = recap__device();
  if (atomic_load(&c->policy) == RECAP_NCCL_REFUSE_OVERLAP) {
    bool done = false;
    if (c->event_valid) RECAP__CHECK(dev->event_query(c->event, &done));
    /* Without an event (its record failed) only the stream can say: assume pending. */
    if (!done)
      return recap__error(RECAP_ERROR_BUSY,
                          "%s: the graph uses NCCL communicator %p, whose latest replay, on "
                          "stream %p, has not finished; this %s on stream %p would overlap it, "
                          "which can deadlock the ranks (vllm #52504), and the communicator's "
                          "policy is RECAP_NCCL_REFUSE_OVERLAP: replay on the same stream, wait "
                          "for the other, or choose RECAP_NCCL_SERIALIZE",
                          function, (void *)c->comm, (void *)c->last_stream,
                          strcmp(function, "recap_graph_replay") == 0 ? "replay" : "exchange",
                          (void *)stream);
    return RECAP_SUCCESS;
  }
  if (c->event_valid) return serialize(c, stream);
  return dev->stream_synchronize(c->last_stream);
}

recap_status_t recap__nccl_policy_before(recap__nccl_comm_t *comms, size_t count,
                                         recap_stream_t stream, const char *function,
                                         recap__nccl_admission_t *admission) {
  admission->states = NULL;
  admission->count = 0;
  if (count == 0) return RECAP_SUCCESS;
  RECAP__CHECK(states(comms, count, admission));
  comm_state_t **s = admission->states;
  size_t locked = 0;
  recap_status_t status = RECAP_SUCCESS;
  while (locked < count && status == RECAP_SUCCESS) {
    comm_state_t *c = s[locked];
    if (atomic_load(&c->policy) == RECAP_NCCL_REFUSE_OVERLAP) {
      /* Another thread's replay using the communicator is being launched: it overlaps. */
      if (pthread_mutex_trylock(&c->replay) == EBUSY) {
        status = recap__error(RECAP_ERROR_BUSY,
                              "%s: the graph uses NCCL communicator %p, which a replay on "
                              "another thread is launching now; this call on stream %p would "
                              "overlap it, which can deadlock the ranks (vllm #52504), and the "
                              "communicator's policy is RECAP_NCCL_REFUSE_OVERLAP: order the "
                              "replays, or choose RECAP_NCCL_SERIALIZE",
                              function, (void *)c->comm, (void *)stream);
        break;
      }
    } else {
      pthread_mutex_lock(&c->replay);
    }
    locked++;
    status = admit(c, stream, function);
  }
  if (status != RECAP_SUCCESS) {
    while (locked > 0) pthread_mutex_unlock(&s[--locked]->replay);
    admission_clear(admission);
  }
  return status;
}

void recap__nccl_policy_after(recap__nccl_admission_t *admission, recap_stream_t stream,
                              bool launched) {
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  for (size_t i = 0; i < admission->count; i++) {
    comm_state_t *c = admission->states[i];
    if (launched) {
      c->has_last = true;
      c->last_stream = stream;
      c->event_valid = false;
      if (!c->event && dev->event_create(&c->event) != RECAP_SUCCESS) c->event = NULL;
      /* A failed record leaves event_valid false: the next replay elsewhere then waits for the
       * whole stream (SERIALIZE) or is refused (REFUSE_OVERLAP), never runs unordered. */
      if (c->event && dev->event_record(c->event, stream) == RECAP_SUCCESS) c->event_valid = true;
    }
    pthread_mutex_unlock(&c->replay);
  }
  admission_clear(admission);
  recap__error_restore(&saved);
}

recap_status_t recap__nccl_check_stream(recap__nccl_comm_t comm, recap_stream_t *stream) {
  *stream = NULL;
  const recap__device_ops_t *dev = recap__device();
  int device;
  RECAP__CHECK(dev->get_device(&device));
  comm_state_t *c = state_of(comm);
  if (!c)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "recap_graph_check_collectives: out of host memory");
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&c->replay);
  if (c->check_stream && c->check_device != device) {
    /* Checked from another device now: that device's stream, and buffers made there. */
    recap__saved_error_t saved;
    recap__error_save(&saved);
    (void)dev->stream_destroy(c->check_stream);
    if (c->check_buffer) (void)dev->raw_free(c->check_buffer);
    recap__error_restore(&saved);
    c->check_stream = NULL;
    c->check_buffer = NULL;
    c->check_bytes = 0;
  }
  if (!c->check_stream && (s = dev->stream_create(&c->check_stream)) == RECAP_SUCCESS)
    c->check_device = device;
  *stream = c->check_stream;
  pthread_mutex_unlock(&c->replay);
  return s;
}

recap_status_t recap__nccl_check_buffer(const recap__nccl_admission_t *admission, size_t bytes,
                                        void **buffer) {
  *buffer = NULL;
  comm_state_t *c = admission->states[0];
  if (c->check_bytes < bytes) {
    const recap__device_ops_t *dev = recap__device();
    void *p = NULL;
    RECAP__CHECK(dev->raw_malloc(&p, bytes));
    if (c->check_buffer) {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      (void)dev->raw_free(c->check_buffer);
      recap__error_restore(&saved);
    }
    c->check_buffer = p;
    c->check_bytes = bytes;
  }
  *buffer = c->check_buffer;
  return RECAP_SUCCESS;
}

void recap__nccl_policy_forget(void) {
  pthread_mutex_lock(&table_lock);
  while (table) {
    comm_state_t *c = table;
    table = c->next;
    pthread_mutex_destroy(&c->replay);
    recap__host_free(c);
  }
  pthread_mutex_unlock(&table_lock);
}
