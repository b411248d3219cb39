# SPDX-License-Identifier: BSD-3-Clause
# launch.cmake — what examples of one process per GPU share to start under a launcher: the rank
# from the launcher's environment (launch_env.c) and the hand-over of NCCL's unique id from
# rank 0 over TCP or a shared file (rendezvous.c). Plain C and POSIX, no CUDA: examples/dp_mlp
# links it, and the CPU tests (tests/examples/) test it. The first inclusion defines the target.
if(NOT TARGET recap_example_launch)
  add_library(recap_example_launch STATIC
    "${CMAKE_CURRENT_LIST_DIR}/launch_env.c"
    "${CMAKE_CURRENT_LIST_DIR}/rendezvous.c")
  target_include_directories(recap_example_launch PUBLIC "${CMAKE_CURRENT_LIST_DIR}")
endif()
