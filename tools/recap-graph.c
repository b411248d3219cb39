/*
 * recap-graph — turns the JSON of recap_graph_info_json() into a picture of the graph.
 *
 *     recap-graph dot  graph.json graph.dot    Graphviz DOT: one box per node, edges from the
 *                                              dependencies, colour by node type, annotation
 *                                              labels as clusters
 *     recap-graph html graph.json graph.html   one self-contained HTML page: per-type counts, an
 *                                              SVG drawing of the DAG laid out here, and a table
 *                                              of the nodes that sorts and filters in the page
 *
 * The program reads the JSON once into a small model (struct graph), checks it the way a reader
 * of a file written by someone else must (every field's type, indices in range, no cycle), and
 * hands the model to one of two emitters. Nothing is fetched from the network: the page carries
 * its own style sheet and script, so it can be mailed or archived as one file.
 *
 * Exit status: 0 on success, 1 when the input cannot be read or is not a recap graph, or the
 * output cannot be written, 2 for a bad command line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Only for RECAP_NODE_TYPE_MAP, the library's list of node types: the tool links nothing of
 * recap, it reads the library's JSON. */
#include "recap/inspect.h"

#define PROGRAM "recap-graph"

/* ==========================================================================================
 * Small helpers: memory that cannot fail (a tool has nothing better to do than stop), and a
 * growing string.
 * ======================================================================================== */

static void out_of_memory(void) {
  fprintf(stderr, PROGRAM ": out of memory\n");
  exit(1);
}

static void *xmalloc(size_t size) {
  void *p = malloc(size ? size : 1);
  if (!p) out_of_memory();
  return p;
}

static void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) out_of_memory();
  return p;
}

static void *xrealloc(void *p, size_t size) {
  p = realloc(p, size ? size : 1);
  if (!p) out_of_memory();
  return p;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

typedef struct buf {
  char *data; /* always NUL-terminated once anything was added */
  size_t len, cap;
} buf_t;

static void buf_putn(buf_t *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void buf_puts(buf_t *b, const char *s) { buf_putn(b, s, strlen(s)); }

static void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    buf_putn(b, small, (size_t)n);
    return;
  }
  char *big = xmalloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_putn(b, big, (size_t)n);
  free(big);
}

/* The string built so far, handed over to the caller ("" for an empty buffer). */
static char *buf_take(buf_t *b) {
  char *s = b->data ? b->data : xstrdup("");
  b->data = NULL;
  b->len = b->cap = 0;
  return s;
}

/* "4.0 KiB" for 4096; exact bytes under 1 KiB. */
static void format_bytes(char *out, size_t size, double bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(out, size, "%.0f B", bytes);
  else
    snprintf(out, size, "%.1f %s", bytes, units[u]);
}

/* ==========================================================================================
 * The model: what the JSON says about the graph, checked.
 * ======================================================================================== */

typedef struct node {
  char *type;        /* "kernel", "memcpy"... as written (an unknown type is kept) */
  char *kernel_name; /* the name as the driver gave it, or NULL */
  char *pretty_name; /* demangled when that was easy, else a copy of kernel_name; or NULL */
  bool has_launch;   /* grid, block and shared_bytes were given */
  unsigned grid[3], block[3];
  double shared_bytes;
  double bytes;
  char *annotation; /* or NULL */
  char *annotation_path; /* every enclosing label, "outer/inner", or NULL (older files) */
  bool has_tools_id;
  double tools_id; /* JSON numbers are doubles: ids above 2^53 print rounded */
  size_t *deps;    /* indices of the nodes this one waits for */
  size_t dep_count;
  size_t *succ; /* the reverse of deps, built here (the file's "dependents" is only checked) */
  size_t succ_count;
  /* Layout (computed): layer = longest path from a root; slot = position within the layer. */
  size_t layer, slot;
} node_t;

typedef struct graph {
  node_t *nodes;
  size_t count;
  size_t edges;       /* sum of the dependency counts */
  size_t layer_count; /* 1 + the deepest layer (0 for an empty graph) */
  size_t widest;      /* nodes in the fullest layer */
  bool tools_ids_available;
} graph_t;

static void graph_free(graph_t *g) {
  for (size_t i = 0; i < g->count; i++) {
    node_t *n = &g->nodes[i];
    free(n->type);
    free(n->kernel_name);
    free(n->pretty_name);
    free(n->annotation);
    free(n->annotation_path);
    free(n->deps);
    free(n->succ);
  }
  free(g->nodes);
  memset(g, 0, sizeof *g);
}

/* ==========================================================================================
 * Errors while reading: one message, formatted where the problem is understood.
 * ======================================================================================== */

typedef struct error {
  char message[512];
} failure_t;

