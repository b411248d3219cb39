/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_page.c — the memory page: one self-contained HTML page drawn from a snapshot's JSON
 * (snapshot.c's shape), so that the page of the allocator now (recap_memory_html) and the page
 * of a snapshot saved earlier (recap_memory_html_from_json, tools/recap-memory) are the same
 * drawing of the same text.
 *
 * The page: totals of every device at the top, then per device a table of its pools (state,
 * VMM or classic, segments, bytes, what the graphs holding the pool cost, the budget) and per
 * pool a bar per segment whose blocks are drawn to scale, coloured allocated / waiting / free,
 * their address ranges in the tooltip. An asleep pool is greyed and carries its state as a
 * badge. Nothing is fetched: the style sheet is inline and the page needs no script. Every
 * string that comes from the snapshot is escaped, so a hostile snapshot cannot inject markup.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "core/host.h"
#include "core/json_read.h"
#include "recap/memory.h"

/* ---- the page's text ------------------------------------------------------------------------ */

typedef struct page {
  char *buf;
  size_t len, cap;
  bool failed; /* a host allocation failed; reported once at the end */
} page_t;

static void put(page_t *pg, const char *s, size_t n) {
  if (pg->failed) return;
  if (pg->len + n + 1 > pg->cap) {
    size_t cap = pg->cap ? pg->cap : 4096;
    while (cap < pg->len + n + 1) cap *= 2;
    char *grown = recap__host_realloc(pg->buf, cap);
    if (!grown) {
      pg->failed = true;
      return;
    }
    pg->buf = grown;
    pg->cap = cap;
  }
  memcpy(pg->buf + pg->len, s, n);
  pg->len += n;
  pg->buf[pg->len] = '\0';
}

static void text(page_t *pg, const char *s) { put(pg, s, strlen(s)); }

/* Formatted text of the page's own making (numbers, class names): never a snapshot's string. */
static void format(page_t *pg, const char *fmt, ...) RECAP__PRINTF(2, 3);
static void format(page_t *pg, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    put(pg, small, (size_t)n);
    return;
  }
  char *big = recap__host_malloc((size_t)n + 1);
  if (!big) {
    pg->failed = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  put(pg, big, (size_t)n);
  recap__host_free(big);
}

/* A string from the snapshot, escaped for text and for attribute values alike. */
static void escaped(page_t *pg, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': text(pg, "&amp;"); break;
      case '<': text(pg, "&lt;"); break;
      case '>': text(pg, "&gt;"); break;
      case '"': text(pg, "&quot;"); break;
      case '\'': text(pg, "&#39;"); break;
      default: put(pg, s, 1);
    }
  }
}

/* ---- figures ------------------------------------------------------------------------------- */

/* "1.50 MiB", as recap's messages write sizes. */
static void human(char *out, size_t cap, uint64_t bytes) {
  if (bytes >= (1ull << 40))
    snprintf(out, cap, "%.2f TiB", (double)bytes / (double)(1ull << 40));
  else if (bytes >= (1ull << 30))
    snprintf(out, cap, "%.2f GiB", (double)bytes / (double)(1ull << 30));
  else if (bytes >= (1ull << 20))
    snprintf(out, cap, "%.2f MiB", (double)bytes / (double)(1ull << 20));
  else if (bytes >= (1ull << 10))
    snprintf(out, cap, "%.2f KiB", (double)bytes / (double)(1ull << 10));
  else
    snprintf(out, cap, "%" PRIu64 " bytes", bytes);
}

/* A byte count read as a person reads it, the exact count in its tooltip. */
static void bytes(page_t *pg, uint64_t n) {
  char h[32];
  human(h, sizeof h, n);
  format(pg, "<span class=\"bytes\" title=\"%" PRIu64 " bytes\">%s</span>", n, h);
}

static const char UNKNOWN[] = "<span class=\"unknown\" title=\"not in the snapshot\">?</span>";

/* A field of the snapshot: the figure, or a mark saying the snapshot lacks it. */
static void bytes_field(page_t *pg, const recap__jv_t *obj, const char *key) {
  uint64_t n;
  if (recap__jv_uint(recap__jv_get(obj, key), &n))
    bytes(pg, n);
  else
    text(pg, UNKNOWN);
}

