/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_page.c — the memory page: one self-contained HTML page of the allocator now, drawn from
 * the model of memory_model.h (taken under the allocator's lock, drawn after it is released).
 *
 * The page: totals of every device at the top, then per device a table of its pools (state,
 * VMM or classic, segments, bytes, what the graphs holding the pool cost, the budget) and per
 * pool a bar per segment whose blocks are drawn to scale, coloured allocated / waiting / free,
 * their address ranges in the tooltip. An asleep pool is greyed and carries its state as a
 * badge. Nothing is fetched: the style sheet is inline and the page needs no script. Every text
 * on the page is of the library's making (numbers, addresses, fixed names): nothing a user
 * gave reaches it, so nothing needs escaping.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/memory_model.h"
#include "alloc/sleep.h"
#include "alloc/state.h"
#include "core/error.h"
#include "core/host.h"
#include "core/strbuf.h"
#include "recap/memory.h"

/* The page's text, built in one growing string. */
typedef recap__strbuf_t page_t;

/* ---- figures ------------------------------------------------------------------------------- */

/* A byte count read as a person reads it, the exact count in its tooltip. */
static void bytes(page_t *pg, int64_t n) {
  uint64_t u = n > 0 ? (uint64_t)n : 0;
  char h[32];
  recap__format_bytes(h, sizeof h, u);
  recap__strbuf_printf(pg, "<span class=\"bytes\" title=\"%" PRIu64 " bytes\">%s</span>", u, h);
}

/* An address as the snapshot writes it ("0x7f..."). */
static uint64_t address(const void *p) { return (uint64_t)(uintptr_t)p; }

/* ---- what the page counts ------------------------------------------------------------------ */

/* Freed blocks not yet reusable (pending events, deferred) are drawn as waiting. */
static bool waiting(recap__model_block_state_t state) {
  return state == RECAP__MODEL_BLOCK_PENDING_EVENTS || state == RECAP__MODEL_BLOCK_DEFERRED;
}

static const char *block_class(recap__model_block_state_t state) {
  if (waiting(state)) return "waiting";
  return state == RECAP__MODEL_BLOCK_ALLOCATED ? "allocated" : "free";
}

/* What the pool's blocks hold, summed from its segments. */
typedef struct pool_sums {
  int64_t waiting; /* bytes of blocks freed while their streams' work may still use them */
  size_t blocks;
} pool_sums_t;

static pool_sums_t sum_pool(const recap__memory_model_t *m, const recap__model_pool_t *pool) {
  pool_sums_t s = {0};
  for (size_t i = pool->first_segment; i < pool->first_segment + pool->segments; i++) {
    const recap__model_segment_t *seg = &m->segments[i];
    s.blocks += seg->blocks;
    for (size_t k = seg->first_block; k < seg->first_block + seg->blocks; k++)
      if (waiting(m->blocks[k].state)) s.waiting += (int64_t)m->blocks[k].size;
  }
  return s;
}

static bool asleep(const recap__model_pool_t *pool) {
  return pool->state == RECAP_POOL_ASLEEP_DISCARDED || pool->state == RECAP_POOL_ASLEEP_OFFLOADED;
}

static void badge(page_t *pg, const recap__model_pool_t *pool) {
  const char *cls = pool->state == RECAP_POOL_AWAKE ? "awake" : asleep(pool) ? "asleep" : "other";
  recap__strbuf_printf(pg, "<span class=\"badge %s\">%s</span>", cls,
                       recap__pool_state_text(pool->state));
}

static void pool_name(page_t *pg, const recap__model_pool_t *pool) {
  recap__strbuf_printf(pg, "pool {%" PRIu64 ",%" PRIu64 "}%s", pool->id.a, pool->id.b,
                       pool->is_default ? " (default)" : "");
}

static const char *kind(const recap__model_pool_t *pool) {
  if (pool->segments == 0) return "none";
  if (pool->vmm_segments == pool->segments) return "VMM";
  if (pool->vmm_segments == 0) return "classic";
  return "VMM + classic";
}

static const char *plural(size_t n) { return n == 1 ? "" : "s"; }

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
    ".allocated{background:#3c6fc4}.waiting{background:#e09b2d}.free{background:#cfd8e3}\n";

static void totals_item(page_t *pg, const char *key) {
  recap__strbuf_printf(pg, "<div class=\"total\"><span class=\"k\">%s</span><span class=\"v\">",
                       key);
}

static void write_totals(page_t *pg, const recap__memory_model_t *m) {
  size_t asleep_pools = 0, vmm_segments = 0;
  int64_t graphs = 0, reserved = 0, allocated = 0, waiting = 0, sleeping = 0, exec = 0;
  for (size_t p = 0; p < m->pool_count; p++) {
    const recap__model_pool_t *pool = &m->pools[p];
    asleep_pools += asleep(pool);
    vmm_segments += pool->vmm_segments;
    graphs += pool->graphs;
    reserved += pool->reserved_bytes;
    allocated += pool->allocated_bytes;
    waiting += sum_pool(m, pool).waiting;
    sleeping += pool->sleeping_bytes;
    exec += pool->exec_bytes;
  }
  recap__strbuf_puts(pg, "<div class=\"totals\">\n");
  totals_item(pg, "devices");
  recap__strbuf_printf(pg, "%zu</span></div>\n", m->device_count);
  totals_item(pg, "pools");
  recap__strbuf_printf(pg, "%zu</span> (%zu asleep)</div>\n", m->pool_count, asleep_pools);
  totals_item(pg, "segments");
  recap__strbuf_printf(pg, "%zu</span> (%zu VMM)</div>\n", m->segment_count, vmm_segments);
  const struct {
    const char *key;
    int64_t bytes;
  } figures[] = {{"reserved", reserved},
                 {"allocated", allocated},
                 {"waiting", waiting},
                 {"asleep, given back", sleeping}};
  for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
    totals_item(pg, figures[i].key);
    bytes(pg, figures[i].bytes);
    recap__strbuf_puts(pg, "</span></div>\n");
  }
  totals_item(pg, "graphs");
  recap__strbuf_printf(pg, "%" PRId64 "</span></div>\n", graphs);
  totals_item(pg, "executables");
  bytes(pg, exec);
  recap__strbuf_puts(pg, "</span></div>\n");
  /* Host memory, process-wide: the pinned buffers kept for the next OFFLOAD sleep. */
  totals_item(pg, "pinned, kept for offload");
  bytes(pg, (int64_t)m->pinned_kept_bytes);
  recap__strbuf_printf(pg, "</span> (%zu buffer%s)</div>\n</div>\n", m->pinned_kept_buffers,
                       m->pinned_kept_buffers == 1 ? "" : "s");
}

