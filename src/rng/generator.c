/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * generator.c — Philox generators whose numbers stay right across graph replays (PyTorch's
 * CUDAGeneratorImpl and its graph-safe state, in C).
 *
 * Eagerly, a kernel gets {seed, offset} by value and the offset advances. During a capture, the
 * generator attaches itself to the capturing graph (through the graph's hooks) the first time it
 * is used there; kernels then get pointers to the generator's 16 bytes of device state and an
 * offset within the graph, which grows as the capture draws. At capture end the graph keeps that
 * total. Before each replay the graph's hook writes the generator's current seed and offset into
 * the device state, on the replay stream, and advances the offset by the total — which is what
 * running the captured work eagerly would have done. A replay (or an eager kernel) that fails to
 * launch moves the offset back, unless another draw advanced it since: then the failed call's
 * numbers are skipped, never handed out twice.
 *
 * Inside a region's body (recap/region.h) a kernel's offset within the graph counts from where
 * the region began, and the end of each body adds what the body drew to the base offset on the
 * device (the seam's rng_advance), so every iteration of a loop draws fresh numbers, and what
 * follows the region starts after the iterations that ran, as eager calls would. How many ran is
 * known on the device only: the third device word sums what bodies drew since the host last
 * looked, every replay's state write adds it to the base, and the host folds it into the offset
 * (a device synchronisation) only when it needs the offset itself: an eager draw, reading or
 * setting the offset or the seed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/args.h"
#include "core/error.h"
#include "core/host.h"
#include "device/rng_launch.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

enum { GENERATOR_MAGIC = 0x72676e67 /* "rgng" */ };

struct recap_generator {
  uint32_t magic; /* GENERATOR_MAGIC while the user's handle is valid */
  pthread_mutex_t lock;
  uint64_t seed;
  uint64_t offset; /* in 32-bit values per thread; always a multiple of 4 */
  /* {seed, base offset, offset drawn by region bodies since the last fold}: captured kernels read
   * the first two; region bodies advance the last two on the device. */
  uint64_t *device_state;
  bool device_ahead; /* a replay whose bodies draw ran since the last fold: word 2 may be set */
  /* Replays whose bodies draw, between their state write and their launch: a fold meanwhile
   * cannot see what they will draw, so it leaves device_ahead set. */
  int replays_launching;
  int references;          /* the user's, plus one per graph that captured it */
  bool destroyed;          /* the user destroyed it; graphs still hold it */
  recap_graph_t capturing; /* the graph whose capture uses it now */
  uint64_t offset_intragraph;
  uint64_t version; /* counts every change of seed or offset, so an advance can be undone
                       exactly when nothing changed them since */
};

/* How to move an advance of the offset back: the offset before it and the version after. */
typedef struct advance {
  uint64_t offset_before, version_after;
  bool done;
} advance_t;

/* One generator used by one graph. */
typedef struct rng_use {
  recap_generator_t generator;
  uint64_t increment; /* what one replay consumes outside region bodies */
  advance_t replay;   /* the latest replay's advance (one thread replays a graph at a time) */
  /* Region bodies (recap/region.h): the generator's offset within the graph where the body
   * being captured at each depth began (index depth; 0 unused), and whether a body draws (its
   * replays then advance the offset on the device). */
  uint64_t body_start[RECAP_REGION_MAX_DEPTH + 1];
  bool draws_in_bodies;
  bool launching; /* counted in the generator's replays_launching */
  /* While the graph is being embedded in another capture (use_embed_begin to use_embed_end):
   * the shift of the device's base offset enqueued before the node, and the use of the outer
   * graph attached for it (NULL: the outer capture used the generator already). */
  uint64_t embed_shift;
  struct rng_use *embed_attached;
} rng_use_t;

static uint64_t round4(uint64_t increment) { return (increment + 3) & ~(uint64_t)3; }

/* Take the offset and advance it by step (gen->lock held). */
static uint64_t advance(recap_generator_t gen, uint64_t step, advance_t *a) {
  uint64_t offset = gen->offset;
  gen->offset += step;
  *a = (advance_t){.offset_before = offset, .version_after = ++gen->version, .done = true};
  return offset;
}

/* The call that advanced failed: move the offset back, unless the seed or offset changed since
 * (a concurrent draw took the numbers after it; they must not be handed out twice). */
static void undo_advance(recap_generator_t gen, advance_t *a) {
  if (!a->done) return;
  pthread_mutex_lock(&gen->lock);
  if (gen->version == a->version_after) {
    gen->offset = a->offset_before;
    gen->version++;
  }
  pthread_mutex_unlock(&gen->lock);
  a->done = false;
}

/* The generator's device words come straight from the driver, outside recap's pools: every
 * graph that captured the generator reads them, whatever its pool, and the host reads word 2
 * whenever it folds, so they must never sleep with a pool (recap_sleep, recap_pool_sleep), nor be
 * dropped by a DISCARD: word 2 is recap's own count, which no replay writes again. A capture
 * under way in any thread would forbid cudaMalloc and cudaFree in global mode, though the words
 * are no part of its work: the thread's capture mode is relaxed around the calls, as the
 * allocator does for its segments. allocate: *words receives them; else *words is freed. */
enum { STATE_BYTES = 3 * sizeof(uint64_t) };

static recap_status_t state_words(uint64_t **words, bool allocate) {
  const recap__device_ops_t *dev = recap__device();
  recap__capture_mode_t saved = RECAP__CAPTURE_MODE_RELAXED;
  bool relaxed = dev->exchange_capture_mode(&saved) == RECAP_SUCCESS;
  recap_status_t s =
      allocate ? dev->raw_malloc((void **)words, STATE_BYTES) : dev->raw_free(*words);
  if (relaxed) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    (void)dev->exchange_capture_mode(&saved);
    (void)recap__error_restore(&cause);
  }
  return s;
}

static void drop_reference(recap_generator_t gen) {
  pthread_mutex_lock(&gen->lock);
  bool last = --gen->references == 0;
  pthread_mutex_unlock(&gen->lock);
  if (!last) return;
  (void)state_words(&gen->device_state, false);
  pthread_mutex_destroy(&gen->lock);
  recap__host_free(gen);
}

recap_status_t recap_generator_create(recap_generator_t *generator, uint64_t seed) {
  RECAP__ARG(generator != NULL, "recap_generator_create: generator is NULL");
  *generator = NULL;
  recap_generator_t gen = recap__host_calloc(1, sizeof *gen);
  if (!gen)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_generator_create: out of host memory");
  /* Outside every pool (state_words says why). */
  recap_status_t s = state_words(&gen->device_state, true);
  if (s != RECAP_SUCCESS) {
    char cause[256]; /* the message below is formatted into the buffer the cause lives in */
    snprintf(cause, sizeof cause, "%s", recap_last_error());
    recap__host_free(gen);
    return recap__error(s,
                        "recap_generator_create: the generator's device state (%d bytes) could "
                        "not be allocated: %s",
                        (int)STATE_BYTES, cause);
  }
  /* Word 2 is added to the base offset at every replay: it starts at 0. */
  static const uint64_t zero = 0;
  s = recap__device()->memcpy_async(gen->device_state + 2, &zero, sizeof zero, NULL);
  if (s == RECAP_SUCCESS) s = recap__device()->stream_synchronize(NULL);
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    (void)state_words(&gen->device_state, false);
    recap__error_restore(&cause);
    recap__host_free(gen);
    return s;
  }
  pthread_mutex_init(&gen->lock, NULL);
  gen->magic = GENERATOR_MAGIC;
  gen->seed = seed;
  gen->references = 1;
  *generator = gen;
  return RECAP_SUCCESS;
}

