/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.cpp — a user's C++ program, on the installed C++ layer (recap/recap.hpp) only: the
 * version, the devices, and a failure caught as recap::error. Having no device (or no driver)
 * is fine here; any other failure is not.
 */
#include <cstdio>
#include <cstring>

#include <recap/recap.hpp>

int main() {
  std::printf("recap %s from C++ (backend %s)\n", recap_version_string(), recap_device_backend());
  if (recap_version() != RECAP_VERSION_HEX) {
    std::fprintf(stderr, "library version %x differs from header version %x\n", recap_version(),
                 static_cast<unsigned>(RECAP_VERSION_HEX));
    return 1;
  }

  int count = 0;
  try {
    recap::check(recap_device_count(&count));
    std::printf("%d CUDA device(s)\n", count);
  } catch (const recap::error &e) {
    if (e.status() != RECAP_ERROR_NO_DEVICE) {
      std::fprintf(stderr, "recap_device_count: %s: %s\n", e.status_name(), e.what());
      return 1;
    }
    std::printf("no CUDA device: %s\n", e.what());
  }

  /* A graph owned by the layer: replaying it before any capture throws, then it is freed. */
  try {
    recap::graph g;
    g.replay(nullptr);
    std::fprintf(stderr, "replaying an empty graph did not throw\n");
    return 1;
  } catch (const recap::error &e) {
    if (e.status() != RECAP_ERROR_INVALID_USAGE || std::strcmp(e.what(), recap_last_error())) {
      std::fprintf(stderr, "unexpected failure: %s: %s\n", e.status_name(), e.what());
      return 1;
    }
  }
  return 0;
}
