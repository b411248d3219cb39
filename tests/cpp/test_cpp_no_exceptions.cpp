/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cpp_no_exceptions.cpp — the C++ layer built with -fno-exceptions, on the CPU fake: a
 * failed call goes to the error handler with its status and message, and the call never
 * returns.
 *
 *     test_cpp_no_exceptions handler   the handler installed: it checks what it gets and exits 0
 *     test_cpp_no_exceptions default   no handler: the default prints the failure and aborts,
 *                                      which this program's SIGABRT handler says, exiting 0
 *
 * Exit status 1 when the failing call returns, or the handler gets something else.
 */
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "recap/recap.hpp"

#include "reset.h"
#include "fake/fake.h"

#if RECAP_CPP_EXCEPTIONS
#  error "this program must be built without exceptions"
#endif

namespace {

void exit_if_expected(recap_status_t status, const char *message) {
  bool expected = status == RECAP_ERROR_INVALID_USAGE && std::strstr(message, "replay") &&
                  std::strcmp(message, recap_last_error()) == 0;
  std::printf("handler: %s: %s\n", recap_status_name(status), message);
  std::exit(expected ? 0 : 1);
}

void say_aborted(int) {
  static const char text[] = "std::abort() called\n";
  ssize_t written = write(STDERR_FILENO, text, sizeof text - 1);
  _exit(written == static_cast<ssize_t>(sizeof text - 1) ? 0 : 1);
}

} // namespace

int main(int argc, char **argv) {
  /* No argument: the handler's run (what a runner of every test program, valgrind's, does). */
  const char *mode = argc == 2 ? argv[1] : "handler";
  if (argc > 2 || (std::strcmp(mode, "handler") && std::strcmp(mode, "default"))) {
    std::fprintf(stderr, "usage: %s [handler|default]\n", argv[0]);
    return 2;
  }
  recap_test_reset_graphs();
  if (std::strcmp(mode, "handler") == 0)
    recap::set_error_handler(exit_if_expected);
  else
    std::signal(SIGABRT, say_aborted);

  /* Calls that succeed go on as with exceptions. */
  recap_stream_t s = recap__fake_stream_new();
  recap::graph captured;
  captured.capture(s, [](recap_stream_t stream) { recap__fake_stream_enqueue(stream); });
  captured.replay(s);

  recap::graph fresh;
  fresh.replay(s); /* nothing captured: RECAP_ERROR_INVALID_USAGE */
  std::fprintf(stderr, "the failed replay returned\n");
  return 1;
}
