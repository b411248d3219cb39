/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap-memory — turns a snapshot of recap's allocator (the JSON of
 * recap_memory_snapshot_json) into the memory page: one self-contained HTML page of the pools,
 * segments, blocks, graphs and sleep state of every device in it.
 *
 *     recap-memory snapshot.json memory.html
 *
 * The page is recap_memory_html_from_json's, the same a program writes of its own state now
 * with recap_memory_html (docs/memory.md, "The memory page").
 *
 * Exit status: 0 on success, 1 when the input cannot be read or is not a snapshot, or the
 * output cannot be written, 2 for a bad command line.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recap.h"

#define PROGRAM "recap-memory"

static void usage(FILE *out) {
  fputs("usage: " PROGRAM
        " SNAPSHOT.json PAGE.html\n"
        "       " PROGRAM
        " --help\n"
        "\n"
        "Draws a snapshot of recap's allocator (the JSON of recap_memory_snapshot_json) as one\n"
        "self-contained HTML page (no network access, no script): totals, a table of pools per\n"
        "device (state, VMM or classic segments, reserved / allocated / waiting bytes, graphs,\n"
        "their executables and nodes, capture peak, budget and refusals) and a bar per segment\n"
        "with its blocks to scale (allocated, waiting, free; address ranges on hover). Asleep\n"
        "pools are greyed and badged.\n"
        "SNAPSHOT may be - for standard input and PAGE - for standard output.\n"
        "\n"
        "Exit status: 0 on success; 1 when the input cannot be read or is not a snapshot, or\n"
        "the output cannot be written; 2 for a bad command line.\n",
        out);
}

/* The whole of in as one NUL-terminated string, or NULL (errno set) when it cannot be read. */
static char *read_all(FILE *in) {
  size_t len = 0, cap = 1 << 16;
  char *text = malloc(cap);
  if (!text) return NULL;
  for (;;) {
    if (len + 1 == cap) {
      char *grown = cap <= SIZE_MAX / 2 ? realloc(text, cap * 2) : NULL;
      if (!grown) {
        free(text);
        errno = ENOMEM;
        return NULL;
      }
      text = grown;
      cap *= 2;
    }
    size_t got = fread(text + len, 1, cap - 1 - len, in);
    len += got;
    if (got == 0) break;
  }
  if (ferror(in)) {
    free(text);
    errno = EIO;
    return NULL;
  }
  text[len] = '\0';
  if (strlen(text) != len) { /* a NUL inside: no JSON text */
    free(text);
    errno = EINVAL;
    return NULL;
  }
  return text;
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc != 3) {
    usage(stderr);
    return 2;
  }
  const char *input = argv[1], *output = argv[2];
  bool from_stdin = strcmp(input, "-") == 0, to_stdout = strcmp(output, "-") == 0;
  const char *source = from_stdin ? "(standard input)" : input;

  FILE *in = from_stdin ? stdin : fopen(input, "rb");
  char *json = in ? read_all(in) : NULL;
  if (!json) {
    fprintf(stderr, PROGRAM ": %s: cannot read: %s\n", source, strerror(errno));
    if (in && !from_stdin) fclose(in);
    return 1;
  }
  if (!from_stdin) fclose(in);

  char *html = NULL;
  recap_status_t s = recap_memory_html_from_json(json, &html);
  free(json);
  if (s != RECAP_SUCCESS) {
    fprintf(stderr, PROGRAM ": %s: %s\n", source, recap_last_error());
    return 1;
  }
  FILE *out = to_stdout ? stdout : fopen(output, "wb");
  int rc = 0;
  if (!out) {
    fprintf(stderr, PROGRAM ": %s: cannot write: %s\n", output, strerror(errno));
    rc = 1;
  } else {
    size_t len = strlen(html);
    bool failed = fwrite(html, 1, len, out) != len;
    failed |= to_stdout ? fflush(out) != 0 : fclose(out) != 0;
    if (failed) {
      fprintf(stderr, PROGRAM ": %s: writing failed: %s\n", output, strerror(errno));
      if (!to_stdout) remove(output);
      rc = 1;
    }
  }
  recap_string_free(html);
  return rc;
}
