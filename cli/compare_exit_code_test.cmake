# `parity compare A B` against a scheduler that is not there: exit 69 (unreachable) with an
# error line naming the call, and no table on stdout.
execute_process(COMMAND ${PARITY} compare 00000000-0000-0000-0000-00000000000a
                        00000000-0000-0000-0000-00000000000b --scheduler 127.0.0.1:1 --timeout 5
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 69)
  message(FATAL_ERROR "expected exit code 69 for an unreachable scheduler, got ${rc}\n${err}")
endif()
if(NOT err MATCHES "error: ")
  message(FATAL_ERROR "expected an 'error: ' line on stderr, got:\n${err}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout, got:\n${out}")
endif()
# Missing the second sweep id is a usage error (64).
execute_process(COMMAND ${PARITY} compare 00000000-0000-0000-0000-00000000000a
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 64)
  message(FATAL_ERROR "expected exit code 64 without SWEEP_B, got ${rc}\n${err}")
endif()
