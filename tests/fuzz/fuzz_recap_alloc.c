/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_alloc.c — fuzz_recap's allocator operations: malloc, free, record_stream, stream
 * progress, empty_cache, option changes and injected faults.
 */
#include "fuzz_recap.h"

/* ---- the allocator ---------------------------------------------------------------------------- */

struct size_classes sizes;

/* recap_block_info's struct, the callable description's size and the backward's inputs and
 * outputs changed in one change of the public headers, which RECAP_CALLABLE_DESC_INIT marks:
 * the target builds against the headers before and after it. */
#ifdef RECAP_CALLABLE_DESC_INIT
static recap_status_t block_info(const void *p, void **base, size_t *usable) {
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  recap_status_t s = recap_block_info(p, &info);
  if (s == RECAP_SUCCESS) *base = info.base, *usable = info.bytes;
  return s;
}
#else
static recap_status_t block_info(const void *p, void **base, size_t *usable) {
  return recap_block_info(p, base, usable);
}
#endif

static size_t pick_size(void) {
  uint8_t kind = byte();
  uint16_t x = (uint16_t)(byte() | (byte() << 8));
  switch (kind % 4) {
    case 0: return 1 + x % 4096;
    case 1: return 1 + (size_t)x * sizes.small / 65536;
    case 2: return sizes.small + 1 + (size_t)x * (sizes.large - sizes.small - 1) / 65536;
    default: return sizes.large + (size_t)(x % 64) * (sizes.large / 16);
  }
}

void op_malloc(void) {
  int i = byte() % SLOTS, j = pick_stream();
  size_t size = pick_size();
  if (st.slots[i].p) return;
  bool reuse_check =
      st.prev_plain_free && st.last_free_slot_stream == j && !any_capture() && st.owner[j] < 0;
  size_t freed_usable = st.last_free_usable;
  recap_memory_stats_t before = RECAP_MEMORY_STATS_INIT;
  if (recap_memory_stats(-1, &before) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
  void *p = (void *)1;
  call_begins();
  recap_status_t s = recap_malloc(&p, size, st.streams[j]);
  call_ends();
  TRACE("recap_malloc(slot %d, %zu bytes, stream %d) -> %p %s", i, size, j, p,
        recap_status_name(s));
  events_may_have_waited();
  int g = st.owner[j];
  bool oom_allowed = st.memory_cap || fired(RECAP__FAKE_FAULT_RAW_MALLOC);
  if (s == RECAP_ERROR_OUT_OF_MEMORY && oom_allowed) {
    check_last(s, "recap_malloc");
  } else if (s == RECAP_ERROR_CAPTURE_INVALIDATED && g >= 0 &&
             (st.graphs[g].invalid || st.graphs[g].maybe_invalid)) {
    check_last(s, "recap_malloc");
  } else {
    expect(s, RECAP_SUCCESS, "recap_malloc");
  }
  if (s != RECAP_SUCCESS) {
    if (p) die("a failed recap_malloc left *ptr set", s);
    return;
  }
  if (!p) die("recap_malloc succeeded with NULL", s);
  size_t usable = 0;
  void *base = NULL;
  if (block_info(p, &base, &usable) != RECAP_SUCCESS || base != p || usable < size)
    die("recap_block_info disagrees with recap_malloc", 0);
  st.slots[i] = (slot_t){.p = p,
                         .size = size,
                         .usable = usable,
                         .stream = j,
                         .serial = ++st.next_serial,
                         .pool = g >= 0 ? st.graphs[g].pool_key : 0,
                         .split_at = st.max_split};
  check_no_overlap(i);
  write_tag(&st.slots[i]);
  /* A block freed by the previous call, on this stream, with no other stream's use and no
   * capture about, is in the cache; a request of the same rounded size must take it (or
   * another cached block), not a new segment. Limits: with max_split_size set, a freed block
   * that merged with free neighbours may legitimately be too large to split for a request
   * below the limit (PyTorch's rule), so the check holds for requests below large_threshold
   * only, which share large_segment-sized segments (docs/allocator.md). Where max_split_size
   * lies between large_threshold and large_segment, this is defect 1: every such request takes
   * a fresh segment. Values at or above large_segment cannot hit it. */
  if (reuse_check && usable == freed_usable && (st.max_split == 0 || size < sizes.large)) {
    recap_memory_stats_t after = RECAP_MEMORY_STATS_INIT;
    if (recap_memory_stats(-1, &after) != RECAP_SUCCESS) die("recap_memory_stats failed", 0);
    if (after.num_device_alloc != before.num_device_alloc) {
      bool defect_1 = st.max_split >= sizes.large && st.max_split <= sizes.segment;
      const char *what = "a request took a new segment though the block freed just before fits it";
      if (defect_1)
        known_defect(KNOWN_1,
                     "a request took a new segment though the block freed just before fits it "
                     "(defect 1: max_split_size between large_threshold and large_segment)",
                     s);
      else
        die(what, s);
    }
  }
}

void op_free(void) {
  int i = byte() % SLOTS;
  slot_t *sl = &st.slots[i];
  if (!sl->p || sl->pinned) return;
  check_tag(sl);
  bool plain = !sl->used_on && sl->pool == 0;
  int stream = sl->stream;
  size_t usable = sl->usable;
  call_begins();
  recap_status_t s = recap_free(sl->p);
  call_ends();
  TRACE("recap_free(slot %d) -> %s", i, recap_status_name(s));
  events_may_have_waited();
  expect(s, RECAP_SUCCESS, "recap_free");
  /* A graph that read this block as an input sees it dead from now on; while its capture is
   * under way the block's address may be handed out again and read as another block. */
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].state == CAPTURING)
      for (int k = 0; k < st.graphs[g].input_count; k++)
        if (st.graphs[g].inputs[k] == sl->serial) st.graphs[g].inputs_unknown = true;
  memset(sl, 0, sizeof *sl);
  st.last_was_plain_free = plain;
  st.last_free_slot_stream = stream;
  st.last_free_usable = usable;
}

