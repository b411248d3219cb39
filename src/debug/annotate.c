/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * annotate.c — labels for the nodes of a capture (recap/annotate.h).
 *
 * How: a push or pop on a stream capturing into a recap graph asks the device for the nodes
 * the capture holds so far (cudaStreamGetCaptureInfo's graph_out, then cudaGraphGetNodes) and
 * gives every node not seen before the label of the scope that was innermost until then. When
 * the capture ends, the template's nodes are read once more: those captured after the last
 * push or pop get the label of the scopes still open (normally none). Each graph keeps the map
 * node handle -> scope in a graph hook's context; the hook's inspect and dump callbacks read it.
 *
 * The nodes of a capture and of the template that cudaStreamEndCapture hands back are the same
 * objects: graph_out is the graph being built, and ending the capture hands that very graph to
 * the caller (CUDA documents that graph_out "is transferred or destroyed at
 * cudaStreamEndCapture"). Nodes are matched by handle. Should a driver ever hand back other
 * handles, no handle of the template is known at capture end: the map then switches to the
 * position of each node in the node list, which is the order in which the capture recorded
 * them. CUDA 13.0 has no node ids to match on (cudaGraphNodeGetId is not in its headers), and
 * no tools ids (cudaGraphNodeGetToolsId comes with 13.1), so none are invented.
 *
 * Cost: nothing while annotations are disabled (one atomic load) or no capture is under way
 * (a second one); during a capture, each push and pop lists the capture's nodes, O(nodes).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "core/text.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "recap/annotate.h"

/* ------------------------------------------------------------------------------------------
 * The switch
 * ---------------------------------------------------------------------------------------- */

/* RECAP_ANNOTATIONS, which code overrides (core/env.h). */
void recap_annotations_enable(int enabled) {
  recap__env_set(RECAP__ENV_ANNOTATIONS, enabled < 0 ? -1 : enabled != 0);
}

int recap_annotations_enabled(void) { return recap__env_int(RECAP__ENV_ANNOTATIONS); }

/* ------------------------------------------------------------------------------------------
 * The state of one graph: scopes, the open stack, and node handle -> scope
 * ---------------------------------------------------------------------------------------- */

typedef struct scope {
  char *label; /* as pushed */
  char *path;  /* every enclosing label, outermost first, joined by '/' */
} scope_t;

typedef struct open_scope {
  size_t scope;
  recap_stream_t stream; /* the stream it was pushed on: the pop must come on it */
} open_scope_t;

/* A node seen in the capture. */
typedef struct node_slot {
  recap__graph_node_t node; /* NULL: empty slot */
  size_t scope;             /* 1 + index into scopes; 0: captured outside every scope */
  size_t position;          /* its index in the node list when it was first seen */
} node_slot_t;

typedef struct annotations {
  pthread_mutex_t lock;
  scope_t *scopes;
  size_t scope_count, scope_capacity;
  open_scope_t stack[RECAP_ANNOTATION_MAX_DEPTH];
  size_t depth;
  node_slot_t *slots; /* open addressing, capacity a power of two, at most half full */
  size_t slot_capacity, node_count;
  size_t labelled;  /* nodes with a scope */
  bool by_position; /* the template's handles were not the capture's (see the top) */
} annotations_t;

static size_t hash_node(recap__graph_node_t node, size_t capacity) {
  uint64_t x = (uint64_t)(uintptr_t)node;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (capacity - 1);
}

static node_slot_t *slot_find(const annotations_t *a, recap__graph_node_t node) {
  if (!a->slot_capacity || !node) return NULL;
  for (size_t i = hash_node(node, a->slot_capacity);; i = (i + 1) & (a->slot_capacity - 1)) {
    if (!a->slots[i].node) return NULL;
    if (a->slots[i].node == node) return &a->slots[i];
  }
}

static bool slots_grow(annotations_t *a, size_t needed) {
  if ((needed + 1) * 2 <= a->slot_capacity) return true;
  size_t capacity = a->slot_capacity ? a->slot_capacity : 64;
  while ((needed + 1) * 2 > capacity) capacity *= 2;
  node_slot_t *slots = recap__host_calloc(capacity, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < a->slot_capacity; i++) {
    if (!a->slots[i].node) continue;
    size_t k = hash_node(a->slots[i].node, capacity);
    while (slots[k].node) k = (k + 1) & (capacity - 1);
    slots[k] = a->slots[i];
  }
  recap__host_free(a->slots);
  a->slots = slots;
  a->slot_capacity = capacity;
  return true;
}

static size_t current_scope(const annotations_t *a) {
  return a->depth ? a->stack[a->depth - 1].scope + 1 : 0;
}

/* Give every node of the list not seen before the innermost open scope. Lock held. */
static recap_status_t take_nodes(annotations_t *a, const recap__graph_node_t *nodes, size_t n) {
  if (!slots_grow(a, a->node_count + n))
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "annotations: out of host memory");
  size_t scope = current_scope(a);
  for (size_t i = 0; i < n; i++) {
    if (!nodes[i] || slot_find(a, nodes[i])) continue;
    size_t k = hash_node(nodes[i], a->slot_capacity);
    while (a->slots[k].node) k = (k + 1) & (a->slot_capacity - 1);
    a->slots[k] = (node_slot_t){nodes[i], scope, i};
    a->node_count++;
    if (scope) a->labelled++;
  }
  return RECAP_SUCCESS;
}

/* The capture's nodes so far, taken in. Lock held. */
static recap_status_t take_capture_nodes(annotations_t *a, recap_stream_t stream) {
  recap_cuda_graph_t building = NULL;
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  RECAP__CHECK(recap__device()->capture_nodes(stream, &building, &nodes, &n));
  recap_status_t s = take_nodes(a, nodes, n);
  recap__host_free(nodes);
  return s;
}

static void annotations_free(annotations_t *a) {
  for (size_t i = 0; i < a->scope_count; i++) {
    recap__host_free(a->scopes[i].label);
    recap__host_free(a->scopes[i].path);
  }
  recap__host_free(a->scopes);
  recap__host_free(a->slots);
  pthread_mutex_destroy(&a->lock);
  recap__host_free(a);
}

/* ------------------------------------------------------------------------------------------
 * Graph hooks
 * ---------------------------------------------------------------------------------------- */

static void hook_release(void *ctx, recap_graph_t graph) {
  (void)graph;
  annotations_free(ctx);
}

/* The capture succeeded: take in the nodes captured since the last push or pop, close the
 * scopes left open. */
static recap_status_t hook_captured(void *ctx, recap_graph_t graph, recap__captured_t *captured) {
  (void)graph;
  recap_cuda_graph_t template_graph = captured->template_graph;
  annotations_t *a = ctx;
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  /* Labels are a debug aid: a failure to read them costs the labels, never the capture. */
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_status_t s = recap__device()->graph_nodes(template_graph, &nodes, &n);
  pthread_mutex_lock(&a->lock);
  if (s == RECAP_SUCCESS) {
    size_t known = 0;
    for (size_t i = 0; i < n; i++) known += slot_find(a, nodes[i]) != NULL;
    if (known == 0 && a->node_count > 0) {
      /* Other handles than the capture's: match by position from now on. The nodes past those
       * seen are the ones captured after the last push or pop. */
      a->by_position = true;
      size_t seen = a->node_count;
      if (n > seen) s = take_nodes(a, nodes + seen, n - seen);
      /* take_nodes counted the tail's positions from 0: move them into place. */
      for (size_t i = seen; s == RECAP_SUCCESS && i < n; i++) {
        node_slot_t *slot = slot_find(a, nodes[i]);
        if (slot) slot->position = i;
      }
    } else {
      s = take_nodes(a, nodes, n);
    }
  }
  /* Warned after the lock is released: a log callback may call back into recap. */
  size_t left_open = a->depth;
  char innermost[256] = "";
  if (left_open)
    snprintf(innermost, sizeof innermost, "%s", a->scopes[a->stack[a->depth - 1].scope].path);
  a->depth = 0;
  pthread_mutex_unlock(&a->lock);
  recap__host_free(nodes);
  if (left_open)
    RECAP__WARN(
        "annotations: %zu scope%s still open when the capture ended (innermost \"%s\"); "
        "closed now. Pop every scope you push",
        left_open, left_open == 1 ? " was" : "s were", innermost);
  if (s != RECAP_SUCCESS)
    RECAP__WARN("annotations: the labels of the nodes captured last are lost: %s",
                recap_last_error());
  recap__error_restore(&saved);
  return RECAP_SUCCESS;
}

/* The readers, below: inspection and the DOT dump. */
static recap_status_t hook_inspect(void *ctx, recap_graph_t graph, recap_graph_info_t *info);
static recap_status_t hook_dump(void *ctx, recap_graph_t graph, const char *path);

static const recap__graph_hooks_t annotate_hooks = {
    .release = hook_release,
    .captured = hook_captured,
    .inspect = hook_inspect,
    .dump = hook_dump,
};

/* Attaching is serialised so that two streams of one capture pushing at once attach once. */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static recap_status_t state_of(recap_graph_t graph, bool attach, annotations_t **out) {
  *out = recap__graph_hook_ctx(graph, &annotate_hooks);
  if (*out || !attach) return RECAP_SUCCESS;
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&attach_lock);
  *out = recap__graph_hook_ctx(graph, &annotate_hooks);
  if (!*out) {
    annotations_t *a = recap__host_calloc(1, sizeof *a);
    if (!a) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_annotate_push: out of host memory");
    } else {
      pthread_mutex_init(&a->lock, NULL);
      s = recap__graph_add_hook(graph, &annotate_hooks, a);
      if (s == RECAP_SUCCESS)
        *out = a;
      else
        annotations_free(a);
    }
  }
  pthread_mutex_unlock(&attach_lock);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Push and pop
 * ---------------------------------------------------------------------------------------- */

