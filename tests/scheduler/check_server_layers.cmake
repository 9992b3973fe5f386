# Fails naming every file of server/ that includes what its room may not know:
#   libpqxx (<pqxx/...>) anywhere but store/postgres/, nor through a store/postgres/ header
#   that a file outside it includes;
#   gRPC (<grpcpp/...> or *.grpc.pb.h) in scheduling/ or store/;
#   the whole store (RunStore, store/run_store.h) anywhere but store/ and the assembly,
#   scheduler_server.{h,cc}: every other unit names the narrow interfaces its job needs.
# Usage: cmake -DSERVER_DIR=<repo>/server -P check_server_layers.cmake
# Sets `out` to the first libpqxx include reached from server/`header` through store/postgres/
# headers, or to "" when there is none.
function(pqxx_reached header out)
  set(found "")
  file(STRINGS ${SERVER_DIR}/${header} lines REGEX "^#include")
  foreach(line ${lines})
    if(line MATCHES "pqxx")
      set(found "${header}: ${line}")
      break()
    elseif(line MATCHES "\"server/(store/postgres/[a-z_]+\\.h)\"")
      pqxx_reached(${CMAKE_MATCH_1} inner)
      if(inner)
        set(found "${inner}")
        break()
      endif()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE ${SERVER_DIR} ${SERVER_DIR}/*.h ${SERVER_DIR}/*.cc)
set(violations "")
foreach(path ${sources})
  if(NOT path MATCHES "^store/" AND NOT path MATCHES "^scheduler_server\\.(h|cc)$")
    # Any line, comments included: a comment that names the whole store is as stale as code.
    file(STRINGS ${SERVER_DIR}/${path} whole_store
         REGEX "(^|[^A-Za-z0-9_])RunStore([^A-Za-z0-9_]|$)|run_store\\.h")
    foreach(line ${whole_store})
      string(STRIP "${line}" line)
      string(APPEND violations "  server/${path}: ${line} (the whole store is for "
                               "scheduler_server.cc; name SweepCatalog, RunQueue, ReadModels, "
                               "TelemetryRetention or AccessTokens)\n")
    endforeach()
  endif()
  file(STRINGS ${SERVER_DIR}/${path} includes REGEX "^#include")
  foreach(line ${includes})
    if(line MATCHES "pqxx" AND NOT path MATCHES "^store/postgres/")
      string(APPEND violations "  server/${path}: ${line} (libpqxx belongs to store/postgres/)\n")
    endif()
    if(NOT path MATCHES "^store/postgres/" AND
       line MATCHES "\"server/(store/postgres/[a-z_]+\\.h)\"")
      pqxx_reached(${CMAKE_MATCH_1} reached)
      if(reached)
        string(APPEND violations
               "  server/${path}: ${line} pulls in libpqxx (${reached}); hide it in the room\n")
      endif()
    endif()
    if((line MATCHES "grpcpp/" OR line MATCHES "\\.grpc\\.pb\\.h") AND
       (path MATCHES "^scheduling/" OR path MATCHES "^store/"))
      string(APPEND violations "  server/${path}: ${line} (no gRPC in the logic or the store)\n")
    endif()
  endforeach()
endforeach()
list(LENGTH sources count)
if(count LESS 20)
  message(FATAL_ERROR "expected the server's sources under ${SERVER_DIR}, found ${count} files")
endif()
if(violations)
  message(FATAL_ERROR "includes and names that break the rooms' rules:\n${violations}")
endif()
message(STATUS "${count} files of server/ keep to their rooms")
