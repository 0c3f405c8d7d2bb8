# Runs one tool command and checks its exit status and output (the outcome tests of tools/CMakeLists.txt and the
# stored findings' replays). cmake -P with
#   -DCOMMAND="prog|arg|..."   the command, arguments separated by '|' (case lines hold no '|')
#   -DEXPECT_CODES="0|4"       the exit statuses that pass (flashcheck/outcome.h)
#   -DEXPECT_OUTPUT=regex      optional: stdout + stderr must match it
# The command's output is echoed, so a SKIP_REGULAR_EXPRESSION of the test still sees it.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" command "${COMMAND}")
string(REPLACE "|" ";" codes "${EXPECT_CODES}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc IN_LIST codes)
  message(FATAL_ERROR "exit status ${rc}, expected one of ${codes}")
endif()
if(DEFINED EXPECT_OUTPUT AND NOT "${out}${err}" MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "output does not match '${EXPECT_OUTPUT}'")
endif()
