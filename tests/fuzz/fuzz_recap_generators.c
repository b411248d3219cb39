/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_recap_generators.c — fuzz_recap's generator operations: create, destroy, seed and
 * offset, and draws in and out of captures (docs/rng.md).
 */
#include "fuzz_recap.h"

/* ---- generators ------------------------------------------------------------------------------- */

static int capture_using(int k) {
  for (int g = 0; g < GRAPHS; g++)
    if (st.graphs[g].h && st.graphs[g].state == CAPTURING && (st.graphs[g].gens & (1u << k)))
      return g;
  return -1;
}

void op_generator(void) {
  int k = byte() % GENS;
  uint8_t what = byte();
  gen_t *ge = &st.gens[k];
  recap_status_t s;
  if (!ge->alive) {
    /* A generator held only by graphs is gone for the program: make a new one in its place
     * only once no graph holds the old (the slot's block count stays one per generator). */
    for (int g = 0; g < GRAPHS; g++)
      if (st.graphs[g].h && st.graphs[g].state != FRESH && (st.graphs[g].gens & (1u << k))) return;
    call_begins();
    s = recap_generator_create(&ge->h, what);
    call_ends();
    TRACE("recap_generator_create(gen %d, seed %d) -> %s", k, what, recap_status_name(s));
    if (s == RECAP_ERROR_OUT_OF_MEMORY && (st.memory_cap || fired(RECAP__FAKE_FAULT_RAW_MALLOC)))
      check_last(s, "recap_generator_create");
    else
      expect(s, RECAP_SUCCESS, "recap_generator_create");
    if (s == RECAP_SUCCESS) *ge = (gen_t){.h = ge->h, .alive = true, .offset_known = true};
    return;
  }
  int g = capture_using(k);
  uint64_t v = 0;
  switch (what % 4) {
    case 0:
      call_begins();
      s = recap_generator_destroy(ge->h);
      call_ends();
      TRACE("recap_generator_destroy(gen %d) -> %s", k, recap_status_name(s));
      expect(s, RECAP_SUCCESS, "recap_generator_destroy");
      ge->alive = false;
      return;
    case 1:
      s = recap_generator_seed_set(ge->h, what);
      TRACE("recap_generator_seed_set(gen %d) -> %s", k, recap_status_name(s));
      expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_seed_set");
      if (s == RECAP_SUCCESS) ge->offset = 0, ge->offset_known = true;
      return;
    case 2:
      v = (uint64_t)byte() * 2; /* odd multiples of 2 are not multiples of 4 */
      s = recap_generator_offset_set(ge->h, v);
      TRACE("recap_generator_offset_set(gen %d, %llu) -> %s", k, (unsigned long long)v,
            recap_status_name(s));
      if (v % 4)
        expect(s, RECAP_ERROR_INVALID_ARGUMENT, "recap_generator_offset_set");
      else
        expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_offset_set");
      if (s == RECAP_SUCCESS) ge->offset = v, ge->offset_known = true;
      return;
    default:
      s = recap_generator_offset_get(ge->h, &v);
      TRACE("recap_generator_offset_get(gen %d) -> %s, %llu", k, recap_status_name(s),
            (unsigned long long)v);
      expect(s, g >= 0 ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, "recap_generator_offset_get");
      if (s != RECAP_SUCCESS) return;
      if (ge->offset_known && v != ge->offset) {
        fprintf(stderr, "fuzz_recap: generator %d at offset %llu, the model says %llu\n", k,
                (unsigned long long)v, (unsigned long long)ge->offset);
        die("a generator's offset disagrees with the draws and replays", s);
      }
      ge->offset = v;
      ge->offset_known = true;
      return;
  }
}

void op_draw(void) {
  int k = byte() % GENS, j = pick_stream();
  uint8_t what = byte();
  int i = byte() % SLOTS;
  gen_t *ge = &st.gens[k];
  if (!ge->alive) return;
  int g = st.owner[j];
  int other = capture_using(k);
  bool library = what & 1; /* recap_rng_uniform into a block, else a philox state */
  if (library && !st.slots[i].p) return;
  uint64_t increment = 1 + what % 13;
  recap_philox_state_t ph;
  size_t n = library ? st.slots[i].size / sizeof(float) : 0;
  call_begins();
  recap_status_t s =
      library ? recap_rng_uniform(ge->h, (float *)(void *)st.slots[i].p, n, st.streams[j])
              : recap_generator_philox_state(ge->h, increment, st.streams[j], &ph);
  call_ends();
  TRACE("%s(gen %d, stream %d) -> %s", library ? "recap_rng_uniform" : "philox_state", k, j,
        recap_status_name(s));
  if (library && n == 0) {
    expect(s, RECAP_SUCCESS, "recap_rng_uniform");
    return;
  }
  if (library) write_tag(&st.slots[i]); /* the fake wrote numbers into the block */
  if (g < 0) {
    expect(s, RECAP_SUCCESS, library ? "recap_rng_uniform" : "recap_generator_philox_state");
    if (library) {
      ge->offset_known = false;
    } else {
      if (ph.captured || (ge->offset_known && ph.offset != ge->offset))
        die("an eager draw got another offset than the generator's", s);
      ge->offset = ph.offset + ((increment + 3) & ~(uint64_t)3);
    }
    return;
  }
  graph_t *gr = &st.graphs[g];
  const char *call = library ? "recap_rng_uniform" : "recap_generator_philox_state";
  if (gr->invalid || gr->maybe_invalid) {
    if (s == RECAP_ERROR_CAPTURE_INVALIDATED || (s == RECAP_SUCCESS && !gr->invalid)) {
      check_last(s, call);
    } else if (other >= 0 && other != g) {
      expect(s, RECAP_ERROR_INVALID_USAGE, call);
    } else {
      expect(s, RECAP_ERROR_CAPTURE_INVALIDATED, call);
    }
  } else {
    expect(s, other >= 0 && other != g ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS, call);
  }
  if (s != RECAP_SUCCESS) return;
  if (!library && !ph.captured) die("a draw in a recap graph's capture got an eager state", s);
  gr->gens |= 1u << k;
  if (library)
    gr->consumed_unknown = true;
  else
    gr->consumed[k] += (increment + 3) & ~(uint64_t)3;
}
