# SPDX-License-Identifier: BSD-3-Clause
# RecapCompileOptions.cmake — warnings, -Werror and sanitizers for every target of the build.
#
# These are directory-wide (add_compile_options), so the library, tests, tools, examples and
# benchmarks all build with the same warnings and, when RECAP_SANITIZE is set, the same
# sanitizers: a sanitizer only helps if the test program and the library are both instrumented.

# nvcc sits in /usr/local/cuda/bin, which is often not on PATH. Point CMake at it before
# project() enables CUDA, unless the user chose a compiler already.
macro(recap_find_cuda_compiler)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(RECAP_NVCC nvcc PATHS /usr/local/cuda/bin)
    mark_as_advanced(RECAP_NVCC)
    if(RECAP_NVCC)
      set(CMAKE_CUDA_COMPILER "${RECAP_NVCC}")
    endif()
  endif()
endmacro()

function(recap_add_compile_options)
  # Debug builds check the library's internal invariants (RECAP__ASSERT, src/core/assert.h).
  add_compile_definitions("$<$<CONFIG:Debug>:RECAP_DEBUG>")
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C>:-Wall;-Wextra;-Wpedantic>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  if(RECAP_WERROR)
    add_compile_options(
      "$<$<COMPILE_LANGUAGE:C>:-Werror>"
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
      "$<$<COMPILE_LANGUAGE:C>:${flags}>"
      "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
    # CMake links C and CUDA programs through the host compiler, which takes the flags as they are.
    add_link_options("-fsanitize=${RECAP_SANITIZE}")
  endif()
endfunction()
