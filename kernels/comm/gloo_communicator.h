// The Gloo communicator of the CPU backend (internal to comm/; communicator.h is the interface).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/comm/communicator.h"
#include "kernels/comm/kv_store.h"

namespace parity::kernels {

// Connects the full TCP mesh of the gang through `client`'s store (keys under GangKeyPrefix),
// with this rank's transport listening on `transport_host`, then waits at a barrier so that every
// rank is connected before it returns. DeadlineExceeded naming --rendezvous-timeout when a rank
// did not arrive in time; Unavailable when the mesh could not be built.
absl::StatusOr<std::unique_ptr<Communicator>> MakeGlooCommunicator(
    const CommOptions& options, KvClient& client, const std::string& transport_host);

}  // namespace parity::kernels
