/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_memory_page.c — the memory page (recap_memory_html, recap_memory_html_from_json) and the
 * snapshot fields it draws, on the CPU fake device: a default pool with a block waiting on
 * another stream, a private pool held by a graph and one whose graph is gone, written to a file
 * and read back word for word (pool ids, state badges, byte figures, segment counts, the bars'
 * blocks); an asleep pool drawn from a snapshot text; hostile strings escaped; texts that are no
 * snapshot refused with their messages.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "device/fake.h"
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

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)len + 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
  text[len] = '\0';
  fclose(f);
  return text;
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
  OK(recap_graph_capture_begin(sc->graph, sc->s, NULL));
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
  OK(recap_graph_capture_begin(other, sc->s, NULL));
  OK(recap_malloc(&sc->orphan, 3 * MiB, sc->s));
  recap__fake_launch_kernel(sc->s, "k");
  OK(recap_graph_capture_end(other));
  OK(recap_graph_pool(other, &sc->gone));
  OK(recap_graph_destroy(other));
  check();
}

static void scene_free(scene_t *sc) {
  OK(recap_graph_destroy(sc->graph));
  OK(recap_free(sc->a));
  OK(recap_free(sc->b));
  OK(recap_free(sc->held));
  OK(recap_free(sc->orphan));
  recap__fake_stream_complete(sc->s2);
  OK(recap_empty_cache());
  check();
}

/* A row of a pool's table, as the page writes it, for the figures given (each figure a byte
 * count "bytes" drawn as `human`). */
static void expect_row(const char *page, const char *row) { EXPECT_IN(page, row); }

static void the_page_shows_pools_segments_and_graphs(void **state) {
  (void)state;
  scene_t sc;
  scene_build(&sc);
  const char *path = "test_memory_page.html";
  remove(path);
  OK(recap_memory_html(path));
  char *page = read_file(path);
  remove(path);

  /* Self-contained: nothing to fetch, no script. */
  assert_int_equal(strncmp(page, "<!DOCTYPE html>\n<html lang=\"en\">", 32), 0);
  EXPECT_NOT_IN(page, "http");
  EXPECT_NOT_IN(page, "<script");
  EXPECT_NOT_IN(page, "<link");
  EXPECT_NOT_IN(page, "<span class=\"unknown\""); /* every field is in the snapshot */

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
  EXPECT_IN(page, "<h2>Device 0</h2>");

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
static void the_snapshot_and_page_show_sleep_and_vmm(void **state) {
  (void)state;
  scene_t sc;
  scene_build(&sc);
  char *json;
  OK(recap_memory_snapshot_json(-1, &json));
  assert_int_equal(occurrences(json,
                               "\"budget_refusals\":0,\"state\":\"awake\","
                               "\"sleeping_bytes\":0,\"vmm_segments\":0,\"segments\":["),
                   3);
  assert_int_equal(occurrences(json, "\"vmm\":false,\"va_bytes\":0,\"chunks\":0,\"blocks\":["), 4);
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
           "\"va_bytes\":85899345920,\"chunks\":0,\"blocks\":[",
           sc.gone.a, sc.gone.b, (void *)seg->base, (void *)sc.s);
  if (!strstr(json, expected)) fail_msg("the snapshot lacks\n  %s\n%s", expected, json);
  recap_string_free(json);
  gone->state = 1; /* RECAP_POOL_ASLEEP_DISCARDED */
  OK(recap_memory_snapshot_json(-1, &json));
  assert_int_equal(occurrences(json, "\"state\":\"asleep (discarded)\""), 1);
  recap_string_free(json);

  const char *path = "test_memory_page_asleep.html";
  OK(recap_memory_html(path));
  gone->state = 0;
  gone->sleeping_bytes = 0;
  seg->vmm = false;
  seg->va_size = 0;
  char *page = read_file(path);
  remove(path);
  EXPECT_IN(page, "<span class=\"k\">pools</span><span class=\"v\">3</span> (1 asleep)</div>");
  EXPECT_IN(page, "<span class=\"k\">segments</span><span class=\"v\">4</span> (1 VMM)</div>");
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
  assert_int_equal(occurrences(page, "<tr class=\"awake\">"), 2);
  free(page);
  scene_free(&sc);
}

