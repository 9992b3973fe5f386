# docs/spec-reference.md is the output of `parity spec reference`: regenerated here and compared
# byte for byte, so a proto field, comment, enum spelling or default that changes without the page
# fails this test with the command that fixes it.
execute_process(COMMAND ${PARITY} spec reference RESULT_VARIABLE rc OUTPUT_VARIABLE generated
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "`parity spec reference` failed (exit ${rc}):\n${err}")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  file(WRITE ${OUT} "${generated}")
  message(FATAL_ERROR
          "docs/spec-reference.md is out of date; run "
          "`build/cli/parity spec reference > docs/spec-reference.md` (the freshly generated page "
          "is at ${OUT}; diff it against the committed one to see what changed)")
endif()
