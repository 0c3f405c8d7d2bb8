# ctest run in the source tree reads this file: the tests live in a build directory (build/<preset>). Rather than
# find nothing and exit 0, it runs one test, under every label, that fails and says where the tests are.
add_test(flashcheck_tests_live_in_a_build_directory "/bin/sh" "-c"
         "echo 'flashcheck: the tests live in a build directory: bash ci/test.sh builds and runs them; then ctest --preset ci, or ctest --test-dir build/ci -L cpu (build/gpu on a GPU machine)' >&2; exit 1")
set_tests_properties(flashcheck_tests_live_in_a_build_directory PROPERTIES
                     LABELS "cpu;gpu;sanitizer;nightly;budget;huge;peer")