recap_status_t recap_annotate_push(const char *label, recap_stream_t stream) {
  RECAP__ARG(label != NULL, "recap_annotate_push: label is NULL");
  size_t length = strnlen(label, RECAP_ANNOTATION_MAX_LENGTH + 1);
  RECAP__ARG(length > 0, "recap_annotate_push: the label is empty");
  RECAP__ARG(length <= RECAP_ANNOTATION_MAX_LENGTH,
             "recap_annotate_push: the label \"%.40s...\" is longer than "
             "RECAP_ANNOTATION_MAX_LENGTH (%d bytes)",
             label, RECAP_ANNOTATION_MAX_LENGTH);
  if (!recap_annotations_enabled()) return RECAP_SUCCESS;
  recap_graph_t graph;
  RECAP__CHECK(recap__registry_find_stream(stream, &graph));
  if (!graph) return RECAP_SUCCESS;
  annotations_t *a;
  RECAP__CHECK(state_of(graph, true, &a));

  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&a->lock);
  if (a->depth == RECAP_ANNOTATION_MAX_DEPTH) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "recap_annotate_push(\"%s\"): %d annotation scopes are open already "
                     "(RECAP_ANNOTATION_MAX_DEPTH), innermost \"%.200s\"; pop some first",
                     label, RECAP_ANNOTATION_MAX_DEPTH,
                     a->scopes[a->stack[a->depth - 1].scope].path);
    goto out;
  }
  if (a->scope_count == a->scope_capacity) {
    size_t capacity = a->scope_capacity ? a->scope_capacity * 2 : 16;
    scope_t *grown = recap__host_realloc(a->scopes, capacity * sizeof *grown);
    if (!grown) {
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_annotate_push: out of host memory");
      goto out;
    }
    a->scopes = grown;
    a->scope_capacity = capacity;
  }
  /* The nodes captured so far belong to the scopes open until now. */
  RECAP__CHECK_GOTO(take_capture_nodes(a, stream), s, out);
  const char *parent = a->depth ? a->scopes[a->stack[a->depth - 1].scope].path : NULL;
  size_t parent_length = parent ? strlen(parent) : 0;
  scope_t scope = {recap__copy_text(label, length), recap__host_malloc(parent_length + length + 2)};
  if (!scope.label || !scope.path) {
    recap__host_free(scope.label);
    recap__host_free(scope.path);
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_annotate_push: out of host memory");
    goto out;
  }
  if (parent)
    snprintf(scope.path, parent_length + length + 2, "%s/%s", parent, scope.label);
  else
    memcpy(scope.path, scope.label, length + 1);
  a->scopes[a->scope_count] = scope;
  a->stack[a->depth++] = (open_scope_t){a->scope_count, stream};
  a->scope_count++;
