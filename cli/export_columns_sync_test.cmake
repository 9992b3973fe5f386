# docs/export.md is `parity results --columns`, and clients/python/parity_client/export_columns.json
# (the Python frames' column list) is `parity results --columns --format json`: regenerated here
# and compared byte for byte, so a column added in export/export_schema.cc without the page or the
# Python client fails this test with the command that fixes it.
foreach(kind md json)
  if(kind STREQUAL "md")
    set(args results --columns)
    set(committed_file ${DOC})
    set(fix "build/cli/parity results --columns > docs/export.md")
  else()
    set(args results --columns --format json)
    set(committed_file ${JSON})
    set(fix "build/cli/parity results --columns --format json > "
            "clients/python/parity_client/export_columns.json")
  endif()
  execute_process(COMMAND ${PARITY} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE generated
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "`parity ${args}` failed (exit ${rc}):\n${err}")
  endif()
  file(READ ${committed_file} committed)
  if(NOT generated STREQUAL committed)
    file(WRITE ${OUT}/export-columns.generated.${kind} "${generated}")
    message(FATAL_ERROR "${committed_file} is out of date; run `${fix}` (the generated file is at "
                        "${OUT}/export-columns.generated.${kind})")
  endif()
endforeach()
