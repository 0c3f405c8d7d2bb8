# The installed package: `cmake --install <build> [--prefix P]` puts the kernel's public headers, its static
# libraries and a CMake package into P, so that another project writes
#   find_package(flashcheck CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE flashcheck::attention)
# and gets run() (the CUDA kernel; kNoDevice in a build without CUDA), the host model (run_host_model) and the
# C ABI (fc_*, attention_c.h). The libraries are C++: a C program links them with the C++ linker (CMake does
# this by itself when the consuming project enables CXX). Test: package_consumer (examples/consumer).
include(CMakePackageConfigHelpers)

set_target_properties(flashcheck_api PROPERTIES EXPORT_NAME api)
set_target_properties(flashcheck_kernel PROPERTIES EXPORT_NAME kernel)
set_target_properties(flashcheck_model PROPERTIES EXPORT_NAME model)
set_target_properties(flashcheck_attention PROPERTIES EXPORT_NAME attention)

set(FLASHCHECK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashcheck)
install(TARGETS flashcheck_api flashcheck_kernel flashcheck_model flashcheck_attention
        EXPORT flashcheckTargets COMPONENT flashcheck
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernel/include/flashcheck DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT flashcheck FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(EXPORT flashcheckTargets NAMESPACE flashcheck:: DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR}
        COMPONENT flashcheck)

set(FLASHCHECK_PACKAGE_NEEDS_CUDA ${FLASHCHECK_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashcheckConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/flashcheckConfig.cmake
                              INSTALL_DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashcheckConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/flashcheckConfig.cmake ${PROJECT_BINARY_DIR}/flashcheckConfigVersion.cmake
        DESTINATION ${FLASHCHECK_INSTALL_CMAKEDIR} COMPONENT flashcheck)

# The consumer example against an install into the build directory: install, configure, build, run.
if(FLASHCHECK_TESTS)
  add_test(NAME package_consumer
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR}
                   -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/examples/consumer
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/package-test -DGENERATOR=${CMAKE_GENERATOR}
                   -DCXX_COMPILER=${CMAKE_CXX_COMPILER} -DC_COMPILER=${CMAKE_C_COMPILER}
                   -P ${PROJECT_SOURCE_DIR}/examples/consumer/test_consumer.cmake)
  set_tests_properties(package_consumer PROPERTIES LABELS cpu TIMEOUT 300)
endif()
