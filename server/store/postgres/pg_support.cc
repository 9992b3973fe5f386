#include "server/store/postgres/pg_support.h"

#include <atomic>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/proto_time.h"
#include "google/rpc/error_details.pb.h"
#include "server/store/read_models.h"
#include "spdlog/spdlog.h"

namespace parity::server::pg {
namespace {

template <typename Enum>
std::string StripPrefix(const std::string& name, absl::string_view prefix) {
  return absl::StartsWith(name, prefix) ? name.substr(prefix.size()) : name;
}

}  // namespace

absl::Status DatabaseFailure(absl::StatusCode code, absl::string_view kind,
                             absl::string_view detail) {
  static std::atomic<uint64_t> next{0};
  // Unique within a process, and told apart across restarts by the start time.
  static const uint64_t start = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  const std::string ref = absl::StrCat(absl::Hex(start & 0xffffff), "-", next.fetch_add(1));
  spdlog::warn("event=database_error ref={} kind=\"{}\" detail=\"{}\"", ref, std::string(kind),
               absl::CHexEscape(detail));
  return absl::Status(code, absl::StrCat(kind, " (scheduler log ref ", ref, ")"));
}

absl::Status StatusFromException(const std::exception& e, DatabaseText text) {
  const std::string what = e.what();
  const auto failure = [&](absl::StatusCode code, absl::string_view kind) {
    if (text == DatabaseText::kKeep) return absl::Status(code, absl::StrCat(kind, ": ", what));
    return DatabaseFailure(code, kind, what);
  };
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr ||
      dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr) {
    return failure(absl::StatusCode::kUnavailable, "database unreachable");
  }
  if (dynamic_cast<const pqxx::serialization_failure*>(&e) != nullptr ||
      dynamic_cast<const pqxx::deadlock_detected*>(&e) != nullptr) {
    return failure(absl::StatusCode::kAborted, "lost a race in the database, retry");
  }
  if (dynamic_cast<const pqxx::unique_violation*>(&e) != nullptr) {
    return failure(absl::StatusCode::kAlreadyExists, "conflicts with a stored record");
  }
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e); sql != nullptr) {
    const std::string& state = sql->sqlstate();
    // Class 08: connection exceptions; 57P0x: the server is shutting down or restarting.
    if (absl::StartsWith(state, "08") || absl::StartsWith(state, "57P")) {
      return failure(absl::StatusCode::kUnavailable, "database unavailable");
    }
    if (state == "40001" || state == "40P01" || state == "55P03") {
      return failure(absl::StatusCode::kAborted, "lost a race in the database, retry");
    }
    if (state == "57014") {  // statement_timeout (or a cancel): the database was too slow
      return failure(absl::StatusCode::kUnavailable, "database statement timed out");
    }
    if (state == "22P02") {  // e.g. a malformed UUID that got past the request checks
      return failure(absl::StatusCode::kInvalidArgument, "malformed value");
    }
  }
  return failure(absl::StatusCode::kInternal, "database error");
}

std::string PrimaryMessage(const pqxx::sql_error& e) {
  std::string_view text = e.what();
  if (const size_t end = text.find('\n'); end != std::string_view::npos) text = text.substr(0, end);
  for (std::string_view prefix : {"ERROR:", "FATAL:"}) {
    if (text.starts_with(prefix)) text.remove_prefix(prefix.size());
  }
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return std::string(text);
}

std::string RunStateText(v1::RunState state) {
  return StripPrefix<v1::RunState>(v1::RunState_Name(state), "RUN_STATE_");
}
v1::RunState RunStateFromText(absl::string_view text) {
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  v1::RunState_Parse(absl::StrCat("RUN_STATE_", text), &state);
  return state;
}
std::string SweepStateText(v1::SweepState state) {
  return StripPrefix<v1::SweepState>(v1::SweepState_Name(state), "SWEEP_STATE_");
}
v1::SweepState SweepStateFromText(absl::string_view text) {
  v1::SweepState state = v1::SWEEP_STATE_UNSPECIFIED;
  v1::SweepState_Parse(absl::StrCat("SWEEP_STATE_", text), &state);
  return state;
}
std::string FailureClassText(v1::FailureClass failure_class) {
  return StripPrefix<v1::FailureClass>(v1::FailureClass_Name(failure_class), "FAILURE_CLASS_");
}
v1::FailureClass FailureClassFromText(absl::string_view text) {
  v1::FailureClass failure_class = v1::FAILURE_CLASS_UNSPECIFIED;
  v1::FailureClass_Parse(absl::StrCat("FAILURE_CLASS_", text), &failure_class);
  return failure_class;
}
std::string RoleText(v1::RunRole role) {
  return StripPrefix<v1::RunRole>(v1::RunRole_Name(role), "RUN_ROLE_");
}
v1::RunRole RoleFromText(absl::string_view text) {
  v1::RunRole role = v1::RUN_ROLE_UNSPECIFIED;
  v1::RunRole_Parse(absl::StrCat("RUN_ROLE_", text), &role);
  return role;
}

std::string LayoutText(const v1::ModelSpec& model) { return core::ModelLayoutName(model); }

google::protobuf::Timestamp TimestampFromMicros(int64_t micros) {
  return ToProtoTime(absl::FromUnixMicros(micros));
}

absl::Time TimeFromMicros(int64_t micros) { return absl::FromUnixMicros(micros); }

void SetTimestamp(const pqxx::field& field, google::protobuf::Timestamp* out) {
  if (!field.is_null()) *out = TimestampFromMicros(field.as<int64_t>());
}

pqxx::binarystring Bytes(const std::string& data) {
  return pqxx::binarystring(data.data(), data.size());
}

std::string BytesOf(const pqxx::field& field) { return pqxx::binarystring(field).str(); }

}  // namespace parity::server::pg