out:
  pthread_mutex_unlock(&a->lock);
  return s;
}

recap_status_t recap_annotate_pop(recap_stream_t stream) {
  if (!recap_annotations_enabled()) return RECAP_SUCCESS;
  recap_graph_t graph;
  RECAP__CHECK(recap__registry_find_stream(stream, &graph));
  if (!graph) return RECAP_SUCCESS;
  annotations_t *a;
  RECAP__CHECK(state_of(graph, false, &a));
  if (!a)
    return recap__error(RECAP_ERROR_INVALID_USAGE,
                        "recap_annotate_pop: no annotation scope is open in this capture (a pop "
                        "without its push, or a push made while annotations were disabled)");
  recap_status_t s = RECAP_SUCCESS;
  pthread_mutex_lock(&a->lock);
  if (a->depth == 0) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "recap_annotate_pop: no annotation scope is open in this capture (every "
                     "push was popped already)");
    goto out;
  }
  const open_scope_t *top = &a->stack[a->depth - 1];
  if (top->stream != stream) {
    s = recap__error(RECAP_ERROR_INVALID_USAGE,
                     "recap_annotate_pop(stream %p): the innermost scope \"%.200s\" was pushed on "
                     "stream %p; pop it on that stream (nothing was popped)",
                     (void *)stream, a->scopes[top->scope].path, (void *)top->stream);
    goto out;
  }
  /* The nodes captured since the last push or pop belong to the scope closing now. */
  RECAP__CHECK_GOTO(take_capture_nodes(a, stream), s, out);
  a->depth--;
