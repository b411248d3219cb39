/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_memory_page.c — the memory page (recap_memory_html, recap_memory_html_string) and the
 * snapshot's sleep and VMM fields, on the CPU fake device: a default pool with a block waiting
 * on another stream, a private pool held by a graph and one whose graph is gone, written to a
 * file and read back word for word (pool ids, state badges, byte figures, segment counts, the
 * bars' blocks); a pool drawn asleep, its state and VMM fields set by hand on the real pool; no
 * device used; bad arguments and files that cannot be written.
 *
 * Nothing on the page comes from the user (ids, sizes and addresses are numbers, states fixed
 * names), so there is nothing to escape and no test of escaping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "fake_util.h"
#include "harness.h"
#include "recap.h"

enum { PER_NODE = RECAP__FAKE_EXEC_BYTES_PER_NODE };

#define EXPECT_IN(haystack, needle)                                                         \
  do {                                                                                      \
    if (!strstr((haystack), (needle)))                                                      \
      fail_msg("the page lacks\n  %s\n-- page --\n%s", (const char *)(needle), (haystack)); \
  } while (0)

#define EXPECT_NOT_IN(haystack, needle)                                                     \
  do {                                                                                      \
    if (strstr((haystack), (needle)))                                                       \
      fail_msg("the page holds\n  %s\n-- page --\n%s", (const char *)(needle), (haystack)); \
  } while (0)

static size_t occurrences(const char *haystack, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static recap__pool_t *private_pool(recap_pool_id_t id) {
  for (recap__pool_t *p = recap__alloc.devices[0]->private_pools; p; p = p->next)
    if (p->id.a == id.a && p->id.b == id.b) return p;
  fail_msg("pool {%" PRIu64 ",%" PRIu64 "} is not on device 0", id.a, id.b);
  return NULL;
}

/* The state every test of the page draws: see the file's comment. */
typedef struct scene {
  recap_stream_t s, s2;
  void *a, *b, *c;     /* default pool: 1000 bytes, 3 MiB, and 8 KiB waiting on s2 */
  void *held, *orphan; /* 8 KiB of the graph's pool, 3 MiB of the pool whose graph is gone */
  recap_graph_t graph; /* holds `mine` */
  recap_pool_id_t mine, gone;
} scene_t;

static void scene_build(scene_t *sc) {
  reset();
  OK(recap_option_set("measure_exec_memory", "1")); /* the page shows the executables' bytes */
  sc->s = recap__fake_stream_new();
  sc->s2 = recap__fake_stream_new();
  OK(recap_malloc(&sc->a, 1000, sc->s));
  OK(recap_malloc(&sc->c, 8 * KiB, sc->s));
  OK(recap_malloc(&sc->b, 3 * MiB, sc->s));
  recap__fake_stream_enqueue(sc->s2); /* s2 has work that reads c */
  OK(recap_record_stream(sc->c, sc->s2));
  OK(recap_free(sc->c));

  /* A graph of two kernels holding its pool, 8 KiB of it still allocated. */
  OK(recap_graph_create(&sc->graph, 0));
  OK(recap_graph_capture_begin(sc->graph, NULL, sc->s));
  void *scratch;
  OK(recap_malloc(&sc->held, 8 * KiB, sc->s));
  OK(recap_malloc(&scratch, 8 * KiB, sc->s));
  OK(recap_free(scratch));
  recap__fake_launch_kernel(sc->s, "k");
  recap__fake_launch_kernel(sc->s, "k");
  OK(recap_graph_capture_end(sc->graph));
  OK(recap_graph_pool(sc->graph, &sc->mine));

  /* A pool whose graph is destroyed while a block of it is still held. */
  recap_graph_t other;
  OK(recap_graph_create(&other, 0));
  OK(recap_graph_capture_begin(other, NULL, sc->s));
  OK(recap_malloc(&sc->orphan, 3 * MiB, sc->s));
  recap__fake_launch_kernel(sc->s, "k");
  OK(recap_graph_capture_end(other));
  OK(recap_graph_pool(other, &sc->gone));
  OK(recap_graph_destroy(other));
  check();
}

static void scene_free(scene_t *sc) {
  OK(recap_graph_destroy(sc->graph));
  FREE_ALL(sc->a, sc->b, sc->held, sc->orphan);
  recap__fake_stream_complete(sc->s2);
  OK(recap_empty_cache());
  check();
}

/* A row of a pool's table, as the page writes it, for the figures given (each figure a byte
 * count "bytes" drawn as `human`). */
static void expect_row(const char *page, const char *row) { EXPECT_IN(page, row); }

RECAP_TEST(the_page_shows_pools_segments_and_graphs) {
  scene_t sc;
  scene_build(&sc);
  const char *path = "test_memory_page.html";
  remove(path);
  OK(recap_memory_html(path));
  char *page = recap_test_read_file(path);
  remove(path);

  /* Self-contained: nothing to fetch, no script. */
  assert_int_equal(strncmp(page, "<!DOCTYPE html>\n<html lang=\"en\">", 32), 0);
  EXPECT_NOT_IN(page, "http");
  EXPECT_NOT_IN(page, "<script");
  EXPECT_NOT_IN(page, "<link");
  /* The string is the file's text. */
  char *text;
  OK(recap_memory_html_string(&text));
  assert_string_equal(text, page);
  recap_string_free(text);

  /* Totals: 22 + 20 + 2 MiB reserved; 1024 + 3 MiB + 3 MiB + 8 KiB allocated. */
  EXPECT_IN(page, "<span class=\"k\">devices</span><span class=\"v\">1</span></div>");
  EXPECT_IN(page, "<span class=\"k\">pools</span><span class=\"v\">3</span> (0 asleep)</div>");
  EXPECT_IN(page, "<span class=\"k\">segments</span><span class=\"v\">4</span> (0 VMM)</div>");
  EXPECT_IN(page,
            "<span class=\"k\">reserved</span><span class=\"v\"><span class=\"bytes\" "
            "title=\"46137344 bytes\">44.00 MiB</span>");
  EXPECT_IN(page,
            "<span class=\"k\">allocated</span><span class=\"v\"><span class=\"bytes\" "
            "title=\"6300672 bytes\">6.01 MiB</span>");
  EXPECT_IN(page,
            "<span class=\"k\">waiting</span><span class=\"v\"><span class=\"bytes\" "
            "title=\"8192 bytes\">8.00 KiB</span>");
  EXPECT_IN(page, "<span class=\"k\">graphs</span><span class=\"v\">1</span></div>");
  EXPECT_IN(page,
            "<span class=\"k\">executables</span><span class=\"v\"><span class=\"bytes\" "
            "title=\"8192 bytes\">8.00 KiB</span>");
  /* The device's statistics: nothing was ever given back, and the peak of allocated bytes is
   * now (the scratch block was freed before the orphan's 3 MiB came). */
  EXPECT_IN(page,
            "<h2>Device 0</h2>\n<p class=\"note\">reserved <span class=\"bytes\" "
            "title=\"46137344 bytes\">44.00 MiB</span> (peak <span class=\"bytes\" "
            "title=\"46137344 bytes\">44.00 MiB</span>), allocated <span class=\"bytes\" "
            "title=\"6300672 bytes\">6.01 MiB</span> (peak <span class=\"bytes\" "
            "title=\"6300672 bytes\">6.01 MiB</span>), out-of-memory errors 0, retries after "
            "freeing the cache 0</p>");

  /* The table: one row per pool, the default pool first, then the private pools as the
   * device lists them (the newest first). */
  assert_int_equal(occurrences(page, "<tr class=\"awake\">"), 3);
  assert_int_equal(occurrences(page, "<span class=\"badge awake\">awake</span>"), 6);
  expect_row(page,
             "<tr class=\"awake\"><td><a href=\"#pool-0-0\">pool {0,0} (default)</a></td>"
             "<td><span class=\"badge awake\">awake</span></td><td>classic</td><td>2</td>"
             "<td><span class=\"bytes\" title=\"23068672 bytes\">22.00 MiB</span></td>"
             "<td><span class=\"bytes\" title=\"3146752 bytes\">3.00 MiB</span></td>"
             "<td><span class=\"bytes\" title=\"8192 bytes\">8.00 KiB</span></td><td>0</td>"
             "<td><span class=\"bytes\" title=\"0 bytes\">0 bytes</span></td><td>0</td>"
             "<td><span class=\"bytes\" title=\"0 bytes\">0 bytes</span></td><td>none</td>"
             "<td>0</td></tr>");
  char row[1024];
  snprintf(row, sizeof row,
           "<tr class=\"awake\"><td><a href=\"#pool-0-1\">pool {%" PRIu64 ",%" PRIu64
           "}</a></td><td><span class=\"badge awake\">awake</span></td><td>classic</td><td>1</td>"
           "<td><span class=\"bytes\" title=\"20971520 bytes\">20.00 MiB</span></td>"
           "<td><span class=\"bytes\" title=\"3145728 bytes\">3.00 MiB</span></td>"
           "<td><span class=\"bytes\" title=\"0 bytes\">0 bytes</span></td><td>0</td>"
           "<td><span class=\"bytes\" title=\"0 bytes\">0 bytes</span></td><td>0</td>"
           "<td><span class=\"bytes\" title=\"3145728 bytes\">3.00 MiB</span></td><td>none</td>"
           "<td>0</td></tr>",
           sc.gone.a, sc.gone.b);
  expect_row(page, row);
  /* The graph's pool: one graph, its executable's 2 nodes of PER_NODE bytes, the capture's
   * peak of both 8 KiB blocks. */
  snprintf(row, sizeof row,
           "<tr class=\"awake\"><td><a href=\"#pool-0-2\">pool {%" PRIu64 ",%" PRIu64
           "}</a></td><td><span class=\"badge awake\">awake</span></td><td>classic</td><td>1</td>"
           "<td><span class=\"bytes\" title=\"2097152 bytes\">2.00 MiB</span></td>"
           "<td><span class=\"bytes\" title=\"8192 bytes\">8.00 KiB</span></td>"
           "<td><span class=\"bytes\" title=\"0 bytes\">0 bytes</span></td><td>1</td>"
           "<td><span class=\"bytes\" title=\"%d bytes\">8.00 KiB</span></td><td>2</td>"
           "<td><span class=\"bytes\" title=\"16384 bytes\">16.00 KiB</span></td><td>none</td>"
           "<td>0</td></tr>",
           sc.mine.a, sc.mine.b, 2 * PER_NODE);
  expect_row(page, row);

  /* A section per pool, a bar per segment, a block per block, to scale. */
  assert_int_equal(occurrences(page, "<section class=\"pool\" id=\"pool-0-"), 3);
  assert_int_equal(occurrences(page, "<div class=\"bar\">"), 4);
  assert_int_equal(occurrences(page, "<div class=\"block "), 9);
  EXPECT_IN(page, "<p class=\"note\">2 segments (classic), 5 blocks</p>");
  assert_int_equal(occurrences(page, "<p class=\"note\">1 segment (classic), 2 blocks</p>"), 2);
  char block[512];
  uint64_t a = (uint64_t)(uintptr_t)sc.a;
  snprintf(block, sizeof block,
           "<div class=\"block allocated\" style=\"width:0.0488%%\" title=\"0x%" PRIx64
           " - 0x%" PRIx64
           " (1.00 KiB), allocated, 1000 bytes requested\"></div>"
           "<div class=\"block waiting\" style=\"width:0.3906%%\" title=\"0x%" PRIx64
           " - 0x%" PRIx64
           " (8.00 KiB), pending_events\"></div><div class=\"block free\" "
           "style=\"width:99.5605%%\" title=\"0x%" PRIx64 " - 0x%" PRIx64 " (1.99 MiB), free\">",
           a, a + 1024, a + 1024, a + 1024 + 8192, a + 1024 + 8192, a + 2 * MiB);
  EXPECT_IN(page, block);
  uint64_t b = (uint64_t)(uintptr_t)sc.b;
  snprintf(
      block, sizeof block,
      "<div class=\"label\">0x%" PRIx64
      " &middot; <span class=\"bytes\" title=\"20971520 bytes\">20.00 MiB</span> &middot; "
      "classic &middot; large &middot; stream %p &middot; 2 blocks</div>\n<div "
      "class=\"bar\"><div class=\"block allocated\" style=\"width:15.0000%%\" title=\"0x%" PRIx64
      " - 0x%" PRIx64
      " (3.00 MiB), allocated, 3145728 bytes requested\"></div><div "
      "class=\"block free\" style=\"width:85.0000%%\"",
      b, (void *)sc.s, b, b + 3 * MiB);
  EXPECT_IN(page, block);
  free(page);
  scene_free(&sc);
}

/* The snapshot names each pool's state and sleeping bytes and its VMM segments, and each
 * segment's range and chunks; the page of the allocator draws a pool asleep from them. Sleep
 * itself is recap/sleep.h's: here the fields are set by hand on a pool with a segment made VMM
 * for the occasion, and put back before the checker runs. */
RECAP_TEST(the_snapshot_and_page_show_sleep_and_vmm) {
  scene_t sc;
  scene_build(&sc);
  char *json;
  OK(recap_memory_snapshot_json(-1, &json));
  assert_int_equal(occurrences(json,
                               "\"budget_refusals\":0,\"state\":\"awake\","
                               "\"sleeping_bytes\":0,\"vmm_segments\":0,\"segments\":["),
                   3);
  assert_int_equal(
      occurrences(json,
                  "\"vmm\":false,\"va_bytes\":0,\"chunks\":0,\"unmapped_bytes\":0,\"blocks\":["),
      4);
  recap_string_free(json);

  recap__pool_t *gone = private_pool(sc.gone);
  recap__segment_t *seg = gone->segments;
  assert_null(seg->next);
  gone->state = 2; /* RECAP_POOL_ASLEEP_OFFLOADED */
  gone->sleeping_bytes = (int64_t)seg->size;
  seg->vmm = true;
  seg->va_size = (size_t)80 << 30;
  OK(recap_memory_snapshot_json(-1, &json));
  char expected[512];
  snprintf(expected, sizeof expected,
           "\"id\":[%" PRIu64 ",%" PRIu64
           "],\"references\":0,\"routed\":false,\"reserved_bytes\":20971520,"
           "\"allocated_bytes\":3145728,\"graphs\":0,\"exec_bytes\":0,\"nodes\":0,"
           "\"capture_peak_bytes\":3145728,\"capture_peak_max_bytes\":3145728,"
           "\"budget_bytes\":0,\"budget_refusals\":0,\"state\":\"asleep (offloaded)\","
           "\"sleeping_bytes\":20971520,\"vmm_segments\":1,\"segments\":[{\"address\":\"%p\","
           "\"size\":20971520,\"small\":false,\"stream\":\"%p\",\"vmm\":true,"
           "\"va_bytes\":85899345920,\"chunks\":0,\"unmapped_bytes\":0,\"blocks\":[",
           sc.gone.a, sc.gone.b, (void *)seg->base, (void *)sc.s);
  if (!strstr(json, expected)) fail_msg("the snapshot lacks\n  %s\n%s", expected, json);
  recap_string_free(json);
  gone->state = 1; /* RECAP_POOL_ASLEEP_DISCARDED */
  OK(recap_memory_snapshot_json(-1, &json));
  assert_int_equal(occurrences(json, "\"state\":\"asleep (discarded)\""), 1);
  recap_string_free(json);

  /* Offloaded, then discarded; the default pool with one of its two segments made VMM, three
   * chunks mapped in it (counts only: the page does not follow the chunks). */
  gone->state = 2;
  char *offloaded;
  OK(recap_memory_html_string(&offloaded));
  gone->state = 1;
  recap__pool_t *def = &recap__alloc.devices[0]->default_pool;
  recap__segment_t *def_seg = def->segments; /* the newest: b's 20 MiB */
  assert_int_equal(def_seg->size, 20 * MiB);
  assert_non_null(def_seg->next);
  def_seg->vmm = true;
  def_seg->va_size = (size_t)80 << 30;
  def_seg->chunk_count = 3;
  char *page;
  OK(recap_memory_html_string(&page));
  def_seg->vmm = false;
  def_seg->va_size = 0;
  def_seg->chunk_count = 0;
  gone->state = 0;
  gone->sleeping_bytes = 0;
  seg->vmm = false;
  seg->va_size = 0;
  check();

  snprintf(expected, sizeof expected,
           "<tr class=\"asleep\"><td><a href=\"#pool-0-1\">pool {%" PRIu64 ",%" PRIu64
           "}</a></td><td><span class=\"badge asleep\">asleep (offloaded)</span></td>"
           "<td>VMM</td><td>1</td>",
           sc.gone.a, sc.gone.b);
  EXPECT_IN(offloaded, expected);
  assert_int_equal(occurrences(offloaded, "<span class=\"badge asleep\">asleep (offloaded)</span>"),
                   2);
  recap_string_free(offloaded);

  EXPECT_IN(page, "<span class=\"k\">pools</span><span class=\"v\">3</span> (1 asleep)</div>");
  EXPECT_IN(page, "<span class=\"k\">segments</span><span class=\"v\">4</span> (2 VMM)</div>");
  EXPECT_IN(page,
            "<span class=\"k\">asleep, given back</span><span class=\"v\"><span "
            "class=\"bytes\" title=\"20971520 bytes\">20.00 MiB</span>");
  char row[256];
  snprintf(row, sizeof row,
           "<tr class=\"asleep\"><td><a href=\"#pool-0-1\">pool {%" PRIu64 ",%" PRIu64
           "}</a></td><td><span class=\"badge asleep\">asleep (discarded)</span></td>"
           "<td>VMM</td><td>1</td>",
           sc.gone.a, sc.gone.b);
  EXPECT_IN(page, row);
  snprintf(row, sizeof row,
           "<section class=\"pool asleep\" id=\"pool-0-1\"><h3>pool {%" PRIu64 ",%" PRIu64
           "} <span class=\"badge asleep\">asleep (discarded)</span></h3>",
           sc.gone.a, sc.gone.b);
  EXPECT_IN(page, row);
  EXPECT_IN(page,
            "<p class=\"note\">1 segment (VMM), 2 blocks; asleep: <span class=\"bytes\" "
            "title=\"20971520 bytes\">20.00 MiB</span> of device memory given back, the "
            "addresses kept for the wake</p>");
  EXPECT_IN(page,
            "&middot; VMM, 0 chunks mapped, <span class=\"bytes\" "
            "title=\"85899345920 bytes\">80.00 GiB</span> of addresses &middot; large");
  /* The default pool: one VMM segment beside a classic one. */
  EXPECT_IN(page,
            "<tr class=\"awake\"><td><a href=\"#pool-0-0\">pool {0,0} (default)</a></td>"
            "<td><span class=\"badge awake\">awake</span></td><td>VMM + classic</td><td>2</td>");
  EXPECT_IN(page, "<p class=\"note\">2 segments (VMM + classic), 5 blocks</p>");
  snprintf(row, sizeof row,
           "<div class=\"label\">0x%" PRIxPTR
           " &middot; <span class=\"bytes\" title=\"20971520 bytes\">20.00 MiB</span> &middot; "
           "VMM, 3 chunks mapped, <span class=\"bytes\" title=\"85899345920 bytes\">80.00 "
           "GiB</span> of addresses &middot; large &middot; ",
           (uintptr_t)def_seg->base);
  EXPECT_IN(page, row);
  assert_int_equal(occurrences(page, "<tr class=\"awake\">"), 2);
  assert_int_equal(occurrences(page, "class=\"badge asleep\""), 2);
  assert_int_equal(occurrences(page, "class=\"badge awake\""), 4);
  recap_string_free(page);
  scene_free(&sc);
}

/* Before recap has used a device: a page that says so. */
RECAP_TEST(a_page_of_no_device) {
  reset();
  char *page;
  OK(recap_memory_html_string(&page));
  EXPECT_IN(page,
            "<span class=\"k\">devices</span><span class=\"v\">0</span></div>\n<div "
            "class=\"total\"><span class=\"k\">pools</span><span class=\"v\">0</span> (0 "
            "asleep)</div>");
  EXPECT_IN(page, "</div>\n<p class=\"note\">recap has used no device.</p>\n</body>\n</html>\n");
  EXPECT_NOT_IN(page, "<h2>");
  recap_string_free(page);
}

RECAP_TEST(bad_arguments_and_files_that_cannot_be_written) {
  reset();
  void *p;
  OK(recap_malloc(&p, 1000, NULL));
  EXPECT_STATUS(recap_memory_html_string(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(), "recap_memory_html_string: html is NULL");
  EXPECT_STATUS(recap_memory_html(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html: path is NULL; give the file to write the page to");
  EXPECT_STATUS(recap_memory_html("no-such-directory/memory.html"), RECAP_ERROR_IO);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html: cannot open \"no-such-directory/memory.html\" for "
                      "writing: No such file or directory");
  /* A directory is no file either; what was there stays. */
  const char *dir = "test_memory_page_dir";
  remove(dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  EXPECT_STATUS(recap_memory_html(dir), RECAP_ERROR_IO);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html: cannot open \"test_memory_page_dir\" for writing: Is a "
                      "directory");
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(rmdir(dir), 0);
  OK(recap_free(p));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(the_page_shows_pools_segments_and_graphs),
    cmocka_unit_test(the_snapshot_and_page_show_sleep_and_vmm),
    cmocka_unit_test(a_page_of_no_device),
    cmocka_unit_test(bad_arguments_and_files_that_cannot_be_written),
};

RECAP_TEST_MAIN(tests)
