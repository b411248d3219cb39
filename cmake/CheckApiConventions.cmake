# SPDX-License-Identifier: BSD-3-Clause
# CheckApiConventions.cmake — fail when a public header breaks one of the API's conventions
# (docs/api.md, "Conventions"), so that a new function or struct cannot drift from them.
#
# Usage: cmake -DSOURCE_DIR=<repo> -DCHECK=order|structs -P CheckApiConventions.cmake
#
#   order    every function declared RECAP_API takes its handle first (or, for a call that makes
#            an object, the pointer that receives it), then its inputs, then the stream, then its
#            out-parameters: nothing but out-parameters (and an output array's capacity) after
#            the stream or after an out-parameter, and a recap handle only in first place.
#   structs  every struct of the public headers begins with `size_t size` and has an _INIT macro
#            named after it, except the plain values and the struct recap allocates listed below.
#
# An out-parameter is host memory recap writes its answer into: a pointer to a pointer (const
# or not), or a non-const pointer to a recap type or to size_t, int, int64_t or uint64_t. Pointers to other
# scalars (float *, uint32_t *, void *) are device buffers, which are inputs.

cmake_minimum_required(VERSION 3.24)

if(NOT SOURCE_DIR OR NOT CHECK)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -DCHECK=order|structs -P CheckApiConventions.cmake")
endif()

# Structs that are not versioned, each with why (docs/api.md says the same).
set(PLAIN_STRUCTS
  "recap_pool_id|a value: two numbers"
  "recap_stat|a value: four counters inside recap_memory_stats_t"
  "recap_cond|a value passed to kernels by value"
  "recap_buffer|a value: an address and a size"
  "recap_param_value|a value: a parameter and where its new value lies"
  "recap_philox_state|a value passed to kernels by value"
  "recap_graph_node|an element of the nodes array of recap_graph_info_t, which recap allocates"
  "recap_pool_info|deprecated with recap_pool_info, removed in the next minor release"
)
# Structs recap allocates: `size` first, set by recap, and no _INIT macro.
set(ALLOCATED_STRUCTS "recap_graph_info")

include("${CMAKE_CURRENT_LIST_DIR}/PublicHeaders.cmake")
recap_public_header_text("${SOURCE_DIR}" text)
# The INIT macros are looked up in the headers as written (the text above has no macros left).
file(GLOB headers "${SOURCE_DIR}/include/recap/*.h")
set(init_macros "")
foreach(header IN LISTS headers)
  file(STRINGS "${header}" defines REGEX "^#[ \t]*define[ \t]+RECAP_[A-Z0-9_]+_INIT")
  list(APPEND init_macros ${defines})
endforeach()

set(errors "")

if(CHECK STREQUAL "structs")
  # Semicolons would split CMake's lists: member declarations end with "@" here.
  string(REPLACE ";" "@" text "${text}")
  string(REGEX MATCHALL "typedef[ \t\r\n]+struct[ \t\r\n]+recap_[a-z0-9_]+[ \t\r\n]*{[^{}]*}" structs "${text}")
  set(count 0)
  foreach(s IN LISTS structs)
    string(REGEX REPLACE "^typedef[ \t\r\n]+struct[ \t\r\n]+(recap_[a-z0-9_]+).*" "\\1" name "${s}")
    math(EXPR count "${count} + 1")
    set(plain FALSE)
    foreach(entry IN LISTS PLAIN_STRUCTS)
      if(entry MATCHES "^${name}\\|")
        set(plain TRUE)
      endif()
    endforeach()
    if(plain)
      continue()
    endif()
    string(REGEX REPLACE "^[^{]*{" "" body "${s}")
    if(NOT body MATCHES "^[ \t\r\n]*size_t[ \t\r\n]+size[ \t\r\n]*@")
      list(APPEND errors "${name}_t does not begin with a size_t size member")
    endif()
    string(TOUPPER "${name}_INIT" init)
    set(has_init FALSE)
    foreach(m IN LISTS init_macros)
      if(m MATCHES "[ \t]${init}([ \t\\]|$)")
        set(has_init TRUE)
      endif()
    endforeach()
    if(name IN_LIST ALLOCATED_STRUCTS)
      if(has_init)
        list(APPEND errors "${name}_t is allocated by recap, yet ${init} exists")
      endif()
    elseif(NOT has_init)
      list(APPEND errors "${name}_t has no ${init} macro")
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "no public structs found under ${SOURCE_DIR}/include")
  endif()
  set(what "${count} public structs")
