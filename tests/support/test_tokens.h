// The admin token the tests start their schedulers with (ServerOptions::bootstrap_token, or a
// --bootstrap-token-file holding it), and channels that carry a token, as every client must.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cpp/scheduler_channel.h"
#include "grpcpp/grpcpp.h"

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

}  // namespace parity::testing
