# The share directory the binaries look for beside themselves (src/common/resources.cpp): in the
# build tree build/share/faultline links to the source tree's recipes and Python helper, so an
# edited recipe needs no rebuild; `cmake --install` copies the same files to <prefix>/share/faultline.
set(FAULTLINE_BUILD_SHARE ${PROJECT_BINARY_DIR}/share/faultline)
file(MAKE_DIRECTORY ${FAULTLINE_BUILD_SHARE})
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/recipes ${FAULTLINE_BUILD_SHARE}/recipes SYMBOLIC)
file(CREATE_LINK ${PROJECT_SOURCE_DIR}/probes/python ${FAULTLINE_BUILD_SHARE}/python SYMBOLIC)

include(GNUInstallDirs)
# A LibTorch outside the system's library path (Torch_DIR) stays found from the installed binary.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/recipes/ DESTINATION ${CMAKE_INSTALL_DATADIR}/faultline/recipes
        FILES_MATCHING PATTERN "*.toml")
install(FILES ${PROJECT_SOURCE_DIR}/probes/python/faultline_probe.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/faultline/python)