elseif(CHECK STREQUAL "order")
  # Handles: typedef struct recap_x *recap_x_t.
  string(REGEX MATCHALL "typedef[ \t\r\n]+struct[ \t\r\n]+recap_[a-z0-9_]+[ \t\r\n]*\\*[ \t\r\n]*recap_[a-z0-9_]+_t" typedefs "${text}")
  set(handle_types "")
  foreach(t IN LISTS typedefs)
    string(REGEX REPLACE ".*\\*[ \t\r\n]*(recap_[a-z0-9_]+_t)$" "\\1" h "${t}")
    list(APPEND handle_types "${h}")
  endforeach()
  string(REGEX MATCHALL "RECAP_API[ \t\r\n]+[^;{}]*\\)" decls "${text}")
  set(count 0)
  foreach(decl IN LISTS decls)
    recap_split_declaration("${decl}" fn head params_text)
    math(EXPR count "${count} + 1")
    string(REGEX REPLACE ",[ \t\r\n]*\\.\\.\\.$" "" params_text "${params_text}")
    if(params_text STREQUAL "void" OR params_text STREQUAL "")
      continue()
    endif()
    set(makes FALSE)
    if(fn MATCHES "_create$" OR fn STREQUAL "recap_malloc")
      set(makes TRUE)
    endif()
    string(REPLACE "," ";" plist "${params_text}")
    set(index 0)
    set(after_stream "")
    set(after_output "")
    foreach(p IN LISTS plist)
      string(REGEX REPLACE "[ \t\r\n]+" " " p "${p}")
      string(STRIP "${p}" p)
      string(REGEX MATCH "[A-Za-z_][A-Za-z0-9_]*$" pname "${p}")
      string(REGEX REPLACE "[A-Za-z_][A-Za-z0-9_]*$" "" ptype "${p}")
      string(REPLACE " " "" ptype "${ptype}")
      # Classify: out-parameter, stream, handle, or another input.
      set(kind input)
      if(ptype STREQUAL "recap_stream_t")
        set(kind stream)
      elseif(ptype IN_LIST handle_types)
        set(kind handle)
      elseif(ptype MATCHES "\\*\\*$" OR ptype MATCHES
             "^(recap_[a-z0-9_]+_t|size_t|int|int64_t|uint64_t)\\*$")
        set(kind output)
      elseif(ptype STREQUAL "void*" AND pname STREQUAL "placeholder")
        # params.h: the bytes a declaration hands back, as wide as the parameter's type.
        set(kind output)
      endif()
      if(index EQUAL 0 AND makes)
        set(kind made)
      endif()
      if(kind STREQUAL "handle" AND index GREATER 0)
        list(APPEND errors "${fn}: the handle '${pname}' is not the first parameter")
      endif()
      if(NOT kind STREQUAL "output" AND NOT pname STREQUAL "capacity")
        if(after_output)
          list(APPEND errors "${fn}: '${pname}' comes after the out-parameter '${after_output}' (outputs go last)")
        elseif(after_stream)
          list(APPEND errors "${fn}: '${pname}' comes after the stream '${after_stream}' (the stream is the last input)")
        endif()
      endif()
      if(kind STREQUAL "stream")
        set(after_stream "${pname}")
      elseif(kind STREQUAL "output")
        set(after_output "${pname}")
      endif()
      math(EXPR index "${index} + 1")
    endforeach()
  endforeach()
  set(what "${count} public functions")
else()
  message(FATAL_ERROR "CHECK must be order or structs, not '${CHECK}'")
endif()

if(errors)
  list(JOIN errors "\n  " joined)
  message(FATAL_ERROR "the public headers break the API conventions (docs/api.md, \"Conventions\"):\n  ${joined}")
endif()
message(STATUS "API conventions (${CHECK}): all ${what} follow them")