static void write_legend(page_t *pg) {
  recap__strbuf_puts(
      pg,
      "<div class=\"legend\">blocks:<span class=\"swatch allocated\"></span>allocated"
      "<span class=\"swatch waiting\"></span>waiting (freed; work queued on a stream may still "
      "use it)<span class=\"swatch free\"></span>free</div>\n");
}

static void write_block(page_t *pg, const recap__model_block_t *b, size_t segment_size) {
  double share = segment_size ? 100.0 * (double)b->size / (double)segment_size : 0.0;
  char h[32];
  recap__format_bytes(h, sizeof h, b->size);
  uint64_t base = address(b->address);
  recap__strbuf_printf(pg,
                       "<div class=\"block %s\" style=\"width:%.4f%%\" title=\"0x%" PRIx64
                       " - 0x%" PRIx64 " (%s), %s",
                       block_class(b->state), share, base, base + b->size, h,
                       recap__model_block_state_name(b->state));
  if (b->state == RECAP__MODEL_BLOCK_ALLOCATED)
    recap__strbuf_printf(pg, ", %zu bytes requested", b->requested);
  recap__strbuf_puts(pg, "\"></div>");
}

static void write_segment(page_t *pg, const recap__memory_model_t *m,
                          const recap__model_segment_t *seg) {
  recap__strbuf_printf(pg, "<div class=\"segment\"><div class=\"label\">0x%" PRIx64 " &middot; ",
                       address(seg->address));
  bytes(pg, (int64_t)seg->size);
  if (seg->vmm) {
    recap__strbuf_printf(pg, " &middot; VMM, %d chunk%s mapped, ", seg->chunks,
                         plural((size_t)seg->chunks));
    if (seg->unmapped) {
      bytes(pg, (int64_t)seg->unmapped);
      recap__strbuf_puts(pg, " given back from free blocks, ");
    }
    bytes(pg, (int64_t)seg->va_bytes);
    recap__strbuf_puts(pg, " of addresses");
  } else {
    recap__strbuf_puts(pg, " &middot; classic");
  }
  recap__strbuf_printf(pg,
                       " &middot; %s &middot; stream 0x%" PRIx64 " &middot; %zu block%s</div>\n",
                       seg->small ? "small" : "large", address(seg->stream), seg->blocks,
                       plural(seg->blocks));
  recap__strbuf_puts(pg, "<div class=\"bar\">");
  for (size_t k = seg->first_block; k < seg->first_block + seg->blocks; k++)
    write_block(pg, &m->blocks[k], seg->size);
  recap__strbuf_puts(pg, "</div></div>\n");
}