static void count_field(page_t *pg, const recap__jv_t *obj, const char *key) {
  int64_t n;
  if (recap__jv_int(recap__jv_get(obj, key), &n))
    format(pg, "%" PRId64, n);
  else
    text(pg, UNKNOWN);
}

static uint64_t uint_or_zero(const recap__jv_t *obj, const char *key) {
  uint64_t n;
  return recap__jv_uint(recap__jv_get(obj, key), &n) ? n : 0;
}

static bool bool_field(const recap__jv_t *obj, const char *key) {
  const recap__jv_t *v = recap__jv_get(obj, key);
  return v && v->kind == RECAP__JV_BOOL && v->boolean;
}

static size_t array_count(const recap__jv_t *obj, const char *key) {
  const recap__jv_t *v = recap__jv_get(obj, key);
  return v && v->kind == RECAP__JV_ARRAY ? v->count : 0;
}

/* The i-th element of an array member (NULL past its end or when it is no array). */
static const recap__jv_t *element(const recap__jv_t *obj, const char *key, size_t i) {
  const recap__jv_t *v = recap__jv_get(obj, key);
  return v && v->kind == RECAP__JV_ARRAY && i < v->count ? &v->items[i] : NULL;
}

/* ---- what the page counts ------------------------------------------------------------------ */

/* How a block is drawn: the colour class, from the snapshot's block state. */
static const char *block_class(const char *state) {
  if (!state) return "other";
  if (strcmp(state, "allocated") == 0) return "allocated";
  if (strcmp(state, "free") == 0) return "free";
  if (strcmp(state, "pending_events") == 0 || strcmp(state, "deferred") == 0) return "waiting";
  return "other";
}

/* What the pool's blocks hold, summed from its segments. */
typedef struct pool_sums {
  uint64_t waiting; /* bytes of blocks freed while their streams' work may still use them */
  size_t segments, vmm_segments, blocks;
} pool_sums_t;

static pool_sums_t sum_pool(const recap__jv_t *pool) {
  pool_sums_t s = {0};
  s.segments = array_count(pool, "segments");
  for (size_t i = 0; i < s.segments; i++) {
    const recap__jv_t *seg = element(pool, "segments", i);
    s.vmm_segments += bool_field(seg, "vmm");
    size_t blocks = array_count(seg, "blocks");
    s.blocks += blocks;
    for (size_t k = 0; k < blocks; k++) {
      const recap__jv_t *b = element(seg, "blocks", k);
      if (strcmp(block_class(recap__jv_string(recap__jv_get(b, "state"))), "waiting") == 0)
        s.waiting += uint_or_zero(b, "size");
    }
  }
  return s;
}

/* The pool's state as the snapshot names it ("awake" when a snapshot lacks it: pools of a
 * library without sleep are awake). */
static const char *pool_state(const recap__jv_t *pool) {
  const char *state = recap__jv_string(recap__jv_get(pool, "state"));
  return state ? state : "awake";
}

static bool asleep(const recap__jv_t *pool) { return strncmp(pool_state(pool), "asleep", 6) == 0; }

static void badge(page_t *pg, const recap__jv_t *pool) {
  const char *state = pool_state(pool);
  const char *cls = strcmp(state, "awake") == 0 ? "awake" : asleep(pool) ? "asleep" : "other";
  format(pg, "<span class=\"badge %s\">", cls);
  escaped(pg, state);
  text(pg, "</span>");
}

/* "{1,2}"; false when the snapshot's id is not two unsigned integers. */
static bool pool_id(const recap__jv_t *pool, uint64_t *a, uint64_t *b) {
  return recap__jv_uint(element(pool, "id", 0), a) && recap__jv_uint(element(pool, "id", 1), b);
}

static void pool_name(page_t *pg, const recap__jv_t *pool) {
  uint64_t a, b;
  if (!pool_id(pool, &a, &b)) {
    text(pg, "pool ?");
    return;
  }
  format(pg, "pool {%" PRIu64 ",%" PRIu64 "}", a, b);
  if (a == 0 && b == 0) text(pg, " (default)");
}