/* A snapshot saved as text, with an asleep (offloaded) pool of two VMM segments, one of them
 * mapped in three chunks: the page from the text alone, no allocator state behind it. */
static const char ASLEEP_SNAPSHOT[] =
    "{\"devices\":[{\"device\":1,\"stats\":{\"reserved_bytes\":{\"all\":{\"current\":6291456,"
    "\"peak\":8388608}},\"allocated_bytes\":{\"all\":{\"current\":1048576,\"peak\":2097152}},"
    "\"num_ooms\":2,\"num_alloc_retries\":1},\"pools\":["
    "{\"id\":[0,0],\"references\":0,\"routed\":false,\"reserved_bytes\":2097152,"
    "\"allocated_bytes\":0,\"graphs\":0,\"exec_bytes\":0,\"nodes\":0,\"capture_peak_bytes\":0,"
    "\"capture_peak_max_bytes\":0,\"budget_bytes\":0,\"budget_refusals\":0,\"state\":\"awake\","
    "\"sleeping_bytes\":0,\"vmm_segments\":1,\"segments\":[{\"address\":\"0x7000000000\","
    "\"size\":2097152,\"small\":true,\"stream\":\"0x0\",\"vmm\":true,\"va_bytes\":"
    "85899345920,\"chunks\":3,\"blocks\":[{\"address\":\"0x7000000000\",\"size\":2097152,"
    "\"requested\":0,\"state\":\"free\"}]}]},"
    "{\"id\":[3,0],\"references\":2,\"routed\":false,\"reserved_bytes\":4194304,"
    "\"allocated_bytes\":1048576,\"graphs\":2,\"exec_bytes\":40960,\"nodes\":10,"
    "\"capture_peak_bytes\":1572864,\"capture_peak_max_bytes\":3145728,\"budget_bytes\":0,"
    "\"budget_refusals\":0,\"state\":\"asleep (offloaded)\",\"sleeping_bytes\":4194304,"
    "\"vmm_segments\":1,\"segments\":[{\"address\":\"0x7400000000\",\"size\":4194304,"
    "\"small\":false,\"stream\":\"0x0\",\"vmm\":true,\"va_bytes\":85899345920,\"chunks\":0,"
    "\"blocks\":[{\"address\":\"0x7400000000\",\"size\":1048576,\"requested\":1000000,"
    "\"state\":\"allocated\"},{\"address\":\"0x7400100000\",\"size\":1048576,\"requested\":0,"
    "\"state\":\"deferred\"},{\"address\":\"0x7400200000\",\"size\":2097152,\"requested\":0,"
    "\"state\":\"free\"}]}]}]}]}";

