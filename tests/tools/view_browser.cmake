# SPDX-License-Identifier: BSD-3-Clause
# view_browser.cmake — the viewer's page in a real browser: write the fixture graph's page
# (view_fixture_page), load it in headless Chromium, and fail on a JavaScript error the page
# recorded (<html data-recap-error>) or an empty drawing (data-recap-rendered missing, 0, or not
# the number of nodes in the page's data).
#
#   cmake -DFIXTURE=view_fixture_page -DCHROMIUM=chromium -DWORK=dir [-DBREAK=ON] [-DREGIONS=ON]
#         -P view_browser.cmake
#
# BREAK=ON plants a script error in the page first, to show that the check sees one. REGIONS=ON
# draws the fixture with regions (view_fixture_page --regions) and also checks that the page drew
# a frame per body and a dashed link from each conditional node to each of its bodies.
foreach(var FIXTURE CHROMIUM WORK)
  if(NOT ${var})
    message(FATAL_ERROR "view_browser.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(page "${WORK}/fixture.html")
set(fixture_options "")
if(REGIONS)
  set(fixture_options --regions)
endif()
execute_process(COMMAND "${FIXTURE}" ${fixture_options} "${page}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FIXTURE} ${page} failed (${rc})")
endif()
file(READ "${page}" html)
string(REGEX MATCHALL "{\"i\":[0-9]+," nodes "${html}")
list(LENGTH nodes expected)
if(expected EQUAL 0)
  message(FATAL_ERROR "the page's data holds no node")
endif()
if(BREAK)
  string(REPLACE "  root.setAttribute(" "  noSuchFunction();\n  root.setAttribute(" broken "${html}")
  if(broken STREQUAL html)
    message(FATAL_ERROR "BREAK: the place to plant an error was not found in the page")
  endif()
  file(WRITE "${page}" "${broken}")
endif()

execute_process(
  COMMAND "${CHROMIUM}" --headless --no-sandbox --disable-gpu --no-first-run
          --user-data-dir=${WORK}/profile --virtual-time-budget=2000 --window-size=1400,1000
          --dump-dom "file://${page}"
  OUTPUT_VARIABLE dom
  ERROR_VARIABLE browser_log
  RESULT_VARIABLE rc
  TIMEOUT 90)
file(WRITE "${WORK}/dom.html" "${dom}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chromium failed (${rc}):\n${browser_log}")
endif()
if(dom MATCHES "data-recap-error=\"([^\"]*)\"")
  message(FATAL_ERROR "the page recorded a JavaScript error: ${CMAKE_MATCH_1}")
endif()
if(NOT dom MATCHES "data-recap-rendered=\"([0-9]+)\"")
  message(FATAL_ERROR "the page did not finish drawing (no data-recap-rendered); DOM in "
                      "${WORK}/dom.html")
endif()
set(rendered "${CMAKE_MATCH_1}")
if(NOT rendered EQUAL expected)
  message(FATAL_ERROR "the page drew ${rendered} nodes of ${expected}")
endif()
string(REGEX MATCHALL "<g class=\"node\"" drawn "${dom}")
list(LENGTH drawn drawn_count)
if(NOT drawn_count EQUAL expected)
  message(FATAL_ERROR "the DOM holds ${drawn_count} node elements, expected ${expected}")
endif()
message(STATUS "the page drew all ${rendered} nodes with no JavaScript error")
if(REGIONS)
  string(REGEX MATCHALL "\"node\":[0-9]+,\"branch\":" bodies "${html}")
  list(LENGTH bodies body_count)
  string(REGEX MATCHALL "<g class=\"cluster body\"" frames "${dom}")
  list(LENGTH frames frame_count)
  string(REGEX MATCHALL "<path class=\"region-link\"" links "${dom}")
  list(LENGTH links link_count)
  if(body_count EQUAL 0 OR NOT frame_count EQUAL body_count OR NOT link_count EQUAL body_count)
    message(FATAL_ERROR "the page's data has ${body_count} bodies; the DOM holds ${frame_count} "
                        "body frames and ${link_count} region links")
  endif()
  message(STATUS "the page drew ${frame_count} body frames, each linked to its node")
endif()
