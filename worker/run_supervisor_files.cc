// RunSupervisor's files (run_supervisor.h): what one run reads and writes on this worker's disk
// before and around the engine — the dataset resolved inside --corpus-dir, the spec written for
// the engine, the checkpoint to resume from (checked, checkpoint_store.h), the recorded
// checkpoint's hard link and the URI it is reported as, and engine text made fit for viewers.
// All on the supervisor thread.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_store.h"
#include "worker/failure_text.h"
#include "worker/run_supervisor.h"

namespace parity::worker {

namespace fs = std::filesystem;

std::variant<RunSupervisor::Prepared, RunSupervisor::StartFailure> RunSupervisor::PrepareFiles() {
  // The worker's own trouble (a disk that will not take a file) is told to viewers in a word;
  // the paths go to the log.
  const auto local_failure = [this](const std::string& detail) {
    spdlog::error("run {}: {}", run_.run_id(), detail);
    return StartFailure{.failure_class = parity::v1::FAILURE_CLASS_INFRASTRUCTURE,
                        .message = ForViewers(absl::StrCat("worker: ", detail))};
  };
  std::error_code ec;
  fs::create_directories(work_dir_, ec);
  if (ec) return local_failure(absl::StrCat("create ", work_dir_, ": ", ec.message()));
  fs::create_directories(checkpoint_dir_, ec);
  if (ec) return local_failure(absl::StrCat("create ", checkpoint_dir_, ": ", ec.message()));

  // The dataset is a name, resolved here inside --corpus-dir and nowhere else: the spec came from
  // a researcher, and a path in it would make this worker read any file it can. Then verified
  // against the digest the sweep pinned, so that every worker trains on the same data.
  parity::v1::RunSpec spec = run_.spec();
  const std::string& name = spec.data().corpus();
  datasets::VerifyCache own_cache("");
  DatasetCheck check = options_.dataset_check;
  if (check.cache == nullptr) check.cache = &own_cache;
  absl::StatusOr<ResolvedDataset> dataset = ResolveAndVerifyDataset(
      options_.corpus_dir, name, spec.data().dataset_digest(), options_.dataset_limits, check);
  if (!dataset.ok()) {
    spdlog::error("run {}: {}", run_.run_id(), dataset.status().ToString());
    if (absl::IsDataLoss(dataset.status())) {
      // Never retried: this worker's copy stays what it is until someone re-copies it.
      return StartFailure{
          .failure_class = parity::v1::FAILURE_CLASS_DATA_MISMATCH,
          .message = DatasetMismatchForViewers(name, options_.worker_id, dataset.status())};
    }
    // Not retried: the same name fails the same way (a pool's workers hold the same datasets).
    return StartFailure{
        .failure_class = parity::v1::FAILURE_CLASS_USER_ERROR,
        .message = DatasetFailureForViewers(name, options_.worker_id, dataset.status())};
  }
  dataset_path_ = dataset->path;
  dataset_digest_ = dataset->digest;
  spec.mutable_data()->set_corpus(dataset->path);

  absl::StatusOr<std::string> resume_from = ResumeCheckpoint();
  if (!resume_from.ok()) {
    // A recorded URI this worker may not read is never handed to the engine.
    spdlog::error("run {}: refusing to resume: {}", run_.run_id(), resume_from.status().ToString());
    return StartFailure{.failure_class = parity::v1::FAILURE_CLASS_INFRASTRUCTURE,
                        .message =
                            "the checkpoint recorded for the run (checkpoint.uri) is not "
                            "a plain file inside the run's prefix of the checkpoint store; "
                            "the worker refused to resume from it"};
  }

  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  if (auto st = google::protobuf::util::MessageToJsonString(spec, &json, print); !st.ok()) {
    return local_failure(absl::StrCat("spec to JSON: ", st.ToString()));
  }
  Prepared prepared{
      .spec_path = absl::StrCat(work_dir_, "/run-attempt", std::max(1u, run_.attempt()), ".json"),
      .resume_from = *std::move(resume_from)};
  std::ofstream out(prepared.spec_path, std::ios::trunc);
  out << json << "\n";
  if (!out.good()) return local_failure(absl::StrCat("write ", prepared.spec_path));
  return prepared;
}

// Only the checkpoint the scheduler recorded counts: every metric point up to it is stored (the
// supervisor reports a checkpoint only then), so a resume from it leaves no hole in the curve. A
// newer file on disk may be past points the last holder never delivered. When the recorded file
// is gone (pruned, or written on another machine's disk), the newest one at or before its step
// under this run's directory. The recorded URI is checked before it is read (checkpoint_store.h):
// a lease holder chose it.
absl::StatusOr<std::string> RunSupervisor::ResumeCheckpoint() const {
  if (!run_.has_checkpoint() || run_.checkpoint().step() == 0) return "";
  const parity::v1::Checkpoint& recorded = run_.checkpoint();
  absl::StatusOr<std::string> file =
      CheckpointFileOfUri(options_.checkpoint_root, run_.run_id(), recorded.uri());
  if (file.ok()) return *file;
  if (!absl::IsNotFound(file.status())) return file.status();
  if (std::optional<EngineCheckpoint> older =
          NewestCheckpointAtOrBefore(run_checkpoints_, recorded.step())) {
    spdlog::warn("run {}: recorded checkpoint {} (step {}) is missing; resuming from step {} ({})",
                 run_.run_id(), recorded.uri(), recorded.step(), older->step, older->path);
    return older->path;
  }
  spdlog::warn(
      "run {}: recorded checkpoint {} (step {}) is missing and none older is kept; "
      "starting over",
      run_.run_id(), recorded.uri(), recorded.step());
  return "";
}

std::optional<parity::v1::Checkpoint> RunSupervisor::Reported(
    const parity::v1::Checkpoint& local) const {
  absl::StatusOr<std::string> uri =
      CheckpointUriOfFile(options_.checkpoint_root, run_.run_id(), local.uri());
  if (!uri.ok()) {
    spdlog::warn("run {}: checkpoint not reported: {}", run_.run_id(), uri.status().ToString());
    return std::nullopt;
  }
  parity::v1::Checkpoint reported = local;
  reported.set_uri(*uri);
  return reported;
}

std::string RunSupervisor::ForViewers(absl::string_view engine_text) const {
  std::vector<KnownPath> known = {{dataset_path_, "<dataset>"},
                                  {options_.train_binary, "<engine>"}};
  // Each directory as configured and as the engine may see it (its real path).
  for (const auto& [dir, placeholder] : {std::pair{options_.corpus_dir, "<corpus-dir>"},
                                         {options_.checkpoint_root, "<checkpoint-dir>"},
                                         {options_.work_root, "<work-dir>"}}) {
    if (dir.empty()) continue;
    std::error_code ec;
    known.push_back({dir, placeholder});
    known.push_back({fs::weakly_canonical(dir, ec).string(), placeholder});
  }
  return ScrubForViewers(engine_text, std::move(known));
}

// The engine keeps only its newest few checkpoints, and it goes on training (and pruning) while
// its worker is cut off from the scheduler, so the file the scheduler recorded could be gone by
// the time another worker resumes from it. The recorded one is therefore a hard link outside the
// engine's directory, <run>/recorded-<lease epoch>/step-NNNNNNNN.ckpt, which the engine never
// prunes and retention (checkpoint_retention.h) keeps while it is the run's resume point.
std::string RunSupervisor::KeepForResume(const std::string& engine_file) const {
  std::error_code ec;
  const fs::path dir = fs::path(run_checkpoints_) / absl::StrCat("recorded-", lease_.lease_epoch());
  fs::create_directories(dir, ec);
  const fs::path link = dir / fs::path(engine_file).filename();
  if (!ec && (fs::exists(link, ec) || (fs::create_hard_link(engine_file, link, ec), !ec))) {
    return link.string();
  }
  spdlog::warn("run {}: cannot keep checkpoint {} for resume ({}); reporting the engine's file",
               run_.run_id(), engine_file, ec.message());
  return engine_file;
}

void RunSupervisor::RemoveKept(const std::string& path) const {
  if (fs::path(path).parent_path().filename().string().starts_with("recorded-")) {
    std::error_code ec;
    fs::remove(path, ec);
  }
}

}  // namespace parity::worker