/* The anchor of a pool's section: device and place in the device's list, unique on the page. */
static void pool_anchor(page_t *pg, size_t device_index, size_t pool_index) {
  format(pg, "pool-%zu-%zu", device_index, pool_index);
}

static const char *kind(const pool_sums_t *s) {
  if (s->segments == 0) return "none";
  if (s->vmm_segments == s->segments) return "VMM";
  if (s->vmm_segments == 0) return "classic";
  return "VMM + classic";
}

/* ---- the drawing --------------------------------------------------------------------------- */

static const char STYLE[] =
    "body{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d2330;"
    "background:#fafbfc}\n"
    "h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;margin:28px 0 8px}"
    "h3{font-size:15px;margin:18px 0 4px}\n"
    ".totals{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:12px}\n"
    ".total{background:#fff;border:1px solid #d6dae1;border-radius:6px;padding:6px 12px}\n"
    ".total .k{display:block;font-size:11px;color:#5b6474;text-transform:uppercase}\n"
    ".total .v{font-size:17px;font-weight:600}\n"
    ".legend{margin:8px 0 4px;color:#5b6474}.legend .swatch{display:inline-block;width:12px;"
    "height:12px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-1px}\n"
    "table.pools{border-collapse:collapse;background:#fff;margin:6px 0 10px}\n"
    "table.pools th,table.pools td{border:1px solid #d6dae1;padding:4px 8px;text-align:right;"
    "white-space:nowrap}\n"
    "table.pools th{background:#eef1f5;font-weight:600}\n"
    "table.pools td:nth-child(-n+3),table.pools th:nth-child(-n+3){text-align:left}\n"
    ".table{overflow-x:auto}\n"
    "tr.asleep td{background:#f0f0f0;color:#7a7f88}\n"
    ".badge{display:inline-block;border-radius:9px;padding:0 8px;font-size:12px;"
    "font-weight:600}\n"
    ".badge.awake{background:#d8f0dc;color:#1e6b2d}.badge.asleep{background:#5b6270;color:#fff}"
    ".badge.other{background:#f6d7a7;color:#6b4100}\n"
    "section.pool{background:#fff;border:1px solid #d6dae1;border-radius:6px;padding:4px 12px 10px;"
    "margin:8px 0}\n"
    "section.pool.asleep{background:#f0f0f0}"
    "section.pool.asleep .bar{filter:grayscale(1);opacity:.7}\n"
    ".note{color:#5b6474;margin:2px 0 6px}\n"
    ".segment{margin:6px 0}.segment .label{font-size:12px;color:#5b6474;"
    "font-family:ui-monospace,Menlo,Consolas,monospace}\n"
    ".bar{display:flex;height:18px;border:1px solid #aab1bd;border-radius:3px;overflow:hidden;"
    "background:#fff}\n"
    ".block{flex:0 0 auto;min-width:1px;box-sizing:border-box;border-right:1px solid #fff}\n"
    ".allocated{background:#3c6fc4}.waiting{background:#e09b2d}.free{background:#cfd8e3}"
    ".other{background:#b04fb0}\n"
    ".unknown{color:#b04fb0}\n";

static void totals_item(page_t *pg, const char *key) {
  text(pg, "<div class=\"total\"><span class=\"k\">");
  text(pg, key);
  text(pg, "</span><span class=\"v\">");
}

typedef struct totals {
  size_t devices, pools, asleep, segments, vmm_segments, graphs;
  uint64_t reserved, allocated, waiting, sleeping, exec;
} totals_t;

