# SPDX-License-Identifier: BSD-3-Clause
# RecapCompileOptions.cmake — warnings, -Werror and sanitizers for every target of the build.
#
# These are directory-wide (add_compile_options), so the library, tests, tools, examples and
# benchmarks all build with the same warnings and, when RECAP_SANITIZE is set, the same
# sanitizers: a sanitizer only helps if the test program and the library are both instrumented.

function(recap_add_compile_options)
  # Debug builds check the library's internal invariants (RECAP__ASSERT, src/core/assert.h).
  add_compile_definitions("$<$<CONFIG:Debug>:RECAP_DEBUG>")
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Wpedantic>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  if(RECAP_WERROR)
    add_compile_options(
      "$<$<COMPILE_LANGUAGE:C,CXX>:-Werror>"
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>")
  endif()

  if(RECAP_SANITIZE)
    # One -fsanitize per sanitizer, because nvcc splits -Xcompiler values at commas.
    # -fno-sanitize-recover makes the first report fatal, so a test that triggers undefined
    # behaviour fails instead of printing a line nobody reads.
    string(REPLACE "," ";" sanitizers "${RECAP_SANITIZE}")
    set(flags -fno-omit-frame-pointer -fno-sanitize-recover=all)
    foreach(sanitizer IN LISTS sanitizers)
      list(APPEND flags "-fsanitize=${sanitizer}")
    endforeach()
    list(TRANSFORM flags PREPEND "-Xcompiler=" OUTPUT_VARIABLE cuda_flags)
    add_compile_options(
      "$<$<COMPILE_LANGUAGE:C,CXX>:${flags}>"
      "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
    # CMake links C, C++ and CUDA programs through the host compiler, which takes the flags as they are.
    add_link_options("-fsanitize=${RECAP_SANITIZE}")
  endif()
endfunction()