/* A pool's row. It links to the pool's section, whose anchor is the device's place on the page
 * and the pool's in the device's list: unique on the page. */
static void write_pool_row(page_t *pg, const recap__memory_model_t *m,
                           const recap__model_pool_t *pool, size_t d, size_t p) {
  recap__strbuf_printf(pg, "<tr class=\"%s\"><td><a href=\"#pool-%zu-%zu\">",
                       asleep(pool) ? "asleep" : "awake", d, p);
  pool_name(pg, pool);
  recap__strbuf_puts(pg, "</a></td><td>");
  badge(pg, pool);
  recap__strbuf_printf(pg, "</td><td>%s</td><td>%zu</td>", kind(pool), pool->segments);
  const int64_t figures[] = {pool->reserved_bytes, pool->allocated_bytes,
                             sum_pool(m, pool).waiting};
  for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
    recap__strbuf_puts(pg, "<td>");
    bytes(pg, figures[i]);
    recap__strbuf_puts(pg, "</td>");
  }
  recap__strbuf_printf(pg, "<td>%d</td><td>", pool->graphs);
  bytes(pg, pool->exec_bytes);
  recap__strbuf_printf(pg, "</td><td>%" PRId64 "</td><td>", pool->nodes);
  bytes(pg, pool->capture_peak);
  recap__strbuf_puts(pg, "</td><td>");
  if (pool->budget == 0)
    recap__strbuf_puts(pg, "none");
  else
    bytes(pg, (int64_t)pool->budget);
  recap__strbuf_printf(pg, "</td><td>%" PRIu64 "</td></tr>\n", pool->budget_refusals);
}

static void write_pool_section(page_t *pg, const recap__memory_model_t *m,
                               const recap__model_pool_t *pool, size_t d, size_t p) {
  size_t blocks = sum_pool(m, pool).blocks;
  recap__strbuf_printf(pg, "<section class=\"pool%s\" id=\"pool-%zu-%zu\"><h3>",
                       asleep(pool) ? " asleep" : "", d, p);
  pool_name(pg, pool);
  recap__strbuf_puts(pg, " ");
  badge(pg, pool);
  recap__strbuf_printf(pg, "</h3>\n<p class=\"note\">%zu segment%s (%s), %zu block%s",
                       pool->segments, plural(pool->segments), kind(pool), blocks, plural(blocks));
  if (asleep(pool)) {
    recap__strbuf_puts(pg, "; asleep: ");
    bytes(pg, pool->sleeping_bytes);
    recap__strbuf_puts(pg, " of device memory given back, the addresses kept for the wake");
  }
  recap__strbuf_puts(pg, "</p>\n");
  for (size_t i = pool->first_segment; i < pool->first_segment + pool->segments; i++)
    write_segment(pg, m, &m->segments[i]);
  recap__strbuf_puts(pg, "</section>\n");
}

