/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * load.c — reading recap's inspection JSON into the viewer's model, checked the way a reader of
 * a file written by someone else must be: every field's type, indices in range, the dependents
 * the reverse of the dependencies, no cycle, bodies of conditional nodes that nest. cJSON does
 * the parsing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "load.h"

typedef struct failure {
  char *message;
  size_t size;
} failure_t;

static bool fail(failure_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(failure_t *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, err->size, fmt, ap);
  va_end(ap);
  return false;
}

/* ==========================================================================================
 * The file
 * ======================================================================================== */

/* The whole file (or standard input for "-"), NUL-terminated. */
static char *read_text(const char *path, size_t *length, failure_t *err) {
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    fail(err, "cannot open: %s", strerror(errno));
    return NULL;
  }
  char *text = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[65536];
  bool oom = false;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *more = realloc(text, cap);
      if (!more) {
        oom = true;
        break;
      }
      text = more;
    }
    memcpy(text + len, chunk, n);
    len += n;
  }
  int saved = errno;
  bool failed = ferror(f) != 0;
  if (!is_stdin) fclose(f);
  if (oom || failed) {
    free(text);
    if (oom)
      fail(err, "out of memory");
    else
      fail(err, "cannot read: %s", strerror(saved));
    return NULL;
  }
  if (!text)
    text = calloc(1, 1);
  else
    text[len] = '\0';
  if (!text) fail(err, "out of memory");
  *length = len;
  return text;
}

/* Line and column (both from 1) of the byte at offset in text. */
static void position_of(const char *text, size_t offset, size_t *line, size_t *column) {
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < offset && text[i]; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *column = 1;
    } else {
      (*column)++;
    }
  }
}

/* ==========================================================================================
 * Fields
 * ======================================================================================== */

/* A non-negative integer that a double holds exactly. */
static bool is_count(const cJSON *item) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  return v >= 0 && v <= 9007199254740992.0 && v == (double)(uint64_t)v;
}

/* Optional non-negative integer field: absent or null leaves *out alone and *present false. */
static bool read_count(const cJSON *obj, size_t index, const char *key, uint64_t *out,
                       bool *present, failure_t *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (present) *present = false;
  if (!item || cJSON_IsNull(item)) return true;
  if (!is_count(item))
    return fail(err, "node %zu: \"%s\" must be a non-negative integer", index, key);
  *out = (uint64_t)item->valuedouble;
  if (present) *present = true;
  return true;
}

/* Optional string field: absent or null gives NULL. */
static bool read_string(const cJSON *obj, size_t index, const char *key, char **out,
                        failure_t *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item || cJSON_IsNull(item)) return true;
  if (!cJSON_IsString(item))
    return fail(err, "node %zu: \"%s\" must be a string or null", index, key);
  if (recap_view_set_string(out, item->valuestring) != 0) return fail(err, "out of memory");
  return true;
}

/* Optional [x, y, z] field of unsigned 32-bit values. */
static bool read_dims(const cJSON *obj, size_t index, const char *key, unsigned dims[3],
                      bool *present, failure_t *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  *present = false;
  if (!item || cJSON_IsNull(item)) return true;
  if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 3)
    return fail(err, "node %zu: \"%s\" must be an array of three integers [x, y, z]", index, key);
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetArrayItem(item, i);
    if (!is_count(v) || v->valuedouble > 4294967295.0)
      return fail(err, "node %zu: \"%s\"[%d] must be an integer from 0 to 4294967295", index, key,
                  i);
    dims[i] = (unsigned)v->valuedouble;
  }
  *present = true;
  return true;
}

/* Each index of a required (or, with required false, optional) array of node indices below
 * count, handed to take. */
static bool read_indices(const cJSON *obj, size_t index, const char *key, bool required,
                         size_t count, bool (*take)(void *, size_t), void *ctx, failure_t *err) {
  const cJSON *array = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!array)
    return required ? fail(err, "node %zu: the field \"%s\" is missing", index, key) : true;
  if (!cJSON_IsArray(array))
    return fail(err, "node %zu: \"%s\" must be an array of node indices", index, key);
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, array) {
    if (!is_count(v))
      return fail(err, "node %zu: \"%s\"[%zu] must be a node index (a non-negative integer)", index,
                  key, i);
    if (v->valuedouble >= (double)count)
      return fail(err, "node %zu: \"%s\"[%zu] is %.0f, but the graph has %zu node%s", index, key, i,
                  v->valuedouble, count, count == 1 ? "" : "s");
    size_t target = (size_t)v->valuedouble;
    if (target == index) return fail(err, "node %zu: \"%s\" names the node itself", index, key);
    if (!take(ctx, target)) return fail(err, "out of memory");
    i++;
  }
  return true;
}

typedef struct dependency_sink {
  recap_view_graph_t *g;
  size_t node;
} dependency_sink_t;

static bool take_dependency(void *ctx, size_t from) {
  dependency_sink_t *sink = ctx;
  return recap_view_add_dependency(sink->g, sink->node, from) == 0;
}

