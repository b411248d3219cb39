# SPDX-License-Identifier: BSD-3-Clause
# mlp_model.cmake — the MLP example's model (layers, loss, Adam, data, the three ways of running
# a training step) as a static library, shared by examples/mlp and bench/bench_mlp. Included
# from both; the first inclusion defines the target. Needs cuBLAS: without it nothing is defined
# and the including file says so.
if(NOT TARGET recap_mlp_model AND TARGET CUDA::cublas)
  add_library(recap_mlp_model STATIC
    "${CMAKE_CURRENT_LIST_DIR}/mlp_model.c"
    "${CMAKE_CURRENT_LIST_DIR}/mlp_data.c"
    "${CMAKE_CURRENT_LIST_DIR}/mlp_kernels.cu")
  target_include_directories(recap_mlp_model PUBLIC "${CMAKE_CURRENT_LIST_DIR}")
  # One static CUDA runtime for recap and the model's own CUDA calls (the same context and
  # streams on both sides); cuBLAS is the toolkit's shared library.
  target_link_libraries(recap_mlp_model PUBLIC recap::recap_static CUDA::cudart_static
                        CUDA::cublas m)
endif()
