/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dot.c — the graph as Graphviz DOT: one box per node, an edge per dependency, colour by node
 * type, annotation scopes and the bodies of conditional nodes as nested clusters (recap__view_
 * scopes_build), a dashed edge from each conditional node to each of its bodies, and a legend
 * of the node types present.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "view_internal.h"

/* Inside a DOT double-quoted string: escape quotes and backslashes, and turn newlines into
 * DOT's centred line break. */
static void dot_escape(FILE *out, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(out, "\\%c", *s);
    else if (*s == '\n')
      fputs("\\n", out);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, out);
  }
}

static void dot_node(FILE *out, const recap_view_graph_t *g, size_t i, size_t indent) {
  const recap_view_node_t *n = &g->nodes[i];
  recap__view_buf_t label = {0};
  recap__view_printf(&label, "#%zu %s", i, n->type);
  if (n->pretty_name) recap__view_printf(&label, "\n%s", n->pretty_name);
  recap__view_buf_t shape = {0};
  recap__view_describe_shape(n, false, &shape);
  if (shape.len) recap__view_printf(&label, "\n%s", shape.data);
  if (recap__view_scope_of(n)) recap__view_printf(&label, "\n[%s]", recap__view_scope_of(n));
  if (n->has_tools_id) recap__view_printf(&label, "\ntools id %" PRIu64, n->tools_id);
  for (size_t k = 0; k < n->graph_param_count; k++)
    recap__view_printf(&label, "\n%s", n->graph_params[k]);
  if (n->set_alone) recap__view_printf(&label, "\nset alone: %s", n->set_alone);

  fprintf(out, "%*sn%zu [label=\"", (int)indent, "", i);
  dot_escape(out, label.data ? label.data : "");
  fprintf(out, "\", fillcolor=\"%s\"", recap__view_fill_of(n->type));
  /* A conditional node stands out from the boxes: its bodies hang below it. */
  if (strcmp(n->type, "conditional") == 0)
    fputs(", shape=hexagon, style=\"filled,bold\", color=\"#6a51a3\"", out);
  if (n->kernel_name) {
    fputs(", tooltip=\"", out);
    dot_escape(out, n->kernel_name);
    fputs("\"", out);
  }
  fputs("];\n", out);
  free(label.data);
  free(shape.data);
}

/* A cluster and what it holds: the clusters directly inside it, then its own nodes. A body's
 * cluster is dashed and tinted; an empty body holds a small "empty" mark, so that it can be
 * drawn and pointed at. */
static void write_scope(FILE *out, const recap_view_graph_t *g, const recap__view_scopes_t *s,
                        long scope, size_t indent) {
  for (size_t k = 0; k < s->count; k++) {
    const recap__view_scope_t *c = &s->v[k];
    if (c->parent != scope) continue;
    bool body = c->node != SIZE_MAX;
    fprintf(out, "%*ssubgraph cluster_%zu {\n%*slabel=\"", (int)indent, "", k, (int)indent + 2, "");
    dot_escape(out, c->label);
    if (body)
      fprintf(out,
              "\";\n%*sstyle=\"dashed,rounded,filled\";\n%*sfillcolor=\"#f4f1fa\";\n"
              "%*scolor=\"#6a51a3\";\n%*sfontname=\"Helvetica\";\n",
              (int)indent + 2, "", (int)indent + 2, "", (int)indent + 2, "", (int)indent + 2, "");
    else
      fprintf(out,
              "\";\n%*sstyle=\"rounded\";\n%*scolor=\"#7a8ca3\";\n%*sfontname=\"Helvetica\";\n",
              (int)indent + 2, "", (int)indent + 2, "", (int)indent + 2, "");
    write_scope(out, g, s, (long)k, indent + 2);
    if (body && c->node_count == 0)
      fprintf(out,
              "%*sempty_%zu [label=\"empty\", shape=plain, style=\"\", fontcolor=\"#6a51a3\"];\n",
              (int)indent + 2, "", k);
    fprintf(out, "%*s}\n", (int)indent, "");
  }
  for (size_t i = 0; i < g->count; i++)
    if (s->of_node[i] == scope) dot_node(out, g, i, indent);
}

/* A dashed edge from each conditional node to each of its bodies: to the body's first node
 * (or its empty mark), clipped at the body's cluster (lhead). */
static void write_body_edges(FILE *out, const recap_view_graph_t *g,
                             const recap__view_scopes_t *s) {
  for (size_t k = 0; k < s->count; k++) {
    const recap__view_scope_t *c = &s->v[k];
    if (c->node == SIZE_MAX) continue;
    size_t first = SIZE_MAX;
    for (size_t i = c->node + 1; i < g->count && first == SIZE_MAX; i++)
      if (recap__view_scope_within(s, s->of_node[i], (long)k)) first = i;
    if (first != SIZE_MAX)
      fprintf(out, "  n%zu -> n%zu [style=dashed, color=\"#6a51a3\", lhead=cluster_%zu];\n",
              c->node, first, k);
    else
      fprintf(out, "  n%zu -> empty_%zu [style=dashed, color=\"#6a51a3\", lhead=cluster_%zu];\n",
              c->node, k, k);
  }
}

