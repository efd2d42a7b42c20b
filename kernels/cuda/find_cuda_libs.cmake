# find_cuda_libs.cmake - cuDNN and NCCL for the CUDA backend, after
# find_package(CUDAToolkit): sets CUDNN_LIB, CUDNN_INCLUDE, NCCL_LIB and
# NCCL_INCLUDE (each -NOTFOUND when missing). Looked for under GB_CUDNN_ROOT
# and GB_NCCL_ROOT (cache or environment: an install prefix with include/ and
# lib/), next to the CUDA toolkit, and in the system's paths. The prefixes let
# a machine use the nvidia-cudnn-cu13 / nvidia-nccl-cu13 Python wheels that
# PyTorch brings (site-packages/nvidia/cudnn, .../nccl), whose libraries
# carry only their versioned names, hence libcudnn.so.9 and libnccl.so.2.
set(GB_CUDNN_ROOT "$ENV{GB_CUDNN_ROOT}" CACHE PATH "cuDNN prefix (include/, lib/) when not with CUDA")
set(GB_NCCL_ROOT "$ENV{GB_NCCL_ROOT}" CACHE PATH "NCCL prefix (include/, lib/) when not with CUDA")
set(_gb_cuda_lib_hints ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
set(_gb_cuda_inc_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(CUDNN_LIB NAMES cudnn libcudnn.so.9
             HINTS ${GB_CUDNN_ROOT}/lib ${GB_CUDNN_ROOT}/lib64 ${_gb_cuda_lib_hints})
find_path(CUDNN_INCLUDE cudnn.h HINTS ${GB_CUDNN_ROOT}/include ${_gb_cuda_inc_hints})
find_library(NCCL_LIB NAMES nccl libnccl.so.2
             HINTS ${GB_NCCL_ROOT}/lib ${GB_NCCL_ROOT}/lib64 ${_gb_cuda_lib_hints})
find_path(NCCL_INCLUDE nccl.h HINTS ${GB_NCCL_ROOT}/include ${_gb_cuda_inc_hints})