static bool fail(failure_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(failure_t *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return false;
}

/* ==========================================================================================
 * Demangling, when it is easy.
 *
 * Kernel names come from the driver mangled (Itanium C++ ABI) unless the kernel was declared
 * extern "C". This handles the common shapes of kernel signatures: plain and namespaced names
 * and parameters of builtin types, pointers, references, const or volatile, class types and
 * substitutions (S_, S0_...). Anything else (templates, function pointers, operators, clones,
 * restrict) gives up, and the raw name is shown: a wrong demangling would be worse than none.
 * ======================================================================================== */

#define DM_MAX_SUBS 64

typedef struct demangler {
  const char *p, *end;
  char *subs[DM_MAX_SUBS];
  int sub_count;
} demangler_t;

static void dm_add_sub(demangler_t *d, const char *s) {
  if (d->sub_count < DM_MAX_SUBS) d->subs[d->sub_count++] = xstrdup(s);
}

static bool dm_peek(const demangler_t *d, char c) { return d->p < d->end && *d->p == c; }

static bool dm_eat(demangler_t *d, char c) {
  if (!dm_peek(d, c)) return false;
  d->p++;
  return true;
}

static bool dm_is_digit(const demangler_t *d) {
  return d->p < d->end && *d->p >= '0' && *d->p <= '9';
}

/* <source-name> ::= <length> <identifier> */
static char *dm_source_name(demangler_t *d) {
  size_t len = 0;
  if (!dm_is_digit(d)) return NULL;
  while (dm_is_digit(d)) {
    len = len * 10 + (size_t)(*d->p++ - '0');
    if (len > 4096) return NULL;
  }
  if (len == 0 || (size_t)(d->end - d->p) < len) return NULL;
  const char *id = d->p;
  d->p += len;
  if (len >= 10 && strncmp(id, "_GLOBAL__N", 10) == 0) return xstrdup("(anonymous namespace)");
  char *s = xmalloc(len + 1);
  memcpy(s, id, len);
  s[len] = '\0';
  return s;
}

static char *dm_join(const char *a, const char *sep, const char *b) {
  buf_t out = {0};
  buf_puts(&out, a);
  buf_puts(&out, sep);
  buf_puts(&out, b);
  return buf_take(&out);
}

/* <substitution> ::= S_ | S <seq-id> _   (seq-id in base 36, upper case), and St <name>. */
static char *dm_substitution(demangler_t *d) {
  if (!dm_eat(d, 'S')) return NULL;
  if (dm_eat(d, '_')) return d->sub_count > 0 ? xstrdup(d->subs[0]) : NULL;
  size_t id = 0;
  bool any = false;
  while (d->p < d->end && *d->p != '_') {
    char c = *d->p++;
    if (c >= '0' && c <= '9')
      id = id * 36 + (size_t)(c - '0');
    else if (c >= 'A' && c <= 'Z')
      id = id * 36 + (size_t)(c - 'A' + 10);
    else
      return NULL; /* Sa, Ss, St... handled by the callers or not at all */
    any = true;
    if (id > DM_MAX_SUBS) return NULL;
  }
  if (!any || !dm_eat(d, '_')) return NULL;
  return id + 1 < (size_t)d->sub_count ? xstrdup(d->subs[id + 1]) : NULL;
}

/* <nested-name> ::= N <prefix> <unqualified-name> E. Each prefix is a substitution candidate;
 * the whole name is one too when it names a type, not when it names the function itself. */
static char *dm_nested_name(demangler_t *d, bool is_type) {
  if (!dm_eat(d, 'N')) return NULL;
  if (dm_peek(d, 'K') || dm_peek(d, 'V') || dm_peek(d, 'r')) return NULL; /* member functions */
  char *name = NULL;
  if (d->p + 1 < d->end && d->p[0] == 'S' && d->p[1] == 't') {
    d->p += 2;
    name = xstrdup("std");
  } else if (dm_peek(d, 'S')) {
    name = dm_substitution(d);
    if (!name) return NULL;
  }
  while (!dm_peek(d, 'E')) {
    char *part = dm_source_name(d);
    if (!part) {
      free(name);
      return NULL;
    }
    char *joined = name ? dm_join(name, "::", part) : xstrdup(part);
    free(part);
    free(name);
    name = joined;
    if (dm_peek(d, 'E') && !is_type) break;
    dm_add_sub(d, name);
  }
  if (!name || !dm_eat(d, 'E')) {
    free(name);
    return NULL;
  }
  return name;
}

static const char *dm_builtin(char c) {
  switch (c) {
    case 'v': return "void";
    case 'w': return "wchar_t";
    case 'b': return "bool";
    case 'c': return "char";
    case 'a': return "signed char";
    case 'h': return "unsigned char";
    case 's': return "short";
    case 't': return "unsigned short";
    case 'i': return "int";
    case 'j': return "unsigned int";
    case 'l': return "long";
    case 'm': return "unsigned long";
    case 'x': return "long long";
    case 'y': return "unsigned long long";
    case 'n': return "__int128";
    case 'o': return "unsigned __int128";
    case 'f': return "float";
    case 'd': return "double";
    case 'e': return "long double";
    case 'g': return "__float128";
    case 'z': return "...";
    default: return NULL;
  }
}

static char *dm_type(demangler_t *d);

/* A const or volatile type: the qualifier goes before a plain type ("const float") and after a
 * pointer or reference ("float* const"). Several qualifiers at once, and restrict, are rare in
 * kernel signatures and their substitutions are subtle: give up on them. */
static char *dm_qualified(demangler_t *d) {
  const char *quals = dm_eat(d, 'K') ? "const" : dm_eat(d, 'V') ? "volatile" : NULL;
  if (!quals || dm_peek(d, 'K') || dm_peek(d, 'V') || dm_peek(d, 'r')) return NULL;
  char *inner = dm_type(d);
  if (!inner) return NULL;
  size_t n = strlen(inner);
  bool suffix = n > 0 && (inner[n - 1] == '*' || inner[n - 1] == '&');
  char *result = suffix ? dm_join(inner, " ", quals) : dm_join(quals, " ", inner);
  free(inner);
  dm_add_sub(d, result);
  return result;
}

static char *dm_type(demangler_t *d) {
  if (d->p >= d->end) return NULL;
  char c = *d->p;
  const char *builtin = dm_builtin(c);
  if (builtin) {
    d->p++;
    return xstrdup(builtin);
  }
  if (c == 'D') {
    static const struct {
      const char *code, *name;
    } ext[] = {{"Dh", "half"},      {"Dn", "decltype(nullptr)"}, {"Di", "char32_t"},
               {"Ds", "char16_t"},  {"Du", "char8_t"},           {"DF16_", "_Float16"},
               {"DF32_", "_Float32"}, {"DF64_", "_Float64"}};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
      size_t n = strlen(ext[i].code);
      if ((size_t)(d->end - d->p) >= n && strncmp(d->p, ext[i].code, n) == 0) {
        d->p += n;
        return xstrdup(ext[i].name);
      }
    }
    return NULL;
  }
  if (c == 'P' || c == 'R' || c == 'O') {
    d->p++;
    if (dm_peek(d, 'F') || dm_peek(d, 'A') || dm_peek(d, 'M')) return NULL; /* declarators */
    char *inner = dm_type(d);
    if (!inner) return NULL;
    char *result = dm_join(inner, "", c == 'P' ? "*" : c == 'R' ? "&" : "&&");
    free(inner);
    dm_add_sub(d, result);
    return result;
  }
  if (c == 'V' || c == 'K') return dm_qualified(d);
  if (c >= '0' && c <= '9') {
    char *name = dm_source_name(d);
    if (!name || dm_peek(d, 'I')) {
      free(name);
      return NULL;
    }
    dm_add_sub(d, name);
    return name;
  }
  if (c == 'N') {
    char *name = dm_nested_name(d, true);
    if (name && dm_peek(d, 'I')) {
      free(name);
      return NULL;
    }
    return name;
  }
  if (c == 'S') {
    if (d->p + 1 < d->end && d->p[1] == 't') {
      d->p += 2;
      char *part = dm_source_name(d);
      if (!part) return NULL;
      char *name = dm_join("std", "::", part);
      free(part);
      dm_add_sub(d, name);
      return name;
    }
    return dm_substitution(d);
  }
  return NULL;
}

/* "add(float*, float*, int)" for "_Z3addPfS_i"; NULL when the name is not one this
 * demangler reads completely. */
