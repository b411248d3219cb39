/*
 * fake.h — controls of the CPU fake device, for tests.
 *
 * The fake stands in for CUDA behind the device seam: memory is host memory, a stream is a
 * queue whose progress the test moves by hand, an event is "done" once its stream has
 * progressed past the point where it was recorded, and captures are simulated with ids, joined
 * side streams and CUDA's rules on which calls a capture forbids. Faults can be injected.
 *
 * Semantics the allocator's tests rely on:
 *  - Every stream has a count of enqueued work items and a count of completed ones. Recording an
 *    event enqueues one item and remembers it; the event is done when the stream has completed
 *    that item. recap__fake_stream_complete() finishes everything queued so far on one stream;
 *    stream_synchronize, event_synchronize and device_synchronize finish it too.
 *  - Recording or querying an event on a capturing stream is refused (CUDA would turn the record
 *    into a graph node, and querying would invalidate the capture), and so the fake fails it with
 *    RECAP_ERROR_CAPTURE_INVALIDATED ("cudaErrorStreamCaptureUnsupported"), as the CUDA seam
 *    maps that error, to catch an allocator that does so.
 *  - raw_malloc while a capture forbids it (the calling thread's capture mode is not relaxed and
 *    a global-mode capture is under way in any thread, or a thread-local one in this thread)
 *    fails with RECAP_ERROR_CAPTURE_INVALIDATED ("cudaErrorStreamCaptureUnsupported") and
 *    invalidates those captures, as CUDA does.
 */
#ifndef RECAP_FAKE_H
#define RECAP_FAKE_H

#include "device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct recap__fake_config {
  int device_count;         /* default 1 */
  size_t memory_per_device; /* bytes each device can hand out (default 64 GiB of address room;
                               memory is only touched when the test touches it) */
} recap__fake_config_t;

/* Reset the fake to a fresh state with cfg (NULL: defaults), install it as the seam, and reset
 * recap's allocator and options. Every test starts with this. */
void recap__fake_reset(const recap__fake_config_t *cfg);

/* Streams: recap_stream_t handles that only the fake understands. */
recap_stream_t recap__fake_stream_new(void);
/* Finish every work item queued on stream so far. */
void recap__fake_stream_complete(recap_stream_t stream);
/* Queue one work item on stream (as a kernel launch would). */
void recap__fake_stream_enqueue(recap_stream_t stream);

/* Captures. begin fails (returns 0) if the stream is already capturing or is the legacy
 * default stream. join makes side join the capture of origin (as an event record on origin and
 * a wait on side would). end stops the capture of origin and of every stream joined to it. */
uint64_t recap__fake_capture_begin(recap_stream_t stream, recap__capture_mode_t mode);
bool recap__fake_capture_join(recap_stream_t side, recap_stream_t origin);
/* Returns false if the capture had been invalidated (CUDA's cudaErrorStreamCaptureInvalidated). */
bool recap__fake_capture_end(recap_stream_t origin);
/* Mark the capture of stream invalidated, as an illegal call inside it would. */
void recap__fake_capture_invalidate(recap_stream_t stream);

/* Fault injection. Kinds of calls that can be made to fail. */
typedef enum recap__fake_fault {
  RECAP__FAKE_FAULT_RAW_MALLOC = 0,
  RECAP__FAKE_FAULT_EVENT_CREATE,
  RECAP__FAKE_FAULT_EVENT_RECORD,
  RECAP__FAKE_FAULT_STREAM_CREATE,
  RECAP__FAKE_FAULT_KINDS
} recap__fake_fault_t;

/* The nth call (1-based, counted from now) of kind fails; 0 disarms. A failed raw_malloc reports
 * out of memory; the others report RECAP_ERROR_CUDA. */
void recap__fake_fail_nth(recap__fake_fault_t kind, uint64_t nth);
/* How many calls of kind the fake has seen since the last reset. */
uint64_t recap__fake_calls(recap__fake_fault_t kind);

/* Bytes of raw memory the fake has handed out and not had back, on device. */
size_t recap__fake_bytes_in_use(int device);
/* Events created and not destroyed. */
int64_t recap__fake_live_events(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_FAKE_H */
