# A new user's spec with typos: `parity plan` exits 2 within seconds, and each error names the
# field, the reason in the spec's own spelling and the remedy ("did you mean").
execute_process(COMMAND ${PARITY} plan ${SPEC} RESULT_VARIABLE rc ERROR_VARIABLE err
                OUTPUT_VARIABLE out)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2 for a spec with typos, got ${rc}\n${err}")
endif()
foreach(expected
        "error: data.reuse: 'lose' is not a reuse mode; did you mean 'loose'\\? \\(unique, strict, loose\\)"
        "error: moe.moe.router.balance: 'lossfree2' is not a balance method; did you mean 'loss_free'\\?"
        "error: training.lerning_rate: unknown field of TrainingSpec; did you mean 'learning_rate'\\?")
  if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "expected stderr to match '${expected}', got:\n${err}")
  endif()
endforeach()
if(err MATCHES "REUSE_MODE_|BALANCE_METHOD_")
  message(FATAL_ERROR "enum errors must use the YAML spelling, not the proto name:\n${err}")
endif()
