/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * layout.c — a layered (Sugiyama) drawing of the graph, computed here.
 *
 *  1. Layers: a node sits one layer below the deepest node it waits for (longest path); a node
 *     that waits for nothing moves down to just above its first dependent, so that an input
 *     copy is drawn next to its reader, not far above it. A conditional node's bodies take the
 *     layers below it, laid out the same way inside, and its dependents come after them.
 *  2. Edges longer than one layer are cut at every layer they cross by a dummy element, and
 *     every cluster (annotation scope or body) gets a placeholder in each layer of its span where it has nothing,
 *     so that a scope is one solid band in every layer it covers.
 *  3. Order within layers: sweeps down and up the layers sort each layer by the barycenter
 *     (mean position) of each element's neighbours in the layer before. The sort is by scope
 *     first: sibling scopes compare by one key per sweep (the mean position of everything they
 *     hold), the same in every layer, so a scope's elements are contiguous in each layer and
 *     scopes keep one left-to-right order. The ordering with the fewest crossings is kept.
 *  4. Coordinates, scope by scope from the innermost: the items of a scope (its own elements
 *     and its child scopes as rigid blocks) are placed left to right with gaps, then pulled
 *     towards their neighbours by a few rounds of a left-packed and a right-packed placement,
 *     averaged (the average of two placements that keep the gaps keeps them too).
 *  5. Edges are routed through their dummies; scopes become rectangles with room for a label.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "view_internal.h"

enum {
  GAP_X = 24,   /* between neighbours in a layer */
  GAP_Y = 36,   /* between layers */
  MARGIN = 24,  /* around the drawing */
  PAD = 10,     /* inside a scope's rectangle, left, right and below */
  LABEL_H = 20, /* a scope's label, above its first layer */
  DUMMY_W = 12, /* an edge passing through a layer */
  EMPTY_W = 60, /* the mark of an empty body */
  MIN_W = 120,
  MAX_W = 280,
  SWEEPS = 24,
};

enum { ELEM_NODE, ELEM_DUMMY, ELEM_PLACEHOLDER };

typedef struct elem {
  int kind;
  size_t node; /* ELEM_NODE: the node; ELEM_DUMMY: the edge */
  size_t layer;
  long scope; /* index of the innermost scope, -1 for none */
  double w;
  double key;        /* sort key of this sweep */
  double pos;        /* position in the layer, centred */
  double rel;        /* centre x relative to the origin of the scope block placed last */
  size_t *up, *down; /* neighbours in the layers above and below */
  size_t up_count, down_count;
} elem_t;

typedef struct scope {
  long parent;
  size_t depth;
  size_t lo, hi; /* layers spanned */
  int any;
  double key;
  double relx, w; /* the block: left relative to the parent's origin, and width */
  double absx;
  size_t start_depth, end_depth; /* scopes (itself included) that begin/end at lo/hi */
  size_t node_count;
} scope_t;

typedef struct layout {
  recap_view_graph_t *g;
  elem_t *elems;
  size_t elem_count, elem_cap;
  recap__view_scopes_t tree; /* the clusters (scopes.c); scopes[s] lays out tree.v[s] */
  scope_t *scopes;
  size_t scope_count;
  size_t *extent; /* per node: the layers it takes, its bodies included */
  size_t layer_count;
  size_t max_depth; /* of the deepest scope */
  size_t **layers;  /* element indices per layer, in order */
  size_t *layer_size;
  size_t *edge_first; /* per edge (in node order of deps): first dummy, or SIZE_MAX */
  bool oom;
} layout_t;

static void *grow(layout_t *L, void *p, size_t count, size_t size) {
  void *q = realloc(p, (count ? count : 1) * size);
  if (!q) L->oom = true;
  return q;
}

/* ==========================================================================================
 * Scopes
 * ======================================================================================== */

static bool scope_within(const layout_t *L, long s, long ancestor) {
  for (; s >= 0; s = L->scopes[s].parent)
    if (s == ancestor) return true;
  return ancestor < 0;
}

static long common_scope(const layout_t *L, long a, long b) {
  for (; a >= 0; a = L->scopes[a].parent)
    if (scope_within(L, b, a)) return a;
  return -1;
}

/* The child of `within` on the way from s to it, or -1 when s is `within` itself. */
static long child_towards(const layout_t *L, long s, long within) {
  long child = -1;
  for (; s != within && s >= 0; s = L->scopes[s].parent) child = s;
  return child;
}

/* ==========================================================================================
 * Elements
 * ======================================================================================== */

