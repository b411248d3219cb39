/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap-graph — turns the JSON of recap_graph_info_json() into a picture of the graph.
 *
 *     recap-graph dot  graph.json graph.dot    Graphviz DOT: a box per node, an edge per
 *                                              dependency, annotation scopes and the bodies
 *                                              of conditional nodes as clusters
 *     recap-graph html graph.json graph.html   one self-contained HTML page: the graph laid
 *                                              out in layers, with pan, zoom, search and a
 *                                              panel of everything a node holds
 *
 * The JSON is read into the viewer's model (load.c, with cJSON) and written by recap_view
 * (tools/view), the library a program links to write the same page straight from
 * recap_graph_inspect.
 *
 * Exit status: 0 on success, 1 when the input cannot be read or is not a recap graph, or the
 * output cannot be written, 2 for a bad command line.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "load.h"
#include "recap_view.h"

#define PROGRAM "recap-graph"

static void usage(FILE *out) {
  fputs("usage: " PROGRAM
        " [--title TEXT] dot  INPUT.json OUTPUT.dot\n"
        "       " PROGRAM
        " [--title TEXT] html INPUT.json OUTPUT.html\n"
        "       " PROGRAM
        " --help\n"
        "\n"
        "Turns the JSON written by recap_graph_info_json() (a captured CUDA graph's nodes and\n"
        "edges) into a picture:\n"
        "  dot   Graphviz DOT: one box per node (type, kernel name, launch shape or bytes,\n"
        "        annotation), an edge per dependency, colour by node type, annotation scopes\n"
        "        and the bodies of conditional nodes (\"while body\", \"if\", \"else\",\n"
        "        \"case N\") as nested clusters. Render with: dot -Tsvg OUTPUT.dot -o graph.svg\n"
        "  html  one self-contained HTML page (no network access): the graph laid out in\n"
        "        layers with annotation scopes as labelled boxes and the bodies of\n"
        "        conditional nodes as framed boxes below their node, pan and zoom, a search\n"
        "        box, a legend of node types, a table of regions, and everything a node\n"
        "        holds on a click.\n"
        "INPUT may be - for standard input and OUTPUT - for standard output.\n"
        "\n"
        "  -t, --title TEXT   the name the page and the DOT comment give the graph\n"
        "                     (default: the input's path)\n"
        "  -h, --help         this text\n"
        "\n"
        "Exit status: 0 on success; 1 when the input cannot be read or is not a recap graph,\n"
        "or the output cannot be written; 2 for a bad command line.\n",
        out);
}

int main(int argc, char **argv) {
  static const struct option options[] = {
      {"help", no_argument, NULL, 'h'},
      {"title", required_argument, NULL, 't'},
      {NULL, 0, NULL, 0},
  };
  const char *title = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "ht:", options, NULL)) != -1) {
    switch (c) {
      case 'h': usage(stdout); return 0;
      case 't': title = optarg; break;
      default: /* getopt_long said what was wrong */ usage(stderr); return 2;
    }
  }
  if (argc - optind != 3) {
    usage(stderr);
    return 2;
  }
  const char *format = argv[optind], *input = argv[optind + 1], *output = argv[optind + 2];
  bool html = strcmp(format, "html") == 0;
  if (!html && strcmp(format, "dot") != 0) {
    fprintf(stderr, PROGRAM ": unknown format '%s' (dot or html)\n", format);
    usage(stderr);
    return 2;
  }
  const char *source = strcmp(input, "-") == 0 ? "(standard input)" : input;
  if (!title) title = source;

  recap_view_graph_t g;
  char err[512];
  if (recap_graph_load(input, PROGRAM, &g, err, sizeof err) != 0) {
    fprintf(stderr, PROGRAM ": %s: %s\n", source, err);
    return 1;
  }
  int rc = html ? recap_view_save_html(&g, output, title, err, sizeof err)
                : recap_view_save_dot(&g, output, title, err, sizeof err);
  if (rc != 0) fprintf(stderr, PROGRAM ": %s: %s\n", output, err);
  recap_view_graph_free(&g);
  return rc == 0 ? 0 : 1;
}
