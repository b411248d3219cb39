# SPDX-License-Identifier: BSD-3-Clause
# CheckNoTestCode.cmake — run as cmake "-DLIBRARIES=<lib>;<lib>..." [-DNM=<nm>] -P.
#
# Fails when a library holds the CPU fake device, which is test code: any symbol, global or
# local, named recap__fake* or fake_*. Works on the build tree's and the installed librecap.so
# and librecap.a (the consumer test runs it on the installed ones). A shared library is read
# twice, its symbol table and its dynamic symbols, so that a stripped copy is checked too.

cmake_minimum_required(VERSION 3.24)

if(NOT LIBRARIES)
  message(FATAL_ERROR "LIBRARIES is empty: name the libraries to check")
endif()
if(NOT NM)
  find_program(NM nm REQUIRED)
endif()

foreach(library IN LISTS LIBRARIES)
  if(NOT EXISTS "${library}")
    message(FATAL_ERROR "${library}: no such file")
  endif()
  set(listings "")
  execute_process(COMMAND "${NM}" "${library}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 AND NOT err MATCHES "no symbols")
    message(FATAL_ERROR "${NM} ${library} failed: ${err}")
  endif()
  string(APPEND listings "${out}")
  if(library MATCHES "\\.so(\\.[0-9]+)*$")
    execute_process(COMMAND "${NM}" -D "${library}"
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${NM} -D ${library} failed: ${err}")
    endif()
    string(APPEND listings "${out}")
  endif()

  # Lines are "<address> <type> <name>", "<type> <name>" for undefined symbols, or member
  # headers of an archive; only defined symbols count.
  string(REPLACE "\n" ";" lines "${listings}")
  set(symbols 0)
  set(found "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^ ]+)$")
      continue()
    endif()
    math(EXPR symbols "${symbols} + 1")
    string(REGEX REPLACE "@.*" "" name "${CMAKE_MATCH_1}")
    if(name MATCHES "^(recap__fake|fake_)" AND NOT name IN_LIST found)
      list(APPEND found "${name}")
    endif()
  endforeach()
  if(symbols EQUAL 0)
    message(FATAL_ERROR "${library}: ${NM} listed no defined symbol; nothing was checked")
  endif()
  if(found)
    list(LENGTH found count)
    list(SUBLIST found 0 10 shown)
    message(FATAL_ERROR "${library} holds test code: ${count} symbols of the fake device, e.g. "
                        "${shown}")
  endif()
  message(STATUS "${library}: ${symbols} symbols, none of the fake device")
endforeach()