static size_t add_elem(layout_t *L, int kind, size_t node, size_t layer, long scope, double w) {
  if (L->elem_count == L->elem_cap) {
    size_t cap = L->elem_cap ? 2 * L->elem_cap : 64;
    elem_t *elems = grow(L, L->elems, cap, sizeof *elems);
    if (!elems) return SIZE_MAX;
    L->elems = elems;
    L->elem_cap = cap;
  }
  L->elems[L->elem_count] =
      (elem_t){.kind = kind, .node = node, .layer = layer, .scope = scope, .w = w};
  return L->elem_count++;
}

static void link_elems(layout_t *L, size_t upper, size_t lower) {
  elem_t *u = &L->elems[upper], *d = &L->elems[lower];
  size_t *down = grow(L, u->down, u->down_count + 1, sizeof *down);
  if (!down) return;
  u->down = down;
  down[u->down_count++] = lower;
  size_t *up = grow(L, d->up, d->up_count + 1, sizeof *up);
  if (!up) return;
  d->up = up;
  up[d->up_count++] = upper;
}

static double node_width(const recap_view_node_t *n) {
  char *name = recap__view_box_name(n);
  recap__view_buf_t detail = {0};
  recap__view_box_detail(n, &detail);
  double w = 7.2 * (double)(name ? strlen(name) : 10) + 24;
  double dw = 6.2 * (double)(detail.len + 6) + 24;
  free(name);
  free(detail.data);
  if (dw > w) w = dw;
  return w < MIN_W ? MIN_W : w > MAX_W ? MAX_W : w;
}

/* Layers of the nodes in members (one body, or the graph's own nodes), from 0: longest path,
 * each node taking extent[] layers (a conditional node: itself and its bodies below it), then
 * sources moved down next to their first dependent. Returns the layers the group takes. */
static size_t layer_group(const recap_view_graph_t *g, const size_t *members, size_t count,
                          const size_t *extent, size_t *local, size_t *pending, size_t *queue) {
  size_t head = 0, tail = 0;
  for (size_t m = 0; m < count; m++) {
    size_t i = members[m];
    local[i] = 0;
    pending[i] = g->nodes[i].dep_count;
    if (!pending[i]) queue[tail++] = i;
  }
  while (head < tail) {
    size_t i = queue[head++];
    const recap_view_node_t *n = &g->nodes[i];
    for (size_t k = 0; k < n->succ_count; k++) {
      size_t s = n->succ[k];
      if (local[s] < local[i] + extent[i]) local[s] = local[i] + extent[i];
      if (--pending[s] == 0) queue[tail++] = s;
    }
  }
  size_t height = 0;
  for (size_t m = 0; m < count; m++) {
    size_t i = members[m];
    const recap_view_node_t *n = &g->nodes[i];
    if (!n->dep_count && n->succ_count) {
      size_t lowest = SIZE_MAX;
      for (size_t k = 0; k < n->succ_count; k++)
        if (local[n->succ[k]] < lowest) lowest = local[n->succ[k]];
      local[i] = lowest - extent[i];
    }
    if (local[i] + extent[i] > height) height = local[i] + extent[i];
  }
  return height;
}

/* Every node's layer. The bodies of a conditional node take the layers below it (an empty body
 * one layer, for its frame), and what waits for it comes below them: bodies are laid out first,
 * innermost first (a body's nodes follow their conditional node, so from the last conditional
 * node back), then each body is moved under its node, outermost first. */
static bool assign_layers(layout_t *L, size_t *layer) {
  recap_view_graph_t *g = L->g;
  size_t n = g->count;
  /* Groups: 0 for the graph's own nodes, then one per body, numbered from base[P]. */
  size_t *base = calloc(n + 1, sizeof *base), *extent = calloc(n + 1, sizeof *extent);
  size_t *pending = calloc(n + 1, sizeof *pending), *queue = calloc(n + 1, sizeof *queue);
  size_t groups = 1;
  for (size_t i = 0; base && i < n; i++) {
    base[i] = groups;
    if (strcmp(g->nodes[i].type, "conditional") == 0) groups += g->nodes[i].branches;
  }
  size_t *start = calloc(groups + 1, sizeof *start), *members = calloc(n + 1, sizeof *members);
  bool ok = base && extent && pending && queue && start && members;
  if (ok) {
    /* The members of each group in index order (a counting sort by group). */
    for (size_t i = 0; i < n; i++) {
      const recap_view_node_t *node = &g->nodes[i];
      size_t group = node->parent == SIZE_MAX ? 0 : base[node->parent] + node->branch;
      start[group + 1]++;
      extent[i] = 1;
    }
    for (size_t k = 0; k < groups; k++) start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++) { /* start[group] moves on, then moves back */
      const recap_view_node_t *node = &g->nodes[i];
      size_t group = node->parent == SIZE_MAX ? 0 : base[node->parent] + node->branch;
      members[start[group]++] = i;
    }
    for (size_t k = groups; k > 0; k--) start[k] = start[k - 1];
    start[0] = 0;
    for (size_t p = n; p-- > 0;) {
      const recap_view_node_t *node = &g->nodes[p];
      if (strcmp(node->type, "conditional") != 0 || !node->branches) continue;
      size_t tallest = 1; /* an empty body still shows its frame */
      for (unsigned b = 0; b < node->branches; b++) {
        size_t group = base[p] + b;
        size_t height = layer_group(g, members + start[group], start[group + 1] - start[group],
                                    extent, layer, pending, queue);
        if (height > tallest) tallest = height;
      }
      extent[p] = 1 + tallest;
    }
    layer_group(g, members + start[0], start[1] - start[0], extent, layer, pending, queue);
    for (size_t i = 0; i < n; i++)
      if (g->nodes[i].parent != SIZE_MAX) layer[i] += layer[g->nodes[i].parent] + 1;
    L->layer_count = 0;
    for (size_t i = 0; i < n; i++)
      if (layer[i] + extent[i] > L->layer_count) L->layer_count = layer[i] + extent[i];
  }
  free(base);
  free(pending);
  free(queue);
  free(start);
  free(members);
  L->extent = extent;
  return ok;
}

