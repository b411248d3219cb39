/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * html.c — the graph as one self-contained HTML page.
 *
 * The page carries everything inline: its style sheet (page.css), its script (page.js), and the
 * laid-out graph as JSON in <script id="graph-data" type="application/json">. The script draws
 * the layout as SVG, so the page can be mailed or archived as one file and opens with no network.
 * The node-type counts are written as HTML here; everything else is drawn by the script.
 *
 * A first inline script records any JavaScript error in <html data-recap-error="...">, and the
 * drawing script sets <html data-recap-rendered="N"> to the number of nodes it drew, so that a
 * headless browser can tell a page that works from one that does not (tests/tools/view_browser.cmake).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "page_css.h"
#include "page_js.h"
#include "view_internal.h"

static void html_escape(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default:
        if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') fputc(*s, out);
    }
  }
}

/* A JSON string that is also safe inside <script>: no '<', '>' or '&' appears as itself, so the
 * data can never close its element. */
static void json_string(FILE *out, const char *s) {
  if (!s) {
    fputs("null", out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20 || c == '<' || c == '>' || c == '&')
      fprintf(out, "\\u%04x", c);
    else
      fputc(c, out);
  }
  fputc('"', out);
}

static void json_indices(FILE *out, const size_t *items, size_t count) {
  fputc('[', out);
  for (size_t k = 0; k < count; k++) fprintf(out, "%s%zu", k ? "," : "", items[k]);
  fputc(']', out);
}

static int write_node(FILE *out, const recap_view_node_t *n, size_t i) {
  char *name = recap__view_box_name(n);
  recap__view_buf_t detail = {0};
  recap__view_box_detail(n, &detail);
  if (!name || detail.failed) {
    free(name);
    free(detail.data);
    return -1;
  }
  fprintf(out, "{\"i\":%zu,\"type\":", i);
  json_string(out, n->type);
  fputs(",\"name\":", out);
  json_string(out, name);
  fputs(",\"detail\":", out);
  json_string(out, detail.data ? detail.data : "");
  fprintf(out, ",\"fill\":\"%s\",\"x\":%.1f,\"y\":%.1f,\"w\":%.1f,\"h\":%.1f,\"layer\":%zu",
          recap__view_fill_of(n->type), n->x, n->y, n->w, n->h, n->layer);
  fputs(",\"kernel\":", out);
  json_string(out, n->kernel_name);
  fputs(",\"pretty\":", out);
  json_string(out, n->pretty_name);
  if (n->has_launch)
    fprintf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"smem\":%" PRIu64, n->grid[0],
            n->grid[1], n->grid[2], n->block[0], n->block[1], n->block[2], n->shared_bytes);
  fprintf(out, ",\"bytes\":%" PRIu64 ",\"scope\":", n->bytes);
  json_string(out, recap__view_scope_of(n));
  if (n->has_tools_id)
    fprintf(out, ",\"tools_id\":\"%" PRIu64 "\"", n->tools_id);
  else
    fputs(",\"tools_id\":null", out);
  /* Where the node sits: a body of a conditional node, or the graph itself (null). */
  if (n->parent == SIZE_MAX)
    fputs(",\"parent\":null", out);
  else
    fprintf(out, ",\"parent\":%zu", n->parent);
  fprintf(out, ",\"branch\":%u,\"region\":", n->branch);
  json_string(out, n->region_kind);
  fprintf(out, ",\"branches\":%u,\"cluster\":%ld", n->branches, n->cluster);
  fputs(",\"deps\":", out);
  json_indices(out, n->deps, n->dep_count);
  fputs(",\"succ\":", out);
  json_indices(out, n->succ, n->succ_count);
  fputs(",\"params\":[", out);
  for (size_t k = 0; k < n->param_count; k++) {
    if (k) fputc(',', out);
    json_string(out, n->params[k]);
  }
  fputs("],\"graph_params\":[", out);
  for (size_t k = 0; k < n->graph_param_count; k++) {
    if (k) fputc(',', out);
    json_string(out, n->graph_params[k]);
  }
  fputs("],\"set_alone\":", out);
  json_string(out, n->set_alone);
  fputs(",\"allocs\":[", out);
  for (size_t k = 0; k < n->alloc_count; k++) {
    const recap_view_alloc_t *a = &n->allocs[k];
    fprintf(out,
            "%s{\"base\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"generation\":%" PRIu64
            ",\"readers\":%zu,\"site\":",
            k ? "," : "", a->base, a->size, a->generation, a->reader_count);
    if (a->alloc_site)
      fprintf(out, "\"0x%" PRIx64 "\"", a->alloc_site);
    else
      fputs("null", out);
    fprintf(out, ",\"freed\":%s}", a->freed ? "true" : "false");
  }
  fputs("]}", out);
  free(name);
  free(detail.data);
  return 0;
}

