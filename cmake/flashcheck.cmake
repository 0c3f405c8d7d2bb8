# Shared CMake helpers.

# Warnings for host code we own.
function(flashcheck_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()

# FMA chains spelled as std::fma (the oracle's emulated reference, the host model's rows) compile to one instruction
# each instead of a libm call where the CPU has FMA: -mfma on x86-64 builds whose build machine reports it
# (FLASHCHECK_HOST_FMA; x86-64 CPUs have it since 2013). std::fma rounds once either way and -ffp-contract=off (set on
# both) still forbids contraction, so the results are the same bit for bit; a binary built with it does not start on a
# CPU without FMA.
set(_flashcheck_fma_default OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo _flashcheck_cpu_flags REGEX "^flags" LIMIT_COUNT 1)
  if(_flashcheck_cpu_flags MATCHES " fma( |$)")
    set(_flashcheck_fma_default ON)
  endif()
endif()
option(FLASHCHECK_HOST_FMA "Compile the oracle and the host model with -mfma (x86-64 CPUs with FMA)"
       ${_flashcheck_fma_default})
function(flashcheck_host_fma target)
  if(FLASHCHECK_HOST_FMA)
    target_compile_options(${target} PRIVATE -mfma)
  endif()
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