static bool build_elements(layout_t *L) {
  recap_view_graph_t *g = L->g;
  size_t *layer = calloc(g->count + 1, sizeof *layer);
  if (!layer || !assign_layers(L, layer)) {
    free(layer);
    return false;
  }
  if (recap__view_scopes_build(g, &L->tree) != 0) {
    free(layer);
    return false;
  }
  L->scope_count = L->tree.count;
  L->scopes = calloc(L->scope_count + 1, sizeof *L->scopes);
  if (!L->scopes) {
    free(layer);
    return false;
  }
  for (size_t s = 0; s < L->scope_count; s++)
    L->scopes[s] = (scope_t){.parent = L->tree.v[s].parent, .depth = L->tree.v[s].depth};
  for (size_t i = 0; i < g->count && !L->oom; i++)
    add_elem(L, ELEM_NODE, i, layer[i], L->tree.of_node[i], node_width(&g->nodes[i]));
  /* An empty body gets a mark in the layer below its node, so that its frame shows. */
  for (size_t s = 0; s < L->scope_count && !L->oom; s++) {
    const recap__view_scope_t *c = &L->tree.v[s];
    if (c->node != SIZE_MAX && c->node_count == 0)
      add_elem(L, ELEM_PLACEHOLDER, c->node, layer[c->node] + 1, (long)s, EMPTY_W);
  }
  free(layer);
  if (L->oom) return false;
  /* Each conditional node pulls the first layer of each of its bodies towards itself (these
   * links order and place elements; they are not edges). */
  for (size_t i = 0; i < L->elem_count && !L->oom; i++) {
    const elem_t *e = &L->elems[i];
    size_t owner = e->kind == ELEM_NODE ? g->nodes[e->node].parent : e->node;
    if (e->kind == ELEM_DUMMY || owner == SIZE_MAX || e->layer != L->elems[owner].layer + 1)
      continue;
    link_elems(L, owner, i);
  }
  if (L->oom) return false;
  for (size_t s = 0; s < L->scope_count; s++)
    if (L->scopes[s].depth > L->max_depth) L->max_depth = L->scopes[s].depth;

  /* Edges, in the order of the nodes' dependency lists, each cut at the layers it crosses. */
  L->edge_first = calloc(g->edge_count + 1, sizeof *L->edge_first);
  if (!L->edge_first) return false;
  size_t e = 0;
  for (size_t to = 0; to < g->count; to++) {
    for (size_t k = 0; k < g->nodes[to].dep_count; k++, e++) {
      size_t from = g->nodes[to].deps[k];
      size_t lf = L->elems[from].layer, lt = L->elems[to].layer;
      long scope = common_scope(L, L->elems[from].scope, L->elems[to].scope);
      size_t prev = from;
      L->edge_first[e] = SIZE_MAX;
      for (size_t l = lf + 1; l < lt; l++) {
        size_t d = add_elem(L, ELEM_DUMMY, e, l, scope, DUMMY_W);
        if (d == SIZE_MAX) return false;
        if (L->edge_first[e] == SIZE_MAX) L->edge_first[e] = d;
        link_elems(L, prev, d);
        prev = d;
      }
      link_elems(L, prev, to);
      if (L->oom) return false;
    }
  }

  /* Spans of scopes, then placeholders where a scope has nothing in a layer of its span. */
  size_t S = L->scope_count, N = L->layer_count;
  for (size_t i = 0; i < L->elem_count; i++) {
    for (long s = L->elems[i].scope; s >= 0; s = L->scopes[s].parent) {
      scope_t *sc = &L->scopes[s];
      size_t l = L->elems[i].layer;
      if (!sc->any || l < sc->lo) sc->lo = l;
      if (!sc->any || l > sc->hi) sc->hi = l;
      sc->any = 1;
      if (L->elems[i].kind == ELEM_NODE) sc->node_count++;
    }
  }
  if (S) {
    size_t *held = calloc(S * N, sizeof *held);
    if (!held) return false;
    for (size_t i = 0; i < L->elem_count; i++)
      for (long s = L->elems[i].scope; s >= 0; s = L->scopes[s].parent)
        held[(size_t)s * N + L->elems[i].layer]++;
    /* Deepest scopes first, so that a placeholder also fills its ancestors. */
    for (size_t depth = L->max_depth; depth > 0; depth--) {
      for (size_t s = 0; s < S; s++) {
        if (L->scopes[s].depth != depth) continue;
        for (size_t l = L->scopes[s].lo; l <= L->scopes[s].hi; l++) {
          if (held[s * N + l]) continue;
          if (add_elem(L, ELEM_PLACEHOLDER, 0, l, (long)s, DUMMY_W) == SIZE_MAX) break;
          for (long a = (long)s; a >= 0; a = L->scopes[a].parent) held[(size_t)a * N + l]++;
        }
      }
    }
    free(held);
  }
  if (L->oom) return false;

  /* Layers: the elements in index order to begin with. */
  L->layers = calloc(N + 1, sizeof *L->layers);
  L->layer_size = calloc(N + 1, sizeof *L->layer_size);
  if (!L->layers || !L->layer_size) return false;
  for (size_t i = 0; i < L->elem_count; i++) L->layer_size[L->elems[i].layer]++;
  for (size_t l = 0; l < N; l++) {
    L->layers[l] = calloc(L->layer_size[l] + 1, sizeof **L->layers);
    if (!L->layers[l]) return false;
    L->layer_size[l] = 0;
  }
  for (size_t i = 0; i < L->elem_count; i++) {
    size_t l = L->elems[i].layer;
    L->layers[l][L->layer_size[l]++] = i;
  }
  return true;
}

