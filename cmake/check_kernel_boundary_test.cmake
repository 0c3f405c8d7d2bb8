# cmake -DROOT=<source dir> -DWORK=<scratch dir> -P check_kernel_boundary_test.cmake: check_kernel_boundary.cmake
# fails on a folder whose file includes kernel-private headers (quoted and angle), naming file, line and header,
# and passes on a folder whose file includes the public API and the standard library: neither outcome is vacuous.
# WORK is emptied first and removed after.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT OR NOT WORK)
  message(FATAL_ERROR "check_kernel_boundary_test: pass -DROOT=<source dir> -DWORK=<scratch dir>")
endif()
set(checker "${CMAKE_CURRENT_LIST_DIR}/check_kernel_boundary.cmake")
file(REMOVE_RECURSE "${WORK}")
file(WRITE "${WORK}/public/probe.cpp"
     "// The public API only.\n#include <vector>\n\n#include \"flashcheck/attention.h\"\n")
file(WRITE "${WORK}/private/probe.cpp"
     "// Kernel-private headers, as a property might reach for them.\n#include \"common/softmax.h\"\n"
     "#include <tile_config.h>\n")

# `dir` checked: its exit status and output.
function(check dir rc_out text_out)
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${ROOT} -DDIRS=${dir} -P ${checker}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${dir}: exit status ${rc}\n${out}${err}")
  set(${rc_out} "${rc}" PARENT_SCOPE)
  set(${text_out} "${out}${err}" PARENT_SCOPE)
endfunction()

check("${WORK}/public" public_rc public_text)
check("${WORK}/private" private_rc private_text)
file(REMOVE_RECURSE "${WORK}")
if(NOT public_rc EQUAL 0)
  message(FATAL_ERROR "the check fails on public includes only")
endif()
if(private_rc EQUAL 0)
  message(FATAL_ERROR "the check passes a file that includes \"common/softmax.h\" and <tile_config.h>")
endif()
foreach(expected "probe.cpp:2: #include \"common/softmax.h\"" "probe.cpp:3: #include <tile_config.h>")
  string(FIND "${private_text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check's message does not name '${expected}'")
  endif()
endforeach()