static void write_device(page_t *pg, const recap__memory_model_t *m,
                         const recap__model_device_t *dev, size_t d) {
  /* The device's statistics (recap_memory_stats) over all its pools. */
  const recap_memory_stats_t *st = &dev->stats;
  recap__strbuf_printf(
      pg, "<section class=\"device\">\n<h2>Device %d</h2>\n<p class=\"note\">reserved ",
      dev->device);
  bytes(pg, st->reserved_bytes[RECAP_STAT_ALL].current);
  recap__strbuf_puts(pg, " (peak ");
  bytes(pg, st->reserved_bytes[RECAP_STAT_ALL].peak);
  recap__strbuf_puts(pg, "), allocated ");
  bytes(pg, st->allocated_bytes[RECAP_STAT_ALL].current);
  recap__strbuf_puts(pg, " (peak ");
  bytes(pg, st->allocated_bytes[RECAP_STAT_ALL].peak);
  recap__strbuf_printf(pg,
                       "), out-of-memory errors %" PRId64
                       ", retries after freeing the cache %" PRId64 "</p>\n",
                       st->num_ooms, st->num_alloc_retries);
  recap__strbuf_puts(
      pg,
      "<div class=\"table\"><table class=\"pools\"><thead><tr><th>pool</th><th>state</th>"
      "<th>segments are</th><th>segments</th><th>reserved</th><th>allocated</th>"
      "<th>waiting</th><th>graphs</th><th>executables</th><th>nodes</th>"
      "<th>capture peak</th><th>budget</th><th>refusals</th></tr></thead>\n<tbody>\n");
  for (size_t p = 0; p < dev->pools; p++)
    write_pool_row(pg, m, &m->pools[dev->first_pool + p], d, p);
  recap__strbuf_puts(pg, "</tbody></table></div>\n");
  write_legend(pg);
  for (size_t p = 0; p < dev->pools; p++)
    write_pool_section(pg, m, &m->pools[dev->first_pool + p], d, p);
  recap__strbuf_puts(pg, "</section>\n");
}

/* The page of every device recap has used, into *html. */
static recap_status_t draw(const char *who, char **html) {
  recap__memory_model_t m;
  recap_status_t s = recap__memory_model_take(&m, 0, RECAP__MAX_DEVICES - 1, who);
  if (s != RECAP_SUCCESS) {
    recap__memory_model_free(&m);
    return s;
  }
  page_t pg = {0};
  recap__strbuf_puts(&pg,
                     "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<title>recap memory</title>\n<style>\n");
  recap__strbuf_puts(&pg, STYLE);
  recap__strbuf_puts(&pg, "</style>\n</head>\n<body>\n<h1>recap memory</h1>\n");
  write_totals(&pg, &m);
  if (m.device_count == 0)
    recap__strbuf_puts(&pg, "<p class=\"note\">recap has used no device.</p>\n");
  for (size_t d = 0; d < m.device_count; d++) write_device(&pg, &m, &m.devices[d], d);
  recap__strbuf_puts(&pg, "</body>\n</html>\n");
  recap__memory_model_free(&m);
  if (!recap__strbuf_take(&pg, html))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory writing the page", who);
  return RECAP_SUCCESS;
}

recap_status_t recap_memory_html_string(char **html) {
  RECAP__ARG(html != NULL, "recap_memory_html_string: html is NULL");
  *html = NULL;
  return draw("recap_memory_html_string", html);
}

recap_status_t recap_memory_html(const char *path) {
  RECAP__ARG(path != NULL, "recap_memory_html: path is NULL; give the file to write the page to");
  char *html;
  RECAP__CHECK(draw("recap_memory_html", &html));
  recap_status_t s = RECAP_SUCCESS;
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
