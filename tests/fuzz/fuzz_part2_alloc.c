/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_alloc.c — fuzz_part2's allocations: malloc, free, empty_cache, and blocks of a VMM
 * segment freed in its middle.
 */
#include "fuzz_part2.h"

/* ---- allocations ------------------------------------------------------------------------------ */

static size_t pick_size(void) {
  uint8_t kind = byte();
  size_t v = (size_t)byte() << 8 | byte();
  switch (kind % 4) {
    case 0: return 1 + v % (4 * KiB);
    case 1: return 1 + v % (64 * KiB);
    case 2: return 1 + (size_t)v * 16 % (512 * KiB);
    default: return 1 + (size_t)v * 64 % (3 * MiB);
  }
}

void op_malloc(void) {
  int i = byte() % SLOTS;
  size_t size = pick_size();
  uint8_t pattern = byte();
  slot_t *s = &st.slots[i];
  if (s->p) return;
  int g = capturing_graph();
  int pool = g >= 0 ? st.graphs[g].pool : 0;
  recap_status_t allowed = RECAP_SUCCESS;
  if (asleep(pool)) allowed = RECAP_ERROR_POOL_ASLEEP;
  if (g >= 0 && st.graphs[g].invalid) allowed = -1; /* see below */
  void *p = NULL;
  call_begins();
  recap_status_t r = recap_malloc(&p, size, st.cap);
  call_ends();
  if (allowed == (recap_status_t)-1) {
    /* An invalidated capture's routing may still serve it or refuse: the docs leave it open. */
    TRACE("recap_malloc(%zu) in an invalidated capture: %s", size, recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL) die("recap_malloc", r);
  } else if (r == RECAP_ERROR_OUT_OF_MEMORY && allowed == RECAP_SUCCESS) {
    TRACE("recap_malloc(%zu): out of memory", size); /* the device is 256 MiB */
  } else {
    status(r, allowed, "recap_malloc");
  }
  if (r != RECAP_SUCCESS) {
    if (p) die("a failed recap_malloc set *ptr", r);
    return;
  }
  st.device_used = true;
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info failed", RECAP_SUCCESS);
  s->p = p;
  s->usable = info.bytes;
  s->pool = add_pool(info.pool);
  if (s->pool < 0) die("too many pools", RECAP_SUCCESS);
  if (s->pool != pool && !(g >= 0 && st.graphs[g].invalid))
    die("a block came from another pool than the route's", RECAP_SUCCESS);
  for (int k = 0; k < SLOTS; k++)
    if (k != i && st.slots[k].p && fuzz_overlap(st.slots[k].p, st.slots[k].usable, s->p, s->usable))
      die("two live blocks overlap", RECAP_SUCCESS);
  write_pattern(s, pattern);
  TRACE("  slot %d = %p (%zu bytes, pool %d)", i, p, s->usable, s->pool);
}

void op_free(void) {
  int i = byte() % SLOTS;
  slot_t *s = &st.slots[i];
  if (!s->p) return;
  call_begins();
  recap_status_t r = recap_free(s->p);
  call_ends();
  status(r, RECAP_SUCCESS, "recap_free"); /* allowed while the pool sleeps too */
  memset(s, 0, sizeof *s);
}

