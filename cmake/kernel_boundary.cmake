# The kernel's boundary: properties/, fuzz/, tools/, bench/, subjects/ and harness/ include only the kernel's public
# API (kernel/include/flashcheck/), so that nothing outside the kernel shares its private rules. Checked when the
# project is configured (a violation stops it, naming file, line and header) and under CTest (label cpu):
#   kernel_boundary                          no file there includes a kernel-private header
#                                            (check_kernel_boundary.cmake)
#   kernel_boundary_catches_private_include  the check fails on a probe that includes "common/softmax.h" and
#                                            <tile_config.h>, and passes one of public includes
# and no target defined there takes headers from kernel/src, unless it is a copy of a kernel library (every source
# in kernel/: fuzz's mutant kernel). Included after every add_subdirectory, when every target exists.
set(FLASHCHECK_KERNEL_CLIENTS properties fuzz tools bench subjects harness)
string(JOIN "|" fc_boundary_dirs ${FLASHCHECK_KERNEL_CLIENTS})
set(fc_boundary_check ${CMAKE_CURRENT_LIST_DIR}/check_kernel_boundary.cmake)

# The file check, run in a function so that the script's variables stay in it.
function(flashcheck_check_kernel_boundary_files)
  set(ROOT ${PROJECT_SOURCE_DIR})
  set(DIRS ${fc_boundary_dirs})
  include(${fc_boundary_check})
endfunction()
flashcheck_check_kernel_boundary_files()

# True when `path` is `dir` or lies below it.
function(flashcheck_path_within path dir out)
  string(FIND "${path}/" "${dir}/" at)
  if(at EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# Fails the configure when a target of `dir` takes headers from kernel/src, through its own include directories,
# those it passes on, or one of its sources'.
function(flashcheck_check_kernel_boundary_targets dir)
  set(kernel_src ${PROJECT_SOURCE_DIR}/kernel/src)
  file(RELATIVE_PATH shown_dir ${PROJECT_SOURCE_DIR} ${dir})
  get_directory_property(targets DIRECTORY ${dir} BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(source_dir ${target} SOURCE_DIR)
    get_target_property(sources ${target} SOURCES)
    set(kernel_copy FALSE)
    set(entries "")
    if(sources)
      set(kernel_copy TRUE)
      foreach(source IN LISTS sources)
        if(source MATCHES "^\\$<")  # objects of another target: that target is checked in its own folder
          set(kernel_copy FALSE)
          continue()
        endif()
        get_filename_component(source_path ${source} ABSOLUTE BASE_DIR ${source_dir})
        flashcheck_path_within(${source_path} ${PROJECT_SOURCE_DIR}/kernel in_kernel)
        flashcheck_path_within(${source_path} ${PROJECT_BINARY_DIR}/kernel in_kernel_build)
        if(NOT in_kernel AND NOT in_kernel_build)
          set(kernel_copy FALSE)
        endif()
        get_source_file_property(source_dirs ${source_path} TARGET_DIRECTORY ${target} INCLUDE_DIRECTORIES)
        if(source_dirs)
          list(APPEND entries ${source_dirs})
        endif()
      endforeach()
    endif()
    if(kernel_copy)
      continue()
    endif()
    foreach(property INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES)
      get_target_property(target_dirs ${target} ${property})
      if(target_dirs)
        list(APPEND entries ${target_dirs})
      endif()
    endforeach()
    foreach(entry IN LISTS entries)
      string(FIND "${entry}" "${kernel_src}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "flashcheck: ${target} (${shown_dir}/) takes headers from '${entry}'; outside the kernel "
                            "only its public API (kernel/include/flashcheck/) may be included")
      endif()
    endforeach()
  endforeach()
endfunction()

# Every folder of the project, the clients' checked.
set(fc_boundary_pending ${PROJECT_SOURCE_DIR})
while(fc_boundary_pending)
  list(POP_FRONT fc_boundary_pending fc_boundary_dir)
  get_directory_property(fc_boundary_subdirs DIRECTORY ${fc_boundary_dir} SUBDIRECTORIES)
  list(APPEND fc_boundary_pending ${fc_boundary_subdirs})
  foreach(client IN LISTS FLASHCHECK_KERNEL_CLIENTS)
    flashcheck_path_within(${fc_boundary_dir} ${PROJECT_SOURCE_DIR}/${client} fc_boundary_client)
    if(fc_boundary_client)
      flashcheck_check_kernel_boundary_targets(${fc_boundary_dir})
    endif()
  endforeach()
endwhile()

if(FLASHCHECK_TESTS)
  add_test(NAME kernel_boundary
           COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DDIRS=${fc_boundary_dirs} -P ${fc_boundary_check})
  set_tests_properties(kernel_boundary PROPERTIES LABELS cpu TIMEOUT 60)
  add_test(NAME kernel_boundary_catches_private_include
           COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DWORK=${PROJECT_BINARY_DIR}/kernel_boundary_probe
                   -P ${CMAKE_CURRENT_LIST_DIR}/check_kernel_boundary_test.cmake)
  set_tests_properties(kernel_boundary_catches_private_include PROPERTIES LABELS cpu TIMEOUT 60)
endif()
