# Symbol check behind the kernel_no_instrumentation test (cmake -P): the production kernel library holds
# no run_instrumented(), nothing from the `instrumented` kernel namespace and no kernel instantiated with
# instrumentation on (the kernels' last template argument, `Lb1E` in the mangled name); the instrumented
# library holds all three. Inputs: -DNM, -DPRODUCTION, -DINSTRUMENTED (archive paths), -DHAS_CUDA.
foreach(var NM PRODUCTION INSTRUMENTED)
  if(NOT ${var})
    message(FATAL_ERROR "check_no_instrumentation: -D${var} is required")
  endif()
endforeach()

function(defined_symbols archive out)
  execute_process(COMMAND ${NM} --defined-only ${archive} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${archive}: ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

defined_symbols(${PRODUCTION} production)
defined_symbols(${INSTRUMENTED} instrumented)

# Patterns on mangled names. flashcheck::run_instrumented -> 10flashcheck16run_instrumented;
# namespace flashcheck::detail::instrumented -> 6detail12instrumented; a general kernel instantiated with
# kInst = true ends its template arguments with Lb1E.
set(run_instrumented_pattern "10flashcheck16run_instrumented")
set(namespace_pattern "6detail12instrumented")
set(kernel_on_pattern "general_forward_kernel[A-Za-z0-9_]*Lb1EE")
set(kernel_off_pattern "general_forward_kernel[A-Za-z0-9_]*Lb0EE")

set(errors "")
if(production MATCHES "${run_instrumented_pattern}")
  string(APPEND errors "production library defines run_instrumented\n")
endif()
if(production MATCHES "${namespace_pattern}")
  string(APPEND errors "production library defines symbols of the instrumented kernel namespace\n")
endif()
if(production MATCHES "${kernel_on_pattern}")
  string(APPEND errors "production library has a general kernel instantiated with instrumentation on\n")
endif()
if(NOT instrumented MATCHES "${run_instrumented_pattern}")
  string(APPEND errors "instrumented library lacks run_instrumented (check would be vacuous)\n")
endif()
if(HAS_CUDA)
  if(NOT production MATCHES "${kernel_off_pattern}")
    string(APPEND errors "production library has no general kernel stub at all (check would be vacuous)\n")
  endif()
  if(NOT instrumented MATCHES "${namespace_pattern}" OR NOT instrumented MATCHES "${kernel_on_pattern}")
    string(APPEND errors "instrumented library lacks instrumented kernels (check would be vacuous)\n")
  endif()
endif()

if(errors)
  message(FATAL_ERROR "kernel_no_instrumentation:\n${errors}")
endif()
message(STATUS "kernel_no_instrumentation: production library carries no instrumentation; instrumented library does")
