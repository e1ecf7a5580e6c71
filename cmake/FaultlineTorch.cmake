# Common settings for every target that includes LibTorch: one precompiled <torch/torch.h>
# (about 18 s per unit otherwise) shared with REUSE_FROM, and the same definitions everywhere so
# the precompiled header stays valid.
function(faultline_torch_setup)
  add_library(faultline_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/src/trainer/torch_pch.cpp)
  target_link_libraries(faultline_torch_pch PUBLIC torch)
  target_compile_definitions(faultline_torch_pch PUBLIC USE_C10D_GLOO USE_DISTRIBUTED)
  target_precompile_headers(faultline_torch_pch PRIVATE <torch/torch.h>)
endfunction()

function(faultline_torch_target target)
  target_link_libraries(${target} PUBLIC torch)
  target_compile_definitions(${target} PUBLIC USE_C10D_GLOO USE_DISTRIBUTED)
  target_precompile_headers(${target} REUSE_FROM faultline_torch_pch)
endfunction()
