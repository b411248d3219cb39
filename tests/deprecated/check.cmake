# SPDX-License-Identifier: BSD-3-Clause
# check.cmake — RECAP_DEPRECATED makes the compiler warn when a caller uses a name kept for one
# more release, and the warning names the replacement.
#
# Compiles name_use.c twice with -Werror=deprecated-declarations: calling the new name, which
# must succeed; and with OLD_NAME (the deprecated recap_graph_set_update_policy), which must fail
# with a deprecated-declarations diagnostic that names recap_graph_update_policy_set.
#
# cmake -DCC=<compiler> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch folder> -P check.cmake

include("${CMAKE_CURRENT_LIST_DIR}/../compile_diagnostic.cmake")
recap_expect_diagnostic("${CMAKE_CURRENT_LIST_DIR}/name_use.c" -Werror=deprecated-declarations
                        OLD_NAME "calling recap_graph_set_update_policy"
                        "deprecated-declarations" "recap_graph_update_policy_set")
