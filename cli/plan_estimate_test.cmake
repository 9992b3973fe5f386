# `parity plan` on a grid with two MoE points of the same shape: exit 0, a warning naming both
# points, and the estimated wall time on the workers given.
execute_process(COMMAND ${PARITY} plan ${SPEC} --workers 4 --worker-flops 2G RESULT_VARIABLE rc
                ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0 (warnings are not errors), got ${rc}\n${err}")
endif()
if(NOT err MATCHES "warning: grid.moe: grid points moe=a and moe=b plan the identical model")
  message(FATAL_ERROR "expected the redundant-point warning on stderr, got:\n${err}")
endif()
if(NOT err MATCHES "estimated wall time: ~[0-9]+ (s|min) for Σ C = [0-9.e+]+ FLOPs on 4 workers at 2.0 GFLOP/s each \\(assumed; --workers, --worker-flops\\)")
  message(FATAL_ERROR "expected the wall-time estimate on stderr, got:\n${err}")
endif()
execute_process(COMMAND ${PARITY} plan ${SPEC} --worker-flops fast RESULT_VARIABLE rc
                ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 64 OR NOT err MATCHES "error: --worker-flops: 'fast' is not a rate")
  message(FATAL_ERROR "expected exit 64 and a --worker-flops error, got ${rc}:\n${err}")
endif()
