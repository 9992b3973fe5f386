// WorkerFlags: what parity-worker is told on its command line, each flag declared once with its
// default (AddFlags: the PARITY_* variable where the flag has one, else the built-in value) and
// checked as a whole, each error naming the flag (Validate). worker_main.cc turns them into the
// daemon's WorkerOptions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clients/cpp/scheduler_channel.h"
#include "datasets/verify/verify.h"
#include "worker/dataset_resolver.h"

namespace CLI {
class App;
}

namespace parity::worker {

struct WorkerFlags {
  std::string scheduler = "localhost:50051";  // PARITY_SCHEDULER
  clients::SchedulerChannelOptions channel;   // --token, --tls-ca, ... (address: `scheduler`)
  std::string token_file;
  uint32_t threads = 0;   // CPU threads offered; 0 = all
  uint32_t max_runs = 0;  // 0 = one per GPU, else one per thread
  std::string checkpoint_dir = ".parity/checkpoints";
  std::string work_dir = ".parity/work";
  std::string corpus_dir = "data";
  int64_t max_dataset_bytes = kDefaultMaxDatasetBytes;
  std::string train_binary;  // empty: parity-train beside this binary, else on PATH
  std::string verify_datasets = "cached";
  std::string log_level = "info";
  std::string log_format = "text";
  std::string metrics_listen;  // empty = off
  std::string metrics_token_file;
  bool metrics_insecure_plaintext = false;
  // Why PARITY_WORKER_METRICS_INSECURE_PLAINTEXT is no yes/no word (Validate returns it); empty
  // when it parsed.
  std::string metrics_insecure_plaintext_invalid;
  std::string worker_id;            // empty: the one saved in work_dir
  std::vector<std::string> labels;  // k=v
  bool no_gpus = false;
  bool probe = false;
  bool list_devices = false;
  double kill_grace_s = 30;
  // Where a gang's rank 0 on this worker serves its rendezvous store: an address of this machine
  // the gang's other workers reach (0.0.0.0 = every interface, reported by host name).
  std::string rendezvous_host = "0.0.0.0";
  double lease_wait_s = 20;
  double progress_timeout_s = 300;
  double startup_timeout_s = 1800;
  double checkpoint_retention_s = 600;

  // Takes each default from its environment variable (an empty one counts as unset), then
  // declares every flag on `app`, bound to its field. `app` must not outlive this struct.
  void AddFlags(CLI::App& app);
  // INVALID_ARGUMENT naming the flag (and its variable) for what the parse could not check: a
  // dataset byte limit that is not positive, an unknown --verify-datasets, a --label not k=v, a
  // PARITY_WORKER_METRICS_INSECURE_PLAINTEXT that is no yes/no word.
  absl::Status Validate() const;
  // The parsed forms; valid after Validate() succeeded.
  datasets::VerifyMode verify_mode() const;
  std::map<std::string, std::string> label_map() const;
};

}  // namespace parity::worker
