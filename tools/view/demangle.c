/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * demangle.c — readable kernel names: the C++ runtime's demangler, and the short form drawn in
 * a box.
 *
 * Kernel names come from the driver mangled (Itanium C++ ABI) unless the kernel was declared
 * extern "C". Most library kernels (cuBLAS, CUTLASS, CUB) are templates, so only a complete
 * demangler will do: the one every C++ runtime carries, __cxa_demangle. It is declared here
 * with C linkage, which is how the runtime defines it (abi::__cxa_demangle is extern "C"), and
 * the viewer links the C++ runtime for it (docs/dependencies.md).
 */
#include <stdlib.h>
#include <string.h>

#include "view_internal.h"

/* From the C++ runtime (libstdc++ or libc++): status 0 on success, and a malloc'ed result. */
extern char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status);

char *recap_view_demangle(const char *mangled) {
  if (!mangled || strncmp(mangled, "_Z", 2) != 0) return NULL;
  int status = -1;
  char *name = __cxa_demangle(mangled, NULL, NULL, &status);
  if (status != 0) {
    free(name);
    return NULL;
  }
  return name;
}

/* The index of the '(' that opens the parameter list ending name[0, len), or len when the name
 * does not end with one. */
static size_t parameters_start(const char *name, size_t len) {
  if (len == 0 || name[len - 1] != ')') return len;
  int depth = 0;
  for (size_t i = len; i-- > 0;) {
    if (name[i] == ')') depth++;
    if (name[i] == '(' && --depth == 0) return i;
  }
  return len;
}

/* The start of the name proper in name[0, len) after a return type ("void " in
 * "void kernel<float>"): just after the last space outside brackets, unless that space belongs
 * to an operator or a qualifier. */
static size_t after_return_type(const char *name, size_t len) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (c == '<' || c == '(' || c == '[') depth++;
    if ((c == '>' || c == ')' || c == ']') && depth > 0) depth--;
    if (c == ' ' && depth == 0 && i + 1 < len) start = i + 1;
  }
  if (start >= 9 && strncmp(name + start - 9, "operator ", 9) == 0) return 0;
  return start;
}

/* Just past the first "::" outside brackets in name[0, len), or 0 when there is none. */
static size_t after_first_qualifier(const char *name, size_t len) {
  int depth = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    char c = name[i];
    if (c == '<' || c == '(') depth++;
    if ((c == '>' || c == ')') && depth > 0) depth--;
    if (depth == 0 && c == ':' && name[i + 1] == ':') return i + 2;
  }
  return 0;
}

char *recap_view_short_name(const char *name, size_t max) {
  size_t len = parameters_start(name, strlen(name));
  size_t start = after_return_type(name, len);
  name += start;
  len -= start;
  while (len > max) {
    size_t skip = after_first_qualifier(name, len);
    if (skip == 0 || skip >= len) break;
    name += skip;
    len -= skip;
  }
  recap__view_buf_t out = {0};
  if (len > max && max > 1) {
    /* Cut on a character boundary (names may hold UTF-8) and mark the cut. */
    size_t cut = max - 1;
    while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80) cut--;
    recap__view_putn(&out, name, cut);
    recap__view_puts(&out, "\xE2\x80\xA6"); /* "…" */
  } else {
    recap__view_putn(&out, name, len);
  }
  if (!out.data && !out.failed) recap__view_putn(&out, "", 0);
  if (out.failed) {
    free(out.data);
    return NULL;
  }
  return out.data;
}
