# SPDX-License-Identifier: BSD-3-Clause
# RecapCuda.cmake — whether this build has CUDA (the option RECAP_CUDA), and the CUDA language and
# toolkit when it does.
#
# With CUDA, the library holds its CUDA seam (src/device/cuda*.c, driver.c and the .cu kernels)
# and the GPU tests, examples, benchmarks and recap-device-probe are built. Without it, a plain C
# compiler builds the rest of the library, the CPU fake and the CPU suite: the library's device
# table is src/device/no_cuda.c, which answers every device call with RECAP_ERROR_NO_DEVICE. The
# option defaults to ON where a CUDA compiler is found and to OFF otherwise, so that a machine
# without the toolkit still builds and tests everything above the device layer.

include(CheckLanguage)

# nvcc sits in /usr/local/cuda/bin, which is often not on PATH. Point CMake at it before CUDA is
# enabled, unless the user chose a compiler already (or an earlier search found none, which
# this search then repeats).
macro(recap_find_cuda_compiler)
  if(NOT CMAKE_CUDA_COMPILER AND "$ENV{CUDACXX}" STREQUAL "")
    find_program(RECAP_NVCC nvcc PATHS /usr/local/cuda/bin)
    mark_as_advanced(RECAP_NVCC)
    if(RECAP_NVCC)
      set(CMAKE_CUDA_COMPILER "${RECAP_NVCC}")
    endif()
  endif()
endmacro()

# Sets recap_cuda_compiler_missing to why no CUDA compiler is usable, or to "" when one is
# (CMAKE_CUDA_COMPILER then names it). A macro, as check_language sets cache entries.
macro(recap__look_for_cuda_compiler)
  recap_find_cuda_compiler()
  set(recap_cuda_compiler_missing "")
  if(CMAKE_CUDA_COMPILER)
    set(recap_cuda_named "CMAKE_CUDA_COMPILER" "${CMAKE_CUDA_COMPILER}")
  elseif(NOT "$ENV{CUDACXX}" STREQUAL "")
    set(recap_cuda_named "CUDACXX" "$ENV{CUDACXX}")
  else()
    set(recap_cuda_named "")
  endif()
  if(recap_cuda_named)
    # A compiler the user named: CMake's own checks take it from here, but a path that is not
    # there means no CUDA.
    list(GET recap_cuda_named 1 recap_cuda_path)
    if(IS_ABSOLUTE "${recap_cuda_path}" AND NOT EXISTS "${recap_cuda_path}")
      list(GET recap_cuda_named 0 recap_cuda_variable)
      set(recap_cuda_compiler_missing
          "${recap_cuda_variable} names ${recap_cuda_path}, which does not exist")
    endif()
  else()
    check_language(CUDA)
    if(NOT CMAKE_CUDA_COMPILER)
      set(recap_cuda_compiler_missing
          "no CUDA compiler (nvcc) was found on PATH, in /usr/local/cuda/bin or through CUDACXX")
    endif()
  endif()
endmacro()

# Decide RECAP_CUDA and, when ON, enable CUDA and find the toolkit (CUDA:: targets). Call it
# once, right after project(), in the top-level file: enable_language must run at file scope, so
# this is a macro.
macro(recap_setup_cuda)
  if(NOT DEFINED RECAP_CUDA)
    recap__look_for_cuda_compiler()
    if(recap_cuda_compiler_missing)
      set(recap_cuda_default OFF)
      # Remembered, so that a later configure of this build directory says why again.
      set(RECAP__CUDA_MISSING "${recap_cuda_compiler_missing}" CACHE INTERNAL
          "why RECAP_CUDA defaulted to OFF")
    else()
      set(recap_cuda_default ON)
    endif()
  endif()
  option(RECAP_CUDA
         "Build the CUDA seam, GPU tests, examples and benchmarks (OFF: the CPU build, no nvcc)"
         ${recap_cuda_default})

  if(RECAP_CUDA)
    unset(RECAP__CUDA_MISSING CACHE)
    recap__look_for_cuda_compiler()
    if(recap_cuda_compiler_missing)
      message(FATAL_ERROR
              "RECAP_CUDA is ON but ${recap_cuda_compiler_missing}. Install the CUDA toolkit "
              "(https://developer.nvidia.com/cuda-downloads), set CUDACXX or "
              "CMAKE_CUDA_COMPILER to its nvcc, or configure with -DRECAP_CUDA=OFF to build and "
              "test recap without CUDA.")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
  else()
    if(RECAP__CUDA_MISSING)
      set(recap_cuda_why "RECAP_CUDA is OFF because ${RECAP__CUDA_MISSING}")
      set(recap_cuda_message_kind WARNING)
    else()
      set(recap_cuda_why "RECAP_CUDA is OFF")
      set(recap_cuda_message_kind STATUS)
    endif()
    message(${recap_cuda_message_kind}
            "${recap_cuda_why}: recap builds without CUDA. The library's device calls return "
            "RECAP_ERROR_NO_DEVICE (\"built without CUDA\"); the CPU fake and the CPU test "
            "suite are built. Left out: the CUDA seam (src/device/cuda*.c, driver.c, the .cu "
            "kernels), the GPU tests (label gpu), the examples, the benchmarks, the tool "
            "recap-device-probe and the NCCL headers' search. For the full build, install the "
            "CUDA toolkit and configure a new build directory (or this one with "
            "-DRECAP_CUDA=ON).")
  endif()
endmacro()
