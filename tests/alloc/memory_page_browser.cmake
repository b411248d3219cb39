# SPDX-License-Identifier: BSD-3-Clause
# memory_page_browser.cmake — the memory page in a real browser: memory_page_write draws a state
# on the fake (three pools, one asleep; three segments), headless Chromium loads the page, and
# the tree it parsed must hold what the text holds: a row and a section per pool, one of each
# asleep, a bar per segment, a block per block. A page the parser had to repair (a tag left
# open, a quote in an attribute) would lose or move some of them.
#
#   cmake -DWRITER=memory_page_write -DCHROMIUM=chromium -DWORK=dir -P memory_page_browser.cmake
foreach(var WRITER CHROMIUM WORK)
  if(NOT ${var})
    message(FATAL_ERROR "memory_page_browser.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(page "${WORK}/memory.html")
execute_process(COMMAND "${WRITER}" "${page}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${WRITER} ${page} failed (${rc})")
endif()
file(READ "${page}" html)

execute_process(
  COMMAND "${CHROMIUM}" --headless --no-sandbox --disable-gpu --no-first-run
          --user-data-dir=${WORK}/profile --window-size=1400,1000 --dump-dom "file://${page}"
  OUTPUT_VARIABLE dom ERROR_VARIABLE browser_log RESULT_VARIABLE rc TIMEOUT 90)
file(WRITE "${WORK}/dom.html" "${dom}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CHROMIUM} --dump-dom failed (${rc}):\n${browser_log}")
endif()

# How many times the page's text holds regex: count, and the browser's tree must hold it as often.
function(expect_both regex count what)
  foreach(tree html dom)
    string(REGEX MATCHALL "${regex}" found "${${tree}}")
    list(LENGTH found n)
    if(NOT n EQUAL count)
      message(FATAL_ERROR "the ${tree} holds ${n} ${what} (${regex}), expected ${count}; "
                          "the page is ${page}, the browser's tree ${WORK}/dom.html")
    endif()
  endforeach()
endfunction()

expect_both("<tr class=\"(awake|asleep)\">" 3 "pool rows")
expect_both("<tr class=\"asleep\">" 1 "asleep rows")
expect_both("<section class=\"pool( asleep)?\" id=\"pool-0-[0-2]\">" 3 "pool sections")
expect_both("<section class=\"pool asleep\"" 1 "asleep sections")
expect_both("<div class=\"bar\">" 3 "bars")
expect_both("<div class=\"block (allocated|waiting|free)\" style=\"width:[0-9.]+%\" title=\"0x[0-9a-f]+ - 0x[0-9a-f]+ " 7 "blocks")
expect_both("<div class=\"block waiting\"" 1 "waiting blocks")
expect_both("<span class=\"badge asleep\">asleep \\(offloaded\\)</span>" 2 "asleep badges")
