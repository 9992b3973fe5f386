// The admin token the tests start their schedulers with (ServerOptions::bootstrap_token, or a
// --bootstrap-token-file holding it), and channels that carry a token, as every client must.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/scheduler_channel.h"
#include "core/proto_time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "parity/v1/token_service.grpc.pb.h"

namespace parity::testing {

inline constexpr char kTestAdminToken[] = "parity_test-admin-0123456789abcdefghijklmnopqrstu";

// A plaintext channel to 127.0.0.1:`port` whose calls carry `token` (none when empty).
inline std::shared_ptr<grpc::Channel> TokenChannel(int port,
                                                   const std::string& token = kTestAdminToken,
                                                   grpc::ChannelArguments args = {}) {
  clients::SchedulerChannelOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.token = token;
  options.args = std::move(args);
  return *clients::MakeSchedulerChannel(options);
}

// A new token of `role` named `name` (expiring after `lifetime`, none when zero), made over gRPC
// by the test admin on the scheduler at 127.0.0.1:`port`; its secret. A failed call fails the
// test and returns "".
inline std::string MakeTokenAsAdmin(int port, const std::string& name, parity::v1::Role role,
                                    absl::Duration lifetime = absl::ZeroDuration()) {
  auto tokens = parity::v1::TokenService::NewStub(TokenChannel(port));
  parity::v1::CreateTokenRequest request;
  request.set_name(name);
  request.set_role(role);
  if (lifetime > absl::ZeroDuration()) {
    *request.mutable_lifetime() = parity::ToProtoDuration(lifetime);
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  parity::v1::CreateTokenResponse response;
  const grpc::Status status = tokens->CreateToken(&context, request, &response);
  EXPECT_TRUE(status.ok()) << "creating token '" << name << "': " << status.error_message();
  return response.secret();
}

}  // namespace parity::testing