static void write_totals(page_t *pg, const recap__jv_t *devices) {
  totals_t t = {0};
  t.devices = devices->count;
  for (size_t d = 0; d < devices->count; d++) {
    const recap__jv_t *dev = &devices->items[d];
    size_t pools = array_count(dev, "pools");
    for (size_t p = 0; p < pools; p++) {
      const recap__jv_t *pool = element(dev, "pools", p);
      pool_sums_t s = sum_pool(pool);
      t.pools++;
      t.asleep += asleep(pool);
      t.segments += s.segments;
      t.vmm_segments += s.vmm_segments;
      t.graphs += uint_or_zero(pool, "graphs");
      t.reserved += uint_or_zero(pool, "reserved_bytes");
      t.allocated += uint_or_zero(pool, "allocated_bytes");
      t.waiting += s.waiting;
      t.sleeping += uint_or_zero(pool, "sleeping_bytes");
      t.exec += uint_or_zero(pool, "exec_bytes");
    }
  }
  text(pg, "<div class=\"totals\">\n");
  totals_item(pg, "devices");
  format(pg, "%zu</span></div>\n", t.devices);
  totals_item(pg, "pools");
  format(pg, "%zu</span> (%zu asleep)</div>\n", t.pools, t.asleep);
  totals_item(pg, "segments");
  format(pg, "%zu</span> (%zu VMM)</div>\n", t.segments, t.vmm_segments);
  totals_item(pg, "reserved");
  bytes(pg, t.reserved);
  text(pg, "</span></div>\n");
  totals_item(pg, "allocated");
  bytes(pg, t.allocated);
  text(pg, "</span></div>\n");
  totals_item(pg, "waiting");
  bytes(pg, t.waiting);
  text(pg, "</span></div>\n");
  totals_item(pg, "asleep, given back");
  bytes(pg, t.sleeping);
  text(pg, "</span></div>\n");
  totals_item(pg, "graphs");
  format(pg, "%zu</span></div>\n", t.graphs);
  totals_item(pg, "executables");
  bytes(pg, t.exec);
  text(pg, "</span></div>\n</div>\n");
}

static void write_legend(page_t *pg) {
  text(pg,
       "<div class=\"legend\">blocks:<span class=\"swatch allocated\"></span>allocated"
       "<span class=\"swatch waiting\"></span>waiting (freed; work queued on a stream may still "
       "use it)<span class=\"swatch free\"></span>free</div>\n");
}

/* A hexadecimal address of the snapshot ("0x7f..."), when it is one. */
static bool address(const char *s, uint64_t *out) {
  if (!s || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2]) return false;
  uint64_t v = 0;
  for (const char *c = s + 2; *c; c++) {
    int d = *c >= '0' && *c <= '9'   ? *c - '0'
            : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
            : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
                                     : -1;
    if (d < 0 || v >> 60) return false;
    v = v * 16 + (uint64_t)d;
  }
  *out = v;
  return true;
}

static void write_block(page_t *pg, const recap__jv_t *b, uint64_t segment_size) {
  const char *state = recap__jv_string(recap__jv_get(b, "state"));
  uint64_t size = uint_or_zero(b, "size");
  double share = segment_size ? 100.0 * (double)size / (double)segment_size : 0.0;
  format(pg, "<div class=\"block %s\" style=\"width:%.4f%%\" title=\"", block_class(state), share);
  const char *start = recap__jv_string(recap__jv_get(b, "address"));
  uint64_t base;
  if (address(start, &base))
    format(pg, "0x%" PRIx64 " - 0x%" PRIx64, base, base + size);
  else
    escaped(pg, start ? start : "?");
  char h[32];
  human(h, sizeof h, size);
  format(pg, " (%s), ", h);
  escaped(pg, state ? state : "?");
  uint64_t requested;
  if (state && strcmp(state, "allocated") == 0 &&
      recap__jv_uint(recap__jv_get(b, "requested"), &requested))
    format(pg, ", %" PRIu64 " bytes requested", requested);
  text(pg, "\"></div>");
}

