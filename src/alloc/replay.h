/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay.h — the allocation log of a capture and its replay at a recapture (replay.c).
 */
#ifndef RECAP_ALLOC_REPLAY_H
#define RECAP_ALLOC_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/options.h"
#include "recap/alloc.h"
#include "recap/core.h"

/*
 * A graph that is captured again wants the same addresses, so that its new template differs
 * from the old one only where the step really changed (cudaGraphExecUpdate applies it in place)
 * and its pool does not grow with every recapture. The graph layer attaches two logs to the
 * route of a capture: the one it records now, and the one its previous capture recorded.
 *
 * The replay rule (what "the i-th allocation" means): the routed allocations of the capture are
 * matched against the replay log in order. An allocation of rounded size R takes the first
 * entry not used yet, at or after the cursor (the first unused entry), whose size is R: entry i
 * by position when the sequence is the same, else the next entry of the same size (an extra or
 * a changed allocation takes nothing from the entries before it). It gets exactly that entry's
 * address when the range is free in the pool now, on the allocation's stream, in a free block
 * of its size class, or, for a request of the small class in a graph pool with VMM segments, of
 * the pool's large VMM segments (a hit: the free block is split around it); else it is a miss,
 * and the entry is used up either way. A miss (no entry of that size, or its range not free)
 * goes to free space of the pool that no unused entry claims (the lowest such address in the
 * best fitting free block of its size class, then, for such a small request, of the large VMM
 * segments); when there is none, to a new segment, so that an allocation the old
 * capture did not make does not take the range a later one of the same sequence is about to
 * ask for. Thus an identical sequence gets identical addresses, and a different one grows the
 * pool only by what it needs beyond the old capture. Blocks of max_split_size or more follow the
 * usual rules: a hit or a miss placement never gives a request below max_split_size a part of
 * such a block (but the start of one less than round_large larger than the request, as a new
 * segment made for it would be), nor an oversize request any but a whole free block less than
 * large_segment larger than itself.
 */

/* What a capture allocated from its pool, in order: address and rounded size of each block
 * handed out through the route. Owned by the graph layer (zero-initialize it; free it with
 * recap__alloc_log_free). `incomplete`: an entry could not be appended for want of host memory
 * (the allocation itself succeeded); such a log still replays, its later entries matched by
 * size as after any divergence. */
typedef struct recap__alloc_log {
  struct recap__alloc_log_entry {
    void *ptr;
    size_t size;
  } * v;
  size_t count, capacity;
  bool incomplete;
} recap__alloc_log_t;
/* Free the entries and zero the log, for reuse. NULL is a no-op. */
void recap__alloc_log_free(recap__alloc_log_t *log);

/* Attach logs to the route of pool (pool.c; reserved or active, on device), replacing what was
 * attached and starting the counters, the cursor and the used marks over: every allocation
 * routed to the pool from now on is appended to *record (when not NULL; the caller empties it
 * first if it wants only this capture's), and, when replay is not NULL, placed by the replay
 * rule above. Both NULL: detach (the route then costs malloc nothing). The logs must stay
 * valid until the route ends or they are detached; record and replay must differ. Errors:
 * INVALID_USAGE when pool is not routed on device, INVALID_ARGUMENT when record == replay,
 * OUT_OF_MEMORY (nothing attached) when the route's host state cannot be had. */
recap_status_t recap__pool_route_set_logs(int device, recap_pool_id_t pool,
                                          recap__alloc_log_t *record,
                                          const recap__alloc_log_t *replay);
/* recap__pool_route_reserve (pool.h) with record and replay attached as by
 * recap__pool_route_set_logs, in one take of the allocator's lock: a capture's beginning.
 * Errors: those of both; on any, nothing is reserved or attached. */
recap_status_t recap__pool_route_reserve_logged(int device, recap_pool_id_t pool,
                                                recap__alloc_log_t *record,
                                                const recap__alloc_log_t *replay);
/* The route's counters since its logs were attached: *hits, the allocations that got the
 * replay log's address; *misses, the other allocations routed while logs were attached
 * (without a replay log every one is a miss). Read them before recap__pool_route_end, which
 * detaches the logs. INVALID_USAGE when pool is not routed on device; a route with no logs
 * gives 0 and 0. */
recap_status_t recap__pool_route_replay_stats(int device, recap_pool_id_t pool, uint64_t *hits,
                                              uint64_t *misses);

/* The hook of the allocation path (replay_take.c calls it only for a route with logs; lock held).
 * Where the next allocation of `rounded` bytes on stream goes, by the replay rule:
 * RECAP__REPLAY_AT: at *at, inside *block, a free member of set (*hit says whether it is the replay
 * log's address); RECAP__REPLAY_NEW_SEGMENT: a new segment (no unclaimed space fits);
 * RECAP__REPLAY_USUAL: the usual best fit (no replay log). `also`, when not NULL, is a second free
 * set whose blocks of VMM segments serve the request too, after set's (the pool's large set, for a
 * small request of a graph pool with VMM segments: segment_growth.c recap__alloc_take_from_large);
 * *block may then be a member of it. */
typedef enum recap__replay_place {
  RECAP__REPLAY_USUAL,
  RECAP__REPLAY_AT,
  RECAP__REPLAY_NEW_SEGMENT
} recap__replay_place_t;
recap__replay_place_t recap__replay_place(recap__route_logs_t *logs, const recap__free_set_t *set,
                                          const recap__free_set_t *also, recap_stream_t stream,
                                          size_t rounded, const recap__options_t *o,
                                          recap__block_t **block, char **at, bool *hit);
/* The miss placement of the replay rule alone (no entry used up): where in the free blocks of
 * set an allocation of `rounded` bytes on stream fits outside the unused entries' ranges; false
 * when nowhere, or without a replay log. What a VMM segment's growth asks after it grew for a
 * RECAP__REPLAY_NEW_SEGMENT placement, since the grown free tail may be claimed (lock held). */
bool recap__replay_place_unclaimed(const recap__route_logs_t *logs, const recap__free_set_t *set,
                                   recap_stream_t stream, size_t rounded, const recap__options_t *o,
                                   recap__block_t **block, char **at);
/* Whether logs hold a replay log, whose rule places the allocations; without one the usual
 * placement (the front cache's included) serves them, and they are only noted. */
bool recap__route_logs_replay(const recap__route_logs_t *logs);
/* Count the allocation handed out at ptr and append it to the record log (lock held). */
void recap__replay_note(recap__route_logs_t *logs, void *ptr, size_t rounded, bool hit);
/* The state a route keeps for its logs (replay.c): made before the route takes it (NULL
 * without host memory), freed at route end, detach or allocator reset (NULL is a no-op), and
 * its counters (0 and 0 for NULL). */
recap__route_logs_t *recap__route_logs_new(recap__alloc_log_t *record,
                                           const recap__alloc_log_t *replay);
void recap__route_logs_delete(recap__route_logs_t *logs);
void recap__route_logs_counts(const recap__route_logs_t *logs, uint64_t *hits, uint64_t *misses);

#endif /* RECAP_ALLOC_REPLAY_H */