/* Optional array of strings (a kernel's "params", its "graph_params"), shown as they are. */
static bool read_strings(const cJSON *obj, size_t index, const char *key, char ***out,
                         size_t *count, failure_t *err) {
  const cJSON *array = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!array || cJSON_IsNull(array)) return true;
  if (!cJSON_IsArray(array))
    return fail(err, "node %zu: \"%s\" must be an array of strings", index, key);
  size_t n = (size_t)cJSON_GetArraySize(array);
  *out = calloc(n ? n : 1, sizeof **out);
  if (!*out) return fail(err, "out of memory");
  const cJSON *v;
  cJSON_ArrayForEach(v, array) {
    if (!cJSON_IsString(v))
      return fail(err, "node %zu: \"%s\"[%zu] must be a string", index, key, *count);
    if (recap_view_set_string(&(*out)[(*count)++], v->valuestring) != 0)
      return fail(err, "out of memory");
  }
  return true;
}

/* Optional unsigned 32-bit field: absent or null leaves *out alone. */
static bool read_unsigned(const cJSON *obj, size_t index, const char *key, unsigned *out,
                          failure_t *err) {
  uint64_t v = 0;
  bool present;
  if (!read_count(obj, index, key, &v, &present, err)) return false;
  if (present && v > 4294967295u)
    return fail(err, "node %zu: \"%s\" must be an integer from 0 to 4294967295", index, key);
  if (present) *out = (unsigned)v;
  return true;
}

/* Where the node sits ("parent": null or the conditional node's index, "branch": which body)
 * and, for a conditional node, "region_kind" and "branches". A file without them (written
 * before regions existed) is a graph without bodies. How they fit together is checked with the
 * rest of the graph (recap_view_finish). */
static bool read_region(const cJSON *obj, size_t index, recap_view_node_t *n, failure_t *err) {
  const cJSON *parent = cJSON_GetObjectItemCaseSensitive(obj, "parent");
  if (parent && !cJSON_IsNull(parent)) {
    if (!is_count(parent))
      return fail(err,
                  "node %zu: \"parent\" must be null or the index of the conditional node whose "
                  "body holds it",
                  index);
    n->parent = (size_t)parent->valuedouble;
  }
  if (!read_unsigned(obj, index, "branch", &n->branch, err)) return false;
  if (!read_unsigned(obj, index, "branches", &n->branches, err)) return false;
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "region_kind");
  if (kind && !cJSON_IsNull(kind) && (!cJSON_IsString(kind) || !kind->valuestring[0]))
    return fail(err,
                "node %zu: \"region_kind\" must be null or a region's kind (\"while\", \"if\", "
                "\"if_else\", \"switch\")",
                index);
  if (kind && cJSON_IsString(kind) &&
      recap_view_set_string(&n->region_kind, kind->valuestring) != 0)
    return fail(err, "out of memory");
  return true;
}

static bool read_node(const cJSON *obj, size_t i, size_t count, recap_view_graph_t *g,
                      failure_t *err) {
  if (!cJSON_IsObject(obj)) return fail(err, "node %zu: must be an object", i);
  const cJSON *index = cJSON_GetObjectItemCaseSensitive(obj, "index");
  if (!index) return fail(err, "node %zu: the field \"index\" is missing", i);
  if (!is_count(index) || index->valuedouble != (double)i)
    return fail(err, "node %zu: \"index\" must be %zu (nodes are listed in index order, from 0)", i,
                i);
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "type");
  if (!type) return fail(err, "node %zu: the field \"type\" is missing", i);
  if (!cJSON_IsString(type) || !type->valuestring[0])
    return fail(err, "node %zu: \"type\" must be a non-empty string (\"kernel\", \"memcpy\"...)",
                i);
  recap_view_node_t *n = recap_view_add_node(g, type->valuestring);
  if (!n) return fail(err, "out of memory");

  if (!read_string(obj, i, "kernel_name", &n->kernel_name, err)) return false;
  bool has_grid, has_block, has_shared;
  if (!read_dims(obj, i, "grid", n->grid, &has_grid, err)) return false;
  if (!read_dims(obj, i, "block", n->block, &has_block, err)) return false;
  if (!read_count(obj, i, "shared_bytes", &n->shared_bytes, &has_shared, err)) return false;
  if (has_grid != has_block)
    return fail(err, "node %zu: \"grid\" and \"block\" come together; only one is given", i);
  n->has_launch = has_grid;
  if (!read_count(obj, i, "bytes", &n->bytes, NULL, err)) return false;
  if (!read_string(obj, i, "annotation", &n->annotation, err)) return false;
  if (!read_string(obj, i, "annotation_path", &n->annotation_path, err)) return false;
  /* Tools ids are 64-bit and may pass 2^53, where a JSON number (a double) is no longer exact:
   * take any non-negative number, as near as a double holds it. */
  const cJSON *tools_id = cJSON_GetObjectItemCaseSensitive(obj, "tools_id");
  if (tools_id && !cJSON_IsNull(tools_id)) {
    if (!cJSON_IsNumber(tools_id) || tools_id->valuedouble < 0 ||
        tools_id->valuedouble >= 18446744073709551616.0)
      return fail(err, "node %zu: \"tools_id\" must be a non-negative integer or null", i);
    n->tools_id = (uint64_t)tools_id->valuedouble;
    n->has_tools_id = 1;
  }
  if (!read_strings(obj, i, "params", &n->params, &n->param_count, err)) return false;
  if (!read_strings(obj, i, "graph_params", &n->graph_params, &n->graph_param_count, err))
    return false;
  if (!read_string(obj, i, "set_alone", &n->set_alone, err)) return false;
  if (!read_region(obj, i, n, err)) return false;
  dependency_sink_t sink = {g, i};
  return read_indices(obj, i, "dependencies", true, count, take_dependency, &sink, err);
}