static char *demangle(const char *mangled) {
  size_t len = strlen(mangled);
  if (len < 3 || strncmp(mangled, "_Z", 2) != 0) return NULL;
  demangler_t d = {.p = mangled + 2, .end = mangled + len};
  char *name = NULL, *result = NULL;
  buf_t out = {0};
  if (dm_peek(&d, 'N'))
    name = dm_nested_name(&d, false);
  else if (d.p + 1 < d.end && d.p[0] == 'S' && d.p[1] == 't') {
    d.p += 2;
    char *part = dm_source_name(&d);
    if (part) name = dm_join("std", "::", part);
    free(part);
  } else
    name = dm_source_name(&d);
  if (!name || dm_peek(&d, 'I') || d.p >= d.end) goto done; /* templates carry a return type */
  buf_puts(&out, name);
  buf_puts(&out, "(");
  if (d.end - d.p == 1 && *d.p == 'v') {
    d.p++;
  } else {
    for (bool first = true; d.p < d.end; first = false) {
      char *type = dm_type(&d);
      if (!type) goto done;
      if (!first) buf_puts(&out, ", ");
      buf_puts(&out, type);
      free(type);
    }
  }
  buf_puts(&out, ")");
  result = buf_take(&out);
done:
  free(out.data);
  free(name);
  for (int i = 0; i < d.sub_count; i++) free(d.subs[i]);
  return result;
}

/* ==========================================================================================
 * Reading the JSON
 * ======================================================================================== */

static char *read_all(FILE *f, size_t *length) {
  buf_t b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_putn(&b, chunk, n);
  *length = b.len;
  return ferror(f) ? (free(b.data), NULL) : buf_take(&b);
}

/* The whole file (or standard input for "-"), NUL-terminated. */
static char *read_file(const char *path, size_t *length, failure_t *err) {
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    fail(err, "cannot open: %s", strerror(errno));
    return NULL;
  }
  char *text = read_all(f, length);
  int saved = errno;
  if (!is_stdin) fclose(f);
  if (!text) fail(err, "cannot read: %s", strerror(saved));
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

/* A non-negative integer that a double holds exactly. */
static bool is_count(const cJSON *item) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  return v >= 0 && v <= 9007199254740992.0 && v == (double)(uint64_t)v;
}

/* Optional non-negative integer field: absent or null leaves *out alone and *present false. */
static bool read_count(const cJSON *obj, size_t index, const char *key, double *out,
                       bool *present, failure_t *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (present) *present = false;
  if (!item || cJSON_IsNull(item)) return true;
  if (!is_count(item))
    return fail(err, "node %zu: \"%s\" must be a non-negative integer", index, key);
  *out = item->valuedouble;
  if (present) *present = true;
  return true;
}

/* Optional string field: absent or null gives NULL. */
static bool read_string(const cJSON *obj, size_t index, const char *key, char **out,
                        failure_t *err) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!item || cJSON_IsNull(item)) return true;
  if (!cJSON_IsString(item))
    return fail(err, "node %zu: \"%s\" must be a string or null", index, key);
  *out = xstrdup(item->valuestring);
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

/* A required (or, with required false, optional) array of node indices below count. */
static bool read_indices(const cJSON *obj, size_t index, const char *key, bool required,
                         size_t count, size_t **items, size_t *item_count, failure_t *err) {
  const cJSON *array = cJSON_GetObjectItemCaseSensitive(obj, key);
  *items = NULL;
  *item_count = 0;
  if (!array)
    return required ? fail(err, "node %zu: the field \"%s\" is missing", index, key) : true;
  if (!cJSON_IsArray(array))
    return fail(err, "node %zu: \"%s\" must be an array of node indices", index, key);
  size_t n = (size_t)cJSON_GetArraySize(array), i = 0;
  *items = xcalloc(n, sizeof **items);
  const cJSON *v;
  cJSON_ArrayForEach(v, array) {
    if (!is_count(v))
      return fail(err, "node %zu: \"%s\"[%zu] must be a node index (a non-negative integer)",
                  index, key, i);
    if (v->valuedouble >= (double)count)
      return fail(err, "node %zu: \"%s\"[%zu] is %.0f, but the graph has %zu node%s", index, key,
                  i, v->valuedouble, count, count == 1 ? "" : "s");
    size_t target = (size_t)v->valuedouble;
    if (target == index) return fail(err, "node %zu: \"%s\" names the node itself", index, key);
    (*items)[i++] = target;
  }
  *item_count = n;
  return true;
}

static bool read_node(const cJSON *obj, size_t i, size_t count, node_t *n, failure_t *err) {
  if (!cJSON_IsObject(obj)) return fail(err, "node %zu: must be an object", i);
  const cJSON *index = cJSON_GetObjectItemCaseSensitive(obj, "index");
  if (!index) return fail(err, "node %zu: the field \"index\" is missing", i);
  if (!is_count(index) || index->valuedouble != (double)i)
    return fail(err,
                "node %zu: \"index\" must be %zu (nodes are listed in index order, from 0)", i, i);
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "type");
  if (!type) return fail(err, "node %zu: the field \"type\" is missing", i);
  if (!cJSON_IsString(type) || !type->valuestring[0])
    return fail(err, "node %zu: \"type\" must be a non-empty string (\"kernel\", \"memcpy\"...)",
                i);
  n->type = xstrdup(type->valuestring);

  if (!read_string(obj, i, "kernel_name", &n->kernel_name, err)) return false;
  if (n->kernel_name) {
    n->pretty_name = demangle(n->kernel_name);
    if (!n->pretty_name) n->pretty_name = xstrdup(n->kernel_name);
  }
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
   * take any non-negative number and show it as near as a double can. */
  const cJSON *tools_id = cJSON_GetObjectItemCaseSensitive(obj, "tools_id");
  if (tools_id && !cJSON_IsNull(tools_id)) {
    if (!cJSON_IsNumber(tools_id) || tools_id->valuedouble < 0)
      return fail(err, "node %zu: \"tools_id\" must be a non-negative integer or null", i);
    n->tools_id = tools_id->valuedouble;
    n->has_tools_id = true;
  }
  return read_indices(obj, i, "dependencies", true, count, &n->deps, &n->dep_count, err);
}

/* The file's "dependents" must be the reverse of the dependencies: a mismatch means the file
 * was edited or truncated, and the picture would lie. */
static bool check_dependents(const cJSON *nodes, graph_t *g, failure_t *err) {
  size_t i = 0;
  const cJSON *obj;
  cJSON_ArrayForEach(obj, nodes) {
    size_t *listed, listed_count;
    if (!read_indices(obj, i, "dependents", false, g->count, &listed, &listed_count, err))
      return (free(listed), false);
    bool ok = true;
    size_t bad = 0;
    for (size_t k = 0; k < listed_count && ok; k++) {
      const node_t *d = &g->nodes[listed[k]];
      ok = false;
      for (size_t m = 0; m < d->dep_count; m++) ok = ok || d->deps[m] == i;
      bad = listed[k];
    }
    free(listed);
    if (!ok)
      return fail(err,
                  "node %zu lists node %zu among its \"dependents\", but node %zu does not "
                  "depend on it",
                  i, bad, bad);
    i++;
  }
  return true;
}

