/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * set_sizes.c — a graph set's sizes: the options' list or rule checked and turned into an
 * ascending list, the order in which the members are captured (the priority), and the bucket
 * lookups of every call (binary search over the ascending list).
 *
 * Every refusal names the field that is wrong, as the caller wrote it (options.sizes[3]), so
 * that a list built by a program can be fixed from the message alone.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "set/set_internal.h"

static const char *const fn = "recap_graph_set_create";

/* A size with its place in the caller's list. */
typedef struct listed {
  size_t size, index;
} listed_t;

static int by_size(const void *a, const void *b) {
  const listed_t *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* How many sizes a rule gives (rule_max included), or 0 past the limit. */
static size_t rule_count(const recap_graph_set_options_t *o) {
  size_t n = 0;
  if (o->rule == RECAP_SIZES_POWERS_OF_TWO) {
    for (size_t p = 1; p <= o->rule_max; p *= 2) {
      n++;
      if (p > SIZE_MAX / 2) break;
    }
    /* rule_max itself when it is no power of two */
    if ((o->rule_max & (o->rule_max - 1)) != 0) n++;
  } else {
    n = o->rule_max / o->rule_step + (o->rule_max % o->rule_step != 0);
  }
  return n;
}

static recap_status_t check_rule(const recap_graph_set_options_t *o) {
  RECAP__ARG(o->rule == RECAP_SIZES_POWERS_OF_TWO || o->rule == RECAP_SIZES_MULTIPLES,
             "%s: options.rule is %d, not one of RECAP_SIZES_LIST, RECAP_SIZES_POWERS_OF_TWO, "
             "RECAP_SIZES_MULTIPLES",
             fn, (int)o->rule);
  RECAP__ARG(o->rule_max != 0,
             "%s: options.rule_max is 0: a rule needs the largest size (rule_max > 0)", fn);
  if (o->rule == RECAP_SIZES_MULTIPLES) {
    RECAP__ARG(o->rule_step != 0,
               "%s: options.rule_step is 0: RECAP_SIZES_MULTIPLES needs the step (sizes "
               "rule_step, 2 rule_step, ... up to rule_max)",
               fn);
    RECAP__ARG(o->rule_step <= o->rule_max,
               "%s: options.rule_step (%zu) is above options.rule_max (%zu): the rule gives no "
               "size",
               fn, o->rule_step, o->rule_max);
  }
  size_t n = rule_count(o);
  RECAP__ARG(n <= RECAP__SET_MAX_MEMBERS,
             "%s: the rule gives %zu sizes, more than the %d a set holds; raise rule_step or "
             "lower rule_max",
             fn, n, (int)RECAP__SET_MAX_MEMBERS);
  return RECAP_SUCCESS;
}

/* The rule's sizes, ascending, into out (rule_count entries). */
static void rule_sizes(const recap_graph_set_options_t *o, listed_t *out) {
  size_t n = 0;
  if (o->rule == RECAP_SIZES_POWERS_OF_TWO) {
    for (size_t p = 1; p <= o->rule_max; p *= 2) {
      out[n].size = p;
      out[n].index = n;
      n++;
      if (p > SIZE_MAX / 2) break;
    }
    if ((o->rule_max & (o->rule_max - 1)) != 0) {
      out[n].size = o->rule_max;
      out[n].index = n;
      n++;
    }
  } else {
    for (size_t k = o->rule_step; k <= o->rule_max; k += o->rule_step) {
      out[n].size = k;
      out[n].index = n;
      n++;
      if (k > SIZE_MAX - o->rule_step) break;
    }
    if (o->rule_max % o->rule_step != 0) {
      out[n].size = o->rule_max;
      out[n].index = n;
      n++;
    }
  }
}

static recap_status_t check_list(const recap_graph_set_options_t *o) {
  RECAP__ARG(o->rule == RECAP_SIZES_LIST,
             "%s: options.sizes is a list and options.rule is %d: give a list or a rule, not "
             "both (leave options.rule RECAP_SIZES_LIST with a list)",
             fn, (int)o->rule);
  RECAP__ARG(o->size_count != 0, "%s: options.size_count is 0: the list of sizes is empty", fn);
  RECAP__ARG(o->size_count <= RECAP__SET_MAX_MEMBERS,
             "%s: options.size_count is %zu, more than the %d sizes a set holds", fn, o->size_count,
             (int)RECAP__SET_MAX_MEMBERS);
  for (size_t i = 0; i < o->size_count; i++)
    RECAP__ARG(o->sizes[i] != 0, "%s: options.sizes[%zu] is 0: sizes are positive", fn, i);
  return RECAP_SUCCESS;
}

recap_status_t recap__set_sizes_make(const recap_graph_set_options_t *o, size_t **sizes_out,
                                     size_t **order_out, size_t *count_out) {
  size_t n;
  if (o->sizes) {
    RECAP__CHECK(check_list(o));
    n = o->size_count;
  } else {
    RECAP__ARG(o->size_count == 0,
               "%s: options.sizes is NULL but options.size_count is %zu: pass the list", fn,
               o->size_count);
    RECAP__ARG(o->rule != RECAP_SIZES_LIST,
               "%s: no sizes: options.sizes is NULL and options.rule is RECAP_SIZES_LIST; give "
               "a list (options.sizes, options.size_count) or a rule (RECAP_SIZES_POWERS_OF_TWO, "
               "RECAP_SIZES_MULTIPLES with rule_max)",
               fn);
    RECAP__CHECK(check_rule(o));
    n = rule_count(o);
  }
  listed_t *listed = recap__host_malloc(n * sizeof *listed);
  size_t *sizes = recap__host_malloc(n * sizeof *sizes);
  size_t *order = recap__host_malloc(n * sizeof *order);
  if (!listed || !sizes || !order) {
    recap__host_free(listed);
    recap__host_free(sizes);
    recap__host_free(order);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory for %zu sizes", fn, n);
  }
  if (o->sizes) {
    for (size_t i = 0; i < n; i++) {
      listed[i].size = o->sizes[i];
      listed[i].index = i;
    }
  } else {
    rule_sizes(o, listed);
  }
  qsort(listed, n, sizeof *listed, by_size);
  for (size_t i = 1; i < n; i++) {
    if (listed[i].size == listed[i - 1].size) {
      size_t dup = listed[i].index, first = listed[i - 1].index, size = listed[i].size;
      recap__host_free(listed);
      recap__host_free(sizes);
      recap__host_free(order);
      return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                          "%s: options.sizes[%zu] = %zu appears twice (options.sizes[%zu]); "
                          "sizes are distinct",
                          fn, dup, size, first);
    }
  }
  for (size_t i = 0; i < n; i++) sizes[i] = listed[i].size;
  switch (o->priority) {
    case RECAP_SET_LARGEST_FIRST:
      for (size_t i = 0; i < n; i++) order[i] = n - 1 - i;
      break;
    case RECAP_SET_SMALLEST_FIRST:
      for (size_t i = 0; i < n; i++) order[i] = i;
      break;
    default: /* AS_LISTED: member listed[i] sits at i once sorted; order by the listing */
      for (size_t i = 0; i < n; i++) order[listed[i].index] = i;
      break;
  }
  recap__host_free(listed);
  *sizes_out = sizes;
  *order_out = order;
  *count_out = n;
  return RECAP_SUCCESS;
}

size_t recap__set_bucket(const recap_graph_set_t set, size_t n) {
  size_t lo = 0, hi = set->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (set->members[mid].bucket < n)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

size_t recap__set_find(const recap_graph_set_t set, size_t size) {
  size_t i = recap__set_bucket(set, size);
  return i < set->count && set->members[i].bucket == size ? i : set->count;
}