static void write_segment(page_t *pg, const recap__jv_t *seg) {
  uint64_t size = uint_or_zero(seg, "size");
  text(pg, "<div class=\"segment\"><div class=\"label\">");
  const char *base = recap__jv_string(recap__jv_get(seg, "address"));
  escaped(pg, base ? base : "?");
  text(pg, " &middot; ");
  bytes(pg, size);
  if (bool_field(seg, "vmm")) {
    int64_t chunks = 0;
    recap__jv_int(recap__jv_get(seg, "chunks"), &chunks);
    format(pg, " &middot; VMM, %" PRId64 " chunk%s mapped, ", chunks, chunks == 1 ? "" : "s");
    bytes(pg, uint_or_zero(seg, "va_bytes"));
    text(pg, " of addresses");
  } else {
    text(pg, " &middot; classic");
  }
  text(pg, bool_field(seg, "small") ? " &middot; small" : " &middot; large");
  const char *stream = recap__jv_string(recap__jv_get(seg, "stream"));
  if (stream) {
    text(pg, " &middot; stream ");
    escaped(pg, stream);
  }
  size_t blocks = array_count(seg, "blocks");
  format(pg, " &middot; %zu block%s</div>\n<div class=\"bar\">", blocks, blocks == 1 ? "" : "s");
  for (size_t k = 0; k < blocks; k++) write_block(pg, element(seg, "blocks", k), size);
  text(pg, "</div></div>\n");
}

static void write_pool_row(page_t *pg, const recap__jv_t *pool, size_t d, size_t p) {
  pool_sums_t s = sum_pool(pool);
  format(pg, "<tr class=\"%s\"><td><a href=\"#", asleep(pool) ? "asleep" : "awake");
  pool_anchor(pg, d, p);
  text(pg, "\">");
  pool_name(pg, pool);
  text(pg, "</a></td><td>");
  badge(pg, pool);
  format(pg, "</td><td>%s</td><td>%zu</td><td>", kind(&s), s.segments);
  bytes_field(pg, pool, "reserved_bytes");
  text(pg, "</td><td>");
  bytes_field(pg, pool, "allocated_bytes");
  text(pg, "</td><td>");
  bytes(pg, s.waiting);
  text(pg, "</td><td>");
  count_field(pg, pool, "graphs");
  text(pg, "</td><td>");
  bytes_field(pg, pool, "exec_bytes");
  text(pg, "</td><td>");
  count_field(pg, pool, "nodes");
  text(pg, "</td><td>");
  bytes_field(pg, pool, "capture_peak_bytes");
  text(pg, "</td><td>");
  uint64_t budget;
  if (!recap__jv_uint(recap__jv_get(pool, "budget_bytes"), &budget))
    text(pg, UNKNOWN);
  else if (budget == 0)
    text(pg, "none");
  else
    bytes(pg, budget);
  text(pg, "</td><td>");
  count_field(pg, pool, "budget_refusals");
  text(pg, "</td></tr>\n");
}

static void write_pool_section(page_t *pg, const recap__jv_t *pool, size_t d, size_t p) {
  pool_sums_t s = sum_pool(pool);
  format(pg, "<section class=\"pool%s\" id=\"", asleep(pool) ? " asleep" : "");
  pool_anchor(pg, d, p);
  text(pg, "\"><h3>");
  pool_name(pg, pool);
  text(pg, " ");
  badge(pg, pool);
  format(pg, "</h3>\n<p class=\"note\">%zu segment%s (%s), %zu block%s", s.segments,
         s.segments == 1 ? "" : "s", kind(&s), s.blocks, s.blocks == 1 ? "" : "s");
  if (asleep(pool)) {
    text(pg, "; asleep: ");
    bytes_field(pg, pool, "sleeping_bytes");
    text(pg, " of device memory given back, the addresses kept for the wake");
  }
  text(pg, "</p>\n");
  for (size_t i = 0; i < s.segments; i++) write_segment(pg, element(pool, "segments", i));
  text(pg, "</section>\n");
}

