# SPDX-License-Identifier: BSD-3-Clause
# compile_diagnostic.cmake — the shared step of the compile-time API checks (tests/nodiscard,
# tests/deprecated): a source must compile cleanly as it is, and fail with a given diagnostic
# when one macro is defined.

# recap_expect_diagnostic(<source> <werror-flag> <define> <what> <pattern>...): compiles source
# with ${CC}, -std=c11, the werror flag and SOURCE_DIR/include into WORK_DIR, once as it is (must
# succeed, so that a broken include path or compiler cannot pass for the diagnostic) and once
# with -D<define> (must fail, its output matching every pattern). what names the second case in
# the messages.
function(recap_expect_diagnostic source werror define what)
  file(MAKE_DIRECTORY "${WORK_DIR}")
  # -c, not -fsyntax-only: GCC reports unused results only when it generates code.
  set(flags -c -std=c11 "${werror}" "-I${SOURCE_DIR}/include")
  execute_process(COMMAND "${CC}" ${flags} -o "${WORK_DIR}/clean.o" "${source}"
                  RESULT_VARIABLE clean_rc OUTPUT_VARIABLE clean_out ERROR_VARIABLE clean_out)
  if(NOT clean_rc EQUAL 0)
    message(FATAL_ERROR "${source} does not compile as it is:\n${clean_out}")
  endif()
  execute_process(COMMAND "${CC}" ${flags} "-D${define}" -o "${WORK_DIR}/flagged.o" "${source}"
                  RESULT_VARIABLE flagged_rc OUTPUT_VARIABLE flagged_out
                  ERROR_VARIABLE flagged_out)
  if(flagged_rc EQUAL 0)
    message(FATAL_ERROR "${what} compiled without a diagnostic")
  endif()
  foreach(pattern IN LISTS ARGN)
    if(NOT flagged_out MATCHES "${pattern}")
      message(FATAL_ERROR "${what} failed, but not with a diagnostic that says ${pattern}:\n"
                          "${flagged_out}")
    endif()
  endforeach()
  message(STATUS "${what} fails as it should:\n${flagged_out}")
endfunction()
