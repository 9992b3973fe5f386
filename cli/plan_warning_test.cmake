# `parity plan` on a spec whose dense 1C baseline is undertrained: exit 0, the plan on stdout and
# the regime warning on stderr naming the budget and its tokens per parameter.
execute_process(COMMAND ${PARITY} plan ${SPEC} RESULT_VARIABLE rc ERROR_VARIABLE err
                OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0 (a warning is not an error), got ${rc}\n${err}")
endif()
if(NOT err MATCHES "warning: grid.compute\\[0\\]: dense 1C at C1 trains [0-9.]+ tokens per parameter \\(< 20, the papers' regime\\)")
  message(FATAL_ERROR "expected the regime warning for C1 on stderr, got:\n${err}")
endif()
if(NOT err MATCHES "allow_undertrained: true to silence")
  message(FATAL_ERROR "expected the warning to name its remedy, got:\n${err}")
endif()
if(NOT out MATCHES "D/N")
  message(FATAL_ERROR "expected the plan table to have a D/N column, got:\n${out}")
endif()
