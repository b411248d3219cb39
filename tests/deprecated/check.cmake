# SPDX-License-Identifier: BSD-3-Clause
# check.cmake — RECAP_DEPRECATED makes the compiler warn when a caller uses a name kept for one
# more release, and the warning names the replacement.
#
# Compiles name_use.c twice with -Werror=deprecated-declarations: calling the new name, which
# must succeed, so that a broken include path or compiler cannot pass for the warning; and with
# OLD_NAME (the deprecated recap_graph_set_update_policy), which must fail with a
# deprecated-declarations diagnostic that names recap_graph_update_policy_set.
#
# cmake -DCC=<compiler> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch folder> -P check.cmake

set(source "${CMAKE_CURRENT_LIST_DIR}/name_use.c")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(flags -c -std=c11 -Werror=deprecated-declarations "-I${SOURCE_DIR}/include")

execute_process(COMMAND "${CC}" ${flags} -o "${WORK_DIR}/new.o" "${source}"
                RESULT_VARIABLE new_rc OUTPUT_VARIABLE new_out ERROR_VARIABLE new_out)
if(NOT new_rc EQUAL 0)
  message(FATAL_ERROR "the file that calls the new name does not compile:\n${new_out}")
endif()

execute_process(COMMAND "${CC}" ${flags} -DOLD_NAME -o "${WORK_DIR}/old.o" "${source}"
                RESULT_VARIABLE old_rc OUTPUT_VARIABLE old_out ERROR_VARIABLE old_out)
if(old_rc EQUAL 0)
  message(FATAL_ERROR "calling recap_graph_set_update_policy compiled without a diagnostic")
endif()
if(NOT old_out MATCHES "deprecated-declarations" OR NOT old_out MATCHES
                                                    "recap_graph_update_policy_set")
  message(FATAL_ERROR "the compile failed, but not with the deprecation naming the new name:\n"
                      "${old_out}")
endif()
message(STATUS "calling a deprecated name fails as it should:\n${old_out}")
