#include "worker/worker_flags.h"

#include <cstdlib>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/cpp/scheduler_channel.h"
#include "clients/cpp/scheduler_channel_flags.h"

namespace parity::worker {
namespace {

std::string Env(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// The defaults that come from the environment, read before the flags so that a flag wins.
void ReadEnvironment(WorkerFlags& f) {
  f.scheduler = Env("PARITY_SCHEDULER", f.scheduler);
  f.threads = static_cast<uint32_t>(std::atoi(Env("PARITY_WORKER_THREADS", "0").c_str()));
  f.max_runs = static_cast<uint32_t>(std::atoi(Env("PARITY_WORKER_MAX_RUNS", "0").c_str()));
  f.checkpoint_dir = Env("PARITY_CHECKPOINT_DIR", f.checkpoint_dir);
  f.rendezvous_host = Env("PARITY_RENDEZVOUS_HOST", f.rendezvous_host);
  f.work_dir = Env("PARITY_WORK_DIR", f.work_dir);
  f.corpus_dir = Env("PARITY_CORPUS_DIR", f.corpus_dir);
  f.max_dataset_bytes =
      std::atoll(Env("PARITY_MAX_DATASET_BYTES", std::to_string(f.max_dataset_bytes)).c_str());
  f.train_binary = Env("PARITY_TRAIN_BINARY", f.train_binary);
  f.verify_datasets = Env("PARITY_VERIFY_DATASETS", f.verify_datasets);
  f.log_level = Env("PARITY_LOG_LEVEL", f.log_level);
  f.log_format = Env("PARITY_LOG_FORMAT", f.log_format);
  f.metrics_listen = Env("PARITY_WORKER_METRICS_LISTEN", f.metrics_listen);
  f.metrics_token_file = Env("PARITY_WORKER_METRICS_TOKEN_FILE", f.metrics_token_file);
  // A yes/no word, as PARITY_INSECURE_PLAINTEXT takes it: "0" or "false" must not turn it on.
  absl::StatusOr<bool> plaintext = clients::EnvFlag("PARITY_WORKER_METRICS_INSECURE_PLAINTEXT");
  if (plaintext.ok()) {
    f.metrics_insecure_plaintext = *plaintext;
  } else {
    f.metrics_insecure_plaintext_invalid = std::string(plaintext.status().message());
  }
}

// Where runs live and what they may read.
void AddRunFlags(CLI::App& app, WorkerFlags& f) {
  app.add_option("--threads", f.threads,
                 "CPU threads to offer; 0 = all (env PARITY_WORKER_THREADS)");
  app.add_option(
      "--max-runs", f.max_runs,
      "Concurrent runs; 0 = one per GPU, else one per thread (env PARITY_WORKER_MAX_RUNS)");
  app.add_option("--checkpoint-dir", f.checkpoint_dir,
                 "Checkpoint store (env PARITY_CHECKPOINT_DIR)");
  app.add_option("--work-dir", f.work_dir,
                 "Scratch directory for specs and engine logs (env PARITY_WORK_DIR)");
  app.add_option("--corpus-dir", f.corpus_dir,
                 "Where dataset names resolve, and nothing outside it is read: NAME → DIR/NAME/ "
                 "(prepared, with manifest.json), else DIR/NAME.txt, else DIR/NAME; no links (env "
                 "PARITY_CORPUS_DIR)");
  app.add_option("--max-dataset-bytes", f.max_dataset_bytes,
                 "The largest raw dataset file an engine may read; prepared datasets are "
                 "memory-mapped and not limited (env PARITY_MAX_DATASET_BYTES)")
      ->check(CLI::PositiveNumber);
  app.add_option("--verify-datasets", f.verify_datasets,
                 "How datasets are checked against their manifests: cached (re-hash only files "
                 "whose size, mtime or inode changed; a tamper keeping all three is not seen) or "
                 "full (re-hash everything at start and before every run) (env "
                 "PARITY_VERIFY_DATASETS)")
      ->check(CLI::IsMember({"cached", "full"}));
  app.add_option("--train-binary", f.train_binary,
                 "The parity-train engine (env PARITY_TRAIN_BINARY)");
  app.add_option("--label", f.labels, "Worker label k=v (repeatable)");
  app.add_option("--worker-id", f.worker_id,
                 "Reuse this worker id (default: the one saved in --work-dir)");
  app.add_flag("--no-gpus", f.no_gpus, "Do not look for CUDA GPUs");
}

// The metrics port, the one-shot modes, the engines' timings and the log.
void AddDaemonFlags(CLI::App& app, WorkerFlags& f) {
  app.add_option("--metrics-listen", f.metrics_listen,
                 "Prometheus /metrics address ip:port, port 0 = any; empty = off (env "
                 "PARITY_WORKER_METRICS_LISTEN); loopback only unless "
                 "--metrics-insecure-plaintext");
  app.add_option("--metrics-token-file", f.metrics_token_file,
                 "File holding the secret scrapers send as the basic-auth password of "
                 "/metrics; required with --metrics-listen (env PARITY_WORKER_METRICS_TOKEN_FILE)");
  app.add_flag("--metrics-insecure-plaintext", f.metrics_insecure_plaintext,
               "Allow --metrics-listen on a non-loopback address: the port has no TLS, so the "
               "scrape token crosses the network in clear (env "
               "PARITY_WORKER_METRICS_INSECURE_PLAINTEXT)");
  app.add_flag("--probe", f.probe, "Check the scheduler's gRPC health (SERVING → exit 0) and exit");
  app.add_flag("--list-devices", f.list_devices,
               "Print the devices this worker would register (JSON, one per line) and exit");
  app.add_option("--kill-grace", f.kill_grace_s,
                 "Seconds between SIGTERM and SIGKILL for an engine");
  app.add_option("--rendezvous-host", f.rendezvous_host,
                 "Address a gang's rank 0 on this worker serves its rendezvous store on, which the "
                 "gang's other workers must reach (env PARITY_RENDEZVOUS_HOST; 0.0.0.0 = every "
                 "interface, reported by host name)");
  app.add_option("--lease-wait", f.lease_wait_s, "Seconds one LeaseRun long poll waits");
  app.add_option("--progress-timeout", f.progress_timeout_s,
                 "Seconds without a new training step (or 4x the longest gap seen, if longer) "
                 "before an engine is killed as HUNG")
      ->check(CLI::PositiveNumber);
  app.add_option("--startup-timeout", f.startup_timeout_s,
                 "Seconds an engine may take to its first two steps before it is killed as HUNG")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-retention-interval", f.checkpoint_retention_s,
                 "Seconds between passes that delete the checkpoints no run needs any more (a "
                 "deleted sweep's runs, all but the final one of a finished run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error (env PARITY_LOG_LEVEL)");
  app.add_option("--log-format", f.log_format,
                 "text (key=value) or json, one object per line (env PARITY_LOG_FORMAT)");
}

}  // namespace

void WorkerFlags::AddFlags(CLI::App& app) {
  ReadEnvironment(*this);
  app.add_option("--scheduler", scheduler, "Scheduler address host:port (env PARITY_SCHEDULER)");
  clients::AddSchedulerChannelFlags(app, channel, token_file);
  AddRunFlags(app, *this);
  AddDaemonFlags(app, *this);
}

absl::Status WorkerFlags::Validate() const {
  if (max_dataset_bytes <= 0) {
    return absl::InvalidArgumentError(
        "--max-dataset-bytes (or PARITY_MAX_DATASET_BYTES) must be a positive number of bytes");
  }
  if (absl::StatusOr<datasets::VerifyMode> mode = datasets::ParseVerifyMode(verify_datasets);
      !mode.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(mode.status().message(), " (or PARITY_VERIFY_DATASETS)"));
  }
  for (const std::string& label : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    if (kv.first.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--label wants k=v, got '", label, "'"));
    }
  }
  if (!metrics_insecure_plaintext_invalid.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(metrics_insecure_plaintext_invalid, " (or --metrics-insecure-plaintext)"));
  }
  return absl::OkStatus();
}

datasets::VerifyMode WorkerFlags::verify_mode() const {
  return datasets::ParseVerifyMode(verify_datasets).value_or(datasets::VerifyMode::kCached);
}

std::map<std::string, std::string> WorkerFlags::label_map() const {
  std::map<std::string, std::string> map;
  for (const std::string& label : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    map[kv.first] = kv.second;
  }
  return map;
}

}  // namespace parity::worker