/* A live handle (core/args.h: the magic is cleared at destroy). */
static recap_status_t check_handle(recap_generator_t gen, const char *function) {
  return RECAP__HANDLE_CHECK(gen, GENERATOR_MAGIC, function, "generator", "generator",
                             "recap_generator_create");
}

recap_status_t recap_generator_destroy(recap_generator_t gen) {
  if (!gen) return RECAP_SUCCESS;
  RECAP__CHECK(check_handle(gen, "recap_generator_destroy"));
  pthread_mutex_lock(&gen->lock);
  gen->magic = 0;
  gen->destroyed = true;
  pthread_mutex_unlock(&gen->lock);
  drop_reference(gen);
  return RECAP_SUCCESS;
}

/* Calls that need the generator outside any capture. */
static recap_status_t refuse_during_capture(recap_generator_t gen, const char *function,
                                            const char *why) {
  if (!gen->capturing) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "%s: a graph capture that uses this generator is under way; %s", function,
                      why);
}

/* Fold what region bodies drew on the device into the offset (gen->lock held): wait for the
 * device, read word 2, add it, and set it back to 0, so that the host's offset is the whole
 * truth again. Nothing to do unless a replay whose bodies draw ran since the last fold. */
static recap_status_t fold(recap_generator_t gen, const char *function) {
  if (!gen->device_ahead) return RECAP_SUCCESS;
  /* A device synchronisation during a capture would invalidate it (global mode). */
  if (recap__registry_active() > 0)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "%s: loops of the generator's last replays drew on the device, and reading "
                        "how far needs a device synchronisation, which a graph capture under way "
                        "forbids; call it once no capture is under way",
                        function);
  const recap__device_ops_t *dev = recap__device();
  uint64_t drawn = 0;
  static const uint64_t zero = 0;
  recap_status_t s = dev->device_synchronize();
  if (s == RECAP_SUCCESS) s = dev->memcpy_async(&drawn, gen->device_state + 2, sizeof drawn, NULL);
  if (s == RECAP_SUCCESS) s = dev->stream_synchronize(NULL);
  if (s == RECAP_SUCCESS) s = dev->memcpy_async(gen->device_state + 2, &zero, sizeof zero, NULL);
  if (s == RECAP_SUCCESS) s = dev->stream_synchronize(NULL);
  if (s != RECAP_SUCCESS) {
    char cause[256]; /* the message below is formatted into the buffer the cause lives in */
    snprintf(cause, sizeof cause, "%s", recap_last_error());
    return recap__error(s,
                        "%s: reading what the loops of the last replays drew from the device "
                        "failed (%s); the generator's offset is unchanged",
                        function, cause);
  }
  gen->offset += drawn;
  gen->version++;
  gen->device_ahead = gen->replays_launching > 0;
  return RECAP_SUCCESS;
}

