# Shared CMake helpers.

# Warnings for host code we own.
function(flashcheck_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()

# flashcheck_gtest(NAME target SOURCES ... LIBS ... LABELS ... [TIMEOUT s])
# One test executable, tests discovered at test time and labelled, so `ctest -L cpu` / `-L gpu` select tiers.
function(flashcheck_gtest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  flashcheck_warnings(${T_NAME})
  # NO_PRETTY_VALUES: a parameterised test is named by its suffix (the name generator's configuration, e.g.
  # Gpu/GpuShapes.TileBoundarySeqlensAllMasks/Bf16_Hdim128), not by the printed parameter as well; CTest pads every
  # line to the longest name, so one long name makes every line long.
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
                       PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