out:
  pthread_mutex_unlock(&a->lock);
  return s;
}

/* ------------------------------------------------------------------------------------------
 * Readers: inspection and the DOT dump
 * ---------------------------------------------------------------------------------------- */

/* For each node of the template's list, the scope it belongs to (0: none), in a malloc'ed
 * array; *labelled is false when no node has one. Lock held. */
static recap_status_t scopes_of(const annotations_t *a, const recap__graph_node_t *nodes, size_t n,
                                size_t **out) {
  *out = recap__host_calloc(n ? n : 1, sizeof **out);
  if (!*out) return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "annotations: out of host memory");
  if (a->by_position) {
    for (size_t i = 0; i < a->slot_capacity; i++)
      if (a->slots[i].node && a->slots[i].position < n)
        (*out)[a->slots[i].position] = a->slots[i].scope;
  } else {
    for (size_t i = 0; i < n; i++) {
      const node_slot_t *slot = slot_find(a, nodes[i]);
      if (slot) (*out)[i] = slot->scope;
    }
  }
  return RECAP_SUCCESS;
}

/* A labelled node's handle and index, sorted by handle for the DOT rewrite. */
typedef struct handle_index {
  uintptr_t handle;
  size_t index;
} handle_index_t;

/* The template's nodes and their scopes, or *a NULL when the graph has no labels. */
typedef struct labels {
  annotations_t *a;
  recap__graph_node_t *nodes;
  size_t *scopes;
  size_t count;
  handle_index_t *sorted; /* the labelled ones (labels_sort) */
  size_t sorted_count;
} labels_t;

static recap_status_t labels_get(annotations_t *a, recap_graph_t graph, labels_t *l) {
  memset(l, 0, sizeof *l);
  if (!graph->template_graph) return RECAP_SUCCESS;
  pthread_mutex_lock(&a->lock);
  bool any = a->labelled > 0;
  pthread_mutex_unlock(&a->lock);
  if (!any) return RECAP_SUCCESS;
  RECAP__CHECK(recap__device()->graph_nodes(graph->template_graph, &l->nodes, &l->count));
  pthread_mutex_lock(&a->lock);
  recap_status_t s = scopes_of(a, l->nodes, l->count, &l->scopes);
  pthread_mutex_unlock(&a->lock);
  if (s != RECAP_SUCCESS) {
    recap__host_free(l->nodes);
    l->nodes = NULL;
    return s;
  }
  l->a = a;
  return RECAP_SUCCESS;
}

static void labels_free(labels_t *l) {
  recap__host_free(l->nodes);
  recap__host_free(l->scopes);
  recap__host_free(l->sorted);
}

static int compare_handles(const void *x, const void *y) {
  uintptr_t a = ((const handle_index_t *)x)->handle, b = ((const handle_index_t *)y)->handle;
  return (a > b) - (a < b);
}