/* ==========================================================================================
 * Ordering
 * ======================================================================================== */

static void set_positions(layout_t *L, size_t l) {
  double centre = ((double)L->layer_size[l] - 1.0) / 2.0;
  for (size_t k = 0; k < L->layer_size[l]; k++) L->elems[L->layers[l][k]].pos = (double)k - centre;
}

/* Each scope's key: the mean position of all it holds, in every layer. */
static void scope_keys(layout_t *L) {
  size_t S = L->scope_count;
  if (!S) return;
  double *sum = calloc(S, sizeof *sum), *count = calloc(S, sizeof *count);
  if (!sum || !count) {
    L->oom = true;
    free(sum);
    free(count);
    return;
  }
  for (size_t i = 0; i < L->elem_count; i++)
    for (long s = L->elems[i].scope; s >= 0; s = L->scopes[s].parent) {
      sum[s] += L->elems[i].pos;
      count[s] += 1;
    }
  for (size_t s = 0; s < S; s++) L->scopes[s].key = count[s] > 0 ? sum[s] / count[s] : 0;
  free(sum);
  free(count);
  /* The bodies of one conditional node (made one after another, in branch order) keep their
   * branch order from left to right: they take their keys sorted. */
  for (size_t s = 0; s < S; s++) {
    const recap__view_scope_t *c = &L->tree.v[s];
    if (c->node == SIZE_MAX || c->branch != 0) continue;
    size_t end = s + 1;
    while (end < S && L->tree.v[end].node == c->node) end++;
    for (size_t i = s + 1; i < end; i++) { /* insertion sort of the keys */
      double key = L->scopes[i].key;
      size_t j = i;
      for (; j > s && L->scopes[j - 1].key > key; j--) L->scopes[j].key = L->scopes[j - 1].key;
      L->scopes[j].key = key;
    }
  }
}

/* Order of two elements of one layer: by the keys of what represents each under their
 * innermost common scope (a child scope, or the element itself), then by index. */
static int compare_elems(const layout_t *L, size_t a, size_t b) {
  const elem_t *ea = &L->elems[a], *eb = &L->elems[b];
  long common = common_scope(L, ea->scope, eb->scope);
  long ra = child_towards(L, ea->scope, common), rb = child_towards(L, eb->scope, common);
  double ka = ra >= 0 ? L->scopes[ra].key : ea->key, kb = rb >= 0 ? L->scopes[rb].key : eb->key;
  if (ka != kb) return ka < kb ? -1 : 1;
  /* Equal keys: scopes before elements, then by index, so the order is total and stable. */
  if ((ra >= 0) != (rb >= 0)) return ra >= 0 ? -1 : 1;
  if (ra >= 0 && ra != rb) return ra < rb ? -1 : 1;
  return a < b ? -1 : a > b;
}

