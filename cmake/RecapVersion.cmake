# SPDX-License-Identifier: BSD-3-Clause
# RecapVersion.cmake — read the version from include/recap/core.h, so the header is its only source.

# recap_read_version(<header> <out-var>): sets <out-var> to "major.minor.patch" as the header's
# RECAP_VERSION_MAJOR/MINOR/PATCH macros give it.
function(recap_read_version header out_var)
  file(STRINGS "${header}" lines REGEX "^#define RECAP_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    set(value "")
    foreach(line IN LISTS lines)
      if(line MATCHES "^#define RECAP_VERSION_${part} +([0-9]+)")
        set(value "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(value STREQUAL "")
      message(FATAL_ERROR "RECAP_VERSION_${part} not found in ${header}")
    endif()
    list(APPEND parts "${value}")
  endforeach()
  list(JOIN parts "." version)
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()