static bool labels_sort(labels_t *l) {
  l->sorted = recap__host_malloc((l->count ? l->count : 1) * sizeof *l->sorted);
  if (!l->sorted) return false;
  for (size_t i = 0; i < l->count; i++)
    if (l->scopes[i]) l->sorted[l->sorted_count++] = (handle_index_t){(uintptr_t)l->nodes[i], i};
  qsort(l->sorted, l->sorted_count, sizeof *l->sorted, compare_handles);
  return true;
}

static recap_status_t hook_inspect(void *ctx, recap_graph_t graph, recap_graph_info_t *info) {
  labels_t l;
  RECAP__CHECK(labels_get(ctx, graph, &l));
  if (!l.a) return RECAP_SUCCESS;
  recap_status_t s = RECAP_SUCCESS;
  size_t n = l.count < info->node_count ? l.count : info->node_count;
  /* Scopes only grow, and not after the capture: reading them unlocked is safe here. */
  for (size_t i = 0; i < n && s == RECAP_SUCCESS; i++) {
    if (!l.scopes[i]) continue;
    const scope_t *scope = &l.a->scopes[l.scopes[i] - 1];
    recap_graph_node_t *node = &info->nodes[i];
    if (!(node->annotation = recap__copy_string(scope->label)) ||
        !(node->annotation_path = recap__copy_string(scope->path)))
      s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_inspect: out of host memory");
  }
  labels_free(&l);
  return s;
}

/* A DOT quoted string's contents: quotes and backslashes escaped, control characters dropped. */
static void dot_text(FILE *out, const char *text) {
  for (; *text; text++) {
    if (*text == '"' || *text == '\\') fputc('\\', out);
    if ((unsigned char)*text >= 0x20) fputc(*text, out);
  }
}

/* Comment text: no line breaks. */
static void comment_text(FILE *out, const char *text) {
  for (; *text; text++) fputc((unsigned char)*text >= 0x20 ? *text : ' ', out);
}

/* The labelled node (index into l) whose handle is the hexadecimal number at text[0..len),
 * or SIZE_MAX. */
static size_t labelled_node_of(const labels_t *l, const char *text, size_t len) {
  char digits[24];
  if (len < 3 || len - 2 >= sizeof digits) return SIZE_MAX;
  memcpy(digits, text + 2, len - 2);
  digits[len - 2] = '\0';
  handle_index_t key = {(uintptr_t)strtoull(digits, NULL, 16), 0};
  if (!key.handle) return SIZE_MAX;
  const handle_index_t *hit =
      bsearch(&key, l->sorted, l->sorted_count, sizeof *l->sorted, compare_handles);
  return hit ? hit->index : SIZE_MAX;
}

static bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_id_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == '.';
}

/* The end of the bracketed attribute list that starts at text[at] == '[', quotes respected;
 * len when unterminated. */
static size_t attr_list_end(const char *text, size_t len, size_t at) {
  bool quoted = false;
  for (size_t i = at + 1; i < len; i++) {
    if (quoted) {
      if (text[i] == '\\')
        i++;
      else if (text[i] == '"')
        quoted = false;
    } else if (text[i] == '"') {
      quoted = true;
    } else if (text[i] == ']') {
      return i;
    }
  }
  return len;
}

/* The labelled node named by a handle inside text[from, to), or SIZE_MAX. */
static size_t labelled_node_in(const labels_t *l, const char *text, size_t from, size_t to) {
  for (size_t i = from; i + 2 < to; i++) {
    if (text[i] != '0' || (text[i + 1] != 'x' && text[i + 1] != 'X')) continue;
    if (i > from && is_hex(text[i - 1])) continue;
    size_t end = i + 2;
    while (end < to && is_hex(text[end])) end++;
    size_t node = labelled_node_of(l, text + i, end - i);
    if (node != SIZE_MAX) return node;
    i = end - 1;
  }
  return SIZE_MAX;
}

/* Rewrite text into out: each node statement whose attributes show the handle of a labelled
 * node (the driver's verbose dump prints "node handle | 0x..."; the fake's too) gets
 * recap_annotation, tooltip and xlabel attributes; a comment block before the final brace lists
 * every labelled node. Returns how many statements were annotated. */