recap_status_t recap_generator_seed_set(recap_generator_t gen, uint64_t seed) {
  RECAP__CHECK(check_handle(gen, "recap_generator_seed_set"));
  pthread_mutex_lock(&gen->lock);
  recap_status_t s = refuse_during_capture(
      gen, "recap_generator_seed_set",
      "the graph would replay with a seed it never saw. Set the seed before capture_begin or "
      "after capture_end (it then takes effect at the next replay)");
  if (s == RECAP_SUCCESS) s = fold(gen, "recap_generator_seed_set");
  if (s == RECAP_SUCCESS) {
    gen->seed = seed;
    gen->offset = 0;
    gen->version++;
  }
  pthread_mutex_unlock(&gen->lock);
  return s;
}

recap_status_t recap_generator_seed_get(recap_generator_t gen, uint64_t *seed) {
  RECAP__CHECK(check_handle(gen, "recap_generator_seed_get"));
  RECAP__ARG(seed != NULL, "recap_generator_seed_get: seed is NULL");
  pthread_mutex_lock(&gen->lock);
  *seed = gen->seed;
  pthread_mutex_unlock(&gen->lock);
  return RECAP_SUCCESS;
}

recap_status_t recap_generator_offset_get(recap_generator_t gen, uint64_t *offset) {
  RECAP__CHECK(check_handle(gen, "recap_generator_offset_get"));
  RECAP__ARG(offset != NULL, "recap_generator_offset_get: offset is NULL");
  pthread_mutex_lock(&gen->lock);
  recap_status_t s = refuse_during_capture(
      gen, "recap_generator_offset_get",
      "its value depends on replays that have not happened. Read it after capture_end");
  if (s == RECAP_SUCCESS) s = fold(gen, "recap_generator_offset_get");
  if (s == RECAP_SUCCESS) *offset = gen->offset;
  pthread_mutex_unlock(&gen->lock);
  return s;
}