void op_empty_cache(void) {
  recap__fake_stream_complete(st.cap);
  recap__fake_stream_complete(st.other);
  bool capture = capturing_graph() >= 0;
  call_begins();
  recap_status_t r = recap_empty_cache();
  call_ends();
  status(r, capture ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_empty_cache");
  if (capture) return;
  if (st.fired) {
    st.pinned_unknown = true;
    return;
  }
  /* Every kept buffer is freed; those an asleep pool holds are not kept. */
  st.nkept = 0;
  bool offloaded = false;
  for (int i = 0; i < st.npools; i++) offloaded |= st.pools[i].holds_buf;
  if (!offloaded) st.pinned_unknown = false;
  check_pinned();
}

/* Blocks of a VMM segment freed in its middle (docs/allocator.md, "Expandable segments"): a
 * fresh large-class segment on the second stream, grown one chunk per block (sizes of whole
 * 64 KiB granules, above small_size, so each growth maps exactly its block), some blocks freed
 * with a live one after them, recap_empty_cache, then an allocation again. The chunks lying
 * wholly in free memory go back: the pool reserves at most what it did before plus the live
 * blocks. */
void op_vmm_interior(void) {
  uint8_t n = 2 + byte() % 5, keep = byte(), grow = byte();
  if (capturing_graph() >= 0 || asleep(0)) return;
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++)
    if (st.fault_at[k]) return; /* a fault would change the chunks */
  for (int i = 0; i < SLOTS; i++)
    if (st.slots[i].p && st.slots[i].side) return; /* the segment is not fresh */
  int free_slots[8], nfree = 0;
  for (int i = 0; i < SLOTS && nfree < n; i++)
    if (!st.slots[i].p) free_slots[nfree++] = i;
  if (nfree < n) return;
  recap__fake_stream_complete(st.cap);
  recap__fake_stream_complete(st.other);
  status(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache (before the segment)");
  st.nkept = 0;
  recap_pool_memory_t before = RECAP_POOL_MEMORY_INIT, after = RECAP_POOL_MEMORY_INIT;
  if (recap_pool_memory(st.pools[0].id, &before) != RECAP_SUCCESS) die("recap_pool_memory", 0);
  size_t base = (st.data[0] & 1) ? 0 : MiB; /* above small_size: 16 KiB scaled, else 1 MiB */
  for (int k = 0; k < n; k++) {
    slot_t *s = &st.slots[free_slots[k]];
    size_t size = base + GRANULE * (1 + (grow >> k) % 4);
    void *p = NULL;
    recap_status_t r = recap_malloc(&p, size, st.other);
    if (r == RECAP_ERROR_OUT_OF_MEMORY) return;
    status(r, RECAP_SUCCESS, "recap_malloc (the segment)");
    recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
    if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info", r);
    s->p = p;
    s->usable = info.bytes;
    s->pool = 0;
    s->side = true;
    write_pattern(s, (uint8_t)(grow + k));
    TRACE("  slot %d = %p (%zu bytes, the segment's block %d)", free_slots[k], p, s->usable, k);
  }
  /* Free the blocks whose bit is clear, but the last one: the frees lie in the middle. */
  int64_t live = 0;
  for (int k = 0; k < n; k++) {
    slot_t *s = &st.slots[free_slots[k]];
    if (k < n - 1 && !((keep >> k) & 1)) {
      status(recap_free(s->p), RECAP_SUCCESS, "recap_free (the segment)");
      memset(s, 0, sizeof *s);
    } else {
      live += (int64_t)s->usable;
    }
  }
  recap__fake_stream_complete(st.other);
  status(recap_empty_cache(), RECAP_SUCCESS, "recap_empty_cache (the segment)");
  if (recap_pool_memory(st.pools[0].id, &after) != RECAP_SUCCESS) die("recap_pool_memory", 0);
  if (after.reserved_bytes > before.reserved_bytes + live) {
    if (known & FUZZ_KNOWN_VMM_INTERIOR) {
      TRACE("known defect tolerated (vmm_interior): free chunks in a segment's middle stay");
    } else {
      fprintf(stderr,
              "fuzz_part2: the default pool reserves %lld bytes after recap_empty_cache; %lld "
              "before the segment, whose live blocks hold %lld\n",
              (long long)after.reserved_bytes, (long long)before.reserved_bytes, (long long)live);
      die("recap_empty_cache kept a chunk lying wholly in free memory (defect e)", 0);
    }
  }
  check_invariants(); /* the live blocks kept their addresses and contents */
  /* Allocate again, in the hole or past it. */
  for (int i = 0; i < SLOTS; i++)
    if (!st.slots[i].p) {
      void *p = NULL;
      recap_status_t r = recap_malloc(&p, base + GRANULE, st.other);
      status(r, RECAP_SUCCESS, "recap_malloc (after the segment's trim)");
      recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
      if (recap_block_info(p, &info) != RECAP_SUCCESS) die("recap_block_info", r);
      st.slots[i] = (slot_t){.p = p, .usable = info.bytes, .pool = 0, .side = true};
      write_pattern(&st.slots[i], grow);
      break;
    }
}