static void sort_layer(layout_t *L, size_t l) {
  size_t *v = L->layers[l], n = L->layer_size[l];
  for (size_t i = 1; i < n; i++) { /* insertion sort: layers are short and nearly sorted */
    size_t x = v[i], j = i;
    while (j > 0 && compare_elems(L, v[j - 1], x) > 0) {
      v[j] = v[j - 1];
      j--;
    }
    v[j] = x;
  }
  set_positions(L, l);
}

/* The barycenter of e's neighbours above (down = false) or below; its own position without. */
static double barycenter(const layout_t *L, const elem_t *e, bool below) {
  const size_t *nb = below ? e->down : e->up;
  size_t count = below ? e->down_count : e->up_count;
  if (!count) return e->pos;
  double sum = 0;
  for (size_t k = 0; k < count; k++) sum += L->elems[nb[k]].pos;
  return sum / (double)count;
}

static void sweep(layout_t *L, bool down) {
  scope_keys(L);
  for (size_t step = 0; step < L->layer_count; step++) {
    size_t l = down ? step : L->layer_count - 1 - step;
    for (size_t k = 0; k < L->layer_size[l]; k++) {
      elem_t *e = &L->elems[L->layers[l][k]];
      e->key = barycenter(L, e, !down);
    }
    sort_layer(L, l);
  }
}

static size_t count_crossings(const layout_t *L) {
  size_t crossings = 0;
  for (size_t l = 0; l + 1 < L->layer_count; l++) {
    for (size_t a = 0; a < L->layer_size[l]; a++) {
      const elem_t *ua = &L->elems[L->layers[l][a]];
      for (size_t b = a + 1; b < L->layer_size[l]; b++) {
        const elem_t *ub = &L->elems[L->layers[l][b]];
        for (size_t i = 0; i < ua->down_count; i++)
          for (size_t j = 0; j < ub->down_count; j++)
            if (L->elems[ua->down[i]].pos > L->elems[ub->down[j]].pos) crossings++;
      }
    }
  }
  return crossings;
}

static bool order_layers(layout_t *L, size_t *best_crossings) {
  for (size_t l = 0; l < L->layer_count; l++) {
    for (size_t k = 0; k < L->layer_size[l]; k++) L->elems[L->layers[l][k]].pos = (double)k;
    /* The first order groups scopes by where their first elements are. */
    for (size_t k = 0; k < L->layer_size[l]; k++)
      L->elems[L->layers[l][k]].key = (double)L->layers[l][k];
  }
  scope_keys(L);
  for (size_t l = 0; l < L->layer_count; l++) sort_layer(L, l);

  size_t total = L->elem_count;
  size_t *best = calloc(total + 1, sizeof *best);
  if (!best) return false;
  size_t offset = 0;
  for (size_t l = 0; l < L->layer_count; offset += L->layer_size[l++])
    memcpy(best + offset, L->layers[l], L->layer_size[l] * sizeof *best);
  *best_crossings = count_crossings(L);
  for (int s = 0; s<SWEEPS && * best_crossings> 0 && !L->oom; s++) {
    sweep(L, s % 2 == 0);
    size_t c = count_crossings(L);
    if (c < *best_crossings) {
      *best_crossings = c;
      offset = 0;
      for (size_t l = 0; l < L->layer_count; offset += L->layer_size[l++])
        memcpy(best + offset, L->layers[l], L->layer_size[l] * sizeof *best);
    }
  }
  offset = 0;
  for (size_t l = 0; l < L->layer_count; offset += L->layer_size[l++]) {
    memcpy(L->layers[l], best + offset, L->layer_size[l] * sizeof *best);
    set_positions(L, l);
  }
  free(best);
  return !L->oom;
}

/* ==========================================================================================
 * Coordinates
 * ======================================================================================== */

/* An item of a scope: one of its own elements (scope < 0) or a child scope. */
typedef struct item {
  long scope;
  size_t elem;
  double x, w;
  size_t *next; /* items that must lie to its right, in some layer, just after it */
  size_t next_count;
  size_t pred_count;
} item_t;

typedef struct placing {
  layout_t *L;
  long within; /* the scope placed, -1 for the whole drawing */
  item_t *items;
  size_t count;
  size_t *item_of; /* per element: its item, or SIZE_MAX when outside the scope */
} placing_t;

/* The centre of element e relative to the origin of the scope being placed. */
static double centre(const placing_t *P, size_t e) {
  const item_t *it = &P->items[P->item_of[e]];
  return it->x + (it->scope >= 0 ? P->L->elems[e].rel : P->L->elems[e].w / 2.0);
}

