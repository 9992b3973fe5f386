# Fails naming every file of server/ that includes what its room may not know:
#   libpqxx (<pqxx/...>) anywhere but store/postgres/;
#   gRPC (<grpcpp/...> or *.grpc.pb.h) in scheduling/ or store/.
# Usage: cmake -DSERVER_DIR=<repo>/server -P check_server_layers.cmake
file(GLOB_RECURSE sources RELATIVE ${SERVER_DIR} ${SERVER_DIR}/*.h ${SERVER_DIR}/*.cc)
set(violations "")
foreach(path ${sources})
  file(STRINGS ${SERVER_DIR}/${path} includes REGEX "^#include")
  foreach(line ${includes})
    if(line MATCHES "pqxx" AND NOT path MATCHES "^store/postgres/")
      string(APPEND violations "  server/${path}: ${line} (libpqxx belongs to store/postgres/)\n")
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
  message(FATAL_ERROR "includes that break the rooms' rules:\n${violations}")
endif()
message(STATUS "${count} files of server/ keep to their rooms")