static void an_asleep_pool_is_greyed_and_badged(void **state) {
  (void)state;
  reset();
  char *page;
  OK(recap_memory_html_from_json(ASLEEP_SNAPSHOT, &page));
  EXPECT_IN(page, "<span class=\"k\">pools</span><span class=\"v\">2</span> (1 asleep)</div>");
  EXPECT_IN(page, "<span class=\"k\">segments</span><span class=\"v\">2</span> (2 VMM)</div>");
  EXPECT_IN(page,
            "<span class=\"k\">waiting</span><span class=\"v\"><span class=\"bytes\" "
            "title=\"1048576 bytes\">1.00 MiB</span>");
  EXPECT_IN(page,
            "<span class=\"k\">asleep, given back</span><span class=\"v\"><span "
            "class=\"bytes\" title=\"4194304 bytes\">4.00 MiB</span>");
  EXPECT_IN(page,
            "<h2>Device 1</h2>\n<p class=\"note\">reserved <span class=\"bytes\" "
            "title=\"6291456 bytes\">6.00 MiB</span> (peak <span class=\"bytes\" "
            "title=\"8388608 bytes\">8.00 MiB</span>), allocated <span class=\"bytes\" "
            "title=\"1048576 bytes\">1.00 MiB</span> (peak <span class=\"bytes\" "
            "title=\"2097152 bytes\">2.00 MiB</span>), out-of-memory errors 2, retries "
            "after freeing the cache 1</p>");
  EXPECT_IN(page,
            "<tr class=\"asleep\"><td><a href=\"#pool-0-1\">pool {3,0}</a></td><td><span "
            "class=\"badge asleep\">asleep (offloaded)</span></td><td>VMM</td><td>1</td>"
            "<td><span class=\"bytes\" title=\"4194304 bytes\">4.00 MiB</span></td>"
            "<td><span class=\"bytes\" title=\"1048576 bytes\">1.00 MiB</span></td>"
            "<td><span class=\"bytes\" title=\"1048576 bytes\">1.00 MiB</span></td><td>2</td>"
            "<td><span class=\"bytes\" title=\"40960 bytes\">40.00 KiB</span></td><td>10</td>"
            "<td><span class=\"bytes\" title=\"1572864 bytes\">1.50 MiB</span></td><td>none</td>"
            "<td>0</td></tr>");
  EXPECT_IN(page,
            "<section class=\"pool asleep\" id=\"pool-0-1\"><h3>pool {3,0} <span "
            "class=\"badge asleep\">asleep (offloaded)</span></h3>");
  EXPECT_IN(page,
            "<div class=\"block allocated\" style=\"width:25.0000%\" title=\"0x7400000000 "
            "- 0x7400100000 (1.00 MiB), allocated, 1000000 bytes requested\"></div>"
            "<div class=\"block waiting\" style=\"width:25.0000%\" title=\"0x7400100000 - "
            "0x7400200000 (1.00 MiB), deferred\"></div><div class=\"block free\" "
            "style=\"width:50.0000%\" title=\"0x7400200000 - 0x7400400000 (2.00 MiB), "
            "free\"></div>");
  /* The awake default pool on VMM: its three chunks, the range it reserves. */
  EXPECT_IN(page,
            "<tr class=\"awake\"><td><a href=\"#pool-0-0\">pool {0,0} (default)</a></td>"
            "<td><span class=\"badge awake\">awake</span></td><td>VMM</td><td>1</td>");
  EXPECT_IN(page,
            "<div class=\"label\">0x7000000000 &middot; <span class=\"bytes\" "
            "title=\"2097152 bytes\">2.00 MiB</span> &middot; VMM, 3 chunks mapped, "
            "<span class=\"bytes\" title=\"85899345920 bytes\">80.00 GiB</span> of "
            "addresses &middot; small &middot; stream 0x0 &middot; 1 block</div>");
  assert_int_equal(occurrences(page, "class=\"badge asleep\""), 2);
  assert_int_equal(occurrences(page, "class=\"badge awake\""), 2);
  recap_string_free(page);
}

/* Every string of the snapshot reaches the page escaped; JSON's escapes are read, surrogate
 * pairs included; fields a snapshot lacks show as "?". */
