# SPDX-License-Identifier: BSD-3-Clause
# check.cmake — RECAP_NODISCARD makes the compiler warn when a caller drops a status.
#
# Compiles status_use.c twice with -Werror=unused-result: as it is (the status checked), which
# must succeed, so that a broken include path or compiler cannot pass for the warning; and with
# DROP_STATUS (recap_malloc's status dropped), which must fail with an unused-result diagnostic
# that names recap_malloc.
#
# cmake -DCC=<compiler> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch folder> -P check.cmake

set(source "${CMAKE_CURRENT_LIST_DIR}/status_use.c")
file(MAKE_DIRECTORY "${WORK_DIR}")
# -c, not -fsyntax-only: GCC reports unused results only when it generates code.
set(flags -c -std=c11 -Werror=unused-result "-I${SOURCE_DIR}/include")

execute_process(COMMAND "${CC}" ${flags} -o "${WORK_DIR}/kept.o" "${source}"
                RESULT_VARIABLE kept_rc OUTPUT_VARIABLE kept_out ERROR_VARIABLE kept_out)
if(NOT kept_rc EQUAL 0)
  message(FATAL_ERROR "the file that checks its status does not compile:\n${kept_out}")
endif()

execute_process(COMMAND "${CC}" ${flags} -DDROP_STATUS -o "${WORK_DIR}/dropped.o" "${source}"
                RESULT_VARIABLE dropped_rc OUTPUT_VARIABLE dropped_out
                ERROR_VARIABLE dropped_out)
if(dropped_rc EQUAL 0)
  message(FATAL_ERROR "dropping recap_malloc's status compiled without a diagnostic")
endif()
if(NOT dropped_out MATCHES "recap_malloc" OR NOT dropped_out MATCHES "unused-result")
  message(FATAL_ERROR "the compile failed, but not with the unused-result diagnostic:\n"
                      "${dropped_out}")
endif()
message(STATUS "dropping recap_malloc's status fails as it should:\n${dropped_out}")
