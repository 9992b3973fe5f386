// What the client subcommands share: where the scheduler is (--scheduler, PARITY_SCHEDULER), how
// to reach it (TLS and the bearer token: clients/cpp/scheduler_channel.h), a stub to it, and how
// a failed call becomes stderr lines and an exit code. Only these files and
// the client subcommands include gRPC; `parity plan` works without a server.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "clients/cpp/scheduler_channel.h"
#include "grpcpp/grpcpp.h"
#include "parity/v1/sweep_service.grpc.pb.h"

namespace parity::cli {

inline constexpr std::string_view kDefaultScheduler = "127.0.0.1:50051";

struct SchedulerOptions {
  // host:port of the scheduler's gRPC endpoint.
  std::string address = std::string(kDefaultScheduler);
  // Deadline of each unary call.
  double timeout_seconds = 30;
  // TLS and the bearer token (clients/cpp; the flags fill it, the environment the rest). Its
  // address is `address` above, set when connecting.
  clients::SchedulerChannelOptions channel;
  // --token-file (else PARITY_TOKEN_FILE).
  std::string token_file;
};

// Adds --scheduler (env PARITY_SCHEDULER), --timeout, --token, --token-file and the --tls-*
// options to a subcommand.
void AddSchedulerOptions(CLI::App& command, SchedulerOptions& options);

// The channel to the scheduler; on a bad TLS or token file prints why and exits 64.
std::shared_ptr<grpc::Channel> ConnectScheduler(const SchedulerOptions& options);
std::unique_ptr<parity::v1::SweepService::Stub> ConnectSweepService(
    const SchedulerOptions& options);

// A client context with the unary deadline set.
std::unique_ptr<grpc::ClientContext> UnaryContext(const SchedulerOptions& options);

// Every run of a sweep in grid order, following the pages; `status` is the first failed call's.
std::vector<parity::v1::Run> ListAllRuns(parity::v1::SweepService::Stub& stub,
                                         const std::string& sweep_id,
                                         const SchedulerOptions& options, grpc::Status& status);

// Every results row of a sweep in grid order, following the pages; `status` as above.
std::vector<parity::v1::ResultRow> ListAllResults(parity::v1::SweepService::Stub& stub,
                                                  const std::string& sweep_id,
                                                  const SchedulerOptions& options,
                                                  grpc::Status& status);

// Prints a failed call to stderr — each google.rpc.BadRequest field violation as
// "error: FIELD: REASON", else "error: WHAT: MESSAGE" — and returns the exit code for its code.
int ReportRpcError(const grpc::Status& status, std::string_view what,
                   const SchedulerOptions& options);

}  // namespace parity::cli