static void hostile_strings_are_escaped(void **state) {
  (void)state;
  reset();
  const char *hostile =
      "{\"devices\":[{\"device\":0,\"pools\":[{\"id\":[5,6],"
      "\"state\":\"<script>alert(1)</script>\",\"segments\":[{\"address\":\"\\\"><img src=x "
      "onerror=alert(2)>\",\"size\":1024,\"stream\":\"'&amp;<b>\",\"blocks\":[{\"address\":"
      "\"0x10' onmouseover='alert(3)\",\"size\":1024,\"requested\":1,\"state\":"
      "\"<i>caf\\u00e9 \\ud83d\\ude00</i>\"}]}]}]}]}";
  char *page;
  OK(recap_memory_html_from_json(hostile, &page));
  EXPECT_NOT_IN(page, "<script");
  EXPECT_NOT_IN(page, "<img");
  EXPECT_NOT_IN(page, "<b>");
  EXPECT_NOT_IN(page, "<i>");
  EXPECT_NOT_IN(page, "' onmouseover");
  EXPECT_IN(page, "<span class=\"badge other\">&lt;script&gt;alert(1)&lt;/script&gt;</span>");
  EXPECT_IN(page, "<div class=\"label\">&quot;&gt;&lt;img src=x onerror=alert(2)&gt; &middot; ");
  EXPECT_IN(page, "stream &#39;&amp;amp;&lt;b&gt; &middot; 1 block</div>");
  EXPECT_IN(page,
            "<div class=\"block other\" style=\"width:100.0000%\" title=\"0x10&#39; "
            "onmouseover=&#39;alert(3) (1.00 KiB), &lt;i&gt;caf\xc3\xa9 \xf0\x9f\x98\x80"
            "&lt;/i&gt;\"></div>");
  /* The pool gives no bytes, graphs or budget: each shows the mark of a missing field. */
  EXPECT_IN(page,
            "<tr class=\"awake\"><td><a href=\"#pool-0-0\">pool {5,6}</a></td><td><span "
            "class=\"badge other\">");
  assert_int_equal(occurrences(page,
                               "<span class=\"unknown\" title=\"not in the snapshot\">?"
                               "</span>"),
                   8);
  EXPECT_NOT_IN(page, "<p class=\"note\">reserved"); /* no statistics in it */
  recap_string_free(page);
}

static void texts_that_are_no_snapshot_are_refused(void **state) {
  (void)state;
  reset();
  char *page = (char *)"untouched";
  EXPECT_STATUS(recap_memory_html_from_json("{\"devices\": [1,]}", &page),
                RECAP_ERROR_INVALID_ARGUMENT);
  assert_null(page);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html_from_json: snapshot_json is not JSON: at line 1, column "
                      "16, a value was expected");
  EXPECT_STATUS(recap_memory_html_from_json("{\"devices\":\n [] } x", &page),
                RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html_from_json: snapshot_json is not JSON: at line 2, column "
                      "7, the end of the text was expected");
  EXPECT_STATUS(recap_memory_html_from_json("{\"pools\":[]}", &page), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html_from_json: snapshot_json is JSON but no snapshot: it has "
                      "no \"devices\" array; give the text of recap_memory_snapshot_json");
  EXPECT_STATUS(recap_memory_html_from_json("\"\\ud83d\"", &page), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("the low half of a surrogate pair was expected");
  EXPECT_STATUS(recap_memory_html_from_json("\"a\\u0000\"", &page), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("no \\u0000 (recap's strings end at a NUL) was expected");
  /* Nesting deep enough to exhaust a stack is refused at 64 levels. */
  char deep[200];
  memset(deep, '[', 100);
  deep[100] = '\0';
  EXPECT_STATUS(recap_memory_html_from_json(deep, &page), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html_from_json: snapshot_json is not JSON: at line 1, column "
                      "65, less nesting (64 levels at most) was expected");
  EXPECT_STATUS(recap_memory_html_from_json(NULL, &page), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("snapshot_json is NULL");
  EXPECT_STATUS(recap_memory_html_from_json("{}", NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_memory_html_from_json: html is NULL");
  /* An empty snapshot is a page that says so. */
  OK(recap_memory_html_from_json(" {\"devices\" : [ ] } ", &page));
  EXPECT_IN(page, "<p class=\"note\">recap has used no device.</p>");
  recap_string_free(page);

  EXPECT_STATUS(recap_memory_html(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_memory_html: path is NULL");
  EXPECT_STATUS(recap_memory_html("no-such-directory/memory.html"), RECAP_ERROR_IO);
  assert_string_equal(recap_last_error(),
                      "recap_memory_html: cannot open \"no-such-directory/memory.html\" for "
                      "writing: No such file or directory");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(the_page_shows_pools_segments_and_graphs),
    cmocka_unit_test(the_snapshot_and_page_show_sleep_and_vmm),
    cmocka_unit_test(an_asleep_pool_is_greyed_and_badged),
    cmocka_unit_test(hostile_strings_are_escaped),
    cmocka_unit_test(texts_that_are_no_snapshot_are_refused),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