static bool collect_items(placing_t *P) {
  layout_t *L = P->L;
  size_t cap = 0;
  long *scope_item = calloc(L->scope_count + 1, sizeof *scope_item);
  if (!scope_item) return false;
  for (size_t s = 0; s < L->scope_count; s++) scope_item[s] = -1;
  for (size_t i = 0; i < L->elem_count; i++) {
    P->item_of[i] = SIZE_MAX;
    long scope = L->elems[i].scope;
    if ((P->within >= 0 && scope < 0) || !scope_within(L, scope, P->within)) continue;
    long child = child_towards(L, scope, P->within);
    if (child >= 0 && scope_item[child] >= 0) {
      P->item_of[i] = (size_t)scope_item[child];
      continue;
    }
    if (P->count == cap) {
      cap = cap ? 2 * cap : 16;
      item_t *more = grow(L, P->items, cap, sizeof *P->items);
      if (!more) break;
      P->items = more;
    }
    if (child >= 0) scope_item[child] = (long)P->count;
    P->item_of[i] = P->count;
    P->items[P->count++] =
        (item_t){.scope = child, .elem = i, .w = child >= 0 ? L->scopes[child].w : L->elems[i].w};
  }
  free(scope_item);
  /* Constraints: consecutive items of each layer. */
  for (size_t l = 0; l < L->layer_count && !L->oom; l++) {
    size_t prev = SIZE_MAX;
    for (size_t k = 0; k < L->layer_size[l]; k++) {
      size_t it = P->item_of[L->layers[l][k]];
      if (it == SIZE_MAX || it == prev) continue;
      if (prev != SIZE_MAX) {
        item_t *p = &P->items[prev];
        size_t *next = grow(L, p->next, p->next_count + 1, sizeof *next);
        if (!next) break;
        p->next = next;
        next[p->next_count++] = it;
        P->items[it].pred_count++;
      }
      prev = it;
    }
  }
  return !L->oom;
}

/* Where each item would like its left edge: under the mean of its neighbours outside it. */
static void wishes(const placing_t *P, double *want, double *count) {
  const layout_t *L = P->L;
  for (size_t i = 0; i < P->count; i++) want[i] = count[i] = 0;
  for (size_t e = 0; e < L->elem_count; e++) {
    size_t it = P->item_of[e];
    if (it == SIZE_MAX) continue;
    const elem_t *el = &L->elems[e];
    double own = centre(P, e) - P->items[it].x;
    for (int dir = 0; dir < 2; dir++) {
      const size_t *nb = dir ? el->down : el->up;
      size_t nc = dir ? el->down_count : el->up_count;
      for (size_t k = 0; k < nc; k++) {
        size_t o = P->item_of[nb[k]];
        if (o == SIZE_MAX || o == it) continue;
        want[it] += centre(P, nb[k]) - own;
        count[it] += 1;
      }
    }
  }
  for (size_t i = 0; i < P->count; i++) want[i] = count[i] > 0 ? want[i] / count[i] : P->items[i].x;
}

