#include "worker/checkpoint_retention.h"

#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_store.h"
#include "worker/engine_protocol.h"

namespace parity::worker {
namespace {

namespace fs = std::filesystem;

bool IsFinal(parity::v1::RunState state) {
  return state == parity::v1::RUN_STATE_SUCCEEDED || state == parity::v1::RUN_STATE_FAILED ||
         state == parity::v1::RUN_STATE_CANCELLED;
}

bool IsLive(parity::v1::RunState state) {
  return state == parity::v1::RUN_STATE_LEASED || state == parity::v1::RUN_STATE_RUNNING;
}

// The lease epoch of a directory of one lease (epoch-N: the engine's; recorded-N: the links its
// heartbeats recorded), nullopt for any other name.
std::optional<int64_t> EpochOf(const fs::path& dir) {
  const std::string name = dir.filename().string();
  int64_t epoch = 0;
  for (const absl::string_view prefix : {"epoch-", "recorded-"}) {
    if (absl::StartsWith(name, prefix) &&
        absl::SimpleAtoi(absl::string_view(name).substr(prefix.size()), &epoch)) {
      return epoch;
    }
  }
  return std::nullopt;
}

bool SamePath(const fs::path& a, const std::string& b) {
  std::error_code ec;
  return !b.empty() && fs::equivalent(a, b, ec) && !ec;
}

}  // namespace

std::vector<std::string> CheckpointsToDelete(const std::string& run_dir,
                                             const parity::v1::RunRetention& retention) {
  std::vector<std::string> doomed;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return doomed;
  if (!retention.exists()) return {run_dir};
  const std::string& recorded = retention.checkpoint().uri();
  const bool final_state = IsFinal(retention.state());
  // The one file to keep of the older leases: the recorded checkpoint when it is here, else
  // (a live or pending run) the newest at or before the recorded step, where a resume falls back.
  // The recorded URI is relative to the store (core/checkpoint_uri.h), run_dir is <store>/<run>.
  std::string keep;
  const fs::path run_path = fs::path(run_dir).lexically_normal();
  if (absl::StatusOr<std::string> file = CheckpointFileOfUri(
          run_path.parent_path().string(), run_path.filename().string(), recorded);
      file.ok()) {
    keep = *file;
  } else if (!final_state && retention.checkpoint().step() > 0) {
    if (std::optional<EngineCheckpoint> older =
            NewestCheckpointAtOrBefore(run_dir, retention.checkpoint().step())) {
      keep = older->path;
    }
  }
  if (final_state && keep.empty()) return {run_dir};
  for (const fs::directory_entry& entry : fs::directory_iterator(run_dir, ec)) {
    const std::optional<int64_t> epoch = EpochOf(entry.path());
    // The live lease's directories are its holder's: it may be writing there right now (a link
    // it is about to record, too).
    if (epoch && IsLive(retention.state()) && *epoch >= retention.lease_epoch()) continue;
    const bool holds_keep = !keep.empty() && SamePath(entry.path(), fs::path(keep).parent_path());
    if (!holds_keep) {
      doomed.push_back(entry.path().string());
      continue;
    }
    for (const fs::directory_entry& file : fs::directory_iterator(entry.path(), ec)) {
      if (!SamePath(file.path(), keep)) doomed.push_back(file.path().string());
    }
  }
  return doomed;
}

int ApplyCheckpointRetention(const std::string& run_dir,
                             const parity::v1::RunRetention& retention) {
  int deleted = 0;
  for (const std::string& path : CheckpointsToDelete(run_dir, retention)) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) {
      spdlog::warn("checkpoint retention: cannot delete {}: {}", path, ec.message());
      continue;
    }
    ++deleted;
  }
  return deleted;
}

parity::v1::RunRetention RetentionOf(const parity::v1::Run& run) {
  parity::v1::RunRetention retention;
  retention.set_run_id(run.run_id());
  retention.set_exists(true);
  retention.set_state(run.state());
  if (run.has_checkpoint()) *retention.mutable_checkpoint() = run.checkpoint();
  retention.set_lease_epoch(run.lease().lease_epoch());
  return retention;
}

}  // namespace parity::worker
