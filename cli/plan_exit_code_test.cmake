# Runs `parity plan SPEC` on an invalid spec and checks the contract: exit code 2 and one
# "error: FIELD: REASON" line per problem on stderr.
execute_process(COMMAND ${PARITY} plan ${SPEC} RESULT_VARIABLE rc ERROR_VARIABLE err
                OUTPUT_VARIABLE out)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2 for an invalid spec, got ${rc}\n${err}")
endif()
foreach(expected "error: grid.moe\\[0\\].top_k: 9 exceeds num_experts 8"
                 "error: moe.num_heads: 5 heads do not divide d_model 64"
                 "error: name: 'Bad Name' must match")
  if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "expected stderr to contain '${expected}', got:\n${err}")
  endif()
endforeach()
