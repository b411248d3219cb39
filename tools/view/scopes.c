/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * scopes.c — the tree of clusters that the layout and the DOT writer draw: annotation scopes and
 * the bodies of conditional nodes, nested. One walk of the nodes in index order builds it: a
 * body's nodes follow their conditional node, so its cluster exists when they are met.
 */
#include <stdlib.h>
#include <string.h>

#include "view_internal.h"

static long add_scope(recap__view_scopes_t *s, size_t *cap, long parent, size_t node,
                      unsigned branch, const char *label, size_t label_len) {
  if (s->count == *cap) {
    size_t more = *cap ? 2 * *cap : 16;
    recap__view_scope_t *v = realloc(s->v, more * sizeof *v);
    if (!v) return -2;
    s->v = v;
    *cap = more;
  }
  const char *above = parent >= 0 ? s->v[parent].path : NULL;
  size_t above_len = above ? strlen(above) + 1 : 0;
  char *path = malloc(above_len + label_len + 1);
  char *own = malloc(label_len + 1);
  if (!path || !own) {
    free(path);
    free(own);
    return -2;
  }
  if (above) {
    memcpy(path, above, above_len - 1);
    path[above_len - 1] = '/';
  }
  memcpy(path + above_len, label, label_len);
  path[above_len + label_len] = '\0';
  memcpy(own, label, label_len);
  own[label_len] = '\0';
  s->v[s->count] = (recap__view_scope_t){
      .parent = parent,
      .depth = parent >= 0 ? s->v[parent].depth + 1 : 1,
      .node = node,
      .branch = branch,
      .label = own,
      .path = path,
  };
  return (long)s->count++;
}

/* The annotation scope `label` directly inside parent, created when new; -2 out of memory. */
static long child_scope(recap__view_scopes_t *s, size_t *cap, long parent, const char *label,
                        size_t len) {
  for (size_t k = 0; k < s->count; k++) {
    const recap__view_scope_t *c = &s->v[k];
    if (c->parent == parent && c->node == SIZE_MAX && strlen(c->label) == len &&
        memcmp(c->label, label, len) == 0)
      return (long)k;
  }
  return add_scope(s, cap, parent, SIZE_MAX, 0, label, len);
}

/* The part of path below prefix ("step/fwd" below "step" is "fwd"), or all of path when it
 * does not continue prefix. */
static const char *below(const char *path, const char *prefix) {
  if (!prefix) return path;
  size_t n = strlen(prefix);
  if (strncmp(path, prefix, n) != 0) return path;
  if (path[n] == '\0') return path + n;
  return path[n] == '/' ? path + n + 1 : path;
}

int recap__view_scopes_build(const recap_view_graph_t *g, recap__view_scopes_t *s) {
  memset(s, 0, sizeof *s);
  size_t cap = 0;
  long *first_body = malloc((g->count ? g->count : 1) * sizeof *first_body);
  s->of_node = malloc((g->count ? g->count : 1) * sizeof *s->of_node);
  if (!first_body || !s->of_node) goto out_of_memory;
  for (size_t i = 0; i < g->count; i++) {
    const recap_view_node_t *n = &g->nodes[i];
    long scope = -1;
    const char *prefix = NULL;
    /* recap_view_finish checked that a parent is a conditional node before this one. */
    if (n->parent < i && first_body[n->parent] >= 0 && n->branch < g->nodes[n->parent].branches) {
      scope = first_body[n->parent] + (long)n->branch;
      prefix = recap__view_scope_of(&g->nodes[n->parent]);
    }
    const char *path = recap__view_scope_of(n);
    if (path) path = below(path, prefix);
    for (size_t start = 0, end = 0; path && path[start]; start = end + 1) {
      end = start;
      while (path[end] && path[end] != '/') end++;
      if (end > start) scope = child_scope(s, &cap, scope, path + start, end - start);
      if (scope == -2) goto out_of_memory;
      if (!path[end]) break;
    }
    s->of_node[i] = scope;
    first_body[i] = -1;
    if (n->branches && strcmp(n->type, "conditional") == 0) {
      first_body[i] = (long)s->count;
      for (unsigned b = 0; b < n->branches; b++) {
        char label[32];
        recap_view_body_label(n, b, label, sizeof label);
        if (add_scope(s, &cap, scope, i, b, label, strlen(label)) == -2) goto out_of_memory;
      }
    }
  }
  for (size_t i = 0; i < g->count; i++)
    for (long k = s->of_node[i]; k >= 0; k = s->v[k].parent) s->v[k].node_count++;
  free(first_body);
  return 0;
out_of_memory:
  free(first_body);
  recap__view_scopes_free(s);
  return -1;
}

void recap__view_scopes_free(recap__view_scopes_t *s) {
  for (size_t k = 0; k < s->count; k++) {
    free(s->v[k].label);
    free(s->v[k].path);
  }
  free(s->v);
  free(s->of_node);
  memset(s, 0, sizeof *s);
}

bool recap__view_scope_within(const recap__view_scopes_t *s, long scope, long ancestor) {
  for (; scope >= 0; scope = s->v[scope].parent)
    if (scope == ancestor) return true;
  return ancestor < 0;
}