static size_t rewrite_dot(FILE *out, const char *text, size_t len, const labels_t *l) {
  size_t annotated = 0, copied = 0;
  size_t close = len; /* the graph's final closing brace */
  while (close > 0 && text[close - 1] != '}') close--;
  close = close ? close - 1 : len;
  bool line_start = true;
  for (size_t i = 0; i < close; i++) {
    char c = text[i];
    if (c == '\n') {
      line_start = true;
      continue;
    }
    if (!line_start || c == ' ' || c == '\t') continue;
    line_start = false;
    /* A statement's first token: a quoted id or a plain one, then '[' for a node statement. */
    size_t end = i;
    if (c == '"') {
      for (end = i + 1; end < close && text[end] != '"'; end++)
        if (text[end] == '\\') end++;
      end++;
    } else {
      while (end < close && is_id_char(text[end])) end++;
    }
    if (end == i || end > close) continue;
    size_t bracket = end;
    while (bracket < close && (text[bracket] == ' ' || text[bracket] == '\t')) bracket++;
    if (bracket >= close || text[bracket] != '[') continue;
    size_t stop = attr_list_end(text, close, bracket);
    size_t node = labelled_node_in(l, text, bracket, stop);
    if (node != SIZE_MAX) {
      const scope_t *scope = &l->a->scopes[l->scopes[node] - 1];
      fwrite(text + copied, 1, bracket + 1 - copied, out);
      fputs("recap_annotation=\"", out);
      dot_text(out, scope->path);
      fputs("\" tooltip=\"", out);
      dot_text(out, scope->path);
      fputs("\" xlabel=\"", out);
      dot_text(out, scope->label);
      fputs("\" ", out);
      copied = bracket + 1;
      annotated++;
    }
    i = stop < close ? stop : close - 1;
  }
  fwrite(text + copied, 1, close - copied, out);
  fputs("// recap annotations (node index in recap_graph_inspect's order, node handle, path)\n",
        out);
  for (size_t i = 0; i < l->count; i++) {
    if (!l->scopes[i]) continue;
    fprintf(out, "// recap annotation: node %zu, handle 0x%016llX: ", i,
            (unsigned long long)(uintptr_t)l->nodes[i]);
    comment_text(out, l->a->scopes[l->scopes[i] - 1].path);
    fputc('\n', out);
  }
  fwrite(text + close, 1, len - close, out);
  return annotated;
}

static recap_status_t hook_dump(void *ctx, recap_graph_t graph, const char *path) {
  labels_t l;
  RECAP__CHECK(labels_get(ctx, graph, &l));
  if (!l.a) return RECAP_SUCCESS;
  recap_status_t s = RECAP_SUCCESS;
  char *text = NULL;
  if (!labels_sort(&l)) {
    labels_free(&l);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_debug_dump: out of host memory");
  }
  FILE *in = fopen(path, "rb");
  if (!in) {
    s = recap__error(RECAP_ERROR_IO,
                     "recap_graph_debug_dump: cannot read back \"%s\" to add "
                     "the annotations",
                     path);
    goto done;
  }
  size_t len = 0, cap = 0, got;
  do {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      char *grown = recap__host_realloc(text, cap);
      if (!grown) {
        fclose(in);
        s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_graph_debug_dump: out of host memory");
        goto done;
      }
      text = grown;
    }
    got = fread(text + len, 1, cap - len, in);
    len += got;
  } while (got > 0);
  bool read_failed = ferror(in) != 0;
  fclose(in);
  if (read_failed) {
    s = recap__error(RECAP_ERROR_IO, "recap_graph_debug_dump: reading back \"%s\" failed", path);
    goto done;
  }
  FILE *out = fopen(path, "wb");
  if (!out) {
    s = recap__error(RECAP_ERROR_IO, "recap_graph_debug_dump: cannot rewrite \"%s\"", path);
    goto done;
  }
  size_t annotated = rewrite_dot(out, text, len, &l);
  if (ferror(out) | (fclose(out) != 0))
    s = recap__error(RECAP_ERROR_IO, "recap_graph_debug_dump: writing \"%s\" failed", path);
  else if (annotated == 0)
    RECAP__INFO(
        "recap_graph_debug_dump: no node statement of the driver's dump showed a node "
        "handle; the annotations are in the comment block at its end only");
done:
  recap__host_free(text);
  labels_free(&l);
  return s;
}
