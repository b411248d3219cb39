# SPDX-License-Identifier: BSD-3-Clause
# embed.cmake — turn a text file into a C array of string literals, one per line, so that a page's
# style sheet and script live in files of their own and still end up inside every page (one
# literal per line keeps each under the length ISO C promises to support).
#
#   cmake -DINPUT=page.js -DOUTPUT=page_js.h -DNAME=recap__view_page_js -P embed.cmake
file(READ "${INPUT}" text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REPLACE "\t" "\\t" text "${text}")
string(REPLACE "\n" "\\n\",\n  \"" text "${text}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${name} by embed.cmake; edit ${name} instead. */\n"
  "static const char *const ${NAME}[] = {\n  \"${text}\",\n  NULL};\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
