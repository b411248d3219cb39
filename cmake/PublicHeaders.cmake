# SPDX-License-Identifier: BSD-3-Clause
# PublicHeaders.cmake — read the public headers' declarations, for the scripts that check the API
# against rules (GenBadInputMatrix.cmake, CheckApiConventions.cmake), so that both read the
# headers the same way.

# recap_public_header_text(<source_dir> <out_var>): include/recap.h and include/recap/*.h as one
# text, without comments, line continuations and preprocessor lines, and with '[' and ']' written
# '<' and '>' (brackets would confuse CMake's lists; declarations use neither).
function(recap_public_header_text source_dir out_var)
  file(GLOB headers "${source_dir}/include/recap.h" "${source_dir}/include/recap/*.h")
  list(SORT headers)
  set(text "")
  foreach(header IN LISTS headers)
    file(READ "${header}" one)
    string(APPEND text "\n${one}")
  endforeach()
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " text "${text}")
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(REGEX REPLACE "\\\\\n" " " text "${text}")
  string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" text "${text}")
  string(REPLACE "[" "<" text "${text}")
  string(REPLACE "]" ">" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# recap_split_declaration(<decl> <fn_var> <head_var> <params_var>): one match of
# "RECAP_API[ \t\r\n]+[^;{}]*\\)" in that text, split into the function's name, what comes before
# the name (the return type) and the text between the parentheses, stripped.
function(recap_split_declaration decl fn_var head_var params_var)
  string(REGEX REPLACE "^RECAP_API[ \t\r\n]+" "" decl "${decl}")
  string(REGEX REPLACE "\\)$" "" decl "${decl}")
  string(FIND "${decl}" "(" open)
  string(SUBSTRING "${decl}" 0 ${open} head)
  math(EXPR after "${open} + 1")
  string(SUBSTRING "${decl}" ${after} -1 params_text)
  string(REGEX MATCH "[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*$" fn "${head}")
  string(STRIP "${fn}" fn)
  string(REGEX REPLACE "[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*$" "" head "${head}")
  string(STRIP "${params_text}" params_text)
  set(${fn_var} "${fn}" PARENT_SCOPE)
  set(${head_var} "${head}" PARENT_SCOPE)
  set(${params_var} "${params_text}" PARENT_SCOPE)
endfunction()
