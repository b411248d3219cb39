# SPDX-License-Identifier: BSD-3-Clause
# CheckSharedLibrary.cmake — run as cmake -DLIBRARY=<librecap.so> [-DREADELF=..] [-DNM=..] -P.
#
# Fails when the shared library needs libcuda (a program using recap must start on a machine
# with no NVIDIA driver, and recap reaches the driver through entry points fetched at run time)
# or exports a symbol other than recap's public functions (hidden visibility by default, and
# the static CUDA runtime kept inside).

if(NOT LIBRARY OR NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "LIBRARY=${LIBRARY}: no such file")
endif()
if(NOT READELF)
  find_program(READELF readelf REQUIRED)
endif()
if(NOT NM)
  find_program(NM nm REQUIRED)
endif()

execute_process(COMMAND "${READELF}" -d "${LIBRARY}"
                OUTPUT_VARIABLE dynamic COMMAND_ERROR_IS_FATAL ANY)
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed "${dynamic}")
message(STATUS "${LIBRARY} needs:")
foreach(line IN LISTS needed)
  message(STATUS "  ${line}")
  if(line MATCHES "libcuda\\.so|libnvidia")
    message(FATAL_ERROR "${LIBRARY} links the CUDA driver library: ${line}")
  endif()
endforeach()

execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
                OUTPUT_VARIABLE symbols COMMAND_ERROR_IS_FATAL ANY)
string(REPLACE "\n" ";" symbols "${symbols}")
set(exported 0)
set(foreign "")
foreach(line IN LISTS symbols)
  # "<address> <type> <name>"; code and data symbols only.
  if(NOT line MATCHES "^[0-9a-fA-F]+ [TDBRVWtdbrvw] ([^ ]+)$")
    continue()
  endif()
  set(name "${CMAKE_MATCH_1}")
  string(REGEX REPLACE "@.*" "" name "${name}")
  if(name MATCHES "^recap_[a-z]" AND NOT name MATCHES "^recap__")
    math(EXPR exported "${exported} + 1")
  elseif(NOT name MATCHES "^(_init|_fini|_edata|_end|__bss_start)$")
    list(APPEND foreign "${name}")
  endif()
endforeach()
if(foreign)
  list(LENGTH foreign count)
  list(SUBLIST foreign 0 20 shown)
  message(FATAL_ERROR "${LIBRARY} exports ${count} symbols that are not recap's public API, "
                      "e.g. ${shown}")
endif()
if(exported EQUAL 0)
  message(FATAL_ERROR "${LIBRARY} exports no recap_ function")
endif()
message(STATUS "${LIBRARY}: ${exported} public symbols, no libcuda")
