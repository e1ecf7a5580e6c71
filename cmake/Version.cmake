# Generates common/version.hpp (FAULTLINE_VERSION, FAULTLINE_GIT_COMMIT) into the build tree and
# offers it as the header-only target faultline_version. The commit is the one at configure time.
find_package(Git QUIET)
set(FAULTLINE_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE faultline_git_commit OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE faultline_git_result ERROR_QUIET)
  if(faultline_git_result EQUAL 0 AND faultline_git_commit)
    set(FAULTLINE_GIT_COMMIT "${faultline_git_commit}")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/src/common/version.hpp.in
  ${PROJECT_BINARY_DIR}/generated/common/version.hpp @ONLY)
add_library(faultline_version INTERFACE)
target_include_directories(faultline_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