recap_status_t recap_generator_offset_set(recap_generator_t gen, uint64_t offset) {
  RECAP__CHECK(check_handle(gen, "recap_generator_offset_set"));
  RECAP__ARG(offset % 4 == 0,
             "recap_generator_offset_set: offset %llu is not a multiple of 4 (each Philox draw "
             "uses 4 values)",
             (unsigned long long)offset);
  pthread_mutex_lock(&gen->lock);
  recap_status_t s = refuse_during_capture(gen, "recap_generator_offset_set",
                                           "set it before capture_begin or after capture_end");
  if (s == RECAP_SUCCESS) s = fold(gen, "recap_generator_offset_set");
  if (s == RECAP_SUCCESS) {
    gen->offset = offset;
    gen->version++;
  }
  pthread_mutex_unlock(&gen->lock);
  return s;
}

/* The names of 0.1, deprecated (recap/rng.h). */
recap_status_t recap_generator_set_seed(recap_generator_t gen, uint64_t seed) {
  return recap_generator_seed_set(gen, seed);
}
recap_status_t recap_generator_get_seed(recap_generator_t gen, uint64_t *seed) {
  return recap_generator_seed_get(gen, seed);
}
recap_status_t recap_generator_get_offset(recap_generator_t gen, uint64_t *offset) {
  return recap_generator_offset_get(gen, offset);
}
recap_status_t recap_generator_set_offset(recap_generator_t gen, uint64_t offset) {
  return recap_generator_offset_set(gen, offset);
}

/* ------------------------------------------------------------------------------------------
 * The graph side
 * ---------------------------------------------------------------------------------------- */

static recap_status_t use_before_replay(void *ctx, recap_graph_t graph, recap_stream_t stream) {
  (void)graph;
  rng_use_t *use = ctx;
  recap_generator_t gen = use->generator;
  /* Replayed inside a capture recap did not begin (a capture into a recap graph embeds the
   * graph instead, use_embed_begin), the write below would be captured with today's values and
   * the outer graph would draw the same numbers at every replay. */
  recap__capture_status_t status;
  uint64_t id;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
  if (status != RECAP__CAPTURE_NONE)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_graph_replay: the graph draws random numbers, and replaying it "
                        "inside a capture that recap did not begin would freeze them; capture "
                        "with recap_graph_capture_begin (the replay then embeds the graph) or "
                        "capture that work directly");
  /* The words are read by this replay on `stream`; they go back to the driver with cudaFree
   * (state_words), which waits for the device, so no stream's use of them needs recording. */
  /* Take the offset, advance it and enqueue the state write in one step under the lock, so
   * that concurrent replays get distinct ranges and a fold (which zeroes word 2) never falls
   * between a replay's offset and its write. */
  pthread_mutex_lock(&gen->lock);
  uint64_t seed = gen->seed, offset = advance(gen, use->increment, &use->replay);
  recap_status_t s = recap__device()->rng_write_state(stream, gen->device_state, seed, offset);
  /* Its bodies will add what they draw to word 2 once it launches (a failed replay adds
   * nothing: a fold then reads 0). */
  if (s == RECAP_SUCCESS && use->draws_in_bodies) {
    gen->device_ahead = true;
    gen->replays_launching++;
    use->launching = true;
  }
  pthread_mutex_unlock(&gen->lock);
  if (s != RECAP_SUCCESS) undo_advance(gen, &use->replay);
  return s;
}

/* The replay launched (or failed): it no longer holds folds back. */
static void end_launching(rng_use_t *use) {
  if (!use->launching) return;
  pthread_mutex_lock(&use->generator->lock);
  use->generator->replays_launching--;
  pthread_mutex_unlock(&use->generator->lock);
  use->launching = false;
}

static void use_replay_done(void *ctx, recap_graph_t graph) {
  (void)graph;
  end_launching(ctx);
}

/* The launch (or a later hook) failed: the replay drew nothing. The state words written above
 * are harmless: the next replay writes them again before it reads them. */
static void use_replay_failed(void *ctx, recap_graph_t graph) {
  (void)graph;
  rng_use_t *use = ctx;
  end_launching(use);
  undo_advance(use->generator, &use->replay);
}

static void use_capture_ended(void *ctx, recap_graph_t graph, bool succeeded) {
  (void)graph;
  rng_use_t *use = ctx;
  recap_generator_t gen = use->generator;
  pthread_mutex_lock(&gen->lock);
  if (succeeded) use->increment = gen->offset_intragraph;
  gen->capturing = NULL;
  gen->offset_intragraph = 0;
  pthread_mutex_unlock(&gen->lock);
}

