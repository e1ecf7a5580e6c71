# FAULTLINE_CUDA: AUTO (default) builds the GPU module's CUDA parts (gpu/) when the CUDA toolkit
# is found (/usr/local/cuda is looked at too), ON requires it, OFF skips it. Only gpu/ links
# CUDA, CUPTI and NCCL; the rest of the build works the same without a toolkit.
set(FAULTLINE_CUDA AUTO CACHE STRING "Build the CUDA/CUPTI/NCCL parts: AUTO, ON or OFF")
set_property(CACHE FAULTLINE_CUDA PROPERTY STRINGS AUTO ON OFF)

set(FAULTLINE_CUDA_ENABLED OFF)
if(NOT FAULTLINE_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  if(FAULTLINE_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  # NCCL ships with PyTorch's wheels and some toolkits, not with every one: look next to CUDA.
  find_path(FAULTLINE_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
            PATH_SUFFIXES include)
  find_library(FAULTLINE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
               PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cupti AND FAULTLINE_NCCL_INCLUDE AND FAULTLINE_NCCL_LIBRARY)
    set(FAULTLINE_CUDA_ENABLED ON)
    add_library(faultline_nccl INTERFACE)
    target_include_directories(faultline_nccl INTERFACE ${FAULTLINE_NCCL_INCLUDE})
    target_link_libraries(faultline_nccl INTERFACE ${FAULTLINE_NCCL_LIBRARY})
    message(STATUS "faultline: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR}), "
                   "NCCL ${FAULTLINE_NCCL_LIBRARY}: building the GPU module")
  elseif(FAULTLINE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FAULTLINE_CUDA=ON but CUPTI or NCCL was not found (CUDAToolkit_ROOT, "
                        "NCCL_HOME)")
  else()
    message(STATUS "faultline: no CUDA toolkit with CUPTI and NCCL; GPU module skipped")
  endif()
endif()
