# SPDX-License-Identifier: BSD-3-Clause
# memory_tool.cmake — tools/recap-memory on a saved snapshot (memory_page_snapshot.json: a
# device with an awake default pool and an asleep, offloaded pool of 2 graphs): the page it
# writes, its exit status for a bad command line, an unreadable file and a text that is no
# snapshot; with CHROMIUM, the page as a browser parses it holds the same rows, sections and
# blocks.
#
#   cmake -DTOOL=recap-memory -DSNAPSHOT=memory_page_snapshot.json -DWORK=dir [-DCHROMIUM=chromium]
#         -P memory_tool.cmake
foreach(var TOOL SNAPSHOT WORK)
  if(NOT ${var})
    message(FATAL_ERROR "memory_tool.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(page "${WORK}/memory.html")

function(expect_in text needle what)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what} lacks: ${needle}\n---\n${text}")
  endif()
endfunction()

function(expect_count text regex count what)
  string(REGEX MATCHALL "${regex}" found "${text}")
  list(LENGTH found n)
  if(NOT n EQUAL count)
    message(FATAL_ERROR "${what}: ${n} matches of ${regex}, expected ${count}")
  endif()
endfunction()

execute_process(COMMAND "${TOOL}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "recap-memory without arguments exited ${rc}, expected 2")
endif()
expect_in("${err}" "usage: recap-memory SNAPSHOT.json PAGE.html" "the usage")

execute_process(COMMAND "${TOOL}" "${WORK}/missing.json" "${page}" RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "recap-memory on a missing file exited ${rc}, expected 1")
endif()
expect_in("${err}" "recap-memory: ${WORK}/missing.json: cannot read: No such file or directory"
          "the message for a missing file")

file(WRITE "${WORK}/broken.json" "{\"devices\": [\n  {\"device\": 0,]}")
execute_process(COMMAND "${TOOL}" "${WORK}/broken.json" "${page}" RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR EXISTS "${page}")
  message(FATAL_ERROR "recap-memory on broken JSON exited ${rc} (expected 1) or wrote a page")
endif()
expect_in("${err}"
          "recap-memory: ${WORK}/broken.json: recap_memory_html_from_json: snapshot_json is not JSON: at line 2, column 16, a member's name in quotes was expected"
          "the message for broken JSON")

execute_process(COMMAND "${TOOL}" "${SNAPSHOT}" "${page}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "recap-memory ${SNAPSHOT} ${page} exited ${rc}")
endif()
file(READ "${page}" html)
expect_in("${html}" "<tr class=\"asleep\"><td><a href=\"#pool-0-1\">pool {3,0}</a></td><td><span class=\"badge asleep\">asleep (offloaded)</span></td><td>VMM</td><td>1</td>" "the page")
expect_in("${html}" "<span class=\"k\">pools</span><span class=\"v\">2</span> (1 asleep)" "the page")
# Standard output: the same page.
execute_process(COMMAND "${TOOL}" "${SNAPSHOT}" - RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out STREQUAL html)
  message(FATAL_ERROR "recap-memory ${SNAPSHOT} - exited ${rc} or wrote another page")
endif()

if(CHROMIUM)
  execute_process(
    COMMAND "${CHROMIUM}" --headless --no-sandbox --disable-gpu --no-first-run
            --user-data-dir=${WORK}/profile --window-size=1400,1000 --dump-dom "file://${page}"
    OUTPUT_VARIABLE dom ERROR_VARIABLE browser_log RESULT_VARIABLE rc TIMEOUT 90)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${CHROMIUM} --dump-dom failed (${rc}): ${browser_log}")
  endif()
  # The browser's tree holds what the text does: a row per pool, one asleep; a section per
  # pool; four blocks in two bars.
  expect_count("${dom}" "<tr class=\"(awake|asleep)\">" 2 "the parsed page's pool rows")
  expect_count("${dom}" "<tr class=\"asleep\">" 1 "the parsed page's asleep rows")
  expect_count("${dom}" "<section class=\"pool( asleep)?\" id=\"pool-0-[01]\">" 2
               "the parsed page's pool sections")
  expect_count("${dom}" "<div class=\"bar\">" 2 "the parsed page's bars")
  expect_count("${dom}" "<div class=\"block (allocated|waiting|free)\"" 4 "the parsed page's blocks")
endif()