static void use_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  rng_use_t *use = ctx;
  drop_reference(use->generator);
  recap__host_free(use);
}

/* A body begins at depth: its draws count from the generator's offset within the graph now. */
static recap_status_t use_nested_capture_begin(void *ctx, recap_graph_t graph, unsigned depth) {
  (void)graph;
  rng_use_t *use = ctx;
  if (depth == 0 || depth > RECAP_REGION_MAX_DEPTH)
    return recap__error(RECAP_ERROR_INTERNAL, "generator: a region body at depth %u", depth);
  pthread_mutex_lock(&use->generator->lock);
  use->body_start[depth] = use->generator->offset_intragraph;
  pthread_mutex_unlock(&use->generator->lock);
  return RECAP_SUCCESS;
}

/* The body at depth ends: append the advance of the base offset by what it drew, so that the
 * next iteration draws fresh numbers and what follows the region starts after them; the
 * offset within the graph goes back to the region's start (the next branch, or the work after
 * the region, counts from there on the advanced base). */
static recap_status_t use_nested_capture_end(void *ctx, recap_graph_t graph, recap_stream_t stream,
                                             unsigned depth) {
  (void)graph;
  rng_use_t *use = ctx;
  recap_generator_t gen = use->generator;
  if (depth == 0 || depth > RECAP_REGION_MAX_DEPTH)
    return recap__error(RECAP_ERROR_INTERNAL, "generator: a region body at depth %u", depth);
  pthread_mutex_lock(&gen->lock);
  uint64_t start = use->body_start[depth], drawn = gen->offset_intragraph - start;
  pthread_mutex_unlock(&gen->lock);
  if (drawn == 0) return RECAP_SUCCESS;
  RECAP__CHECK(recap__device()->rng_advance(stream, gen->device_state, drawn));
  pthread_mutex_lock(&gen->lock);
  gen->offset_intragraph = start;
  use->draws_in_bodies = true;
  pthread_mutex_unlock(&gen->lock);
  return RECAP_SUCCESS;
}

/* Defined below the functions it names, which attach and detach it. */
static const recap__graph_hooks_t rng_hooks;

/* Attach gen to graph's capture (called with gen->lock held); *made: the use attached. */
static recap_status_t attach(recap_generator_t gen, recap_graph_t graph, rng_use_t **made) {
  rng_use_t *use = recap__host_calloc(1, sizeof *use);
  if (!use) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "generator: out of host memory");
  use->generator = gen;
  /* Joining inside region bodies: it drew nothing before, so each body open now began at 0
   * (body_start is zeroed). */
  recap_status_t s = recap__graph_add_hook(graph, &rng_hooks, use);
  if (s != RECAP_SUCCESS) {
    recap__host_free(use);
    return s;
  }
  gen->references++;
  gen->capturing = graph;
  gen->offset_intragraph = 0;
  *made = use;
  return RECAP_SUCCESS;
}

/* Undo attach (gen->lock held): nothing was drawn through use. The reference dropped is not
 * the last: the caller holds one through the embedded graph's use. */
static void detach(recap_generator_t gen, recap_graph_t graph, rng_use_t *use) {
  recap__graph_remove_hook(graph, &rng_hooks, use);
  recap__host_free(use);
  gen->references--;
  gen->capturing = NULL;
  gen->offset_intragraph = 0;
}

/* Refused when another capture under way uses gen (gen->lock held): two captures under way
 * cannot share a generator. */
static recap_status_t refuse_shared(recap_generator_t gen, recap_graph_t outer) {
  if (!gen->capturing || gen->capturing == outer) return RECAP_SUCCESS;
  return recap__error(RECAP_ERROR_INVALID_USAGE,
                      "recap_graph_replay: cannot embed the graph into the capture on this stream: "
                      "it draws from a generator that another capture under way uses; give "
                      "concurrent captures generators of their own");
}

static recap_status_t use_embed_refused(void *ctx, recap_graph_t graph, recap_graph_t outer) {
  (void)graph;
  recap_generator_t gen = ((rng_use_t *)ctx)->generator;
  pthread_mutex_lock(&gen->lock);
  recap_status_t s = refuse_shared(gen, outer);
  pthread_mutex_unlock(&gen->lock);
  return s;
}

