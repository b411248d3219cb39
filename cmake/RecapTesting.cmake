# SPDX-License-Identifier: BSD-3-Clause
# RecapTesting.cmake — recap_add_test(): one executable per test source, one ctest test per
# cmocka test in it.
#
# Each cmocka test runs in its own process (the executable is given the test's name), so a
# crash or a GPU fault in one test cannot take the others with it, and ctest reports each test
# by name. GPU tests exit with 77 when there is no device, which ctest shows as skipped.

# recap_add_test(<source> [GPU] [NAME <name>] [TIMEOUT <seconds>] [SOURCES <source>...]
#                [LIBS <lib>...])
#   GPU      the tests need a CUDA device: label "gpu" instead of "cpu", skipped without one,
#            and run one at a time (they may fill the device's memory).
#   NAME     the program's name, when it is not the source's (one source built twice).
#   TIMEOUT  per test, default 300 seconds.
#   SOURCES  more sources of the same program, each with a part of its tests (harness.h
#            RECAP_TEST_PART); their tests are registered too.
#   LIBS     more libraries to link.
function(recap_add_test source)
  cmake_parse_arguments(PARSE_ARGV 1 arg "GPU" "NAME;TIMEOUT" "SOURCES;LIBS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "recap_add_test(${source}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()

  get_filename_component(exe "${source}" NAME_WE)
  if(arg_NAME)
    set(exe ${arg_NAME})
  endif()
  add_executable(${exe} "${source}" ${arg_SOURCES})
  target_link_libraries(${exe} PRIVATE recap_test_harness ${arg_LIBS})
  target_compile_definitions(${exe} PRIVATE RECAP_TEST_NEEDS_GPU=$<BOOL:${arg_GPU}>)
  if(arg_GPU)
    # A GPU program sits beside its CPU counterpart; what the GPU programs share (gpu_util.h,
    # the kernels' launchers) is in tests/gpu/.
    target_include_directories(${exe} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/gpu")
  endif()

  # The test list is read from the source, so a new test means a new configure run.
  set(names "")
  foreach(part IN ITEMS "${source}" ${arg_SOURCES})
    get_filename_component(part_path "${part}" ABSOLUTE)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${part_path}")
    recap__test_names("${part_path}" part_names)
    foreach(name IN LISTS part_names)
      if(name IN_LIST names)
        message(FATAL_ERROR "${part}: test ${name} is listed twice")
      endif()
    endforeach()
    list(APPEND names ${part_names})
  endforeach()
  if(NOT names)
    message(FATAL_ERROR "${source}: no cmocka_unit_test(...) entries found")
  endif()
  # recap_add_test_variant registers the same names again, with the same label.
  set_property(TARGET ${exe} PROPERTY RECAP_TEST_NAMES "${names}")
  set_property(TARGET ${exe} PROPERTY RECAP_TEST_GPU ${arg_GPU})

  if(arg_GPU)
    set(label gpu)
  else()
    set(label cpu)
  endif()
  foreach(name IN LISTS names)
    add_test(NAME ${exe}.${name} COMMAND ${exe} ${name})
    set_tests_properties(${exe}.${name} PROPERTIES
      LABELS ${label}
      SKIP_RETURN_CODE 77
      TIMEOUT ${arg_TIMEOUT})
    if(arg_GPU)
      set_tests_properties(${exe}.${name} PROPERTIES RESOURCE_LOCK gpu)
    endif()
  endforeach()
endfunction()

# The names inside cmocka_unit_test(NAME), cmocka_unit_test_setup_teardown(NAME, ...) and the
# other cmocka_unit_test_* forms, in source order, with comments removed first so that a
# commented-out test is not registered.
function(recap__test_names path out_var)
  file(READ "${path}" text)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(REGEX MATCHALL "cmocka_unit_test[a-z_]*[ \t\r\n]*\\([ \t\r\n]*[A-Za-z_][A-Za-z0-9_]*"
         matches "${text}")
  set(names "")
  foreach(match IN LISTS matches)
    string(REGEX REPLACE ".*\\([ \t\r\n]*" "" name "${match}")
    if(name IN_LIST names)
      message(FATAL_ERROR "${path}: test ${name} is listed twice")
    endif()
    list(APPEND names "${name}")
  endforeach()
  set(${out_var} "${names}" PARENT_SCOPE)
endfunction()

# recap_add_test_variant(<source> <variant> [NAME <name>] ENVIRONMENT <var=value>...
#                        [EXCLUDE <test>...])
#   Registers the tests of <source>'s executable (made by recap_add_test; NAME as there) once more, as
#   <exe>.<variant>.<test>, run with the given environment: the same test code under other
#   options, e.g. RECAP_ALLOC_CONF=expandable_segments:1 (the options are read from the
#   environment again at every test's reset). Label "cpu" and the variant's name. EXCLUDE
#   names tests that are about what the variant changes, which it does not register.
function(recap_add_test_variant source variant)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "NAME;TIMEOUT" "ENVIRONMENT;EXCLUDE")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_ENVIRONMENT)
    message(FATAL_ERROR "recap_add_test_variant(${source} ${variant}): give ENVIRONMENT var=value...")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  get_filename_component(exe "${source}" NAME_WE)
  if(arg_NAME)
    set(exe ${arg_NAME})
  endif()
  # A variant of a GPU test is a GPU test too: gpu-check runs it, CI skips it.
  set(kind cpu)
  get_property(exe_needs_gpu TARGET ${exe} PROPERTY RECAP_TEST_GPU)
  if(exe_needs_gpu)
    set(kind gpu)
  endif()
  get_property(names TARGET ${exe} PROPERTY RECAP_TEST_NAMES)
  foreach(name IN LISTS arg_EXCLUDE)
    if(NOT name IN_LIST names)
      message(FATAL_ERROR "recap_add_test_variant(${source} ${variant}): no test ${name} to exclude")
    endif()
  endforeach()
  foreach(name IN LISTS names)
    if(name IN_LIST arg_EXCLUDE)
      continue()
    endif()
    add_test(NAME ${exe}.${variant}.${name} COMMAND ${exe} ${name})
    set_tests_properties(${exe}.${variant}.${name} PROPERTIES
      LABELS "${kind};${variant}"
      SKIP_RETURN_CODE 77
      TIMEOUT ${arg_TIMEOUT}
      ENVIRONMENT "${arg_ENVIRONMENT}")
    if(kind STREQUAL "gpu")
      # As recap_add_test's GPU tests: one at a time, since they check the device's free memory.
      set_tests_properties(${exe}.${variant}.${name} PROPERTIES RESOURCE_LOCK gpu)
    endif()
  endforeach()
endfunction()