typedef struct dependents_check {
  const recap_view_graph_t *g;
  size_t node; /* the node whose "dependents" are read */
  size_t bad;  /* the first listed dependent that does not depend on it, or SIZE_MAX */
} dependents_check_t;

static bool check_dependent(void *ctx, size_t listed) {
  dependents_check_t *check = ctx;
  const recap_view_node_t *d = &check->g->nodes[listed];
  bool found = false;
  for (size_t m = 0; m < d->dep_count; m++) found = found || d->deps[m] == check->node;
  if (!found && check->bad == SIZE_MAX) check->bad = listed;
  return true;
}

/* The file's "dependents" must be the reverse of the dependencies: a mismatch means the file
 * was edited or truncated, and the picture would lie. */
static bool check_dependents(const cJSON *nodes, const recap_view_graph_t *g, failure_t *err) {
  size_t i = 0;
  const cJSON *obj;
  cJSON_ArrayForEach(obj, nodes) {
    dependents_check_t check = {g, i, SIZE_MAX};
    if (!read_indices(obj, i, "dependents", false, g->count, check_dependent, &check, err))
      return false;
    if (check.bad != SIZE_MAX)
      return fail(err,
                  "node %zu lists node %zu among its \"dependents\", but node %zu does not "
                  "depend on it",
                  i, check.bad, check.bad);
    i++;
  }
  return true;
}

/* ==========================================================================================
 * The whole graph
 * ======================================================================================== */

static bool load_root(const cJSON *root, const char *shown, const char *program,
                      recap_view_graph_t *g, failure_t *err) {
  if (!cJSON_IsObject(root))
    return fail(err,
                "the top level must be an object with a \"nodes\" array "
                "(the JSON of recap_graph_info_json)");
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  if (!nodes)
    return fail(err, "the field \"nodes\" is missing (is this the JSON of recap_graph_info_json?)");
  if (!cJSON_IsArray(nodes)) return fail(err, "\"nodes\" must be an array");
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools_ids_available");
  if (tools && !cJSON_IsBool(tools))
    return fail(err, "\"tools_ids_available\" must be true or false");
  g->tools_ids_available = tools && cJSON_IsTrue(tools);

  size_t count = (size_t)cJSON_GetArraySize(nodes), i = 0;
  const cJSON *obj;
  cJSON_ArrayForEach(obj, nodes) {
    if (!read_node(obj, i, count, g, err)) return false;
    i++;
  }
  if (!check_dependents(nodes, g, err)) return false;
  if (recap_view_finish(g, err->message, err->size) != 0) return false;

  const cJSON *edge_count = cJSON_GetObjectItemCaseSensitive(root, "edge_count");
  if (edge_count && !is_count(edge_count))
    return fail(err, "\"edge_count\" must be a non-negative integer");
  if (edge_count && edge_count->valuedouble != (double)g->edge_count)
    fprintf(stderr,
            "%s: warning: %s: \"edge_count\" is %.0f but the nodes list %zu dependencies; "
            "drawing the dependencies\n",
            program, shown, edge_count->valuedouble, g->edge_count);
  return true;
}

int recap_graph_load(const char *path, const char *program, recap_view_graph_t *g, char *message,
                     size_t message_size) {
  failure_t err = {message, message_size};
  recap_view_graph_init(g);
  const char *shown = strcmp(path, "-") == 0 ? "(standard input)" : path;
  size_t length;
  char *text = read_text(path, &length, &err);
  if (!text) return -1;
  if (strlen(text) != length) {
    free(text);
    fail(&err, "not JSON text (it holds a NUL byte)");
    return -1;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, true);
  if (!root) {
    size_t line, column, offset = end ? (size_t)(end - text) : 0;
    if (!end && cJSON_GetErrorPtr()) offset = (size_t)(cJSON_GetErrorPtr() - text);
    position_of(text, offset, &line, &column);
    fail(&err, "not valid JSON (parse error at line %zu, column %zu)", line, column);
    free(text);
    return -1;
  }
  free(text);
  bool ok = load_root(root, shown, program, g, &err);
  cJSON_Delete(root);
  if (!ok) recap_view_graph_free(g);
  return ok ? 0 : -1;
}