/* Reverse edges, and the layered layout: a node's layer is the longest path to it from a root
 * (Kahn's topological order), which also finds cycles. */
static bool link_and_layer(graph_t *g, failure_t *err) {
  size_t *pending = xcalloc(g->count, sizeof *pending);
  for (size_t i = 0; i < g->count; i++) {
    node_t *n = &g->nodes[i];
    g->edges += n->dep_count;
    pending[i] = n->dep_count;
    for (size_t k = 0; k < n->dep_count; k++) g->nodes[n->deps[k]].succ_count++;
  }
  for (size_t i = 0; i < g->count; i++) {
    g->nodes[i].succ = xcalloc(g->nodes[i].succ_count, sizeof(size_t));
    g->nodes[i].succ_count = 0;
  }
  for (size_t i = 0; i < g->count; i++)
    for (size_t k = 0; k < g->nodes[i].dep_count; k++) {
      node_t *d = &g->nodes[g->nodes[i].deps[k]];
      d->succ[d->succ_count++] = i;
    }

  size_t *queue = xcalloc(g->count, sizeof *queue), head = 0, tail = 0;
  for (size_t i = 0; i < g->count; i++)
    if (pending[i] == 0) queue[tail++] = i;
  while (head < tail) {
    node_t *n = &g->nodes[queue[head++]];
    for (size_t k = 0; k < n->succ_count; k++) {
      node_t *s = &g->nodes[n->succ[k]];
      if (s->layer < n->layer + 1) s->layer = n->layer + 1;
      if (--pending[n->succ[k]] == 0) queue[tail++] = n->succ[k];
    }
    if (n->layer + 1 > g->layer_count) g->layer_count = n->layer + 1;
  }
  bool acyclic = tail == g->count;
  size_t stuck = 0;
  while (!acyclic && pending[stuck] == 0) stuck++;
  free(queue);
  free(pending);
  if (!acyclic)
    return fail(err, "the dependencies form a cycle (through node %zu); a CUDA graph has none",
                stuck);
  return true;
}

static int compare_key(const void *a, const void *b, const double *key) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  if (key[x] != key[y]) return key[x] < key[y] ? -1 : 1;
  return x < y ? -1 : x > y; /* ties keep the driver's order */
}

static const double *sort_key; /* qsort has no user data in C11 */
static int compare_by_key(const void *a, const void *b) { return compare_key(a, b, sort_key); }

/* Order within each layer: first by index, then two sweeps that place each node under the
 * mean position of what it waits for (the barycentre heuristic), which untangles most edges. */
static void order_layers(graph_t *g) {
  if (g->count == 0) return;
  size_t *layer_size = xcalloc(g->layer_count, sizeof *layer_size);
  size_t *start = xcalloc(g->layer_count + 1, sizeof *start);
  for (size_t i = 0; i < g->count; i++) layer_size[g->nodes[i].layer]++;
  for (size_t l = 0; l < g->layer_count; l++) {
    start[l + 1] = start[l] + layer_size[l];
    if (layer_size[l] > g->widest) g->widest = layer_size[l];
  }
  /* members[start[l] .. start[l+1]) are layer l's nodes, in slot order. */
  size_t *members = xcalloc(g->count, sizeof *members);
  size_t *fill = xcalloc(g->layer_count, sizeof *fill);
  for (size_t i = 0; i < g->count; i++) {
    size_t l = g->nodes[i].layer;
    g->nodes[i].slot = fill[l];
    members[start[l] + fill[l]++] = i;
  }
  double *key = xcalloc(g->count, sizeof *key);
  for (int sweep = 0; sweep < 2; sweep++) {
    for (size_t l = 1; l < g->layer_count; l++) {
      for (size_t k = start[l]; k < start[l + 1]; k++) {
        const node_t *n = &g->nodes[members[k]];
        double sum = 0;
        for (size_t d = 0; d < n->dep_count; d++) {
          const node_t *p = &g->nodes[n->deps[d]];
          /* Centred slots, so that layers of different widths compare. */
          sum += (double)p->slot - (double)(layer_size[p->layer] - 1) / 2.0;
        }
        key[members[k]] = sum / (double)n->dep_count;
      }
      sort_key = key;
      qsort(members + start[l], layer_size[l], sizeof *members, compare_by_key);
      for (size_t k = start[l]; k < start[l + 1]; k++) g->nodes[members[k]].slot = k - start[l];
    }
  }
  free(key);
  free(members);
  free(fill);
  free(start);
  free(layer_size);
}

/* Read and check the JSON at path into g. */
static bool load_graph(const char *path, graph_t *g, failure_t *err) {
  memset(g, 0, sizeof *g);
  size_t length;
  char *text = read_file(path, &length, err);
  if (!text) return false;
  if (strlen(text) != length) {
    free(text);
    return fail(err, "not JSON text (it holds a NUL byte)");
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, true);
  if (!root) {
    size_t line, column, offset = end ? (size_t)(end - text) : 0;
    if (!end && cJSON_GetErrorPtr()) offset = (size_t)(cJSON_GetErrorPtr() - text);
    position_of(text, offset, &line, &column);
    fail(err, "not valid JSON (parse error at line %zu, column %zu)", line, column);
    free(text);
    return false;
  }
  free(text);

  bool ok = false;
  if (!cJSON_IsObject(root)) {
    fail(err, "the top level must be an object with a \"nodes\" array "
              "(the JSON of recap_graph_info_json)");
    goto out;
  }
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  if (!nodes) {
    fail(err, "the field \"nodes\" is missing (is this the JSON of recap_graph_info_json?)");
    goto out;
  }
  if (!cJSON_IsArray(nodes)) {
    fail(err, "\"nodes\" must be an array");
    goto out;
  }
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools_ids_available");
  if (tools && !cJSON_IsBool(tools)) {
    fail(err, "\"tools_ids_available\" must be true or false");
    goto out;
  }
  g->tools_ids_available = tools && cJSON_IsTrue(tools);

  g->count = (size_t)cJSON_GetArraySize(nodes);
  g->nodes = xcalloc(g->count, sizeof *g->nodes);
  size_t i = 0;
  const cJSON *obj;
  cJSON_ArrayForEach(obj, nodes) {
    if (!read_node(obj, i, g->count, &g->nodes[i], err)) goto out;
    i++;
  }
  if (!check_dependents(nodes, g, err) || !link_and_layer(g, err)) goto out;

  const cJSON *edge_count = cJSON_GetObjectItemCaseSensitive(root, "edge_count");
  if (edge_count && !is_count(edge_count)) {
    fail(err, "\"edge_count\" must be a non-negative integer");
    goto out;
  }
  if (edge_count && edge_count->valuedouble != (double)g->edges)
    fprintf(stderr,
            PROGRAM ": warning: %s: \"edge_count\" is %.0f but the nodes list %zu dependencies; "
                    "drawing the dependencies\n",
            strcmp(path, "-") == 0 ? "(standard input)" : path, edge_count->valuedouble,
            g->edges);
  order_layers(g);
  ok = true;
out:
  cJSON_Delete(root);
  if (!ok) graph_free(g);
  return ok;
}

