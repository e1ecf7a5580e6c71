# Generates common/version.hpp (FAULTLINE_VERSION, FAULTLINE_GIT_COMMIT) into the build tree at
# configure time; `faultline --version` and `faultline-train --version` print it.
find_package(Git QUIET)
set(FAULTLINE_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE status ERROR_QUIET)
  if(status EQUAL 0 AND commit)
    set(FAULTLINE_GIT_COMMIT ${commit})
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/src/common/version.hpp.in
               ${PROJECT_BINARY_DIR}/generated/common/version.hpp @ONLY)
add_library(faultline_version INTERFACE)
target_include_directories(faultline_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
