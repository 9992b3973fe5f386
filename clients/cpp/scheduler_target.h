// SchedulerTarget: the gRPC target and channel arguments for a scheduler address that may name
// several replicas (docs/operations.md §High availability). Accepted forms:
//   host:port                        one scheduler (a DNS name may still have several records)
//   a:port,b:port,[v6]:port          a comma-separated list: IP literals become gRPC's own
//                                    ipv4:/ipv6: target; host names are resolved here, once,
//                                    into one (a name that does not resolve is an error)
//   dns:///name:port, ipv4:…, ipv6:…, unix:… and any other scheme://   gRPC's own syntax, as is
// Every channel balances calls round_robin over the addresses it has (a headless Service's DNS
// name gives one per replica) and retries a call that failed UNAVAILABLE up to 4 times with
// backoff (0.1 s doubling to 1 s), so a dead replica is skipped; gRPC retries only calls no
// server answered otherwise, and the scheduler's calls are idempotent or fenced (docs/api.md).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/support/channel_arguments.h"

namespace parity::clients {

struct SchedulerTarget {
  std::string target;       // what grpc::CreateChannel gets
  std::string server_name;  // for TLS: the host name the certificate should carry ("" = gRPC's)
};

// INVALID_ARGUMENT for an empty entry or one without a port; UNAVAILABLE when a host name of a
// list does not resolve.
absl::StatusOr<SchedulerTarget> ResolveSchedulerTarget(const std::string& address);

// round_robin and the retry policy above, added to `args`.
void AddSchedulerServiceConfig(grpc::ChannelArguments& args);

}  // namespace parity::clients
