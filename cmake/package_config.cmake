# package_config.cmake (included by the top CMakeLists.txt): find_package(moonshard) for an
# installed moonshard. LIBDIR/cmake/moonshard holds moonshardConfig.cmake (finds what the targets
# name: lua5.4 through pkg-config, zlib, threads, and MPI and the CUDA toolkit where this build
# used them), moonshardConfigVersion.cmake and moonshardTargets.cmake, which defines
#   moonshard::moonshard         the shared library
#   moonshard::moonshard_static  the static archive (with everything it needs to link)
include(CMakePackageConfigHelpers)
set(MS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/moonshard)
install(EXPORT moonshardTargets NAMESPACE moonshard:: DESTINATION ${MS_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/moonshardConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/generated/moonshardConfig.cmake INSTALL_DESTINATION ${MS_CMAKE_DIR})
# 0.x: a new minor version may change the API
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/generated/moonshardConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/generated/moonshardConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/generated/moonshardConfigVersion.cmake DESTINATION ${MS_CMAKE_DIR})
