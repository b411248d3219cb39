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

# Programs whose tests each need an environment of their own (tests/CMakeLists.txt sets it per
# ctest test): these run test by test, "program|test|VAR=value" (an empty value unsets VAR),
# instead of all their tests in one process.
set(runs_with_env
    "test_nccl_loader|missing_library_named_by_the_variable|RECAP_NCCL_LIBRARY=/nonexistent/libnccl.so.2"
    "test_nccl_loader|library_without_nccl_functions|RECAP_NCCL_LIBRARY=libc.so.6"
    "test_nccl_loader|default_library|RECAP_NCCL_LIBRARY="
    "test_nccl_loader|install_swaps_the_table|RECAP_NCCL_LIBRARY=")

set(failed "")
set(count 0)
foreach(program IN LISTS programs)
  get_filename_component(name "${program}" NAME)
  # One run of the whole program, or its runs with an environment each.
  set(runs "")
  foreach(entry IN LISTS runs_with_env)
    string(REPLACE "|" ";" fields "${entry}")
    list(GET fields 0 entry_program)
    if(entry_program STREQUAL name)
      list(APPEND runs "${entry}")
    endif()
  endforeach()
  if(NOT runs)
    set(runs "${name}|-|-") # "-": no test named, no variable
  endif()
  string(TIMESTAMP start "%s")
  set(rc 0)
  set(out "")
  set(err "")
  foreach(run IN LISTS runs)
    string(REPLACE "|" ";" fields "${run}")
    list(GET fields 1 test)
    list(GET fields 2 variable)
    if(test STREQUAL "-")
      set(test "")
    endif()
    set(env_args "")
    if(variable MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
      if(CMAKE_MATCH_2 STREQUAL "")
        set(env_args "--unset=${CMAKE_MATCH_1}")
      else()
        set(env_args "${variable}")
      endif()
    endif()
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -E env ${env_args} "${VALGRIND}" --quiet --error-exitcode=99
              --leak-check=full --errors-for-leak-kinds=definite,indirect
              --show-leak-kinds=definite,indirect --track-fds=no "${program}" ${test}
      WORKING_DIRECTORY "${BUILD_DIR}/tests"
      RESULT_VARIABLE run_rc
      OUTPUT_VARIABLE run_out
      ERROR_VARIABLE run_err)
    if(NOT run_rc EQUAL 0)
      set(rc "${run_rc}")
      string(APPEND out "${run_out}")
      string(APPEND err "${run_err}")
    endif()
  endforeach()
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
