# Common settings for every target that includes LibTorch: one precompiled <torch/torch.h>
# (about 18 s per unit otherwise) shared with REUSE_FROM, and the same definitions everywhere so
# the precompiled header stays valid.

# The C++ standard LibTorch's headers need. From 2.11 or so they stop with "#error C++20 or later
# compatible compiler is required"; TorchConfig.cmake then sets CXX_STANDARD 20 on its imported
# `torch` target, which CMake does not pass on to the targets that link it. The rest of the project
# stays at its own standard (the libstdc++ ABI is the same across -std modes).
function(faultline_torch_cxx_standard out)
  get_target_property(torch_standard torch CXX_STANDARD)
  if(torch_standard AND torch_standard GREATER CMAKE_CXX_STANDARD)
    set(${out} ${torch_standard} PARENT_SCOPE)
  else()
    set(${out} ${CMAKE_CXX_STANDARD} PARENT_SCOPE)
  endif()
endfunction()

function(faultline_torch_setup)
  faultline_torch_cxx_standard(standard)
  message(STATUS "faultline: LibTorch ${Torch_VERSION}; its targets build as C++${standard}")
  add_library(faultline_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/src/trainer/torch_pch.cpp)
  target_link_libraries(faultline_torch_pch PUBLIC torch)
  target_compile_definitions(faultline_torch_pch PUBLIC USE_C10D_GLOO USE_DISTRIBUTED)
  set_target_properties(faultline_torch_pch PROPERTIES CXX_STANDARD ${standard})
  target_precompile_headers(faultline_torch_pch PRIVATE <torch/torch.h>)
endfunction()

function(faultline_torch_target target)
  faultline_torch_cxx_standard(standard)
  target_link_libraries(${target} PUBLIC torch)
  target_compile_definitions(${target} PUBLIC USE_C10D_GLOO USE_DISTRIBUTED)
  set_target_properties(${target} PROPERTIES CXX_STANDARD ${standard})
  target_precompile_headers(${target} REUSE_FROM faultline_torch_pch)
endfunction()