void op_record_stream(void) {
  int i = byte() % SLOTS, j = pick_stream();
  slot_t *sl = &st.slots[i];
  if (!sl->p) return;
  call_begins();
  recap_status_t s = recap_record_stream(sl->p, st.streams[j]);
  call_ends();
  TRACE("recap_record_stream(slot %d, stream %d) -> %s", i, j, recap_status_name(s));
  expect(s, RECAP_SUCCESS, "recap_record_stream");
  if (j != sl->stream) sl->used_on = true;
  recap__fake_launch_kernel(st.streams[j], "fuzz_use");
}

void op_complete(void) {
  int j = pick_stream();
  TRACE("stream %d completes its work", j);
  recap__fake_stream_complete(st.streams[j]);
}

void op_empty_cache(void) {
  call_begins();
  recap_status_t s = recap_empty_cache();
  call_ends();
  TRACE("recap_empty_cache() -> %s", recap_status_name(s));
  /* docs/guarantees.md: refused while a capture is under way, nothing freed. An invalidated
   * capture not yet ended is still under way. */
  expect(s, any_capture() ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_empty_cache");
}

void op_option(void) {
  /* In units of large_threshold (10 MiB, or 160 KiB scaled). 1, 1.2 and 1.6 lie between
   * large_threshold and large_segment, where defect 1 (a fresh segment for every medium request)
   * wastes memory; its fix makes the option refuse them (max_split_size 0 or larger than
   * large_segment), so the model takes either outcome there: accepted, the reuse check in
   * op_malloc holds recap to its promise. */
  static const double split[] = {0, 1, 1.2, 1.6, 2.5, 4};
  static const double cap[] = {0, 3.2, 6.4, 25.6};
  uint8_t which = byte(), value = byte();
  bool is_split = which & 1;
  double f = is_split ? split[value % 6] : cap[value % 4];
  uint64_t bytes = (uint64_t)(f * (double)sizes.large);
  const char *name = is_split ? "max_split_size" : "memory_cap";
  call_begins();
  recap_status_t s = recap_option_set_u64(name, bytes);
  call_ends();
  TRACE("recap_option_set_u64(%s, %llu) -> %s", name, (unsigned long long)bytes,
        recap_status_name(s));
  if (is_split && bytes >= sizes.large && bytes <= sizes.segment && s == RECAP_ERROR_INVALID_VALUE)
    check_last(s, "recap_option_set_u64");
  else
    expect(s, RECAP_SUCCESS, "recap_option_set_u64");
  if (s != RECAP_SUCCESS) return;
  if (is_split)
    st.max_split = bytes;
  else
    st.memory_cap = bytes;
}

void op_fault(void) {
  static const recap__fake_fault_t kinds[] = {
      RECAP__FAKE_FAULT_RAW_MALLOC,   RECAP__FAKE_FAULT_EVENT_CREATE,
      RECAP__FAKE_FAULT_EVENT_RECORD, RECAP__FAKE_FAULT_CAPTURE_BEGIN,
      RECAP__FAKE_FAULT_CAPTURE_END,  RECAP__FAKE_FAULT_INSTANTIATE,
      RECAP__FAKE_FAULT_LAUNCH,       RECAP__FAKE_FAULT_STREAM_CREATE};
  uint8_t k = byte(), n = byte();
  recap__fake_fault_t kind = kinds[k % 8];
  TRACE("fault: the fake's call kind %d fails at its %dth call from now", (int)kind, 1 + n % 3);
  arm(kind, 1 + n % 3);
}