/* ==========================================================================================
 * Presentation shared by both emitters: colours, counts, one-line descriptions.
 * ======================================================================================== */

/* The library's node types, in its order (recap/inspect.h). */
static const char *const known_types[] = {
#define X_TYPE_NAME(name, text) text,
    RECAP_NODE_TYPE_MAP(X_TYPE_NAME)
#undef X_TYPE_NAME
};
#define KNOWN_TYPE_COUNT (sizeof known_types / sizeof known_types[0])

/* Fill colour per type; a type added to the library later is drawn grey until it gets one. */
static const char *const type_fill[RECAP_NODE_TYPE_COUNT] = {
    [RECAP_NODE_KERNEL] = "#9ecae1",       [RECAP_NODE_MEMCPY] = "#fdae6b",
    [RECAP_NODE_MEMSET] = "#fdd0a2",       [RECAP_NODE_HOST] = "#a1d99b",
    [RECAP_NODE_GRAPH] = "#bcbddc",        [RECAP_NODE_EMPTY] = "#f0f0f0",
    [RECAP_NODE_WAIT_EVENT] = "#fcbba1",   [RECAP_NODE_EVENT_RECORD] = "#fc9272",
    [RECAP_NODE_MEM_ALLOC] = "#c7e9c0",    [RECAP_NODE_MEM_FREE] = "#e5f5e0",
    [RECAP_NODE_CONDITIONAL] = "#dadaeb",  [RECAP_NODE_OTHER] = "#d9d9d9",
};

static const char *fill_of(const char *type) {
  for (size_t t = 0; t < KNOWN_TYPE_COUNT; t++)
    if (strcmp(type, known_types[t]) == 0 && type_fill[t]) return type_fill[t];
  return "#d9d9d9";
}

/* Distinct types in display order (the library's, then unknown ones as first met), with counts. */
typedef struct type_count {
  const char *type;
  size_t count;
} type_count_t;

static size_t count_types(const graph_t *g, type_count_t **out) {
  type_count_t *counts = xcalloc(KNOWN_TYPE_COUNT + g->count, sizeof *counts);
  size_t n = 0;
  for (size_t t = 0; t < KNOWN_TYPE_COUNT; t++) counts[n++].type = known_types[t];
  for (size_t i = 0; i < g->count; i++) {
    size_t t = 0;
    while (t < n && strcmp(counts[t].type, g->nodes[i].type) != 0) t++;
    if (t == n) counts[n++].type = g->nodes[i].type;
    counts[t].count++;
  }
  /* Keep only the types present. */
  size_t kept = 0;
  for (size_t t = 0; t < n; t++)
    if (counts[t].count) counts[kept++] = counts[t];
  *out = counts;
  return kept;
}

/* "grid 4x1x1, block 256x1x1, smem 1.0 KiB" for kernels ("grid 4x1x1 block 256x1x1" when
 * compact, to fit a box); "4.0 KiB" for copies and the like; "" otherwise. */
static void describe_shape(const node_t *n, bool compact, buf_t *out) {
  char size[32];
  if (n->has_launch) {
    buf_printf(out, "grid %ux%ux%u%s block %ux%ux%u", n->grid[0], n->grid[1], n->grid[2],
               compact ? "" : ",", n->block[0], n->block[1], n->block[2]);
    if (n->shared_bytes > 0 && !compact) {
      format_bytes(size, sizeof size, n->shared_bytes);
      buf_printf(out, ", smem %s", size);
    }
  } else if (n->bytes > 0) {
    format_bytes(size, sizeof size, n->bytes);
    buf_puts(out, size);
  }
}

/* The short name drawn in a box: the kernel's name without its parameter list, its leading
 * qualifiers dropped while it is too long ("(anonymous namespace)::scale" gives "scale"), cut
 * with an ellipsis if still too long; the node's type when it names no kernel. */
static char *short_name(const node_t *n, size_t max) {
  const char *name = n->pretty_name ? n->pretty_name : n->type;
  size_t len = strlen(name);
  if (n->pretty_name && strcmp(n->pretty_name, n->kernel_name) != 0 && len > 0 &&
      name[len - 1] == ')') {
    /* A demangled name: drop the parameter list, found from its closing parenthesis. */
    int depth = 0;
    size_t i = len;
    while (i-- > 0) {
      if (name[i] == ')') depth++;
      if (name[i] == '(' && --depth == 0) break;
    }
    if (depth == 0) len = i;
    /* Drop qualifiers outside parentheses while the name is too long. */
    while (len > max) {
      const char *sep = NULL;
      depth = 0;
      for (size_t k = 0; k + 1 < len && !sep; k++) {
        if (name[k] == '(') depth++;
        if (name[k] == ')') depth--;
        if (depth == 0 && name[k] == ':' && name[k + 1] == ':') sep = name + k + 2;
      }
      if (!sep) break;
      len -= (size_t)(sep - name);
      name = sep;
    }
  }
  buf_t out = {0};
  if (len > max) {
    /* Cut on a character boundary (names may hold UTF-8) and mark the cut. */
    size_t cut = max - 1;
    while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80) cut--;
    buf_putn(&out, name, cut);
    buf_puts(&out, "\xE2\x80\xA6"); /* "…" */
  } else {
    buf_putn(&out, name, len);
  }
  return buf_take(&out);
}

/* What a node's annotation shows as: the whole path of nested labels when the file gives it,
 * else the innermost label; NULL for none. Clusters stay per innermost label. */
static const char *shown_annotation(const node_t *n) {
  return n->annotation_path ? n->annotation_path : n->annotation;
}

/* Distinct annotation labels, in order of first use. */
static size_t collect_annotations(const graph_t *g, const char ***out) {
  const char **labels = xcalloc(g->count, sizeof *labels);
  size_t n = 0;
  for (size_t i = 0; i < g->count; i++) {
    const char *a = g->nodes[i].annotation;
    if (!a) continue;
    size_t k = 0;
    while (k < n && strcmp(labels[k], a) != 0) k++;
    if (k == n) labels[n++] = a;
  }
  *out = labels;
  return n;
}

/* ==========================================================================================
 * DOT
 * ======================================================================================== */

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