/* The graph that uses this generator is embedded in outer's capture on stream (embed.c): its
 * kernels read the device's base offset plus their own offsets within the graph, which start at
 * 0, so the base is shifted on the device by what the outer capture drew so far before the node
 * (and back after it, use_embed_end), and the outer capture counts the graph's increment as
 * drawn after that. Each replay of the outer graph then writes the state and advances the
 * offset by its own total, which holds the embedded increments: its draws land where the same
 * work run eagerly draws, and what follows starts after them. The shift travels with the node
 * when the outer graph is embedded in turn, being relative. */
static recap_status_t use_embed_begin(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                      recap_stream_t stream) {
  (void)graph;
  rng_use_t *use = ctx;
  recap_generator_t gen = use->generator;
  use->embed_shift = 0;
  use->embed_attached = NULL;
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&gen->lock);
  s = refuse_shared(gen, outer);
  if (s == RECAP_SUCCESS && !gen->capturing) s = attach(gen, outer, &use->embed_attached);
  uint64_t shift = gen->offset_intragraph;
  if (s == RECAP_SUCCESS && shift > 0) {
    s = recap__device()->rng_advance(stream, gen->device_state, shift);
    if (s == RECAP_SUCCESS) use->embed_shift = shift;
  }
  if (s != RECAP_SUCCESS && use->embed_attached) {
    detach(gen, outer, use->embed_attached);
    use->embed_attached = NULL;
  }
  pthread_mutex_unlock(&gen->lock);
  return s;
}

/* After the node (added) the base goes back and the outer capture counts the graph's draws;
 * without it the shift is taken back and an attachment made for it undone. The word that sums
 * what region bodies drew moves with the base and back, so it ends where it began. */
static recap_status_t use_embed_end(void *ctx, recap_graph_t graph, recap_graph_t outer,
                                    recap_stream_t stream, bool added) {
  (void)graph;
  rng_use_t *use = ctx;
  recap_generator_t gen = use->generator;
  pthread_mutex_lock(&gen->lock);
  recap_status_t s = RECAP_SUCCESS;
  if (use->embed_shift > 0)
    s = recap__device()->rng_advance(stream, gen->device_state, (uint64_t)0 - use->embed_shift);
  if (added)
    gen->offset_intragraph += use->increment;
  else if (use->embed_attached)
    detach(gen, outer, use->embed_attached);
  use->embed_shift = 0;
  use->embed_attached = NULL;
  pthread_mutex_unlock(&gen->lock);
  return s;
}

static const recap__graph_hooks_t rng_hooks = {
    .name = "random-number generators",
    .embed_refused = use_embed_refused,
    .embed_begin = use_embed_begin,
    .embed_end = use_embed_end,
    .before_replay = use_before_replay,
    .replay_failed = use_replay_failed,
    .replay_done = use_replay_done,
    .capture_ended = use_capture_ended,
    .release = use_release,
    .nested_capture_begin = use_nested_capture_begin,
    .nested_capture_end = use_nested_capture_end,
};

/* recap_generator_philox_state; an eager advance is described in *eager, for the caller to
 * undo should its launch fail. */
static recap_status_t philox_state(recap_generator_t gen, recap_stream_t stream, uint64_t increment,
                                   recap_philox_state_t *state, advance_t *eager) {
  eager->done = false;
  recap__capture_status_t status;
  uint64_t id = 0;
  RECAP__CHECK(recap__device()->stream_capture_info(stream, &status, &id));
  if (status == RECAP__CAPTURE_INVALIDATED)
    return recap__error(RECAP_ERROR_CAPTURE_INVALIDATED,
                        "recap_generator_philox_state: the stream's capture was invalidated");
  recap_graph_t graph = status == RECAP__CAPTURE_ACTIVE ? recap__registry_find(id) : NULL;
  if (status == RECAP__CAPTURE_ACTIVE && !graph)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_generator_philox_state: the stream is capturing, but not into a "
                        "recap graph, so nothing would update the generator at replay; capture "
                        "with recap_graph_capture_begin");
  uint64_t step = round4(increment);
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&gen->lock);
  if (!graph) {
    s = fold(gen, "recap_generator_philox_state");
    if (s == RECAP_SUCCESS) {
      *state = (recap_philox_state_t){.seed = gen->seed};
      state->offset = advance(gen, step, eager);
    }
  } else {
    if (gen->capturing && gen->capturing != graph)
      s = recap__error(RECAP_ERROR_INVALID_USAGE,
                       "recap_generator_philox_state: the generator is already used by another "
                       "capture under way; give concurrent captures generators of their own");
    else if (!gen->capturing) {
      rng_use_t *made;
      s = attach(gen, graph, &made);
    }
    if (s == RECAP_SUCCESS) {
      *state = (recap_philox_state_t){.seed_ptr = gen->device_state,
                                      .offset_ptr = gen->device_state + 1,
                                      .offset_intragraph = gen->offset_intragraph,
                                      .captured = 1};
      gen->offset_intragraph += step;
    }
  }
  pthread_mutex_unlock(&gen->lock);
  return s;
}

