#include "kernels/comm/communicator.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/comm/gang_watch.h"
#include "kernels/comm/gloo_communicator.h"
#include "kernels/comm/kv_store.h"

namespace parity::kernels {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view Name() const override { return "local"; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSumHost(double*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status BroadcastHost(void*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

// Rank 0 creates NCCL's unique id (ncclGetUniqueId starts its bootstrap listener in this
// process) and posts it; the others read it from the same store as Gloo's addresses.
absl::StatusOr<std::unique_ptr<Communicator>> NcclThroughStore(const CommOptions& o,
                                                               KvClient& client, Device& device) {
  const std::string key = GangKeyPrefix(o) + "nccl_unique_id";
  NcclSetup setup{.rank = o.rank,
                  .world_size = o.world_size,
                  .timeout = o.rendezvous_timeout,
                  .exchange_id = [&](const std::string& id) -> absl::StatusOr<std::string> {
                    if (o.rank == 0) {
                      PARITY_RETURN_IF_ERROR(client.Set(key, id));
                      return id;
                    }
                    absl::StatusOr<std::string> got = client.Get(key, o.rendezvous_timeout);
                    if (absl::IsDeadlineExceeded(got.status())) {
                      return absl::DeadlineExceededError(
                          absl::StrCat("--rendezvous-timeout: rank 0 posted no NCCL id within ",
                                       absl::FormatDuration(o.rendezvous_timeout)));
                    }
                    return got;
                  }};
  return MakeNcclCommunicator(setup, device);
}

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

std::string GangKeyPrefix(const CommOptions& o) {
  return absl::StrCat("gang/", o.run_id.empty() ? "-" : o.run_id, "/epoch-", o.gang_epoch, "/");
}

absl::Status ValidateCommOptions(const CommOptions& o) {
  if (o.world_size < 1 || o.world_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size: must be between 1 and 4096 (ranks in the gang), got ", o.world_size));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: must be in [0, --world-size = ", o.world_size, "), got ", o.rank));
  }
  if (o.rendezvous_timeout <= absl::ZeroDuration() ||
      o.collective_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--rendezvous-timeout / --collective-timeout: must be positive seconds");
  }
  if (o.world_size == 1) return absl::OkStatus();
  if (o.rank == 0 && o.listen_host.empty()) {
    return absl::InvalidArgumentError(
        "--rendezvous-listen: rank 0 of a gang must host the rendezvous store; give the host "
        "address the other ranks can reach (e.g. this machine's IP, or 127.0.0.1 on one host)");
  }
  if (o.rank == 0 && !o.address.empty()) {
    return absl::InvalidArgumentError(
        "--rendezvous: rank 0 hosts the store (--rendezvous-listen); only ranks > 0 dial one");
  }
  if (o.rank > 0 && o.address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rendezvous: rank ", o.rank,
                     " needs rank 0's rendezvous address (HOST:PORT, from rank "
                     "0's \"rendezvous\" line)"));
  }
  if (o.rank > 0) {
    std::string host;
    int port = 0;
    PARITY_RETURN_IF_ERROR(ParseHostPort(o.address, "--rendezvous", host, port));
    if (o.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("PARITY_RENDEZVOUS_TOKEN: rank ", o.rank,
                       " needs the gang token rank 0 reported with its address (\"token\" of its "
                       "\"rendezvous\" line), in the environment"));
    }
  }
  if (o.rank > 0 && !o.listen_host.empty()) {
    return absl::InvalidArgumentError(
        "--rendezvous-listen: only rank 0 hosts the store; give ranks > 0 --rendezvous");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const CommOptions& o,
                                                               DeviceKind kind, Device& device) {
  PARITY_RETURN_IF_ERROR(ValidateCommOptions(o));
  // A gang of one with a store to host runs the real backend communicator (a check of that path
  // on a machine with one device); without one it is the no-op.
  if (o.world_size == 1 && o.listen_host.empty()) return MakeLocalCommunicator();
  KvIdentity identity{.run_id = o.run_id, .epoch = o.gang_epoch, .token = o.token};
  std::unique_ptr<KvServer> server;
  std::string address = o.address;
  if (o.rank == 0) {
    if (identity.token.empty()) {
      PARITY_ASSIGN_OR_RETURN(identity.token, NewGangToken());
    }
    KvLimits limits;
    limits.max_connections = 2 * o.world_size + 16;  // each rank's rendezvous and watch
    limits.ranks = o.world_size;
    limits.idle_timeout = o.rendezvous_timeout;
    limits.max_wait = o.rendezvous_timeout;
    PARITY_ASSIGN_OR_RETURN(server, KvServer::Start(o.listen_host, 0, identity, limits));
    address = server->address();
    if (o.on_listening) o.on_listening(address, identity.token);
  }
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<KvClient> client,
                          KvClient::Connect(address, identity, o.rendezvous_timeout));
  // A second connection is this rank's watch on the gang from before the mesh forms, so that a
  // rank dying at any point from here on is heard by the others (gang_watch.h).
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<KvClient> watch_client,
                          KvClient::Connect(address, identity, o.rendezvous_timeout));
  PARITY_ASSIGN_OR_RETURN(std::unique_ptr<GangWatch> watch,
                          GangWatch::Start(std::move(watch_client), o.rank));
  absl::StatusOr<std::unique_ptr<Communicator>> comm;
  if (kind == DeviceKind::kCuda) {
    comm = NcclThroughStore(o, *client, device);
  } else {
    std::string host = o.transport_host;
    if (host.empty()) {
      const bool wildcard = o.listen_host == "0.0.0.0" || o.listen_host == "::";
      host = o.rank == 0 && !wildcard ? o.listen_host : client->LocalHost();
    }
    comm = MakeGlooCommunicator(o, *client, host);
  }
  if (!comm.ok()) return WithGangWatchWord(comm.status(), watch->broken());
  // Every rank has read what it needed from the store once the collective library's mesh is up
  // (Gloo: a barrier after connecting; NCCL: ncclCommInitRank returns on all ranks together), so
  // rank 0 seals it: no new connection for the rest of the run, only the ranks' watches.
  return WatchGang(*std::move(comm), std::move(watch), std::move(server), o.on_wedged,
                   o.interrupt_grace);
}

}  // namespace parity::kernels
