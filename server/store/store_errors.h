// The errors of the store contract (run_store.h) that carry a payload, built in one place so that
// every implementation gives callers the same code, message and detail.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/rpc/error_details.pb.h"

namespace parity::server {

// NOT_FOUND carrying a google.rpc.ResourceInfo: `kind` is "sweep", "run" or "worker"; the
// detail names the resource type (e.g. "parity.v1.Sweep") and "sweeps/<id>".
inline absl::Status NotFoundError(absl::string_view kind, absl::string_view id,
                                  absl::string_view description = "not found") {
  absl::Status status = absl::NotFoundError(absl::StrCat(kind, " ", id, " ", description));
  google::rpc::ResourceInfo info;
  info.set_resource_type(
      absl::StrCat("parity.v1.", absl::AsciiStrToUpper(kind.substr(0, 1)), kind.substr(1)));
  info.set_resource_name(absl::StrCat(kind, "s/", id));
  info.set_description(std::string(description));
  status.SetPayload("type.googleapis.com/google.rpc.ResourceInfo",
                    absl::Cord(info.SerializeAsString()));
  return status;
}

// FAILED_PRECONDITION carrying a google.rpc.PreconditionFailure of type LEASE_EPOCH: a stale
// fencing token or a lost lease.
inline absl::Status LeaseEpochError(absl::string_view run_id, absl::string_view description) {
  absl::Status status = absl::FailedPreconditionError(
      absl::StrCat("run ", run_id, ": ", description, "; another worker may own it now"));
  google::rpc::PreconditionFailure failure;
  auto* violation = failure.add_violations();
  violation->set_type("LEASE_EPOCH");
  violation->set_subject(absl::StrCat("runs/", run_id));
  violation->set_description(std::string(description));
  status.SetPayload("type.googleapis.com/google.rpc.PreconditionFailure",
                    absl::Cord(failure.SerializeAsString()));
  return status;
}

// The fencing rule, stated once for every store: a write that carries a lease epoch other than the
// run's current one is refused — FAILED_PRECONDITION (LeaseEpochError) before anything is
// written. OK when `given` is current. Both stores call it wherever a worker's write is checked
// (memory: memory_run_queue.cc; PostgreSQL: postgres_run_queue*.cc, including the epochs that
// complete_runs_success.sql and append_metric_arrays.sql report as stale).
inline absl::Status CheckLeaseEpoch(absl::string_view run_id, int64_t given, int64_t current) {
  if (given == current) return absl::OkStatus();
  return LeaseEpochError(run_id,
                         absl::StrCat("lease epoch ", given, " is stale; current is ", current));
}

// ALREADY_EXISTS: `owner` used `key` before for another spec (sweep `existing_sweep_id`). Keys
// are each owner's, so the sweep named is always the caller's own.
inline absl::Status IdempotencyKeyReusedError(absl::string_view owner, absl::string_view key,
                                              absl::string_view existing_sweep_id) {
  return absl::AlreadyExistsError(absl::StrCat(
      "idempotency key '", key, "' was used by '", owner, "' for a different spec (sweep ",
      existing_sweep_id, "): use a new key for a new spec, or resend the same spec"));
}

// PERMISSION_DENIED: the worker id belongs to another token name (the one that registered it
// first), which is not named.
inline absl::Status WorkerOfAnotherIdentityError(absl::string_view worker_id,
                                                 absl::string_view action) {
  return absl::PermissionDeniedError(
      absl::StrCat("worker ", worker_id,
                   " was registered by another identity: a worker id belongs to the "
                   "token name that registered it first, and only that name may ",
                   action, " as it (register without worker_id to get an id of your own)"));
}

}  // namespace parity::server
