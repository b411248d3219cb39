/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_part2_graphs.c — fuzz_part2's graph operations: capture, recapture, invalidation,
 * kernels, replay, rebind (docs/rebind.md), conditional regions (docs/regions.md) and the fake's
 * NCCL collectives (docs/nccl.md).
 */
#include "fuzz_part2.h"

/* The sites each move of the latest recap_graph_rebind changed. */
static size_t patched[16];

/* ---- graphs: capture, recapture, rebind, regions, NCCL ------------------------------------------ */

static void graph_failed(int g) {
  graph_t *gr = &st.graphs[g];
  if (gr->recapturing) {
    gr->state = CAPTURED;
    gr->nsites = gr->saved_nsites;
    memcpy(gr->sites, gr->saved_sites, sizeof gr->sites);
    memcpy(gr->site_size, gr->saved_size, sizeof gr->site_size);
    gr->rebind = gr->saved_rebind;
  } else {
    gr->state = FRESH;
  }
  gr->recapturing = gr->invalid = false;
  gr->depth = 0;
}

/* After a capture call that failed by an injected fault: the capture goes on if the stream
 * still captures (a refused conditional node leaves it where it was), else it failed. */
static void capture_fault(int g) {
  int capturing = 0;
  if (recap_stream_is_capturing(st.cap, &capturing) != RECAP_SUCCESS) die("is_capturing", 0);
  if (!capturing) graph_failed(g);
}

void op_graph(void) {
  int g = byte() % GRAPHS;
  uint8_t what = byte();
  graph_t *gr = &st.graphs[g];
  if (!gr->h) {
    if (st.npools == POOLS) return;
    int pool = add_pool(recap_pool_handle());
    recap_status_t r = recap_graph_create(&gr->h, 0);
    status(r, RECAP_SUCCESS, "recap_graph_create");
    if (r != RECAP_SUCCESS) return;
    gr->pool = pool;
    gr->state = FRESH;
    return;
  }
  if (what % 4 == 0 && gr->state != CAPTURING) {
    recap_status_t r = recap_graph_destroy(gr->h);
    status(r, RECAP_SUCCESS, "recap_graph_destroy");
    memset(gr, 0, sizeof *gr);
    return;
  }
  if (gr->state == CAPTURING) return;
  /* Begin a capture (fresh) or a recapture (captured), with or without rebind. */
  bool capture = capturing_graph() >= 0;
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = st.pools[gr->pool].id;
  o.rebind = (what >> 2) & 1 ? RECAP_REBIND_AUTO : RECAP_REBIND_OFF;
  recap_status_t allowed = RECAP_SUCCESS;
  if (asleep(gr->pool)) allowed = RECAP_ERROR_POOL_ASLEEP;
  if (capture) allowed = RECAP_ERROR_INVALID_USAGE; /* the stream captures already */
  bool recapture = gr->state == CAPTURED;
  call_begins();
  recap_status_t r = recapture ? recap_graph_recapture_begin(gr->h, (what & 8) ? &o : NULL, st.cap)
                               : recap_graph_capture_begin(gr->h, &o, st.cap);
  call_ends();
  /* An asleep pool while the stream captures: either refusal passes. */
  if (capture && asleep(gr->pool) && r == RECAP_ERROR_POOL_ASLEEP) allowed = r;
  if (status(r, allowed, recapture ? "recap_graph_recapture_begin" : "recap_graph_capture_begin"))
    return;
  if (r != RECAP_SUCCESS) return;
  if (recapture) {
    gr->saved_nsites = gr->nsites;
    memcpy(gr->saved_sites, gr->sites, sizeof gr->sites);
    memcpy(gr->saved_size, gr->site_size, sizeof gr->site_size);
    gr->saved_rebind = gr->rebind;
    gr->recapturing = true;
    if (what & 8) gr->rebind = o.rebind == RECAP_REBIND_AUTO;
  } else {
    gr->rebind = o.rebind == RECAP_REBIND_AUTO;
  }
  gr->nsites = 0;
  gr->state = CAPTURING;
  gr->invalid = false;
  gr->depth = 0;
}