static void write_device(page_t *pg, const recap__jv_t *dev, size_t d) {
  int64_t number;
  text(pg, "<section class=\"device\">\n<h2>");
  if (recap__jv_int(recap__jv_get(dev, "device"), &number))
    format(pg, "Device %" PRId64, number);
  else
    text(pg, "Device ?");
  text(pg, "</h2>\n");
  /* The device's statistics (recap_memory_stats) over all its pools. */
  const recap__jv_t *stats = recap__jv_get(dev, "stats");
  const recap__jv_t *reserved = recap__jv_get(recap__jv_get(stats, "reserved_bytes"), "all");
  const recap__jv_t *allocated = recap__jv_get(recap__jv_get(stats, "allocated_bytes"), "all");
  if (reserved && allocated) {
    text(pg, "<p class=\"note\">reserved ");
    bytes_field(pg, reserved, "current");
    text(pg, " (peak ");
    bytes_field(pg, reserved, "peak");
    text(pg, "), allocated ");
    bytes_field(pg, allocated, "current");
    text(pg, " (peak ");
    bytes_field(pg, allocated, "peak");
    text(pg, "), out-of-memory errors ");
    count_field(pg, stats, "num_ooms");
    text(pg, ", retries after freeing the cache ");
    count_field(pg, stats, "num_alloc_retries");
    text(pg, "</p>\n");
  }
  size_t pools = array_count(dev, "pools");
  text(
      pg,
      "<div class=\"table\"><table class=\"pools\"><thead><tr><th>pool</th><th>state</th><th>segments are</th>"
      "<th>segments</th><th>reserved</th><th>allocated</th><th>waiting</th><th>graphs</th>"
      "<th>executables</th><th>nodes</th><th>capture peak</th><th>budget</th>"
      "<th>refusals</th></tr></thead>\n<tbody>\n");
  for (size_t p = 0; p < pools; p++) write_pool_row(pg, element(dev, "pools", p), d, p);
  text(pg, "</tbody></table></div>\n");
  write_legend(pg);
  for (size_t p = 0; p < pools; p++) write_pool_section(pg, element(dev, "pools", p), d, p);
  text(pg, "</section>\n");
}

static recap_status_t draw(const char *snapshot_json, const char *who, char **html) {
  recap__jv_t *root;
  RECAP__CHECK(recap__jv_parse(snapshot_json, who, &root));
  const recap__jv_t *devices = recap__jv_get(root, "devices");
  if (!devices || devices->kind != RECAP__JV_ARRAY) {
    recap__jv_free(root);
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "%s is JSON but no snapshot: it has no \"devices\" array; give the text "
                        "of recap_memory_snapshot_json",
                        who);
  }
  page_t pg = {0};
  text(&pg,
       "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<title>recap memory</title>\n<style>\n");
  text(&pg, STYLE);
  text(&pg, "</style>\n</head>\n<body>\n<h1>recap memory</h1>\n");
  write_totals(&pg, devices);
  if (devices->count == 0) text(&pg, "<p class=\"note\">recap has used no device.</p>\n");
  for (size_t d = 0; d < devices->count; d++) write_device(&pg, &devices->items[d], d);
  text(&pg, "</body>\n</html>\n");
  recap__jv_free(root);
  if (pg.failed) {
    recap__host_free(pg.buf);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory writing the page", who);
  }
  *html = pg.buf;
  return RECAP_SUCCESS;
}

recap_status_t recap_memory_html_from_json(const char *snapshot_json, char **html) {
  RECAP__ARG(html != NULL, "recap_memory_html_from_json: html is NULL");
  *html = NULL;
  RECAP__ARG(snapshot_json != NULL,
             "recap_memory_html_from_json: snapshot_json is NULL; give the text of "
             "recap_memory_snapshot_json");
  return draw(snapshot_json, "recap_memory_html_from_json: snapshot_json", html);
}

recap_status_t recap_memory_html(const char *path) {
  RECAP__ARG(path != NULL, "recap_memory_html: path is NULL; give the file to write the page to");
  char *json, *html;
  RECAP__CHECK(recap__memory_snapshot_all(&json));
  recap_status_t s = draw(json, "recap_memory_html: the snapshot", &html);
  recap__host_free(json);
  if (s != RECAP_SUCCESS) return s;
  FILE *out = fopen(path, "wb");
  if (!out) {
    s = recap__error(RECAP_ERROR_IO, "recap_memory_html: cannot open \"%s\" for writing: %s", path,
                     strerror(errno));
  } else {
    size_t len = strlen(html);
    bool failed = fwrite(html, 1, len, out) != len;
    failed |= fclose(out) != 0;
    if (failed) {
      s = recap__error(RECAP_ERROR_IO,
                       "recap_memory_html: writing \"%s\" failed (the partial file is removed)",
                       path);
      remove(path);
    }
  }
  recap__host_free(html);
  return s;
}
