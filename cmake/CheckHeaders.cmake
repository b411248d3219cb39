# SPDX-License-Identifier: BSD-3-Clause
# CheckHeaders.cmake — every public header compiles on its own, as the first and only include of
# a file: in C11 with warnings as errors, and in C++17 when CXX names a C++ compiler. A header that
# leans on another being included first fails here.
#
#   cmake -DCC=<c compiler> [-DCXX=<c++ compiler>] -DSOURCE_DIR=<recap> -DWORK_DIR=<dir> -P CheckHeaders.cmake

file(GLOB headers RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/recap.h"
     "${SOURCE_DIR}/include/recap/*.h")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failed "")
foreach(header IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(c_file "${WORK_DIR}/${name}.c")
  file(WRITE "${c_file}" "#include <${header}>\nint recap_header_check_${name};\n")
  execute_process(COMMAND "${CC}" -std=c11 -Wall -Wextra -Wpedantic -Werror
                          "-I${SOURCE_DIR}/include" -c "${c_file}" -o "${WORK_DIR}/${name}.o"
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${header} (C): ${err}")
  endif()
  if(CXX)
    set(cxx_file "${WORK_DIR}/${name}.cpp")
    file(WRITE "${cxx_file}" "#include <${header}>\nint recap_header_check_${name};\n")
    execute_process(COMMAND "${CXX}" -std=c++17 -Wall -Wextra -Werror "-I${SOURCE_DIR}/include"
                            -c "${cxx_file}" -o "${WORK_DIR}/${name}.cpp.o"
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    if(NOT rc EQUAL 0)
      list(APPEND failed "${header} (C++): ${err}")
    endif()
  endif()
endforeach()
list(LENGTH headers count)
if(failed)
  list(JOIN failed "\n" failed)
  message(FATAL_ERROR "public headers that do not compile on their own:\n${failed}")
endif()
if(CXX)
  message(STATUS "${count} public headers compile on their own, in C11 and C++17")
else()
  message(STATUS "${count} public headers compile on their own, in C11 (no C++ compiler)")
endif()
