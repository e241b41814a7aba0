# `cmake --install` puts the libraries, headers, the ptopt tool and a CMake
# package config in the prefix, so another project can
#   find_package(ptopt REQUIRED)
#   target_link_libraries(app PRIVATE ptopt::api)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PTOPT_LIBRARIES ptopt_archive ptopt_ir ptopt_draw ptopt_rewriters ptopt_target ptopt_measure ptopt_tune ptopt_fusion ptopt_layout ptopt_quant ptopt_kernels ptopt_verify ptopt_api)
install(TARGETS ${PTOPT_LIBRARIES} EXPORT ptoptTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ptopt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir ir draw rewriters target measure tune fusion layout quant kernels verify api tools)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ptopt/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT ptoptTargets NAMESPACE ptopt:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptopt)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ptoptConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ptoptConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptopt)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ptoptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ptoptConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ptoptConfigVersion.cmake
        ${PROJECT_SOURCE_DIR}/cmake/torch_world.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptopt)
