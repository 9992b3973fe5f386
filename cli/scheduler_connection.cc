#include "cli/scheduler_connection.h"

#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "clients/cpp/scheduler_channel_flags.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace parity::cli {

void AddSchedulerOptions(CLI::App& command, SchedulerOptions& options) {
  command
      .add_option("--scheduler", options.address,
                  "Scheduler address host:port; several replicas: host:port,host:port or "
                  "gRPC's target syntax, e.g. dns:///name:port")
      ->envname("PARITY_SCHEDULER")
      ->capture_default_str();
  command.add_option("--timeout", options.timeout_seconds, "Deadline of each call (seconds)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  clients::AddSchedulerChannelFlags(command, options.channel, options.token_file);
}

std::shared_ptr<grpc::Channel> ConnectScheduler(const SchedulerOptions& options) {
  clients::SchedulerChannelOptions channel = options.channel;
  channel.address = options.address;
  // Results pages and watch streams can be large; the server bounds them, not the client.
  channel.args.SetMaxReceiveMessageSize(64 << 20);
  absl::Status resolved = clients::ResolveFromEnvironment(channel, options.token_file);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made =
      resolved.ok() ? clients::MakeSchedulerChannel(channel)
                    : absl::StatusOr<std::shared_ptr<grpc::Channel>>(resolved);
  if (!made.ok()) {
    std::cerr << "error: " << made.status().message() << "\n";
    std::exit(kExitUsage);
  }
  return *made;
}

std::unique_ptr<parity::v1::SweepService::Stub> ConnectSweepService(
    const SchedulerOptions& options) {
  return parity::v1::SweepService::NewStub(ConnectScheduler(options));
}

std::unique_ptr<grpc::ClientContext> UnaryContext(const SchedulerOptions& options) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000)));
  return context;
}

std::vector<parity::v1::Run> ListAllRuns(parity::v1::SweepService::Stub& stub,
                                         const std::string& sweep_id,
                                         const SchedulerOptions& options, grpc::Status& status) {
  std::vector<parity::v1::Run> runs;
  parity::v1::ListRunsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_page_size(1000);
  do {
    parity::v1::ListRunsResponse page;
    status = stub.ListRuns(UnaryContext(options).get(), request, &page);
    if (!status.ok()) return runs;
    runs.insert(runs.end(), page.runs().begin(), page.runs().end());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return runs;
}

std::vector<parity::v1::ResultRow> ListAllResults(parity::v1::SweepService::Stub& stub,
                                                  const std::string& sweep_id,
                                                  const SchedulerOptions& options,
                                                  grpc::Status& status) {
  std::vector<parity::v1::ResultRow> rows;
  parity::v1::QueryResultsRequest request;
  request.mutable_filter()->set_sweep_id(sweep_id);
  request.set_page_size(1000);
  do {
    parity::v1::QueryResultsResponse page;
    status = stub.QueryResults(UnaryContext(options).get(), request, &page);
    if (!status.ok()) return rows;
    rows.insert(rows.end(), page.rows().begin(), page.rows().end());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return rows;
}

int ReportRpcError(const grpc::Status& status, std::string_view what,
                   const SchedulerOptions& options) {
  google::rpc::Status details;
  bool printed = false;
  if (!status.error_details().empty() && details.ParseFromString(status.error_details())) {
    for (const auto& any : details.details()) {
      google::rpc::BadRequest bad_request;
      if (any.UnpackTo(&bad_request)) {
        for (const auto& v : bad_request.field_violations()) {
          std::cerr << "error: " << v.field() << ": " << v.description() << "\n";
          printed = true;
        }
      }
    }
  }
  if (!printed) std::cerr << "error: " << what << ": " << status.error_message() << "\n";
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
      return kExitInvalidSpec;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::UNAUTHENTICATED:
      std::cerr << "hint: give a token with --token-file or PARITY_TOKEN_FILE (or PARITY_TOKEN); "
                   "an admin makes one with `parity token create`\n";
      return kExitNoPermission;
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitNoPermission;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      std::cerr << "hint: is the scheduler running at " << options.address
                << "? (--scheduler or PARITY_SCHEDULER)\n";
      return kExitUnavailable;
    default:
      return kExitFailure;
  }
}

}  // namespace parity::cli
