# SPDX-License-Identifier: BSD-3-Clause
# recap_find_nccl_headers(): where nccl.h is, for src/device/nccl.c only.
#
# recap never links NCCL (it loads libnccl.so.2 at run time); it needs the header for NCCL's
# types and signatures. Searched in order: NCCL_INCLUDE_DIR, NCCL_ROOT/include, the
# nvidia-nccl-cu13 (or -cu12) wheel of the python3 on the PATH (PyTorch installs it), then the
# system's include directories; RECAP_WITH_NCCL=OFF searches nothing. Sets RECAP_NCCL_INCLUDE_DIR in the caller's scope (empty when
# not found) and says at configure time what it found.
set(NCCL_ROOT "" CACHE PATH "A directory with include/nccl.h (an NCCL install or the nvidia/nccl folder of the nvidia-nccl wheel)")
set(NCCL_INCLUDE_DIR "" CACHE PATH "The directory that holds nccl.h (overrides NCCL_ROOT)")

option(RECAP_WITH_NCCL "Build the NCCL integration when nccl.h is found (OFF: without it)" ON)

function(recap_find_nccl_headers)
  if(NOT RECAP_WITH_NCCL)
    message(STATUS "NCCL headers not searched (RECAP_WITH_NCCL=OFF): recap builds without the NCCL integration")
    set(RECAP_NCCL_INCLUDE_DIR "" PARENT_SCOPE)
    return()
  endif()
  set(candidates "")
  if(NCCL_INCLUDE_DIR)
    list(APPEND candidates "${NCCL_INCLUDE_DIR}")
  endif()
  if(NCCL_ROOT)
    list(APPEND candidates "${NCCL_ROOT}/include")
  endif()
  if(DEFINED ENV{NCCL_ROOT})
    list(APPEND candidates "$ENV{NCCL_ROOT}/include")
  endif()
  # The wheel's nvidia.nccl may be a namespace package (no __file__): take every folder of
  # its __path__.
  find_program(RECAP_PYTHON3 python3)
  if(RECAP_PYTHON3)
    execute_process(
      COMMAND "${RECAP_PYTHON3}" -c
              "import nvidia.nccl as m; print(';'.join(list(getattr(m, '__path__', []))))"
      OUTPUT_VARIABLE wheel_dirs OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET RESULT_VARIABLE wheel_rc)
    if(wheel_rc EQUAL 0 AND wheel_dirs)
      foreach(dir IN LISTS wheel_dirs)
        list(APPEND candidates "${dir}/include")
      endforeach()
    endif()
  endif()
  list(APPEND candidates /usr/include /usr/local/include)
  set(found "")
  foreach(dir IN LISTS candidates)
    if(EXISTS "${dir}/nccl.h")
      set(found "${dir}")
      break()
    endif()
  endforeach()
  if(found)
    file(STRINGS "${found}/nccl.h" code_line REGEX "^#define NCCL_VERSION_CODE ")
    string(REGEX REPLACE "^#define NCCL_VERSION_CODE +([0-9]+).*" "\\1" code "${code_line}")
    message(STATUS "NCCL headers: ${found} (NCCL_VERSION_CODE ${code}); recap loads libnccl.so.2 at run time")
  else()
    message(STATUS "NCCL headers not found: recap builds without the NCCL integration "
                   "(set NCCL_ROOT or NCCL_INCLUDE_DIR to a directory with nccl.h, or install "
                   "the nvidia-nccl-cu13 wheel for python3)")
  endif()
  set(RECAP_NCCL_INCLUDE_DIR "${found}" PARENT_SCOPE)
endfunction()