void op_capture_end(void) {
  int g = capturing_graph();
  if (g < 0) return;
  graph_t *gr = &st.graphs[g];
  recap_status_t allowed = RECAP_SUCCESS;
  if (gr->invalid)
    allowed = RECAP_ERROR_CAPTURE_INVALIDATED;
  else if (gr->depth > 0)
    allowed = RECAP_ERROR_INVALID_USAGE; /* a region is open */
  call_begins();
  recap_status_t r = recap_graph_capture_end(gr->h);
  call_ends();
  if (r == RECAP_SUCCESS) st.device_used = true;
  if (r == RECAP_ERROR_INVALID_ARGUMENT && gr->recapturing && gr->rebind && allowed == 0 &&
      (known & FUZZ_KNOWN_REBIND_RECAPTURE)) {
    TRACE("known defect tolerated (rebind_recapture): %s", recap_last_error());
    graph_failed(g);
    return;
  }
  if (r == RECAP_ERROR_INVALID_USAGE && gr->invalid && gr->depth > 0)
    die("capture_end of a capture invalidated with a region open does not end it (defect c)", r);
  if (status(r, allowed,
             gr->recapturing ? "recap_graph_capture_end (a recapture)"
                             : "recap_graph_capture_end")) {
    capture_fault(g);
    return;
  }
  if (r == RECAP_SUCCESS) {
    gr->state = CAPTURED;
    gr->recapturing = false;
  } else if (r == RECAP_ERROR_CAPTURE_INVALIDATED) {
    graph_failed(g);
  }
}

void op_invalidate(void) {
  int g = capturing_graph();
  if (g < 0) return;
  if (st.graphs[g].depth > 0 && (known & FUZZ_KNOWN_REGION_INVALIDATED)) {
    TRACE("known defect avoided (region_invalidated): no invalidation with a region open");
    return;
  }
  TRACE("the fake invalidates the capture of graph %d (%d regions open)", g, st.graphs[g].depth);
  recap__fake_capture_invalidate(st.cap);
  st.graphs[g].invalid = true;
}

/* A kernel that reads up to two blocks: in a capture its arguments are sites to rebind. */
void op_kernel(void) {
  int a = byte() % SLOTS, b = byte() % SLOTS;
  const void *args[2];
  size_t n = 0;
  int g = capturing_graph();
  int picks[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    slot_t *s = &st.slots[picks[k]];
    if (!s->p || asleep(s->pool)) continue;
    args[n++] = s->p;
    if (g >= 0 && !st.graphs[g].invalid && s->pool == 0 && st.graphs[g].nsites < SITES) {
      st.graphs[g].sites[st.graphs[g].nsites] = s->p;
      st.graphs[g].site_size[st.graphs[g].nsites++] = s->usable;
    }
  }
  TRACE("a kernel reading %zu blocks", n);
  recap__fake_launch_kernel_args(st.cap, "fuzz_read", args, n);
}

void op_replay(void) {
  int g = byte() % GRAPHS;
  graph_t *gr = &st.graphs[g];
  if (!gr->h) return;
  recap_status_t allowed = RECAP_SUCCESS;
  if (gr->state != CAPTURED)
    allowed = RECAP_ERROR_INVALID_USAGE;
  else if (asleep(gr->pool) || asleep(0))
    allowed = RECAP_ERROR_POOL_ASLEEP;
  recap_stream_t s = (byte() & 1) ? st.other : st.cap;
  if (gr->state == CAPTURED && capturing_graph() >= 0 && s == st.cap) return; /* a child graph */
  call_begins();
  recap_status_t r = recap_graph_replay(gr->h, s);
  call_ends();
  if (r == RECAP_ERROR_POOL_ASLEEP && allowed == RECAP_SUCCESS) die("replay refused asleep", r);
  status(r, allowed, "recap_graph_replay");
}

