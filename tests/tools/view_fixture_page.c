/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * view_fixture_page — writes the viewer's fixture graph (view_fixture.h), captured on the CPU
 * fake device, as an HTML page, and with a second path as DOT:
 *
 *     view_fixture_page [--regions] OUT.html [OUT.dot]
 *
 * With --regions it writes the graph of regions_info.h instead (a WHILE whose body holds an
 * IF_ELSE, and a SWITCH of three), whose bodies the page draws as nested frames.
 *
 * The headless-browser test loads the page; tools/screenshot-graph photographs it for docs/.
 * Exit status: 0 on success, 1 on a failure (said on standard error), 2 for a bad command line.
 */
#include <stdio.h>
#include <string.h>

#include "regions_info.h"
#include "view_fixture.h"

/* The graph with regions, straight from its info. */
static int regions_page(const char *html, const char *dot) {
  recap_graph_info_t info = regions_info();
  recap_view_graph_t view;
  char err[512];
  int rc = recap_view_from_info(&view, &info, err, sizeof err);
  if (rc == 0) {
    rc = recap_view_save_html(&view, html, "regions (fixture)", err, sizeof err);
    if (rc == 0 && dot)
      rc = recap_view_save_dot(&view, dot, "the regions fixture", err, sizeof err);
    recap_view_graph_free(&view);
  }
  if (rc != 0) fprintf(stderr, "view_fixture_page: %s\n", err);
  return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--regions") == 0) {
    if (argc < 3 || argc > 4) {
      fprintf(stderr, "usage: view_fixture_page [--regions] OUT.html [OUT.dot]\n");
      return 2;
    }
    return regions_page(argv[2], argc == 4 ? argv[3] : NULL);
  }
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: view_fixture_page [--regions] OUT.html [OUT.dot]\n");
    return 2;
  }
  recap_graph_t graph;
  recap_status_t status = view_fixture_capture(&graph);
  if (status != RECAP_SUCCESS) {
    fprintf(stderr, "view_fixture_page: capture: %s: %s\n", recap_status_name(status),
            recap_last_error());
    return 1;
  }
  recap_view_graph_t view;
  char err[512];
  int rc = view_fixture_model(graph, 1, &view, err, sizeof err);
  if (rc == 0) {
    rc = recap_view_save_html(&view, argv[1], "a training step (fixture, CPU fake device)", err,
                              sizeof err);
    if (rc == 0 && argc == 3)
      rc = recap_view_save_dot(&view, argv[2], "the fixture", err, sizeof err);
    recap_view_graph_free(&view);
  }
  if (rc != 0) fprintf(stderr, "view_fixture_page: %s\n", err);
  status = view_fixture_release(graph);
  if (status != RECAP_SUCCESS) {
    fprintf(stderr, "view_fixture_page: release: %s\n", recap_last_error());
    rc = -1;
  }
  return rc == 0 ? 0 : 1;
}