static void dot_node(FILE *out, const graph_t *g, size_t i, const char *indent) {
  const node_t *n = &g->nodes[i];
  buf_t label = {0};
  buf_printf(&label, "#%zu %s", i, n->type);
  if (n->pretty_name) buf_printf(&label, "\n%s", n->pretty_name);
  buf_t shape = {0};
  describe_shape(n, false, &shape);
  if (shape.len) buf_printf(&label, "\n%s", shape.data);
  if (n->annotation) buf_printf(&label, "\n[%s]", shown_annotation(n));
  if (n->has_tools_id) buf_printf(&label, "\ntools id %.0f", n->tools_id);

  fprintf(out, "%sn%zu [label=\"", indent, i);
  dot_escape(out, label.data);
  fprintf(out, "\", fillcolor=\"%s\"", fill_of(n->type));
  if (n->kernel_name) {
    fputs(", tooltip=\"", out);
    dot_escape(out, n->kernel_name);
    fputs("\"", out);
  }
  fputs("];\n", out);
  free(label.data);
  free(shape.data);
}

static void write_dot(FILE *out, const graph_t *g, const char *source) {
  fputs("// Written by recap-graph from ", out);
  for (const char *s = source; *s; s++) fputc(*s == '\n' ? ' ' : *s, out);
  fprintf(out, "\n// %zu nodes, %zu edges. Render with: dot -Tsvg this.dot -o graph.svg\n",
          g->count, g->edges);
  fputs("digraph recap_graph {\n"
        "  rankdir=TB;\n"
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [color=\"#555555\", arrowsize=0.7];\n",
        out);

  /* Nodes under one annotation label are drawn inside a cluster named by it. */
  const char **labels;
  size_t label_count = collect_annotations(g, &labels);
  for (size_t k = 0; k < label_count; k++) {
    fprintf(out, "  subgraph cluster_%zu {\n    label=\"", k);
    dot_escape(out, labels[k]);
    fputs("\";\n    style=\"dashed,rounded\";\n    color=\"#888888\";\n"
          "    fontname=\"Helvetica\";\n",
          out);
    for (size_t i = 0; i < g->count; i++)
      if (g->nodes[i].annotation && strcmp(g->nodes[i].annotation, labels[k]) == 0)
        dot_node(out, g, i, "    ");
    fputs("  }\n", out);
  }
  free(labels);
  for (size_t i = 0; i < g->count; i++)
    if (!g->nodes[i].annotation) dot_node(out, g, i, "  ");

  for (size_t i = 0; i < g->count; i++)
    for (size_t k = 0; k < g->nodes[i].dep_count; k++)
      fprintf(out, "  n%zu -> n%zu;\n", g->nodes[i].deps[k], i);

  /* A legend of the types present, as a plain table-shaped node off to the side. */
  type_count_t *counts;
  size_t type_count = count_types(g, &counts);
  if (type_count) {
    fputs("  legend [shape=plain, style=\"\", label=<<table border=\"0\" cellborder=\"1\" "
          "cellspacing=\"0\" cellpadding=\"4\">",
          out);
    for (size_t t = 0; t < type_count; t++) {
      fprintf(out, "<tr><td bgcolor=\"%s\">", fill_of(counts[t].type));
      /* Types are the library's words; escape anyway, this is HTML-like text. */
      for (const char *s = counts[t].type; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '&') fputs("&amp;", out);
        else if (*s == '"') fputs("&quot;", out);
        else fputc(*s, out);
      }
      fprintf(out, "</td><td>%zu</td></tr>", counts[t].count);
    }
    fputs("</table>>];\n", out);
  }
  free(counts);
  fputs("}\n", out);
}

/* ==========================================================================================
 * HTML
 * ======================================================================================== */

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

/* Geometry of the drawing, in SVG user units. */
enum {
  BOX_W = 190,
  BOX_H = 46,
  GAP_X = 24,
  GAP_Y = 58,
  MARGIN = 20,
  NAME_CHARS = 26
};

static double box_x(const graph_t *g, const node_t *n, size_t layer_size) {
  /* Each layer centred under the widest one. */
  double offset = (double)(g->widest - layer_size) * (BOX_W + GAP_X) / 2.0;
  return MARGIN + offset + (double)n->slot * (BOX_W + GAP_X);
}

static double box_y(const node_t *n) { return MARGIN + (double)n->layer * (BOX_H + GAP_Y); }

static void write_svg(FILE *out, const graph_t *g) {
  size_t *layer_size = xcalloc(g->layer_count ? g->layer_count : 1, sizeof *layer_size);
  for (size_t i = 0; i < g->count; i++) layer_size[g->nodes[i].layer]++;
  double width = 2.0 * MARGIN + (double)g->widest * (BOX_W + GAP_X) - (g->widest ? GAP_X : 0);
  double height = 2.0 * MARGIN + (double)g->layer_count * (BOX_H + GAP_Y) -
                  (g->layer_count ? GAP_Y : 0);
  fprintf(out,
          "<svg id=\"dag\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"graph of %zu nodes\">\n"
          "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
          "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">"
          "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#666\"/></marker></defs>\n",
          width, height, width, height, g->count);

  /* Edges first, so boxes are drawn over them. */
  fputs("<g class=\"edges\">\n", out);
  for (size_t i = 0; i < g->count; i++) {
    const node_t *to = &g->nodes[i];
    for (size_t k = 0; k < to->dep_count; k++) {
      const node_t *from = &g->nodes[to->deps[k]];
      double x1 = box_x(g, from, layer_size[from->layer]) + BOX_W / 2.0,
             y1 = box_y(from) + BOX_H;
      double x2 = box_x(g, to, layer_size[to->layer]) + BOX_W / 2.0, y2 = box_y(to);
      double bend = (y2 - y1) / 2.0;
      fprintf(out,
              "<path class=\"edge\" data-from=\"%zu\" data-to=\"%zu\" d=\"M%.1f,%.1f C%.1f,%.1f "
              "%.1f,%.1f %.1f,%.1f\" marker-end=\"url(#arrow)\"/>\n",
              to->deps[k], i, x1, y1, x1, y1 + bend, x2, y2 - bend, x2, y2);
    }
  }
  fputs("</g>\n<g class=\"nodes\">\n", out);
  for (size_t i = 0; i < g->count; i++) {
    const node_t *n = &g->nodes[i];
    double x = box_x(g, n, layer_size[n->layer]), y = box_y(n);
    char *name = short_name(n, NAME_CHARS);
    buf_t detail = {0};
    describe_shape(n, true, &detail);
    fprintf(out, "<g class=\"node\" id=\"node-%zu\" data-index=\"%zu\"><title>#%zu %s", i, i, i,
            n->type);
    if (n->pretty_name) {
      fputs("\n", out);
      html_escape(out, n->pretty_name);
    }
    if (n->kernel_name && strcmp(n->kernel_name, n->pretty_name) != 0) {
      fputs("\n", out);
      html_escape(out, n->kernel_name);
    }
    if (n->annotation) {
      fputs("\n[", out);
      html_escape(out, shown_annotation(n));
      fputs("]", out);
    }
    fprintf(out,
            "</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" rx=\"6\" "
            "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\" class=\"name\">",
            x, y, BOX_W, BOX_H, fill_of(n->type), x + BOX_W / 2.0, y + 19.0);
    html_escape(out, name);
    fprintf(out, "</text><text x=\"%.1f\" y=\"%.1f\" class=\"detail\">#%zu ", x + BOX_W / 2.0,
            y + 36.0, i);
    html_escape(out, detail.len ? detail.data : n->type);
    fputs("</text></g>\n", out);
    free(name);
    free(detail.data);
  }
  fputs("</g>\n</svg>\n", out);
  free(layer_size);
}

