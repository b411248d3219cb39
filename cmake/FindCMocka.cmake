# SPDX-License-Identifier: BSD-3-Clause
# FindCMocka.cmake — find the cmocka test framework and give it as the target cmocka::cmocka.
#
# cmocka 1.1.5 (Debian bookworm) installs a config file with variables but no target; newer
# releases define cmocka::cmocka themselves, and that target is used when it exists.

if(TARGET cmocka::cmocka)
  set(CMocka_FOUND TRUE)
  return()
endif()

find_path(CMOCKA_INCLUDE_DIR cmocka.h)
find_library(CMOCKA_LIBRARY cmocka)
mark_as_advanced(CMOCKA_INCLUDE_DIR CMOCKA_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CMocka REQUIRED_VARS CMOCKA_LIBRARY CMOCKA_INCLUDE_DIR)

if(CMocka_FOUND)
  add_library(cmocka::cmocka UNKNOWN IMPORTED)
  set_target_properties(cmocka::cmocka PROPERTIES
    IMPORTED_LOCATION "${CMOCKA_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CMOCKA_INCLUDE_DIR}")
endif()