recap_status_t recap_generator_philox_state(recap_generator_t gen, uint64_t increment,
                                            recap_stream_t stream, recap_philox_state_t *state) {
  RECAP__CHECK(check_handle(gen, "recap_generator_philox_state"));
  RECAP__ARG(state != NULL, "recap_generator_philox_state: state is NULL");
  RECAP__ARG(increment <= UINT64_MAX - 3,
             "recap_generator_philox_state: increment %llu is out of range",
             (unsigned long long)increment);
  advance_t eager;
  return philox_state(gen, stream, increment, state, &eager);
}

/* ------------------------------------------------------------------------------------------
 * Library kernels
 * ---------------------------------------------------------------------------------------- */

static recap_status_t launch(recap_generator_t gen, recap__rng_launch_t *l, const char *function) {
  RECAP__CHECK(check_handle(gen, function));
  RECAP__ARG(l->out != NULL || l->n == 0, "%s: out is NULL", function);
  if (l->n == 0) return RECAP_SUCCESS;
  uint64_t increment;
  recap__rng_shape(l->n, &l->grid, &increment);
  advance_t eager;
  RECAP__CHECK(philox_state(gen, l->stream, increment, &l->state, &eager));
  recap_status_t s = recap__device()->rng_launch(l);
  /* A kernel that did not launch drew nothing. */
  if (s != RECAP_SUCCESS) undo_advance(gen, &eager);
  return s;
}

recap_status_t recap_rng_uniform(recap_generator_t gen, float *out, size_t n,
                                 recap_stream_t stream) {
  recap__rng_launch_t l = {.kind = RECAP__RNG_UNIFORM, .out = out, .n = n, .stream = stream};
  return launch(gen, &l, "recap_rng_uniform");
}

recap_status_t recap_rng_normal(recap_generator_t gen, float *out, size_t n, float mean,
                                float stddev, recap_stream_t stream) {
  RECAP__ARG(stddev >= 0.0f, "recap_rng_normal: stddev %g is negative", (double)stddev);
  recap__rng_launch_t l = {
      .kind = RECAP__RNG_NORMAL, .out = out, .n = n, .a = mean, .b = stddev, .stream = stream};
  return launch(gen, &l, "recap_rng_normal");
}

recap_status_t recap_rng_randint(recap_generator_t gen, int32_t *out, size_t n, int32_t low,
                                 int32_t high, recap_stream_t stream) {
  RECAP__ARG(high > low, "recap_rng_randint: the range [%d, %d) is empty", (int)low, (int)high);
  recap__rng_launch_t l = {
      .kind = RECAP__RNG_RANDINT, .out = out, .n = n, .low = low, .high = high, .stream = stream};
  return launch(gen, &l, "recap_rng_randint");
}

recap_status_t recap_rng_dropout(recap_generator_t gen, const float *in, float *out, uint8_t *mask,
                                 size_t n, float p, recap_stream_t stream) {
  RECAP__ARG(p >= 0.0f && p < 1.0f, "recap_rng_dropout: p = %g is not in [0, 1)", (double)p);
  RECAP__ARG(in != NULL || n == 0, "recap_rng_dropout: in is NULL");
  recap__rng_launch_t l = {.kind = RECAP__RNG_DROPOUT,
                           .in = in,
                           .out = out,
                           .mask = mask,
                           .n = n,
                           .a = p,
                           .stream = stream};
  return launch(gen, &l, "recap_rng_dropout");
}