static int write_data(FILE *out, const recap_view_graph_t *g, const recap__view_type_count_t *types,
                      size_t type_count) {
  fprintf(out, "{\"width\":%.1f,\"height\":%.1f,\"pool\":", g->width, g->height);
  json_string(out, g->pool);
  fputs(",\n\"nodes\":[", out);
  for (size_t i = 0; i < g->count; i++) {
    fputs(i ? ",\n" : "\n", out);
    if (write_node(out, &g->nodes[i], i) != 0) return -1;
  }
  fputs("],\n\"edges\":[", out);
  for (size_t e = 0; e < g->edge_count; e++) {
    const recap_view_edge_t *edge = &g->edges[e];
    fprintf(out, "%s{\"from\":%zu,\"to\":%zu,\"points\":[", e ? ",\n" : "\n", edge->from, edge->to);
    for (size_t p = 0; p < edge->point_count; p++)
      fprintf(out, "%s[%.1f,%.1f]", p ? "," : "", edge->points[p].x, edge->points[p].y);
    fputs("]}", out);
  }
  fputs("],\n\"clusters\":[", out);
  for (size_t c = 0; c < g->cluster_count; c++) {
    const recap_view_cluster_t *cl = &g->clusters[c];
    fputs(c ? ",\n{\"path\":" : "\n{\"path\":", out);
    json_string(out, cl->path);
    fputs(",\"label\":", out);
    json_string(out, cl->label);
    fprintf(out, ",\"depth\":%zu,\"nodes\":%zu,\"parent\":%ld,", cl->depth, cl->node_count,
            cl->parent);
    if (cl->node == SIZE_MAX)
      fputs("\"node\":null", out);
    else
      fprintf(out, "\"node\":%zu,\"branch\":%u", cl->node, cl->branch);
    fprintf(out, ",\"x\":%.1f,\"y\":%.1f,\"w\":%.1f,\"h\":%.1f}", cl->x, cl->y, cl->w, cl->h);
  }
  fputs("],\n\"types\":[", out);
  for (size_t t = 0; t < type_count; t++) {
    fputs(t ? ",{\"type\":" : "{\"type\":", out);
    json_string(out, types[t].type);
    fprintf(out, ",\"fill\":\"%s\",\"count\":%zu}", recap__view_fill_of(types[t].type),
            types[t].count);
  }
  fputs("]}\n", out);
  return 0;
}

/* Where node i sits, as text: "while body of #3", or "graph" for the graph's own nodes. */
static void write_place(FILE *out, const recap_view_graph_t *g, size_t i) {
  const recap_view_node_t *n = &g->nodes[i];
  if (n->parent == SIZE_MAX) {
    fputs("graph", out);
    return;
  }
  char label[32];
  recap_view_body_label(&g->nodes[n->parent], n->branch, label, sizeof label);
  fprintf(out, "<a href=\"#node-%zu\" data-node=\"%zu\">", n->parent, n->parent);
  html_escape(out, label);
  fprintf(out, " of #%zu</a>", n->parent);
}

/* The regions: one row per conditional node, with its kind, its bodies, the nodes they hold
 * (nested ones included) and the region it lies in itself. */