int recap_view_write_dot(FILE *out, const recap_view_graph_t *g, const char *source) {
  fputs("// Written by recap_view", out);
  if (source) {
    fputs(" from ", out);
    for (const char *s = source; *s; s++) fputc(*s == '\n' ? ' ' : *s, out);
  }
  size_t conditional, in_bodies;
  recap__view_count_regions(g, &conditional, &in_bodies);
  fprintf(out, "\n// %zu nodes", g->count);
  if (conditional)
    fprintf(out, " (%zu of them in the bodies of %zu conditional node%s)", in_bodies, conditional,
            conditional == 1 ? "" : "s");
  fprintf(out, ", %zu edges. Render with: dot -Tsvg this.dot -o graph.svg\n", g->edge_count);
  fputs(
      "digraph recap_graph {\n"
      "  rankdir=TB;\n"
      "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
      "  edge [color=\"#555555\", arrowsize=0.7];\n"
      "  compound=true;\n",
      out);

  recap__view_scopes_t scopes;
  if (recap__view_scopes_build(g, &scopes) != 0) return -1;
  write_scope(out, g, &scopes, -1, 2);
  for (size_t i = 0; i < g->count; i++)
    for (size_t k = 0; k < g->nodes[i].dep_count; k++)
      fprintf(out, "  n%zu -> n%zu;\n", g->nodes[i].deps[k], i);
  write_body_edges(out, g, &scopes);
  recap__view_scopes_free(&scopes);

  /* A legend of the types present, as a plain table-shaped node off to the side. */
  recap__view_type_count_t *counts = NULL;
  size_t type_count = recap__view_count_types(g, &counts);
  if (type_count == (size_t)-1) return -1;
  if (type_count) {
    fputs(
        "  legend [shape=plain, style=\"\", label=<<table border=\"0\" cellborder=\"1\" "
        "cellspacing=\"0\" cellpadding=\"4\">",
        out);
    for (size_t t = 0; t < type_count; t++) {
      fprintf(out, "<tr><td bgcolor=\"%s\">", recap__view_fill_of(counts[t].type));
      for (const char *s = counts[t].type; *s; s++) {
        if (*s == '<')
          fputs("&lt;", out);
        else if (*s == '>')
          fputs("&gt;", out);
        else if (*s == '&')
          fputs("&amp;", out);
        else if (*s == '"')
          fputs("&quot;", out);
        else
          fputc(*s, out);
      }
      fprintf(out, "</td><td>%zu</td></tr>", counts[t].count);
    }
    fputs("</table>>];\n", out);
  }
  free(counts);
  fputs("}\n", out);
  return !ferror(out) ? 0 : -1;
}

/* ==========================================================================================
 * Writing into a file
 * ======================================================================================== */

int recap__view_save(const char *path, int (*write)(FILE *, void *), void *ctx, char *err,
                     size_t err_size) {
  bool is_stdout = strcmp(path, "-") == 0;
  FILE *out = is_stdout ? stdout : fopen(path, "wb");
  if (!out) return recap__view_fail(err, err_size, "cannot open for writing: %s", strerror(errno));
  errno = 0;
  int rc = write(out, ctx);
  bool write_error = ferror(out) != 0;
  int saved = errno;
  if (is_stdout) {
    write_error = fflush(out) != 0 || write_error;
  } else {
    write_error = fclose(out) != 0 || write_error;
    /* Remove what was written, but only a file: never a device such as /dev/full. */
    struct stat st;
    if ((write_error || rc != 0) && stat(path, &st) == 0 && S_ISREG(st.st_mode)) remove(path);
  }
  if (write_error) {
    if (!saved) saved = errno ? errno : EIO;
    return recap__view_fail(err, err_size, "cannot write: %s", strerror(saved));
  }
  return rc == 0 ? 0 : -1; /* the writer said what failed */
}

typedef struct dot_job {
  const recap_view_graph_t *g;
  const char *source;
  char *err;
  size_t err_size;
} dot_job_t;

static int write_dot_job(FILE *out, void *ctx) {
  const dot_job_t *job = ctx;
  if (recap_view_write_dot(out, job->g, job->source) == 0 || ferror(out)) return 0;
  return recap__view_fail(job->err, job->err_size, "out of memory");
}

int recap_view_save_dot(const recap_view_graph_t *g, const char *path, const char *source,
                        char *err, size_t err_size) {
  dot_job_t job = {g, source, err, err_size};
  return recap__view_save(path, write_dot_job, &job, err, err_size);
}
