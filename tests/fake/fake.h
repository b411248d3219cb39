/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake.h — controls of the CPU fake device, for tests.
 *
 * The fake is test code and lives with the tests: a library of its own (recap_fake,
 * tests/fake/fake*.c) that only the tests and fuzzers link; the installed librecap.so and
 * librecap.a do not contain it. Its users include it as "fake/fake.h" (tests/ is on their include
 * path), and its own files include their private state as "fake/fake_state.h". It uses the
 * library's core and device seam headers (src/) and nothing above them, which library.layers
 * checks.
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
 *  - stream_wait_event(s, e), e last recorded on stream t at item k, enqueues one marker item
 *    on s and records that once s completes that item, t has completed k: whatever completes
 *    s's marker (recap__fake_stream_complete, a synchronize) completes t up to k, and so on
 *    along chains of waits. An event never recorded, one whose stream is gone, one recorded on
 *    s itself or whose work already completed makes a marker that waits for nothing. A NULL or
 *    destroyed event, or a handle that is not a stream, fails with RECAP_ERROR_CUDA
 *    (cudaErrorInvalidResourceHandle). On a capturing stream, an event ever recorded (always
 *    outside the capture: records on capturing streams are refused) fails with
 *    RECAP_ERROR_CAPTURE_INVALIDATED (cudaErrorStreamCaptureIsolation) and invalidates the
 *    capture; a never-recorded one adds nothing. Destroying a stream completes its work, and
 *    with it what its markers waited for; the waits of other streams on it are dropped.
 *    RECAP__FAKE_FAULT_STREAM_WAIT_EVENT fails a call before it enqueues anything.
 *  - Streams are non-blocking (cudaStreamNonBlocking) unless made with
 *    recap__fake_stream_new_blocking; stream_blocking answers true for those and for the legacy
 *    stream (NULL), RECAP_ERROR_CUDA for a handle that is no stream;
 *    RECAP__FAKE_FAULT_STREAM_BLOCKING fails it. A kernel launched on the legacy stream
 *    invalidates every capture a blocking stream takes part in, as CUDA's implicit
 *    synchronisation does.
 *  - Recording or querying an event on a capturing stream is refused (CUDA would turn the record
 *    into a graph node, and querying would invalidate the capture), and so the fake fails it with
 *    RECAP_ERROR_CAPTURE_INVALIDATED ("cudaErrorStreamCaptureUnsupported"), as the CUDA seam
 *    maps that error, to catch an allocator that does so.
 *  - raw_malloc while a capture forbids it (the calling thread's capture mode is not relaxed and
 *    a global-mode capture is under way in any thread, or a thread-local one in this thread)
 *    fails with RECAP_ERROR_CAPTURE_INVALIDATED ("cudaErrorStreamCaptureUnsupported") and
 *    invalidates those captures, as CUDA does; so do raw_free and device_synchronize. The rule
 *    holds whatever the devices: a global capture on device 0 forbids raw_malloc on device 1 in
 *    every thread. A stream belongs to the thread's current device when it is made, and a
 *    capture to its stream's device; the message names both devices.
 *  - Graphs: a kernel launched (recap__fake_launch_kernel, recap__fake_stream_enqueue) on a
 *    stream that takes part in a capture becomes a kernel node of the capture instead of a work
 *    item; it waits for the previous node of the same stream, and a joined stream's first node
 *    waits for the origin's last node at the time of the join. An invalidated capture records
 *    nothing more. The ops stream_begin_capture / stream_end_capture drive the same captures as
 *    recap__fake_capture_begin / _end; ending hands out a fake graph (freed by graph_destroy or
 *    recap__fake_reset). graph_instantiate gives a fake executable with its own copy of the
 *    graph's nodes (type, name, dependency, arguments, ends, bytes, value, function), which
 *    holds RECAP__FAKE_EXEC_BYTES_PER_NODE bytes of the current device's memory per node
 *    (graph_node_count's count, bodies included) until graph_exec_destroy: mem_get_info shows
 *    them, raw_malloc cannot have them, and an instantiation they do not fit in fails with
 *    RECAP_ERROR_OUT_OF_MEMORY (cudaErrorMemoryAllocation); an update keeps them;
 *    graph_launch enqueues one work item per node on its stream (so events recorded after it
 *    wait for it), or, on a capturing stream, adds one child-graph node to the capture.
 *    graph_inspect reports kernel nodes with their names, grid and block {1,1,1}, memcpy and
 *    memset nodes with their sizes in bytes, and the per-stream chains as edges;
 *    graph_debug_dot writes "digraph fake { ... }", with one statement per node giving its
 *    handle as the driver's verbose dump does (n0 [comment="node handle | 0x00007E0000001230"];).
 *  - Debug aids: every node has a handle (recap__graph_node_t) unique in the process, the same
 *    in the capture (capture_nodes lists them, in capture order, and hands out the graph being
 *    built, the one stream_end_capture or capture_pause will hand out, or the graph given to
 *    capture_to_graph) and in the graph made from it (graph_nodes).
 *    graph_reads reports the arguments given to recap__fake_launch_kernel_args (and _fn), the
 *    ends of memcpy_async copies and the destinations of recap__fake_memset_async (with the
 *    offsets and parameters of the patch plans below); graph_reads_check always succeeds.
 *  - Kernels that compute: recap__fake_launch_kernel_fn runs its function at once when eager;
 *    captured, the node keeps the function and its argument words. Every graph_launch outside
 *    a capture runs the executable's nodes, in node order, with the executable's current
 *    values: each function kernel with its argument words, each copy (memmove of bytes from src
 *    to dst) and each memset (its byte value over bytes at dst); other kernels, random-number
 *    kernels and child-graph nodes run nothing, nor does a copy or memset whose address is
 *    NULL. A function must not call into the fake or recap (it runs under the fake's lock at a
 *    launch).
 *  - Rebinding (patch plans): the sites of a plan are graph_reads' list; each argument word k of
 *    a kernel is parameter k at byte offset 8k; nothing is nested (the fake's child-graph
 *    nodes have no content). patch_plan_apply writes each touched node's whole values (the
 *    plan's, with the patches on top) into the executable's own nodes, one counted set per node
 *    (exec_patches), or, with exec NULL, into the plan alone; the template is unchanged until
 *    patch_plan_sync writes each node patched since the last sync into it (template_patches).
 *    As on CUDA, an executable accepts per-node sets only through the nodes of the graph it was
 *    instantiated from, for its whole life (updates included): a plan's origin (its graph when
 *    origin is NULL) must be that graph and still be alive, else a patch of at least one site
 *    fails with RECAP_ERROR_CUDA (cudaErrorInvalidValue) and sets nothing. A plan's values come
 *    from its graph; origin and graph with different node counts or a node type that differs:
 *    RECAP_ERROR_INVALID_ARGUMENT at creation, naming the index. An injected
 *    RECAP__FAKE_FAULT_PATCH at a node sets the nodes already set back to the plan's values
 *    (each counted in exec_patches) and leaves the plan unchanged; an injected
 *    RECAP__FAKE_FAULT_PATCH_SYNC stops the sync at that node, which with the ones after it
 *    stays to be synced. Messages name the node index and the CUDA call
 *    (cudaGraphExecKernelNodeSetParams, cudaGraphMemsetNodeSetParams, ...).
 *  - Updates (graph_exec_update): refused (RECAP_SUCCESS, update_refusals counted) with
 *    TOPOLOGY_CHANGED when the node counts differ (node SIZE_MAX) or a node's dependency
 *    differs (that node, the first), else NODE_TYPE_CHANGED at the first node whose type
 *    differs; recap__fake_refuse_next_update forces the next refusal whatever the graphs.
 *    Otherwise the executable takes a copy of the graph's nodes (names and functions may
 *    change) and counts as updated for the timing model (exec_updates counted); it is patched
 *    through a plan of that graph whose origin is the graph it was instantiated from. A
 *    refusal or a failure leaves it unchanged.
 *  - Timing model: every stream has a clock in µs. Each eager work item (kernels, copies,
 *    memsets, random-number kernels) advances it by 1 µs, an event record or a stream wait by nothing, a
 *    graph_launch by its node count times 1.0, or times the factor of
 *    recap__fake_updated_slowdown for an executable updated at least once (or of
 *    recap__fake_changed_slowdown for one changed often enough), and a graph_upload
 *    by nothing (it enqueues no work item; counted in graph_uploads; RECAP__FAKE_FAULT_UPLOAD;
 *    an unknown executable or stream is refused as graph_launch refuses it). A timing event
 *    (timing_event_create; RECAP__FAKE_FAULT_TIMING) records its stream's clock; event_elapsed
 *    gives end's clock minus start's in ms once both are done, and fails with RECAP_ERROR_CUDA
 *    for an event made without timing (cudaErrorInvalidResourceHandle), never recorded, or not
 *    yet done (cudaErrorNotReady).
 *  - begin_capture on the legacy stream (NULL) or on a stream already capturing (its own
 *    capture or a joined one) fails with RECAP_ERROR_INVALID_USAGE. end_capture of an
 *    invalidated capture ends it and fails with RECAP_ERROR_CAPTURE_INVALIDATED
 *    ("cudaErrorStreamCaptureInvalidated"); on a joined stream it fails with
 *    RECAP_ERROR_INVALID_USAGE (cudaErrorStreamCaptureUnmatched) and invalidates the capture; from
 *    another thread than the one that began a non-relaxed capture, RECAP_ERROR_INVALID_USAGE
 *    (cudaErrorStreamCaptureWrongThread), the capture left intact; on a stream not capturing,
 *    RECAP_ERROR_INVALID_USAGE. destroy of NULL is a no-op.
 *  - Regions (fake_cond.c). capture_pause ends a capture as stream_end_capture does and hands
 *    out its graph (listed and counted in live_graphs from then on, unless it is a body) with
 *    the stream's last node as the one dependency (none when the stream captured nothing yet);
 *    refusals as device.h says: not capturing or a joined stream (INVALID_USAGE, the latter
 *    invalidating the capture as stream_end_capture does), another thread (INVALID_USAGE,
 *    capture intact), invalidated or with a side stream still joined
 *    (recap__fake_capture_join_back not called: "cudaErrorStreamCaptureUnjoined") ends the
 *    capture with RECAP_ERROR_CAPTURE_INVALIDATED. capture_to_graph begins a capture with a new
 *    id that appends to the graph given, its first node waiting for the dependency given; the
 *    fake keeps one dependency per node, so more than one is RECAP_ERROR_NOT_SUPPORTED; a graph
 *    already captured into is refused (INVALID_USAGE); ending or pausing it hands out that
 *    graph again; an invalidated one ends leaving the graph with what it held. A conditional
 *    handle is made for a live graph or a capture's graph; cond_node_add (on a live graph not
 *    being captured into) checks the kind, branch count (WHILE 1, IF 1 or 2, SWITCH 1 to
 *    RECAP_REGION_MAX_BRANCHES), that the handle was made for that graph and serves no other
 *    node; the bodies are fake graphs owned by the node (graph_destroy refuses them; destroying
 *    the graph frees them) whose handles work with every op that takes a graph.
 *    graph_instantiate copies the bodies deeply. A launch runs conditional nodes as CUDA does:
 *    the condition is the handle's default at each launch with assign_default, else its
 *    initial value at the executable's first launch and the last value set afterwards (values
 *    are per executable); IF runs body 0 when nonzero, IF with two bodies body 1 otherwise;
 *    WHILE checks before every iteration; SWITCH runs body n for n < branches, else none;
 *    nesting works. A WHILE about to start an iteration past recap__fake_cond_iteration_limit
 *    fails the launch (RECAP_ERROR_CUDA, naming the limit; not counted in graph_launches), as
 *    does a kernel setting a handle no conditional node of the executable holds. Condition
 *    kernels (cond_launch) are function kernels named recap_cond_set_value, _set_from,
 *    _countdown and _compare, with six argument words (handle, flag, the pointer operand,
 *    COMPARE's counter, packed value/max/dtype/op, the threshold's bits) that graph_reads
 *    reports; eagerly they run at once (a handle then takes an eager value). graph_node_count
 *    counts body nodes, graph_inspect lays them out as recap/inspect.h says, graph_reads
 *    reports what bodies read as nested reads of the top-level conditional node (patch plans
 *    refuse to patch them), graph_nodes lists the graph's own nodes. graph_exec_update with
 *    conditional nodes refuses a graph whose structure differs (PARAMETERS_CHANGED for another
 *    kind, TOPOLOGY_CHANGED for another branch count or body structure, naming the top-level
 *    node); an update takes the new nodes and handles. With recap__fake_cond_supported(false),
 *    cond_supported says false and cond_handle_create and cond_node_add fail with
 *    RECAP_ERROR_NOT_SUPPORTED. Injected faults of the new kinds fail before anything changes.
 *  - Virtual memory management (fake_vmm.c), on host memory: vmm_reserve maps the range
 *    PROT_NONE (the addresses are kept, nothing is usable); vmm_create makes a chunk backed by
 *    a memory file of its own and counts its size in bytes_in_use (so mem_get_info and
 *    raw_malloc see it) until it is released and unmapped everywhere; vmm_map maps the chunk's
 *    file at the address (MAP_FIXED, shared), still PROT_NONE, and vmm_set_access makes mapped
 *    pages readable and writable, so memory touched before set_access faults as on a GPU; a
 *    chunk mapped twice shows the same bytes at both addresses, and mapped again after an
 *    unmap shows what it held; vmm_unmap puts the reservation back (PROT_NONE). Refusals, with
 *    RECAP_ERROR_CUDA and the driver's CUDA_ERROR_INVALID_VALUE in the message: a map not
 *    inside one reserved range, over another mapping, longer than the chunk, of a handle never
 *    made or released; an unmap that cuts a mapping or covers unmapped addresses; set_access
 *    over unmapped addresses; release_range of anything but a whole range, or of one still
 *    holding mappings; release of an unknown handle. vmm_release of a mapped chunk succeeds, as
 *    on CUDA: the handle is gone and the memory stays until its last mapping is unmapped.
 *    No vmm_* op is refused during a capture (they are no stream work).
 *    host_alloc_pinned is host memory (not counted against the device), refused under a
 *    forbidding capture as raw_malloc is, and so is host_free_pinned; freeing a pointer it did
 *    not give out is RECAP_ERROR_CUDA (cudaErrorInvalidValue). Counters: vmm_chunks_live,
 *    vmm_bytes_mapped, vmm_ranges_live, vmm_bytes_reserved, pinned_live, pinned_bytes, and
 *    vmm_unmaps_unfinished (an unmap does not wait for queued work, as cuMemUnmap does not:
 *    unmaps made while a stream had work left are counted).
 *  - Random numbers: the fake computes no real random numbers. rng_write_state on a stream
 *    that does not capture writes {seed, offset + state[2]} into the first two words at once
 *    (fake device memory is host memory) and enqueues one work item; on a capturing stream it adds a kernel node
 *    named "fake_rng_state" and writes nothing (the write would happen when the graph runs).
 *    rng_launch adds a kernel node named after the kind ("recap_rng_uniform",
 *    "recap_rng_normal", "recap_rng_randint", "recap_rng_dropout") on a capturing stream;
 *    otherwise it enqueues one work item and fills out[] at once from the state's seed s and
 *    offset o, with u(i) = ((s + o + i) mod 1000 + 1) / 1000 in (0, 1]: uniform u(i) with 1
 *    mapped to 0, so in [0, 1) as the CUDA kernel's; normal mean + stddev * (u(i) - 0.5);
 *    randint low + (s + o + i) mod (high - low); dropout keep = u(i) > p,
 *    out = in * keep / (1 - p), mask = keep. Graph launches never run these kernels,
 *    so replays fill nothing; the state words show what a replay was fed. rng_advance adds
 *    step to state[1] and state[2]: at once eagerly, else as a function kernel node named
 *    recap_rng_advance that graph launches run. All fail with
 *    RECAP_ERROR_CAPTURE_INVALIDATED on a stream whose capture was invalidated. With
 *    no_kernel_image configured, they (and cond_launch) fail with RECAP_ERROR_NOT_SUPPORTED and the message the
 *    CUDA seam gives for a GPU that recap's kernels were not built for
 *    (recap__device_no_kernel_image_message), naming the configured compute capability.
 */
