# export_parquet_read_back: the fixture writes Parquet files and what they must hold; hyparquet
# (an independent, pure-JavaScript reader) reads them back and compares every value.
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(COMMAND ${FIXTURE} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "export_parquet_fixture failed (${rc})")
endif()
foreach(name raw export)
  execute_process(COMMAND ${NODE} ${SCRIPT} ${NODE_MODULES} ${OUT}/${name}.parquet
                          ${OUT}/${name}.expected.json
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}.parquet does not read back as written (see above)")
  endif()
endforeach()
