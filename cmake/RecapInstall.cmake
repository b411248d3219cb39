# SPDX-License-Identifier: BSD-3-Clause
# RecapInstall.cmake — what `cmake --install` puts in place: headers, both libraries, the CMake
# package (find_package(recap CONFIG) → recap::recap, recap::recap_static) and recap.pc.

include(CMakePackageConfigHelpers)

function(recap_install)
  set(cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/recap")

  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
          COMPONENT Development
          FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.cuh")

  install(TARGETS recap_shared recap_static EXPORT recap-targets
          LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT Runtime
                  NAMELINK_COMPONENT Development
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT Development
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT Runtime)
  install(EXPORT recap-targets NAMESPACE recap:: FILE recap-targets.cmake
          DESTINATION "${cmake_dir}" COMPONENT Development)

  # The config file finds the static library's dependencies; it suggests the toolkit recap was
  # built with, but a CUDAToolkit_ROOT given by the consumer wins. A build without CUDA
  # (RECAP_CUDA=OFF) needs no toolkit.
  set(RECAP_CUDA_ROOT "")
  if(RECAP_CUDA)
    get_filename_component(RECAP_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  endif()
  configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/recap-config.cmake.in"
    "${PROJECT_BINARY_DIR}/recap-config.cmake"
    INSTALL_DESTINATION "${cmake_dir}")
  # Before 1.0 a minor release may change the API, so only the same major.minor is compatible.
  write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/recap-config-version.cmake"
    COMPATIBILITY SameMinorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/recap-config.cmake"
                "${PROJECT_BINARY_DIR}/recap-config-version.cmake"
          DESTINATION "${cmake_dir}" COMPONENT Development)

  # recap.pc finds its prefix from its own place (${pcfiledir}), so an install moved with
  # --prefix or DESTDIR still works.
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(RECAP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(RECAP_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(RECAP_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
  else()
    file(RELATIVE_PATH up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
    string(REGEX REPLACE "/$" "" up "${up}")
    set(RECAP_PC_PREFIX "\${pcfiledir}/${up}")
    set(RECAP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
    set(RECAP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  set(RECAP_PC_LIBS_PRIVATE "-pthread")
  if(RECAP_CUDA)
    set(RECAP_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -pthread")
  endif()
  foreach(lib IN LISTS CMAKE_DL_LIBS ITEMS rt)
    string(APPEND RECAP_PC_LIBS_PRIVATE " -l${lib}")
  endforeach()
  configure_file("${PROJECT_SOURCE_DIR}/cmake/recap.pc.in" "${PROJECT_BINARY_DIR}/recap.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/recap.pc"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT Development)
endfunction()