/* Rebind a site of a default-pool block to another live default-pool block, outside memory the
 * graph uses (docs/rebind.md). */
void op_rebind(void) {
  int g = byte() % GRAPHS;
  int site = byte(), to = byte() % SLOTS;
  graph_t *gr = &st.graphs[g];
  slot_t *t = &st.slots[to];
  if (!gr->h || gr->state == CAPTURING || !t->p || t->pool != 0) return;
  if (gr->state == FRESH || !gr->rebind || !gr->nsites) {
    recap_rebind_t rb = {sizeof(recap_rebind_t), t->p, t->p, t->usable};
    call_begins();
    recap_status_t r = recap_graph_rebind(gr->h, &rb, 1, patched);
    call_ends();
    recap_status_t allowed = gr->state == CAPTURED && gr->rebind ? RECAP_ERROR_INVALID_ARGUMENT
                                                                 : RECAP_ERROR_INVALID_USAGE;
    if (r == RECAP_ERROR_INVALID_ARGUMENT && allowed == RECAP_ERROR_INVALID_USAGE &&
        gr->state == CAPTURED)
      allowed = r; /* rebind OFF: which of the two the graph reports first is not documented */
    status(r, allowed, "recap_graph_rebind");
    return;
  }
  int k = site % gr->nsites;
  const void *old = gr->sites[k];
  size_t size = gr->site_size[k];
  if (t->usable < size) return;
  /* The new range may overlap memory the graph uses: then INVALID_ARGUMENT is allowed too. */
  bool overlaps = false;
  for (int i = 0; i < gr->nsites; i++)
    overlaps |= fuzz_overlap(gr->sites[i], gr->site_size[i], t->p, size);
  recap_rebind_t rb = {sizeof(recap_rebind_t), old, t->p, size};
  call_begins();
  recap_status_t r = recap_graph_rebind(gr->h, &rb, 1, patched);
  call_ends();
  if (overlaps && r == RECAP_ERROR_INVALID_ARGUMENT) {
    status(r, r, "recap_graph_rebind (an overlap)");
    return;
  }
  if (status(r, RECAP_SUCCESS, "recap_graph_rebind")) return;
  if (patched[0] == 0) die("a rebind of a site patched nothing", r);
  for (int i = 0; i < gr->nsites; i++)
    if (gr->sites[i] == old) gr->sites[i] = t->p;
}

static recap_status_t cond_region(int g, uint8_t what) {
  graph_t *gr = &st.graphs[g];
  recap_cond_t cond;
  int kind = what % 4;
  unsigned initial = kind == RECAP_REGION_WHILE ? 0 : (what >> 2) & 3;
  call_begins();
  recap_status_t r = recap_cond_create(&cond, initial, st.cap);
  call_ends();
  if (gr->invalid) {
    TRACE("recap_cond_create in an invalidated capture: %s", recap_status_name(r));
    if (r == RECAP_ERROR_CAPTURE_INVALIDATED) graph_failed(g);
    return r;
  }
  if (status(r, RECAP_SUCCESS, "recap_cond_create")) {
    capture_fault(g);
    return r;
  }
  if (r != RECAP_SUCCESS || (what & 0x80)) return r; /* a condition no region uses */
  unsigned branches = kind == RECAP_REGION_SWITCH ? 1 + (what >> 4) % 3 : (what >> 4) & 1 ? 0 : 0;
  if (kind == RECAP_REGION_IF_ELSE && ((what >> 4) & 1)) branches = 2;
  if (kind == RECAP_REGION_WHILE || kind == RECAP_REGION_IF) branches = (what >> 4) & 1;
  recap_status_t allowed = gr->depth >= DEPTH ? RECAP_ERROR_INVALID_USAGE : RECAP_SUCCESS;
  if (gr->depth >= DEPTH) return r;
  call_begins();
  r = recap_region_begin((recap_region_kind_t)kind, cond, branches, st.cap);
  call_ends();
  if (status(r, allowed, "recap_region_begin")) {
    capture_fault(g);
    return r;
  }
  if (r != RECAP_SUCCESS) return r;
  level_t *l = &gr->levels[gr->depth++];
  l->kind = kind;
  l->branches = branches ? (int)branches : (kind == RECAP_REGION_IF_ELSE ? 2 : 1);
  l->branch = 0;
  return r;
}

