/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * view_internal.h — what the viewer's files share: a growing string, error messages, the
 * colours of node types and short descriptions of nodes.
 */
#ifndef RECAP_VIEW_INTERNAL_H
#define RECAP_VIEW_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "recap_view.h"

/* A growing string. After an allocation failure it stays as it was and `failed` is set, so a
 * writer can add many pieces and check once. */
typedef struct recap__view_buf {
  char *data; /* NUL-terminated once anything was added */
  size_t len, cap;
  bool failed;
} recap__view_buf_t;

void recap__view_putn(recap__view_buf_t *b, const char *s, size_t n);
void recap__view_puts(recap__view_buf_t *b, const char *s);
void recap__view_printf(recap__view_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Format a message into err (when not NULL) and return -1. */
int recap__view_fail(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "4.0 KiB" for 4096; exact bytes under 1 KiB. */
void recap__view_format_bytes(char *out, size_t size, uint64_t bytes);

/* The fill colour of a node type; grey for a type the library does not list. */
const char *recap__view_fill_of(const char *type);

/* "grid 4x1x1, block 256x1x1, smem 1.0 KiB" for kernels ("grid 4x1x1 block 256x1x1" when
 * compact); "while, 1 branch" for conditional nodes ("1 branch" when compact, the box's name
 * saying "while"); "4.0 KiB" for copies and the like; nothing
 * otherwise. */
void recap__view_describe_shape(const recap_view_node_t *n, bool compact, recap__view_buf_t *out);

/* The node's annotation as shown: its whole path when known, else the innermost label. */
const char *recap__view_scope_of(const recap_view_node_t *n);

/* The clusters of a graph, as a tree: annotation scopes (a node's annotation path, each prefix
 * one scope) and the bodies of conditional nodes (one per branch, empty ones included). A
 * body's cluster lies inside the innermost cluster of its conditional node; inside a body, a
 * node's annotation path continues from its conditional node's (the part they share is not
 * repeated). Parents come before their children. */
typedef struct recap__view_scope {
  long parent;       /* the enclosing scope, or -1 */
  size_t depth;      /* 1 for an outermost scope */
  size_t node;       /* a body: its conditional node; an annotation scope: SIZE_MAX */
  unsigned branch;   /* a body: which one */
  char *label;       /* "forward", or a body's recap_view_body_label */
  char *path;        /* the labels from the outermost scope in, joined by '/' */
  size_t node_count; /* nodes inside, nested scopes included */
} recap__view_scope_t;

typedef struct recap__view_scopes {
  recap__view_scope_t *v;
  size_t count;
  long *of_node; /* per node: its innermost scope, or -1 */
} recap__view_scopes_t;

/* Build the tree of g (finished); -1 when out of memory. Free with recap__view_scopes_free. */
int recap__view_scopes_build(const recap_view_graph_t *g, recap__view_scopes_t *s);
void recap__view_scopes_free(recap__view_scopes_t *s);
/* 1 when scope s is `ancestor` or lies inside it (-1: everything lies inside the top). */
bool recap__view_scope_within(const recap__view_scopes_t *s, long scope, long ancestor);

/* How many conditional nodes g has, and how many of its nodes lie inside their bodies. */
void recap__view_count_regions(const recap_view_graph_t *g, size_t *conditional, size_t *in_bodies);

/* The distinct node types of g in display order (the library's, then others as first met), with
 * counts. *types is malloc'ed; returns the number of entries, or (size_t)-1 out of memory. */
typedef struct recap__view_type_count {
  const char *type;
  size_t count;
} recap__view_type_count_t;
size_t recap__view_count_types(const recap_view_graph_t *g, recap__view_type_count_t **types);

/* The two lines of text in a node's box: the name (the kernel's short name, a conditional node's kind, or the type) and
 * the detail ("grid 4x1x1 block 256x1x1", or the bytes). The name is malloc'ed (NULL when out
 * of memory); the detail is appended to out. */
char *recap__view_box_name(const recap_view_node_t *n);
void recap__view_box_detail(const recap_view_node_t *n, recap__view_buf_t *out);

/* Run write(out, ctx) into the file at path ("-": standard output). A failed write removes the
 * partial file; err says what failed. */
int recap__view_save(const char *path, int (*write)(FILE *, void *), void *ctx, char *err,
                     size_t err_size);

/* Geometry shared by the layout and the page, in drawing units (CSS pixels at zoom 1). */
enum {
  RECAP__VIEW_NAME_CHARS = 34, /* the longest name drawn in a box */
  RECAP__VIEW_NODE_H = 40,
};

#endif /* RECAP_VIEW_INTERNAL_H */
