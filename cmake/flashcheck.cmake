# Shared CMake helpers.

# Warnings for host code we own.
function(flashcheck_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()

# The CTest resources a GPU test holds: one slot of one GPU. Ignored unless ctest is given a resource spec
# (ci/resource_spec.sh; ci/gpu_tier.sh passes one), which then spreads `ctest -L gpu -j` over every GPU listed.
set(FLASHCHECK_GPU_RESOURCE_GROUPS "gpus:1")

# flashcheck_gtest(NAME target SOURCES ... LIBS ... LABELS ... [TIMEOUT s])
# One test executable, tests discovered at test time and labelled, so `ctest -L cpu` / `-L gpu` select tiers.
# A gpu-labelled binary holds a GPU slot (RESOURCE_GROUPS) and its main() selects the CUDA device CTest
# allocated (harness/src/gtest_gpu_main.cpp).
function(flashcheck_gtest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  set(resources "")
  if("gpu" IN_LIST T_LABELS)
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest flashcheck_gtest_gpu_main)
    set(resources RESOURCE_GROUPS "${FLASHCHECK_GPU_RESOURCE_GROUPS}")
  else()
    target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  endif()
  flashcheck_warnings(${T_NAME})
  # NO_PRETTY_VALUES: a parameterised test is named by its suffix (the name generator's configuration, e.g.
  # Gpu/GpuShapes.TileBoundarySeqlensAllMasks/Bf16_Hdim128), not by the printed parameter as well; CTest pads every
  # line to the longest name, so one long name makes every line long.
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ${resources})
endfunction()