/* Place the items of scope `within` (-1: the whole drawing). */
static bool place_scope(layout_t *L, long within) {
  placing_t P = {.L = L, .within = within};
  P.item_of = calloc(L->elem_count + 1, sizeof *P.item_of);
  bool ok = P.item_of && collect_items(&P);
  size_t count = P.count, done = 0;
  item_t *items = P.items;
  /* A topological order of the constraints (they have no cycle: scopes keep one order). */
  size_t *topo = calloc(count + 1, sizeof *topo), *pending = calloc(count + 1, sizeof *pending);
  double *xf = calloc(count + 1, sizeof *xf), *want = calloc(count + 1, sizeof *want);
  double *weight = calloc(count + 1, sizeof *weight);
  ok = ok && topo && pending && xf && want && weight;
  if (ok) {
    size_t head = 0;
    for (size_t i = 0; i < count; i++) {
      pending[i] = items[i].pred_count;
      if (!pending[i]) topo[done++] = i;
    }
    while (head < done) {
      const item_t *it = &items[topo[head++]];
      for (size_t k = 0; k < it->next_count; k++)
        if (--pending[it->next[k]] == 0) topo[done++] = it->next[k];
    }
    ok = done == count;
  }
  if (ok) {
    /* Left-packed to begin with. */
    for (size_t t = 0; t < count; t++) {
      const item_t *it = &items[topo[t]];
      for (size_t k = 0; k < it->next_count; k++) {
        item_t *n = &items[it->next[k]];
        if (n->x < it->x + it->w + GAP_X) n->x = it->x + it->w + GAP_X;
      }
    }
    for (int round = 0; round < 40; round++) {
      wishes(&P, want, weight);
      /* Left-packed towards the wishes, then right-packed, and the mean of the two. */
      for (size_t i = 0; i < count; i++) xf[i] = want[i];
      for (size_t t = 0; t < count; t++) {
        const item_t *it = &items[topo[t]];
        for (size_t k = 0; k < it->next_count; k++) {
          size_t n = it->next[k];
          if (xf[n] < xf[topo[t]] + it->w + GAP_X) xf[n] = xf[topo[t]] + it->w + GAP_X;
        }
      }
      for (size_t t = count; t-- > 0;) {
        size_t i = topo[t];
        for (size_t k = 0; k < items[i].next_count; k++) {
          double limit = want[items[i].next[k]] - items[i].w - GAP_X;
          if (want[i] > limit) want[i] = limit;
        }
      }
      /* Every item moves at once, so a full step would swing neighbours past each other;
       * half a step (between feasible placements, so still feasible) settles. */
      for (size_t i = 0; i < count; i++) items[i].x = (items[i].x + (xf[i] + want[i]) / 2.0) / 2.0;
    }
    /* The block: from the leftmost to the rightmost item, with padding inside a scope. */
    double left = count ? INFINITY : 0, right = count ? -INFINITY : 0;
    for (size_t i = 0; i < count; i++) {
      if (items[i].x < left) left = items[i].x;
      if (items[i].x + items[i].w > right) right = items[i].x + items[i].w;
    }
    double pad = within >= 0 ? PAD : 0;
    for (size_t i = 0; i < count; i++) items[i].x += pad - left;
    for (size_t e = 0; e < L->elem_count; e++)
      if (P.item_of[e] != SIZE_MAX) L->elems[e].rel = centre(&P, e);
    for (size_t i = 0; i < count; i++)
      if (items[i].scope >= 0) L->scopes[items[i].scope].relx = items[i].x;
    if (within >= 0) L->scopes[within].w = right - left + 2 * pad;
  }
  for (size_t i = 0; i < count; i++) free(items[i].next);
  free(items);
  free(P.item_of);
  free(topo);
  free(pending);
  free(xf);
  free(want);
  free(weight);
  return ok;
}

static bool place(layout_t *L) {
  for (size_t depth = L->max_depth; depth > 0; depth--)
    for (size_t s = 0; s < L->scope_count; s++)
      if (L->scopes[s].depth == depth && !place_scope(L, (long)s)) return false;
  return place_scope(L, -1);
}

/* ==========================================================================================
 * The result
 * ======================================================================================== */

static void free_layout(layout_t *L) {
  for (size_t i = 0; i < L->elem_count; i++) {
    free(L->elems[i].up);
    free(L->elems[i].down);
  }
  free(L->elems);
  recap__view_scopes_free(&L->tree);
  free(L->scopes);
  free(L->extent);
  if (L->layers)
    for (size_t l = 0; l < L->layer_count; l++) free(L->layers[l]);
  free(L->layers);
  free(L->layer_size);
  free(L->edge_first);
}

static void clear_result(recap_view_graph_t *g) {
  if (g->edges)
    for (size_t e = 0; e < g->edge_count; e++) free(g->edges[e].points);
  free(g->edges);
  for (size_t c = 0; c < g->cluster_count; c++) free(g->clusters[c].path);
  free(g->clusters);
  g->edges = NULL;
  g->clusters = NULL;
  g->cluster_count = 0;
  g->laid_out = 0;
}