static void write_regions(FILE *out, const recap_view_graph_t *g) {
  fputs(
      "<h2>Regions</h2>\n<table id=\"regions\">\n<tr><th>node</th><th>kind</th>"
      "<th class=\"num\">bodies</th><th class=\"num\">nodes</th><th>in</th></tr>\n",
      out);
  for (size_t i = 0; i < g->count; i++) {
    const recap_view_node_t *n = &g->nodes[i];
    if (strcmp(n->type, "conditional") != 0) continue;
    size_t inside = 0; /* body nodes follow their conditional node */
    for (size_t k = i + 1; k < g->count; k++) {
      size_t p = g->nodes[k].parent;
      while (p != SIZE_MAX && p > i) p = g->nodes[p].parent;
      inside += p == i;
    }
    fprintf(out, "<tr data-node=\"%zu\"><td>#%zu</td><td>", i, i);
    html_escape(out, n->region_kind ? n->region_kind : "?");
    fprintf(out, "</td><td class=\"num\">%u</td><td class=\"num\">%zu</td><td>", n->branches,
            inside);
    write_place(out, g, i);
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n", out);
}

/* Records any script error on <html>, before anything else runs. */
static const char error_hook[] =
    "window.onerror=function(message,source,line,column){"
    "document.documentElement.setAttribute('data-recap-error',"
    "String(message)+' (line '+line+':'+column+')');};\n";

int recap_view_write_html(FILE *out, recap_view_graph_t *g, const char *title, char *err,
                          size_t err_size) {
  if (!g->laid_out && recap_view_layout(g, err, err_size) != 0) return -1;
  if (!title) title = "graph";
  recap__view_type_count_t *types = NULL;
  size_t type_count = recap__view_count_types(g, &types);
  if (type_count == (size_t)-1) return recap__view_fail(err, err_size, "out of memory");
  size_t conditional, in_bodies, scopes = 0;
  recap__view_count_regions(g, &conditional, &in_bodies);
  for (size_t c = 0; c < g->cluster_count; c++) scopes += g->clusters[c].node == SIZE_MAX;

  fputs(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"generator\" content=\"recap_view\">\n<title>recap graph: ",
      out);
  html_escape(out, title);
  fprintf(out, "</title>\n<script>\n%s</script>\n<style>\n", error_hook);
  for (const char *const *line = recap__view_page_css; *line; line++) fputs(*line, out);
  fputs("</style>\n</head>\n<body>\n<header>\n<h1>recap graph <span class=\"title\">", out);
  html_escape(out, title);
  fprintf(out,
          "</span></h1>\n<span class=\"summary\"><b>%zu</b> node%s, <b>%zu</b> edge%s, %zu "
          "layer%s, %zu annotation scope%s",
          g->count, g->count == 1 ? "" : "s", g->edge_count, g->edge_count == 1 ? "" : "s",
          g->layer_count, g->layer_count == 1 ? "" : "s", scopes, scopes == 1 ? "" : "s");
  /* Bodies count among the nodes above; say how many. */
  if (conditional)
    fprintf(out, ", <b>%zu</b> region%s holding %zu node%s", conditional,
            conditional == 1 ? "" : "s", in_bodies, in_bodies == 1 ? "" : "s");
  fprintf(out, "; tools ids %savailable", g->tools_ids_available ? "" : "not ");
  if (g->pool) {
    fputs("; pool ", out);
    html_escape(out, g->pool);
  }
  fputs(
      "</span>\n<div class=\"tools\"><input id=\"search\" type=\"search\" "
      "placeholder=\"search: name, type, scope, #index\" aria-label=\"search nodes\">"
      "<span id=\"matches\"></span>"
      "<button id=\"fit\" title=\"fit the graph into the view (F)\">Fit</button>"
      "<button id=\"zoom-in\" title=\"zoom in (+)\">+</button>"
      "<button id=\"zoom-out\" title=\"zoom out (-)\">&minus;</button></div>\n</header>\n"
      "<main>\n<div id=\"canvas\"><svg id=\"graph\" role=\"img\" aria-label=\"the graph\">"
      "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
      "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">"
      "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#6b7280\"/></marker></defs>"
      "<g id=\"viewport\"></g></svg>"
      "<noscript>The drawing needs JavaScript.</noscript></div>\n<aside>\n"
      "<h2>Node types</h2>\n<table id=\"counts\">\n",
      out);
  for (size_t t = 0; t < type_count; t++) {
    fputs("<tr data-type=\"", out);
    html_escape(out, types[t].type);
    fprintf(out, "\"><td><span class=\"swatch\" style=\"background:%s\"></span>",
            recap__view_fill_of(types[t].type));
    html_escape(out, types[t].type);
    fprintf(out, "</td><td class=\"num\">%zu</td></tr>\n", types[t].count);
  }
  fputs("</table>\n", out);
  if (conditional) write_regions(out, g);
  fputs(
      "<p class=\"keys\">Drag to pan, wheel to zoom, F to fit the graph, W its width, / to search; click a "
      "type to find its nodes.</p>\n"
      "<h2>Node</h2>\n<p id=\"hint\" class=\"hint\">Click a node to see all it holds.</p>\n"
      "<dl id=\"fields\"></dl>\n</aside>\n</main>\n"
      "<script id=\"graph-data\" type=\"application/json\">\n",
      out);
  int rc = write_data(out, g, types, type_count);
  free(types);
  if (rc != 0) return recap__view_fail(err, err_size, "out of memory");
  fputs("</script>\n<script>\n", out);
  for (const char *const *line = recap__view_page_js; *line; line++) fputs(*line, out);
  fputs("</script>\n</body>\n</html>\n", out);
  return ferror(out) ? recap__view_fail(err, err_size, "cannot write the page") : 0;
}

typedef struct html_job {
  recap_view_graph_t *g;
  const char *title;
  char *err;
  size_t err_size;
} html_job_t;

static int write_html_job(FILE *out, void *ctx) {
  html_job_t *job = ctx;
  return recap_view_write_html(out, job->g, job->title, job->err, job->err_size);
}

int recap_view_save_html(recap_view_graph_t *g, const char *path, const char *title, char *err,
                         size_t err_size) {
  /* Lay out before the file is opened: a failure then leaves no file behind. */
  if (!g->laid_out && recap_view_layout(g, err, err_size) != 0) return -1;
  html_job_t job = {g, title, err, err_size};
  return recap__view_save(path, write_html_job, &job, err, err_size);
}