static const char html_style[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
    "margin:24px;color:#222;background:#fff}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}\n"
    ".summary{color:#555;margin:0}\n"
    "table{border-collapse:collapse}\n"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f4f4f4;cursor:pointer;user-select:none;white-space:nowrap}\n"
    "th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.name{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;"
    "word-break:break-all}\n"
    ".swatch{display:inline-block;width:12px;height:12px;border:1px solid #999;"
    "margin-right:6px;vertical-align:-1px}\n"
    ".svgwrap{overflow:auto;max-height:80vh;border:1px solid #ddd}\n"
    "svg .edge{fill:none;stroke:#888;stroke-width:1.3}\n"
    "svg .edge.hot{stroke:#d62728;stroke-width:2.5}\n"
    "svg .node{cursor:pointer}\n"
    "svg .node rect{stroke:#555;stroke-width:1}\n"
    "svg .node.selected rect{stroke:#d62728;stroke-width:3}\n"
    "svg text{font:12px system-ui,Helvetica,Arial,sans-serif;text-anchor:middle}\n"
    "svg text.detail{font-size:10px;fill:#444}\n"
    ".controls{margin-bottom:8px}.controls input{width:260px}\n"
    "#nodes tbody tr{cursor:pointer}#nodes tbody tr:hover{background:#f7f7ff}\n"
    "#nodes tbody tr.selected{background:#ffe9e9}\n";

/* Sorting by a column (numbers as numbers), filtering by text and type, and selecting a node
 * in the drawing or the table to find it in the other. */
static const char html_script[] =
    "(function(){\n"
    "var table=document.getElementById('nodes'),body=table.tBodies[0];\n"
    "var rows=Array.prototype.slice.call(body.rows);\n"
    "var filter=document.getElementById('filter'),type=document.getElementById('type');\n"
    "var shown=document.getElementById('shown');\n"
    "function value(row,i){var c=row.cells[i],v=c.getAttribute('data-v');"
    "return v===null?c.textContent:v;}\n"
    "function apply(){var q=filter.value.toLowerCase(),t=type.value,n=0;\n"
    "rows.forEach(function(r){var ok=(!t||r.getAttribute('data-type')===t)&&"
    "(!q||r.textContent.toLowerCase().indexOf(q)>=0);r.hidden=!ok;if(ok)n++;});\n"
    "shown.textContent=n+' of '+rows.length+' nodes shown';}\n"
    "filter.addEventListener('input',apply);type.addEventListener('change',apply);\n"
    "var heads=table.tHead.rows[0].cells,col=-1,dir=1;\n"
    "Array.prototype.forEach.call(heads,function(th,i){th.addEventListener('click',function(){\n"
    "dir=col===i?-dir:1;col=i;var num=th.getAttribute('data-kind')==='num';\n"
    "rows.sort(function(a,b){var x=value(a,i),y=value(b,i),r;\n"
    "if(num){x=parseFloat(x);y=parseFloat(y);if(isNaN(x))x=-1;if(isNaN(y))y=-1;r=x-y;}\n"
    "else r=x.localeCompare(y);\n"
    "return r*dir||(a.getAttribute('data-index')-b.getAttribute('data-index'));});\n"
    "rows.forEach(function(r){body.appendChild(r);});\n"
    "Array.prototype.forEach.call(heads,function(h){h.className='';});\n"
    "th.className=dir>0?'asc':'desc';});});\n"
    "var selected=null;\n"
    "function select(i,from){\n"
    "if(selected!==null){var o=document.getElementById('node-'+selected),"
    "r=document.getElementById('row-'+selected);if(o)o.classList.remove('selected');"
    "if(r)r.classList.remove('selected');}\n"
    "document.querySelectorAll('svg .edge').forEach(function(e){"
    "var hot=e.getAttribute('data-from')===i||e.getAttribute('data-to')===i;"
    "e.classList.toggle('hot',hot);});\n"
    "selected=i;var node=document.getElementById('node-'+i),\n"
    "row=document.getElementById('row-'+i);\n"
    "if(node)node.classList.add('selected');if(row)row.classList.add('selected');\n"
    "var target=from==='svg'?row:node;"
    "if(target&&target.scrollIntoView)target.scrollIntoView({block:'nearest',inline:'center'});}\n"
    "document.querySelectorAll('svg .node').forEach(function(n){n.addEventListener('click',"
    "function(){select(n.getAttribute('data-index'),'svg');});});\n"
    "rows.forEach(function(r){r.addEventListener('click',function(){"
    "select(r.getAttribute('data-index'),'table');});});\n"
    "apply();\n"
    "})();\n";