static bool store(layout_t *L, size_t crossings) {
  recap_view_graph_t *g = L->g;
  size_t N = L->layer_count, S = L->scope_count;
  /* Vertical room for scope labels above a layer and padding below it. */
  for (size_t s = 0; s < S; s++) L->scopes[s].start_depth = L->scopes[s].end_depth = 1;
  for (size_t depth = L->max_depth; depth > 1; depth--)
    for (size_t s = 0; s < S; s++) {
      scope_t *sc = &L->scopes[s];
      if (sc->depth != depth || sc->parent < 0) continue;
      scope_t *p = &L->scopes[sc->parent];
      if (p->lo == sc->lo && p->start_depth < sc->start_depth + 1)
        p->start_depth = sc->start_depth + 1;
      if (p->hi == sc->hi && p->end_depth < sc->end_depth + 1) p->end_depth = sc->end_depth + 1;
    }
  double *y = calloc(N + 1, sizeof *y);
  size_t *top = calloc(N + 1, sizeof *top), *bottom = calloc(N + 1, sizeof *bottom);
  g->edges = calloc(g->edge_count + 1, sizeof *g->edges);
  g->clusters = calloc(S + 1, sizeof *g->clusters);
  bool ok = y && top && bottom && g->edges && g->clusters;
  if (ok) {
    for (size_t s = 0; s < S; s++) {
      const scope_t *sc = &L->scopes[s];
      if (top[sc->lo] < sc->start_depth) top[sc->lo] = sc->start_depth;
      if (bottom[sc->hi] < sc->end_depth) bottom[sc->hi] = sc->end_depth;
    }
    for (size_t l = 0; l < N; l++)
      y[l] = (l ? y[l - 1] + RECAP__VIEW_NODE_H + GAP_Y + (double)bottom[l - 1] * PAD : MARGIN) +
             (double)top[l] * LABEL_H;

    /* Scopes: absolute positions from the outside in (parents come before children). */
    for (size_t depth = 1; depth <= L->max_depth; depth++)
      for (size_t s = 0; s < S; s++) {
        scope_t *sc = &L->scopes[s];
        if (sc->depth != depth) continue;
        sc->absx = (sc->parent >= 0 ? L->scopes[sc->parent].absx : MARGIN) + sc->relx;
      }
    for (size_t s = 0; s < S; s++) {
      const scope_t *sc = &L->scopes[s];
      recap_view_cluster_t *c = &g->clusters[s];
      recap__view_scope_t *t = &L->tree.v[s];
      c->path = t->path;
      t->path = NULL;                                          /* now the graph's */
      c->label = c->path + strlen(c->path) - strlen(t->label); /* the path ends with it */
      c->parent = t->parent;
      c->node = t->node;
      c->branch = t->branch;
      c->depth = sc->depth;
      c->node_count = sc->node_count;
      c->x = sc->absx;
      c->w = sc->w;
      c->y = y[sc->lo] - (double)sc->start_depth * LABEL_H;
      c->h = y[sc->hi] + RECAP__VIEW_NODE_H + (double)sc->end_depth * PAD - c->y;
    }
    g->cluster_count = S;

    double width = 0;
    for (size_t i = 0; i < L->elem_count; i++) {
      const elem_t *e = &L->elems[i];
      double right = MARGIN + e->rel + e->w / 2.0;
      if (right > width) width = right;
      if (e->kind != ELEM_NODE) continue;
      recap_view_node_t *n = &g->nodes[e->node];
      n->cluster = e->scope;
      n->layer = e->layer;
      n->w = e->w;
      n->h = RECAP__VIEW_NODE_H;
      n->x = MARGIN + e->rel - e->w / 2.0;
      n->y = y[e->layer];
    }
    for (size_t s = 0; s < S; s++)
      if (g->clusters[s].x + g->clusters[s].w > width) width = g->clusters[s].x + g->clusters[s].w;
    for (size_t l = 0; l < N; l++)
      for (size_t k = 0, order = 0; k < L->layer_size[l]; k++) {
        const elem_t *e = &L->elems[L->layers[l][k]];
        if (e->kind == ELEM_NODE) g->nodes[e->node].order = order++;
      }
    g->width = width + MARGIN;
    g->height =
        N ? y[N - 1] + RECAP__VIEW_NODE_H + (double)bottom[N - 1] * PAD + MARGIN : 2 * MARGIN;

    /* Edges: bottom centre of the source, down through each dummy, top centre of the target. */
    size_t e = 0;
    for (size_t to = 0; to < g->count && ok; to++) {
      for (size_t k = 0; k < g->nodes[to].dep_count; k++, e++) {
        const recap_view_node_t *a = &g->nodes[g->nodes[to].deps[k]], *b = &g->nodes[to];
        size_t span = b->layer - a->layer - 1;
        recap_view_edge_t *edge = &g->edges[e];
        edge->from = g->nodes[to].deps[k];
        edge->to = to;
        edge->points = calloc(2 + 2 * span, sizeof *edge->points);
        if (!edge->points) {
          ok = false;
          break;
        }
        edge->points[edge->point_count++] = (recap_view_point_t){a->x + a->w / 2, a->y + a->h};
        for (size_t d = 0; d < span; d++) {
          const elem_t *de = &L->elems[L->edge_first[e] + d];
          double x = MARGIN + de->rel, yl = y[de->layer];
          edge->points[edge->point_count++] = (recap_view_point_t){x, yl};
          edge->points[edge->point_count++] = (recap_view_point_t){x, yl + RECAP__VIEW_NODE_H};
        }
        edge->points[edge->point_count++] = (recap_view_point_t){b->x + b->w / 2, b->y};
      }
    }
    g->layer_count = N;
    g->crossings = crossings;
  }
  free(y);
  free(top);
  free(bottom);
  return ok;
}

int recap_view_layout(recap_view_graph_t *g, char *err, size_t err_size) {
  clear_result(g);
  layout_t L = {.g = g};
  size_t crossings = 0;
  bool ok = build_elements(&L) && order_layers(&L, &crossings) && place(&L) && store(&L, crossings);
  free_layout(&L);
  if (!ok) {
    clear_result(g);
    return recap__view_fail(err, err_size, "out of memory while laying out the graph");
  }
  g->laid_out = 1;
  return 0;
}