#ifndef RECAP_FAKE_H
#define RECAP_FAKE_H

#include "device/device.h"
#include "device/nccl_seam.h"

#ifdef __cplusplus
extern "C" {
#endif

/* More devices than any node has; a config that asks for more gets this many. */
enum { RECAP__FAKE_MAX_DEVICES = 64 };

/* The device memory a fake executable holds per node (a real executable's memory depends on
 * the driver and the graph; a fixed amount per node makes the measurement testable). */
enum { RECAP__FAKE_EXEC_BYTES_PER_NODE = 4096 };

typedef struct recap__fake_config {
  int device_count;         /* default 1 */
  size_t memory_per_device; /* bytes each device can hand out (default 64 GiB of address room;
                               memory is only touched when the test touches it) */
  int compute_capability;   /* major * 10 + minor, as 75 for 7.5 (default 90) */
  bool no_kernel_image;     /* recap's kernels have no image for the devices: the random-number
                               kernels fail as on a GPU outside RECAP_CUDA_ARCHITECTURES */
  size_t vmm_granularity;   /* the devices' minimum and recommended VMM granularity, a multiple
                               of the host's page size (default 2 MiB, as on an H100 or H200) */
  size_t vmm_recommended_granularity; /* a larger recommended granularity, a multiple of the
                               minimum (0: the same); vmm_reserve then aligns a range's start to
                               the minimum and never to it, as CUDA promises no more */
  bool vmm_unsupported; /* the devices have no virtual memory management: the vmm_* ops
                               that need a granularity fail with RECAP_ERROR_NOT_SUPPORTED */
} recap__fake_config_t;

/* The seam's table of the fake's functions. */
extern const recap__device_ops_t recap__fake_ops;

/* Reset the fake alone to a fresh state with cfg (NULL: defaults) and install it as the seam.
 * Everything the fake had made is gone; the layers above keep their state, so tests reset
 * them too (tests/reset.h: recap_test_reset). */
void recap__fake_reset(const recap__fake_config_t *cfg);

/* Streams: recap_stream_t handles that only the fake understands. */
recap_stream_t recap__fake_stream_new(void);
/* A stream that synchronises with the legacy default stream, as cudaStreamCreate makes:
 * stream_blocking says so, and a kernel launched on the legacy stream (NULL) while it takes
 * part in a capture invalidates that capture (cudaErrorStreamCaptureImplicit). */
recap_stream_t recap__fake_stream_new_blocking(void);
/* Finish every work item queued on stream so far. */
void recap__fake_stream_complete(recap_stream_t stream);
/* Launch a kernel named "fake_kernel" on stream: one work item eagerly, a kernel node when the
 * stream takes part in a capture. */
void recap__fake_stream_enqueue(recap_stream_t stream);
/* The same with the kernel's name (NULL: "fake_kernel"), which graph_inspect reports. */
void recap__fake_launch_kernel(recap_stream_t stream, const char *name);
/* The same with n pointer arguments (copied), which graph_reads reports as the kernel node's
 * argument words, for the input-liveness checks. */
void recap__fake_launch_kernel_args(recap_stream_t stream, const char *name,
                                    const void *const *args, size_t n);
/* A kernel that computes, on fake device memory (host memory): args[i] is its i-th 8-byte
 * argument word, n their count. */
typedef void (*recap__fake_kernel_fn_t)(void *const *args, size_t n);
/* The same as recap__fake_launch_kernel_args with a function: eagerly fn(args, n) runs at once
 * (one work item); in a capture it becomes a kernel node that graph_launch runs with the
 * executable's current argument words, in node order. */
void recap__fake_launch_kernel_fn(recap_stream_t stream, const char *name,
                                  recap__fake_kernel_fn_t fn, const void *const *args, size_t n);
/* The same with parameters of two widths: bit k of narrow set makes parameter k (k < 32) a
 * 4-byte value held in the low half of args[k] (graph parameters find and write it there);
 * graph_reads leaves it out, as no pointer fits in it. */
void recap__fake_launch_kernel_sized(recap_stream_t stream, const char *name,
                                     recap__fake_kernel_fn_t fn, const void *const *args, size_t n,
                                     uint32_t narrow);
/* A kernel node's launch shape in executable exec (false: no such kernel node). */
bool recap__fake_exec_shape(recap_cuda_graph_exec_t exec, size_t node, unsigned grid[3],
                            unsigned block[3]);
/* cudaMemsetAsync: eagerly sets the bytes at once (one work item); in a capture, a memset node
 * whose destination graph_reads reports. */
void recap__fake_memset_async(recap_stream_t stream, void *dst, int value, size_t bytes);
/* true: stream_end_capture refuses, as CUDA does, a capture that a side stream still takes part
 * in (joined by recap__fake_capture_join and not joined back with recap__fake_capture_join_back):
 * the capture is ended and thrown away, RECAP_ERROR_CAPTURE_INVALIDATED naming
 * cudaErrorStreamCaptureUnjoined and the side stream. Off by default (many tests end captures
 * with side streams still joined); recap__fake_reset turns it off. */
void recap__fake_strict_joins(bool on);
/* true: graph_debug_dot writes the shape of the driver's verbose dump (a cluster, quoted ids,
 * multi-line record labels showing "node handle | ..."), for tests of code that reads it.
 * recap__fake_reset sets it back to false. */
void recap__fake_dot_driver_style(bool on);

/* Captures. begin fails (returns 0) if the stream is already capturing or is the legacy
 * default stream. join makes side join the capture of origin (as an event record on origin and
 * a wait on side would). end stops the capture of origin and of every stream joined to it. */
uint64_t recap__fake_capture_begin(recap_stream_t stream, recap__capture_mode_t mode);
bool recap__fake_capture_join(recap_stream_t side, recap_stream_t origin);
/* Returns false if the capture had been invalidated (CUDA's cudaErrorStreamCaptureInvalidated). */
bool recap__fake_capture_end(recap_stream_t origin);
/* Mark the capture of stream invalidated, as an illegal call inside it would. */
void recap__fake_capture_invalidate(recap_stream_t stream);

/* A test's turn inside a call of recap: fn(ctx, stream) runs once, in the calling thread, right
 * after the next stream_begin_capture op that succeeds (the fake's lock released), before that
 * op returns to recap; then it is disarmed. It lets a test do what another thread could do
 * between the two steps of recap_graph_capture_begin. NULL disarms; recap__fake_reset does not. */
typedef void (*recap__fake_capture_hook_t)(void *ctx, recap_stream_t stream);
void recap__fake_after_capture_begin(recap__fake_capture_hook_t fn, void *ctx);

/* Updates: the next graph_exec_update is refused with reason (not NONE) naming node (an index,
 * or SIZE_MAX), whatever the graphs, and the knob disarms. recap__fake_reset disarms it. */
void recap__fake_refuse_next_update(recap_update_reason_t reason, size_t node);
/* The timing model's factor for executables updated at least once (default 1.0; reset by
 * recap__fake_reset). */
void recap__fake_updated_slowdown(double factor);
/* The timing model's factor for executables changed at least `changes` times since their
 * instantiation: updates that applied and patch calls that set nodes of theirs (a rebind, a
 * parameter set), as the slowdown of a chain of 1,000 kernels on an H100 appears only after
 * many changes. It replaces recap__fake_updated_slowdown's factor for them; 0 changes: none
 * (the default; reset by recap__fake_reset). */
void recap__fake_changed_slowdown(uint64_t changes, double factor);
/* Argument word arg of node (graph_nodes order) of an executable or a graph; false when the
 * handle is not a live one of the fake, or node or arg is out of range. */
bool recap__fake_exec_arg(recap_cuda_graph_exec_t exec, size_t node, size_t arg,
                          const void **value);
bool recap__fake_graph_arg(recap_cuda_graph_t graph, size_t node, size_t arg, const void **value);

/* Regions. recap__fake_cond_set sets a condition from a test's kernel function
 * (recap__fake_launch_kernel_fn), as recap_cond_set does on the device: cond.flag != NULL
 * writes *flag; otherwise the handle's value in the executable being launched (outside a
 * launch: the handle's eager value, which recap__fake_cond_value reads with exec NULL).
 * recap__fake_cond_supported is the driver's answer to cond_supported (default true; reset
 * restores it). recap__fake_cond_iteration_limit: a WHILE node that would start more
 * iterations than this in one run fails the launch (default 1000000; 0 restores it; reset
 * restores it). recap__fake_cond_value reads handle's value in exec (a conditional node of
 * exec holds it) or, exec NULL, its eager value; false when there is none. */
void recap__fake_cond_set(recap_cond_t cond, unsigned value);
void recap__fake_cond_supported(bool supported);
void recap__fake_cond_iteration_limit(uint64_t limit);
bool recap__fake_cond_value(recap_cuda_graph_exec_t exec, uint64_t handle, unsigned *value);
/* Side joins back into origin's capture (as an event recorded on side and waited for on
 * origin would): side no longer takes part in it, and origin's next node waits for the later of
 * the two streams' last nodes (the fake keeps one dependency per node, so origin's chain then
 * continues through side's when side captured last). False when side is not a side stream of origin's
 * capture. */
bool recap__fake_capture_join_back(recap_stream_t side, recap_stream_t origin);

/* Graph parameters applied on the GPU (fake_applier.c): recap__fake_params_device_supported is
 * the driver's answer to params_device_supported (default true; reset restores it);
 * recap__fake_applier_runs counts the applier kernels run in executables since the reset. */
void recap__fake_params_device_supported(bool supported);
uint64_t recap__fake_applier_runs(void);

/* Fault injection. Kinds of calls that can be made to fail. */
typedef enum recap__fake_fault {
  RECAP__FAKE_FAULT_RAW_MALLOC = 0,
  RECAP__FAKE_FAULT_EVENT_CREATE,
  RECAP__FAKE_FAULT_EVENT_RECORD,
  RECAP__FAKE_FAULT_STREAM_CREATE,
  RECAP__FAKE_FAULT_CAPTURE_BEGIN, /* stream_begin_capture (not counted on the legacy stream) */
  RECAP__FAKE_FAULT_CAPTURE_END,   /* stream_end_capture: the capture is ended and thrown away */
  RECAP__FAKE_FAULT_INSTANTIATE,   /* graph_instantiate */
  RECAP__FAKE_FAULT_LAUNCH,        /* graph_launch */
  RECAP__FAKE_FAULT_PATCH_PLAN,    /* patch_plan_create */
  RECAP__FAKE_FAULT_PATCH,         /* each node's set in an executable (patch_plan_apply) */
  RECAP__FAKE_FAULT_PATCH_SYNC,    /* each node's set in a template (patch_plan_sync) */
  RECAP__FAKE_FAULT_EXEC_UPDATE,   /* graph_exec_update */
  RECAP__FAKE_FAULT_TIMING,        /* timing_event_create */
  RECAP__FAKE_FAULT_UPLOAD,        /* graph_upload */
  /* Regions (each call fails before it changes anything: a failed capture_pause leaves the
   * capture under way, a failed capture_to_graph leaves the stream not capturing). */
  RECAP__FAKE_FAULT_COND_SUPPORTED,   /* cond_supported */
  RECAP__FAKE_FAULT_CAPTURE_PAUSE,    /* capture_pause */
  RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH, /* capture_to_graph */
  RECAP__FAKE_FAULT_COND_HANDLE,      /* cond_handle_create */
  RECAP__FAKE_FAULT_COND_NODE,        /* cond_node_add */
  RECAP__FAKE_FAULT_COND_LAUNCH,      /* cond_launch */
  RECAP__FAKE_FAULT_RNG_ADVANCE,      /* rng_advance */
  /* Virtual memory management and pinned host memory (fake_vmm.c): each call fails before it
   * changes anything; VMM_CREATE and HOST_ALLOC_PINNED report out of memory. */
  RECAP__FAKE_FAULT_VMM_GRANULARITY,   /* vmm_granularity */
  RECAP__FAKE_FAULT_VMM_RESERVE,       /* vmm_reserve */
  RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, /* vmm_release_range */
  RECAP__FAKE_FAULT_VMM_CREATE,        /* vmm_create */
  RECAP__FAKE_FAULT_VMM_RELEASE,       /* vmm_release */
  RECAP__FAKE_FAULT_VMM_MAP,           /* vmm_map */
  RECAP__FAKE_FAULT_VMM_UNMAP,         /* vmm_unmap */
  RECAP__FAKE_FAULT_VMM_SET_ACCESS,    /* vmm_set_access */
  RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, /* host_alloc_pinned */
  RECAP__FAKE_FAULT_HOST_FREE_PINNED,  /* host_free_pinned */
  /* The fake NCCL (recap__fake_nccl_ops): load (RECAP_ERROR_NOT_FOUND, as a missing library),
   * collective (each call, sends and receives included, before it enqueues anything:
   * RECAP_ERROR_INTERNAL, ncclSystemError), mem_alloc (RECAP_ERROR_OUT_OF_MEMORY), comm_register
   * (RECAP_ERROR_INTERNAL); each fails before it changes anything. */
  RECAP__FAKE_FAULT_NCCL_LOAD,
  RECAP__FAKE_FAULT_NCCL_COLLECTIVE,
  RECAP__FAKE_FAULT_NCCL_MEM_ALLOC,
  RECAP__FAKE_FAULT_NCCL_REGISTER,
  RECAP__FAKE_FAULT_STREAM_WAIT_EVENT, /* stream_wait_event, before it enqueues anything */
  RECAP__FAKE_FAULT_STREAM_BLOCKING,   /* stream_blocking */
  RECAP__FAKE_FAULT_CAPTURE_CHILD,     /* capture_add_child, before it adds anything */
  RECAP__FAKE_FAULT_KINDS
} recap__fake_fault_t;

/* The nth call (1-based, counted from now) of kind fails; 0 disarms. A failed raw_malloc,
 * vmm_create or host_alloc_pinned reports out of memory; the others report RECAP_ERROR_CUDA. */
void recap__fake_fail_nth(recap__fake_fault_t kind, uint64_t nth);

/* The fake's counters, read at once under its lock. */
typedef struct recap__fake_counters {
  /* Bytes handed out and not had back (raw_malloc, vmm_create, the fake NCCL's mem_alloc) and
   * bytes live executables hold. Together they never exceed memory_per_device: everything the
   * fake takes from a device is checked against the same free figure that mem_get_info reports
   * (capacity - bytes_in_use - exec_bytes). */
  size_t bytes_in_use[RECAP__FAKE_MAX_DEVICES];
  size_t exec_bytes[RECAP__FAKE_MAX_DEVICES];
  uint64_t calls[RECAP__FAKE_FAULT_KINDS]; /* calls of each kind since the last reset */
  int64_t live_events;                     /* events created and not destroyed */
  int64_t live_graphs;                     /* fake graphs (stream_end_capture) not yet destroyed */
  int64_t live_execs;                      /* executables (graph_instantiate) not yet destroyed */
  uint64_t graph_launches; /* successful graph_launch calls outside captures since the reset */
  uint64_t graph_uploads;  /* successful graph_upload calls since the reset */
  /* rng_write_state calls that wrote the state words and rng_launch calls that filled an
   * output (neither capturing), since the process started: tests compare differences. */
  uint64_t rng_state_writes, rng_launches;
  /* Since the reset: per-node sets that succeeded in executables (patch_plan_apply, roll-backs
   * included) and in templates (patch_plan_sync); graph_exec_update calls that updated and
   * that were refused. */
  uint64_t exec_patches, template_patches, exec_updates, update_refusals;
  /* memcpy_async calls that copied outside a capture (one work item each), since the reset. */
  uint64_t eager_copies;
  /* Since the reset: the questions which capture a stream is in (stream_capture_info and
   * stream_capture_id calls, cudaStreamGetCaptureInfo on CUDA), for the tests of what the
   * allocator knows without asking. */
  uint64_t capture_queries;
  /* Since the reset: conditional nodes run by graph launches (each time a node is reached),
   * bodies run (each WHILE iteration counts one), and condition kernels run (cond_launch's,
   * eagerly or in a launch). */
  uint64_t cond_nodes_run, body_launches, cond_kernels_run;
  /* Virtual memory management, now: physical chunks alive (made and not yet both released and
   * unmapped everywhere; their bytes count in bytes_in_use), bytes mapped, reserved ranges and
   * their bytes; pinned host allocations and their bytes. */
  int64_t vmm_chunks_live;
  size_t vmm_bytes_mapped;
  int64_t vmm_ranges_live;
  size_t vmm_bytes_reserved;
  int64_t pinned_live;
  size_t pinned_bytes;
  /* Since the reset: vmm_unmap calls that unmapped while some stream (of any device, the
   * legacy one included) had work queued and not completed. cuMemUnmap, unlike cudaFree, does
   * not wait for that work, which may still use the memory: recap's unmaps come after a
   * synchronisation, and the tests check this stays 0. */
  uint64_t vmm_unmaps_unfinished;
} recap__fake_counters_t;

void recap__fake_counters(recap__fake_counters_t *out);

/* The same snapshot by value, for assertions on one counter:
 * `assert_int_equal(recap__fake_now().live_events, 0)`. */
static inline recap__fake_counters_t recap__fake_now(void) {
  recap__fake_counters_t c;
  recap__fake_counters(&c);
  return c;
}

/* ---- NCCL (fake_nccl.c) ------------------------------------------------------------------
 *
 * recap__fake_reset installs recap__fake_nccl_ops behind the NCCL seam and forgets every
 * clique. recap__fake_nccl_comms makes a clique of nranks communicators: comms[i] is rank i,
 * used by its own thread (with its own fake stream), as NCCL's one rank per GPU.
 *  - A collective on a stream not capturing enqueues one work item (a kernel named
 *    "ncclDevKernel_<Kind>") and runs at once in the calling thread: it waits (the fake's lock
 *    released) for the same collective of every other rank, numbered per rank in the order the
 *    rank runs them (from 0), then the last rank to arrive does the arithmetic for all on the
 *    fake's memory (host memory): sum, prod, max, min and avg (the sum divided by nranks,
 *    integer division for integers) over int8, uint8, int32, uint32, int64, uint64, float32 and
 *    float64, reduced in rank order; all_gather, reduce_scatter, broadcast and reduce move any
 *    dtype. In place (send == recv, or all_gather's send == recv + rank * count) works.
 *  - On a capturing stream it becomes a kernel node of that name (argument words: send, recv,
 *    count, then the kind, dtype, op, peer, root and comm packed) that runs the same way at
 *    each graph_launch of an executable made from the graph, on the launch's stream.
 *  - A send copies its data into a mailbox of the (sender, receiver) pair and does not wait; a
 *    receive takes the pair's oldest message, waiting for it. Count or dtype differing: the
 *    receive fails naming both.
 *  - Failures (each the status of the call, or of the launch that ran the node, with the
 *    message after "cudaGraphLaunch: kernel node i (name): "):
 *    ranks whose collective of one number differs (kind, count, dtype, op, root): all of them
 *    fail with RECAP_ERROR_INVALID_USAGE, "fake NCCL: collective 3 differs across ranks: rank
 *    0's is all_reduce of 1024 float32 sum; rank 1's is all_gather of 1024 float32";
 *    a rank that waits longer than the timeout (5 s; recap__fake_nccl_timeout_ms) fails with
 *    RECAP_ERROR_INTERNAL (ncclTimeout), "fake NCCL: rank 1 waited 5000 ms for collective 3
 *    (all_reduce of ...); ranks 0, 2 never reached it" (one: "rank 0 never") (a receive: "... for a message from
 *    rank 0"); and a collective that starts on a communicator while another of the same
 *    communicator still waits on another stream fails with RECAP_ERROR_INVALID_USAGE, "fake
 *    NCCL: concurrent use of a communicator on two streams: ..." naming both streams (NCCL
 *    would deadlock, vllm #52504); the one already waiting goes on.
 *  - mem_alloc / mem_free and comm_register / comm_deregister are counted (recap__fake_nccl_now);
 *    mem_alloc gives host memory aligned to 512 bytes and takes its size from the calling
 *    thread's current fake device until mem_free, counted in bytes_in_use as raw_malloc's
 *    bytes are; what does not fit there fails with RECAP_ERROR_OUT_OF_MEMORY ("ncclMemAlloc:
 *    ... out of memory: tried to allocate N bytes on fake device D, which has F bytes free of
 *    T"). Freeing or deregistering what the fake did not hand out is
 *    RECAP_ERROR_INVALID_ARGUMENT.
 *  - load gives the version set by recap__fake_nccl_version (default 23203, NCCL 2.32.3).
 *  - group_start / group_end nest per thread (counted); a group_end without its start is
 *    RECAP_ERROR_INVALID_USAGE. Collectives inside a group run as outside one.
 * No thread may be inside a fake NCCL call at recap__fake_reset. */

extern const recap__nccl_ops_t recap__fake_nccl_ops;

/* A clique of nranks (1 to 64) communicators, rank i in comms[i]; they live until the next
 * reset. RECAP_ERROR_INVALID_ARGUMENT for a bad nranks or NULL comms. */
recap_status_t recap__fake_nccl_comms(int nranks, recap__nccl_comm_t comms[]);
/* The NCCL_VERSION_CODE that load reports (0: the default, 23203). Reset restores it. */
void recap__fake_nccl_version(int version);
/* How long a rank waits for the others before it fails (0: the default, 5000 ms). Reset
 * restores it. */
void recap__fake_nccl_timeout_ms(int ms);

typedef struct recap__fake_nccl_counters {
  uint64_t loads;        /* load calls that succeeded */
  uint64_t collectives;  /* collectives run to completion, each rank counting its own */
  uint64_t sends, recvs; /* sends deposited, receives completed */
  uint64_t failures;     /* runs that failed (mismatch, timeout, concurrent use) */
  int64_t waiting;       /* runs waiting for other ranks (or for a message) now */
  uint64_t group_starts, group_ends;
  int64_t mem_live; /* mem_alloc'ed and not mem_free'd, now */
  size_t mem_bytes; /* their bytes */
  uint64_t mem_allocs, mem_frees;
  int64_t registered_live; /* registrations not deregistered, now */
  size_t registered_bytes; /* their bytes */
  uint64_t registers, deregisters;
} recap__fake_nccl_counters_t;

/* The counters since the reset, read at once. */
recap__fake_nccl_counters_t recap__fake_nccl_now(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_FAKE_H */
