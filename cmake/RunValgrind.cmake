# SPDX-License-Identifier: BSD-3-Clause
# RunValgrind.cmake — run every CPU test program of a build under valgrind memcheck.
#
# Usage: cmake -DBUILD_DIR=<build> [-DVALGRIND=valgrind] [-DEXCLUDE=regex] -P RunValgrind.cmake
#
# Each executable tests/test_* of the build that is not a GPU test (those end in _gpu) runs once
# with all of its tests in one process, under memcheck with full leak checking: any invalid
# read or write, use of uninitialised memory, overlapping copy, or definite or indirect leak is
# an error, and one error anywhere fails the run. Processes the tests fork (the bad-input matrix
# runs each case in a child) are checked too. The bad-input matrix skips its destroyed-handle
# cases here: they are use after free by definition, which memcheck rightly reports.
if(NOT BUILD_DIR)
  message(FATAL_ERROR "usage: cmake -DBUILD_DIR=<build> -P RunValgrind.cmake")
endif()
if(NOT VALGRIND)
  find_program(VALGRIND valgrind)
endif()
if(NOT VALGRIND)
  message(FATAL_ERROR "valgrind not found (apt-get install valgrind)")
endif()

file(GLOB candidates "${BUILD_DIR}/tests/test_*")
set(programs "")
foreach(path IN LISTS candidates)
  get_filename_component(name "${path}" NAME)
  if(IS_DIRECTORY "${path}" OR name MATCHES "_gpu$" OR name MATCHES "\\.")
    continue()
  endif()
  if(EXCLUDE AND name MATCHES "${EXCLUDE}")
    continue()
  endif()
  list(APPEND programs "${path}")
endforeach()
list(SORT programs)
if(NOT programs)
  message(FATAL_ERROR "no CPU test programs under ${BUILD_DIR}/tests")
endif()

set(ENV{RECAP_BAD_INPUT_SKIP_DESTROYED} 1)
set(failed "")
set(count 0)
foreach(program IN LISTS programs)
  get_filename_component(name "${program}" NAME)
  string(TIMESTAMP start "%s")
  execute_process(
    COMMAND "${VALGRIND}" --quiet --error-exitcode=99 --leak-check=full
            --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
            --track-fds=no "${program}"
    WORKING_DIRECTORY "${BUILD_DIR}/tests"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  math(EXPR count "${count} + 1")
  if(rc EQUAL 0)
    message(STATUS "valgrind: ${name}: clean (${seconds} s)")
  else()
    list(APPEND failed "${name}")
    message("valgrind: ${name}: FAILED (exit ${rc}, ${seconds} s)\n${out}\n${err}")
  endif()
endforeach()

list(LENGTH failed nfailed)
if(failed)
  list(JOIN failed ", " failed)
  message(FATAL_ERROR "valgrind: ${nfailed} of ${count} test programs reported errors: ${failed}")
endif()
message(STATUS "valgrind: ${count} CPU test programs, 0 errors")