static void html_cell_text(FILE *out, const char *cls, const char *text) {
  fprintf(out, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
  html_escape(out, text);
  fputs("</td>", out);
}

static void html_cell_indices(FILE *out, const size_t *items, size_t count) {
  fprintf(out, "<td class=\"num\" data-v=\"%zu\">", count);
  for (size_t k = 0; k < count; k++) fprintf(out, "%s%zu", k ? ", " : "", items[k]);
  fputs("</td>", out);
}

static void write_node_row(FILE *out, const node_t *n, size_t i) {
  fprintf(out, "<tr id=\"row-%zu\" data-index=\"%zu\" data-type=\"", i, i);
  html_escape(out, n->type);
  fprintf(out, "\"><td class=\"num\">%zu</td>", i);
  fprintf(out, "<td><span class=\"swatch\" style=\"background:%s\"></span>", fill_of(n->type));
  html_escape(out, n->type);
  fputs("</td>", out);
  if (n->pretty_name) {
    fputs("<td class=\"name\" title=\"", out);
    html_escape(out, n->kernel_name);
    fputs("\">", out);
    html_escape(out, n->pretty_name);
    fputs("</td>", out);
  } else {
    fputs("<td class=\"name\"></td>", out);
  }
  if (n->has_launch) {
    fprintf(out, "<td data-v=\"%.0f\">%u\xC3\x97%u\xC3\x97%u</td>",
            (double)n->grid[0] * n->grid[1] * n->grid[2], n->grid[0], n->grid[1], n->grid[2]);
    fprintf(out, "<td data-v=\"%.0f\">%u\xC3\x97%u\xC3\x97%u</td>",
            (double)n->block[0] * n->block[1] * n->block[2], n->block[0], n->block[1], n->block[2]);
    fprintf(out, "<td class=\"num\">%.0f</td>", n->shared_bytes);
  } else {
    fputs("<td data-v=\"-1\"></td><td data-v=\"-1\"></td><td class=\"num\" data-v=\"-1\"></td>",
          out);
  }
  fprintf(out, "<td class=\"num\">%.0f</td>", n->bytes);
  html_cell_text(out, NULL, n->annotation ? shown_annotation(n) : "");
  html_cell_indices(out, n->deps, n->dep_count);
  html_cell_indices(out, n->succ, n->succ_count);
  if (n->has_tools_id)
    fprintf(out, "<td class=\"num\">%.0f</td>", n->tools_id);
  else
    fputs("<td class=\"num\" data-v=\"-1\"></td>", out);
  fputs("</tr>\n", out);
}

static void write_html(FILE *out, const graph_t *g, const char *source) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"generator\" content=\"recap-graph\">\n<title>recap graph: ",
        out);
  html_escape(out, source);
  fprintf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>recap graph</h1>\n",
          html_style);
  fputs("<p class=\"summary\">", out);
  html_escape(out, source);
  fprintf(out,
          ": <b>%zu</b> node%s, <b>%zu</b> edge%s, %zu layer%s; tools ids %savailable.</p>\n",
          g->count, g->count == 1 ? "" : "s", g->edges, g->edges == 1 ? "" : "s",
          g->layer_count, g->layer_count == 1 ? "" : "s", g->tools_ids_available ? "" : "not ");

  type_count_t *counts;
  size_t type_count = count_types(g, &counts);
  fputs("<h2>Node types</h2>\n<table id=\"counts\">\n<tr><th>type</th><th>nodes</th></tr>\n",
        out);
  for (size_t t = 0; t < type_count; t++) {
    fprintf(out, "<tr><td><span class=\"swatch\" style=\"background:%s\"></span>",
            fill_of(counts[t].type));
    html_escape(out, counts[t].type);
    fprintf(out, "</td><td class=\"num\">%zu</td></tr>\n", counts[t].count);
  }
  fputs("</table>\n", out);

  fputs("<h2>Graph</h2>\n<p class=\"summary\">Each row is a layer: a node sits one layer below "
        "the deepest node it waits for. Click a node to find it in the table.</p>\n"
        "<div class=\"svgwrap\">\n",
        out);
  write_svg(out, g);
  fputs("</div>\n", out);

  fputs("<h2>Nodes</h2>\n<div class=\"controls\"><input id=\"filter\" type=\"search\" "
        "placeholder=\"filter: name, annotation, index...\"> <select id=\"type\">"
        "<option value=\"\">all types</option>",
        out);
  for (size_t t = 0; t < type_count; t++) {
    fputs("<option value=\"", out);
    html_escape(out, counts[t].type);
    fputs("\">", out);
    html_escape(out, counts[t].type);
    fputs("</option>", out);
  }
  free(counts);
  fputs("</select> <span id=\"shown\"></span></div>\n"
        "<table id=\"nodes\">\n<thead><tr><th data-kind=\"num\">#</th><th>type</th>"
        "<th>kernel</th><th data-kind=\"num\">grid</th><th data-kind=\"num\">block</th>"
        "<th data-kind=\"num\">smem</th><th data-kind=\"num\">bytes</th><th>annotation</th>"
        "<th data-kind=\"num\">waits for</th><th data-kind=\"num\">waited on by</th>"
        "<th data-kind=\"num\">tools id</th></tr></thead>\n<tbody>\n",
        out);
  for (size_t i = 0; i < g->count; i++) write_node_row(out, &g->nodes[i], i);
  fprintf(out, "</tbody>\n</table>\n<script>\n%s</script>\n</body>\n</html>\n", html_script);
}

/* ==========================================================================================
 * Command line
 * ======================================================================================== */

static void usage(FILE *out) {
  fputs("usage: " PROGRAM " dot  INPUT.json OUTPUT.dot\n"
        "       " PROGRAM " html INPUT.json OUTPUT.html\n"
        "       " PROGRAM " --help\n"
        "\n"
        "Turns the JSON written by recap_graph_info_json() (a captured CUDA graph's nodes and\n"
        "edges) into a picture:\n"
        "  dot   Graphviz DOT: one box per node (type, kernel name, launch shape or bytes,\n"
        "        annotation), an edge per dependency, colour by node type, nodes under one\n"
        "        annotation label in a cluster. Render with: dot -Tsvg OUTPUT.dot -o graph.svg\n"
        "  html  one self-contained HTML page (no network access): counts per node type, a\n"
        "        layered drawing of the graph, and a table of the nodes to sort and filter.\n"
        "INPUT may be - for standard input and OUTPUT - for standard output.\n"
        "\n"
        "Exit status: 0 on success; 1 when the input cannot be read or is not a recap graph,\n"
        "or the output cannot be written; 2 for a bad command line.\n",
        out);
}

typedef void (*emitter_fn)(FILE *out, const graph_t *g, const char *source);

/* Write with emit into path ("-": standard output). A failed write removes the partial file. */
static bool write_output(const char *path, emitter_fn emit, const graph_t *g, const char *source,
                         failure_t *err) {
  bool is_stdout = strcmp(path, "-") == 0;
  FILE *out = is_stdout ? stdout : fopen(path, "wb");
  if (!out) return fail(err, "cannot open for writing: %s", strerror(errno));
  emit(out, g, source);
  bool failed = ferror(out) != 0;
  int saved = errno;
  if (is_stdout) {
    failed = fflush(out) != 0 || failed;
  } else {
    failed = fclose(out) != 0 || failed;
    if (failed) remove(path);
  }
  if (failed) return fail(err, "cannot write: %s", strerror(saved ? saved : errno));
  return true;
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc != 4) {
    usage(stderr);
    return 2;
  }
  emitter_fn emit;
  if (strcmp(argv[1], "dot") == 0) {
    emit = write_dot;
  } else if (strcmp(argv[1], "html") == 0) {
    emit = write_html;
  } else {
    fprintf(stderr, PROGRAM ": unknown format '%s' (dot or html)\n", argv[1]);
    usage(stderr);
    return 2;
  }
  const char *input = argv[2], *output = argv[3];
  const char *source = strcmp(input, "-") == 0 ? "(standard input)" : input;

  graph_t g;
  failure_t err;
  if (!load_graph(input, &g, &err)) {
    fprintf(stderr, PROGRAM ": %s: %s\n", source, err.message);
    return 1;
  }
  bool ok = write_output(output, emit, &g, source, &err);
  if (!ok) fprintf(stderr, PROGRAM ": %s: %s\n", output, err.message);
  graph_free(&g);
  return ok ? 0 : 1;
}
