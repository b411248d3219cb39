# SPDX-License-Identifier: BSD-3-Clause
# check.cmake — RECAP_NODISCARD makes the compiler warn when a caller drops a status.
#
# Compiles status_use.c twice with -Werror=unused-result: as it is (the status checked), which
# must succeed; and with DROP_STATUS (recap_malloc's status dropped), which must fail with an
# unused-result diagnostic that names recap_malloc.
#
# cmake -DCC=<compiler> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch folder> -P check.cmake

include("${CMAKE_CURRENT_LIST_DIR}/../compile_diagnostic.cmake")
recap_expect_diagnostic("${CMAKE_CURRENT_LIST_DIR}/status_use.c" -Werror=unused-result DROP_STATUS
                        "dropping recap_malloc's status" "recap_malloc" "unused-result")