void op_region(void) {
  uint8_t what = byte();
  int g = capturing_graph();
  if (g < 0) {
    recap_cond_t cond;
    recap_status_t r = recap_cond_create(&cond, 1, st.cap);
    status(r, RECAP_ERROR_INVALID_USAGE, "recap_cond_create (not capturing)");
    r = recap_region_end(st.cap);
    status(r, RECAP_ERROR_INVALID_USAGE, "recap_region_end (not capturing)");
    return;
  }
  graph_t *gr = &st.graphs[g];
  if (!(what & 0x40)) {
    cond_region(g, what);
    return;
  }
  /* Close the innermost region, or go to its next branch. */
  bool next = (what & 1) && gr->depth > 0 &&
              gr->levels[gr->depth - 1].branch + 1 < gr->levels[gr->depth - 1].branches;
  call_begins();
  recap_status_t r = next ? recap_region_next_branch(st.cap) : recap_region_end(st.cap);
  call_ends();
  const char *call = next ? "recap_region_next_branch" : "recap_region_end";
  if (gr->invalid) {
    /* The capture is over for CUDA: the call abandons it (CAPTURE_INVALIDATED, the graph fresh
     * again), or, with no region open, says so; capture_end then fails cleanly. */
    TRACE("%s in an invalidated capture: %s", call, recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL || r == RECAP_SUCCESS) die(call, r);
    if (r == RECAP_ERROR_CAPTURE_INVALIDATED)
      graph_failed(g);
    else if (r == RECAP_ERROR_INVALID_USAGE && gr->depth > 0 &&
             !(known & FUZZ_KNOWN_REGION_INVALIDATED))
      die("a region of an invalidated capture refused to close as not capturing (defect c)", r);
    return;
  }
  if (status(r, gr->depth > 0 ? RECAP_SUCCESS : RECAP_ERROR_INVALID_USAGE, call)) {
    capture_fault(g);
    return;
  }
  if (r != RECAP_SUCCESS) return;
  if (next)
    gr->levels[gr->depth - 1].branch++;
  else
    gr->depth--;
}

void op_nccl(void) {
  int i = byte() % SLOTS;
  uint8_t what = byte();
  slot_t *s = &st.slots[i];
  int g = capturing_graph();
  if (!s->p || asleep(s->pool)) return;
  /* A captured collective runs at every replay: only on a block of the graph's own pool. */
  if (g >= 0 && s->pool != st.graphs[g].pool) return;
  recap_status_t allowed = RECAP_SUCCESS;
  if (g >= 0 && st.graphs[g].depth > 0) allowed = RECAP_ERROR_INVALID_USAGE; /* a region body */
  size_t count = s->usable < 64 ? s->usable : 64;
  call_begins();
  recap_status_t r =
      (what & 1)
          ? recap_nccl_broadcast(s->p, s->p, count, RECAP_NCCL_UINT8, 0, st.comm, st.cap)
          : recap_nccl_all_reduce(s->p, s->p, count, RECAP_NCCL_UINT8,
                                  (what & 2) ? RECAP_NCCL_MAX : RECAP_NCCL_SUM, st.comm, st.cap);
  call_ends();
  if (g >= 0 && st.graphs[g].invalid) {
    TRACE("a collective in an invalidated capture: %s", recap_status_name(r));
    if (r == RECAP_ERROR_INTERNAL) die("a collective", r);
    return;
  }
  status(r, allowed, "recap_nccl collective");
  /* One rank: a sum, a max and a broadcast leave the bytes as they were. */
}
