# gb_cuda_host: the pure-C part of the CUDA backend (memory plan, step
# wiring). It builds without CUDA so the host twin and the CPU tests in
# tests/cuda run everywhere; kernels/cuda and tests/cuda both include this.
if(NOT TARGET gb_cuda_host)
  add_library(gb_cuda_host STATIC ${CMAKE_CURRENT_LIST_DIR}/plan.c ${CMAKE_CURRENT_LIST_DIR}/net.c)
  target_include_directories(gb_cuda_host PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(gb_cuda_host PUBLIC gb_model)
  set_target_properties(gb_cuda_host PROPERTIES C_VISIBILITY_PRESET hidden)
endif()
