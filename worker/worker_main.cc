// parity-worker: the worker daemon. Flags (each with an environment fallback where noted):
//   --scheduler HOST:PORT    (PARITY_SCHEDULER, default localhost:50051); several replicas:
//                            a,b list or gRPC's target syntax (clients/cpp/scheduler_target.h)
//   --token-file FILE        the worker's bearer token, role worker (PARITY_TOKEN_FILE; or
//                            --token / PARITY_TOKEN, which the engines do not inherit)
//   --tls-ca FILE            TLS to the scheduler, verified against this CA (PARITY_TLS_CA);
//   --tls-client-cert/-key   a client certificate for mutual TLS (PARITY_TLS_CLIENT_CERT/KEY)
//   --threads N              CPU threads offered (PARITY_WORKER_THREADS; default: all)
//   --max-runs N             concurrent runs (PARITY_WORKER_MAX_RUNS; default: 1 per GPU, else
//                            one per thread: runs book their cpu_threads until threads run out)
//   --checkpoint-dir DIR     checkpoint store (PARITY_CHECKPOINT_DIR; default .parity/checkpoints)
//   --work-dir DIR           scratch: specs, engine logs (PARITY_WORK_DIR; default .parity/work)
//   --corpus-dir DIR         where dataset names resolve (prepared NAME/, else NAME.txt, else
//   NAME),
//                            and nothing outside it is read (PARITY_CORPUS_DIR; default data)
//   --max-dataset-bytes N    the largest raw dataset file an engine may read; prepared datasets are
//                            memory-mapped and not limited (PARITY_MAX_DATASET_BYTES; default
//                            4 GiB)
//   --verify-datasets MODE   cached|full: how datasets are checked against their manifests at start
//                            and before each run (PARITY_VERIFY_DATASETS; default cached: only
//                            files whose size/mtime/inode changed since the last check are
//                            re-hashed, cache in <work-dir>/dataset-verify-cache.json)
//   --train-binary PATH      the engine (PARITY_TRAIN_BINARY; default: next to this binary, else
//   PATH)
//   --label k=v              repeated; worker labels
//   --no-gpus                do not look for CUDA GPUs
//   --kill-grace SECONDS     SIGTERM → SIGKILL grace for engines (default 30)
//   --lease-wait SECONDS     LeaseRun long-poll wait (default 20)
//   --metrics-listen IP:PORT Prometheus /metrics (PARITY_WORKER_METRICS_LISTEN; default empty =
//                            off, since several workers may share a host; port 0 = any); only
//                            on an address that resolves to loopback unless
//                            --metrics-insecure-plaintext
//                            (PARITY_WORKER_METRICS_INSECURE_PLAINTEXT)
//   --metrics-token-file F   the secret scrapers send as the basic-auth password; required with
//                            --metrics-listen (PARITY_WORKER_METRICS_TOKEN_FILE)
//   --probe                  check the scheduler's gRPC health and exit (0 = SERVING)
//   --list-devices           print the devices this worker would register (JSON) and exit
//   --log-level LEVEL        trace|debug|info|warn|error (PARITY_LOG_LEVEL; default info)
//   --log-format FORMAT      text or json (PARITY_LOG_FORMAT; logging/README.md)
// SIGTERM/SIGINT: engines get SIGTERM, their runs are reported PREEMPTED, exit 0.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "clients/cpp/scheduler_channel_flags.h"
#include "google/protobuf/util/json_util.h"
#include "logging/log_format.h"
#include "prometheus/exposer.h"
#include "spdlog/spdlog.h"
#include "worker/device_inventory.h"
#include "worker/scheduler_client.h"
#include "worker/worker.h"
#include "worker/worker_metrics.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "dev"
#endif

namespace {

namespace fs = std::filesystem;

std::string Env(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// The engine: --train-binary, else parity-train beside this binary or in the build tree's kernels/,
// else the name alone (looked up on PATH at spawn time).
std::string DefaultTrainBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate :
         {self.parent_path() / "parity-train",
          self.parent_path().parent_path() / "kernels" / "parity-train"}) {
      if (fs::exists(candidate, ec)) return candidate.string();
    }
  }
  return "parity-train";
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "parity-worker: leases runs from the Parity scheduler and trains them with parity-train"};
  std::string scheduler = Env("PARITY_SCHEDULER", "localhost:50051");
  uint32_t threads = static_cast<uint32_t>(std::atoi(Env("PARITY_WORKER_THREADS", "0").c_str()));
  uint32_t max_runs = static_cast<uint32_t>(std::atoi(Env("PARITY_WORKER_MAX_RUNS", "0").c_str()));
  std::string checkpoint_dir = Env("PARITY_CHECKPOINT_DIR", ".parity/checkpoints");
  std::string work_dir = Env("PARITY_WORK_DIR", ".parity/work");
  std::string corpus_dir = Env("PARITY_CORPUS_DIR", "data");
  int64_t max_dataset_bytes = std::atoll(
      Env("PARITY_MAX_DATASET_BYTES", std::to_string(parity::worker::kDefaultMaxDatasetBytes))
          .c_str());
  std::string train_binary = Env("PARITY_TRAIN_BINARY", "");
  std::string verify_datasets = Env("PARITY_VERIFY_DATASETS", "cached");
  std::string log_level = Env("PARITY_LOG_LEVEL", "info");
  std::string log_format = Env("PARITY_LOG_FORMAT", "text");
  std::string metrics_listen = Env("PARITY_WORKER_METRICS_LISTEN", "");
  std::string metrics_token_file = Env("PARITY_WORKER_METRICS_TOKEN_FILE", "");
  bool metrics_insecure_plaintext = !Env("PARITY_WORKER_METRICS_INSECURE_PLAINTEXT", "").empty();
  std::string worker_id;
  std::vector<std::string> labels;
  bool no_gpus = false;
  bool probe = false;
  bool list_devices = false;
  double kill_grace_s = 30, lease_wait_s = 20, progress_timeout_s = 300, startup_timeout_s = 1800,
         checkpoint_retention_s = 600;
  app.add_option("--scheduler", scheduler,
                 "Scheduler address host:port; several replicas: host:port,host:port or gRPC's "
                 "target syntax, e.g. dns:///name:port (env PARITY_SCHEDULER)");
  parity::clients::SchedulerChannelOptions channel;
  std::string token_file;
  parity::clients::AddSchedulerChannelFlags(app, channel, token_file);
  app.add_option("--threads", threads, "CPU threads to offer; 0 = all (env PARITY_WORKER_THREADS)");
  app.add_option(
      "--max-runs", max_runs,
      "Concurrent runs; 0 = one per GPU, else one per thread (env PARITY_WORKER_MAX_RUNS)");
  app.add_option("--checkpoint-dir", checkpoint_dir,
                 "Checkpoint store (env PARITY_CHECKPOINT_DIR)");
  app.add_option("--work-dir", work_dir,
                 "Scratch directory for specs and engine logs (env PARITY_WORK_DIR)");
  app.add_option("--corpus-dir", corpus_dir,
                 "Where dataset names resolve, and nothing outside it is read: NAME → DIR/NAME/ "
                 "(prepared, with manifest.json), else DIR/NAME.txt, else DIR/NAME; no links (env "
                 "PARITY_CORPUS_DIR)");
  app.add_option("--max-dataset-bytes", max_dataset_bytes,
                 "The largest raw dataset file an engine may read; prepared datasets are "
                 "memory-mapped and not limited (env PARITY_MAX_DATASET_BYTES)")
      ->check(CLI::PositiveNumber);
  app.add_option("--verify-datasets", verify_datasets,
                 "How datasets are checked against their manifests: cached (re-hash only files "
                 "whose size, mtime or inode changed; a tamper keeping all three is not seen) or "
                 "full (re-hash everything at start and before every run) (env "
                 "PARITY_VERIFY_DATASETS)")
      ->check(CLI::IsMember({"cached", "full"}));
  app.add_option("--train-binary", train_binary,
                 "The parity-train engine (env PARITY_TRAIN_BINARY)");
  app.add_option("--label", labels, "Worker label k=v (repeatable)");
  app.add_option("--worker-id", worker_id,
                 "Reuse this worker id (default: the one saved in --work-dir)");
  app.add_flag("--no-gpus", no_gpus, "Do not look for CUDA GPUs");
  app.add_option("--metrics-listen", metrics_listen,
                 "Prometheus /metrics address ip:port, port 0 = any; empty = off (env "
                 "PARITY_WORKER_METRICS_LISTEN); loopback only unless "
                 "--metrics-insecure-plaintext");
  app.add_option("--metrics-token-file", metrics_token_file,
                 "File holding the secret scrapers send as the basic-auth password of "
                 "/metrics; required with --metrics-listen (env PARITY_WORKER_METRICS_TOKEN_FILE)");
  app.add_flag("--metrics-insecure-plaintext", metrics_insecure_plaintext,
               "Allow --metrics-listen on a non-loopback address: the port has no TLS, so the "
               "scrape token crosses the network in clear (env "
               "PARITY_WORKER_METRICS_INSECURE_PLAINTEXT)");
  app.add_flag("--probe", probe, "Check the scheduler's gRPC health (SERVING → exit 0) and exit");
  app.add_flag("--list-devices", list_devices,
               "Print the devices this worker would register (JSON, one per line) and exit");
  app.add_option("--kill-grace", kill_grace_s, "Seconds between SIGTERM and SIGKILL for an engine");
  app.add_option("--lease-wait", lease_wait_s, "Seconds one LeaseRun long poll waits");
  app.add_option("--progress-timeout", progress_timeout_s,
                 "Seconds without a new training step (or 4x the longest gap seen, if longer) "
                 "before an engine is killed as HUNG")
      ->check(CLI::PositiveNumber);
  app.add_option("--startup-timeout", startup_timeout_s,
                 "Seconds an engine may take to its first two steps before it is killed as HUNG")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-retention-interval", checkpoint_retention_s,
                 "Seconds between passes that delete the checkpoints no run needs any more (a "
                 "deleted sweep's runs, all but the final one of a finished run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error (env PARITY_LOG_LEVEL)");
  app.add_option("--log-format", log_format,
                 "text (key=value) or json, one object per line (env PARITY_LOG_FORMAT)");
  CLI11_PARSE(app, argc, argv);
  if (max_dataset_bytes <= 0) {
    std::fprintf(stderr,
                 "parity-worker: --max-dataset-bytes (or PARITY_MAX_DATASET_BYTES) must be a "
                 "positive number of bytes\n");
    return 2;
  }
  const absl::StatusOr<parity::datasets::VerifyMode> verify_mode =
      parity::datasets::ParseVerifyMode(verify_datasets);
  if (!verify_mode.ok()) {
    std::fprintf(stderr, "parity-worker: %s (or PARITY_VERIFY_DATASETS)\n",
                 std::string(verify_mode.status().message()).c_str());
    return 2;
  }
  channel.address = scheduler;
  if (absl::Status resolved = parity::clients::ResolveFromEnvironment(channel, token_file);
      !resolved.ok()) {
    std::fprintf(stderr, "parity-worker: %s\n", std::string(resolved.message()).c_str());
    return 2;
  }
  // The engines are this process's children: they need no token, so they do not inherit one
  // (RunSupervisor also withholds kEngineWithheldEnv from every engine it starts).
  unsetenv("PARITY_TOKEN");
  unsetenv("PARITY_TOKEN_FILE");

  if (probe) {
    absl::Status health = parity::worker::ProbeSchedulerHealth(channel, absl::Seconds(2));
    if (!health.ok()) {
      std::fprintf(stderr, "%s: %s\n", scheduler.c_str(), health.ToString().c_str());
      return 1;
    }
    std::printf("%s: SERVING\n", scheduler.c_str());
    return 0;
  }
  if (list_devices) {
    // What RegisterWorker would send, for operators and the GPU check (bench/gpu_check.sh).
    google::protobuf::util::JsonPrintOptions json;
    json.always_print_primitive_fields = true;
    for (const parity::v1::Device& d :
         parity::worker::DiscoverDevices({.threads = threads, .discover_gpus = !no_gpus})) {
      std::string line;
      if (!google::protobuf::util::MessageToJsonString(d, &line, json).ok()) return 1;
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }
  if (absl::Status logging =
          parity::logging::ConfigureLogging("parity-worker", log_format, log_level);
      !logging.ok()) {
    std::fprintf(stderr, "parity-worker: %s\n", std::string(logging.message()).c_str());
    return 2;
  }

  // Signals are taken by one thread with sigwait; every other thread (and, through
  // ChildProcess, no engine) inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::map<std::string, std::string> label_map;
  for (const std::string& l : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
    if (kv.first.empty()) {
      spdlog::error("--label wants k=v, got '{}'", l);
      return 2;
    }
    label_map[kv.first] = kv.second;
  }
  std::error_code ec;
  fs::create_directories(checkpoint_dir, ec);
  fs::create_directories(work_dir, ec);
  if (ec) {
    spdlog::error("cannot create {}: {}", work_dir, ec.message());
    return 1;
  }

  std::vector<parity::v1::Device> devices =
      parity::worker::DiscoverDevices({.threads = threads, .discover_gpus = !no_gpus});
  size_t gpus = devices.size() - 1;
  for (const parity::v1::Device& d : devices) {
    spdlog::info("device {}:{} {} threads={} memory={} MiB", parity::v1::DeviceKind_Name(d.kind()),
                 d.index(), d.name(), d.threads(), d.memory_bytes() >> 20);
  }
  // Capacity: one run per GPU on a GPU host, else as many runs as threads (each run books at
  // least one thread, or its ResourceRequest.cpu_threads).
  if (max_runs == 0) max_runs = gpus > 0 ? static_cast<uint32_t>(gpus) : devices[0].threads();
  parity::worker::DeviceSlots slots(devices, max_runs);

  parity::worker::WorkerOptions options;
  options.hostname = Hostname();
  options.labels = label_map;
  options.version = PARITY_VERSION;
  options.worker_id = worker_id;
  options.worker_id_file = (fs::path(work_dir) / "worker-id").string();
  options.lease_wait = absl::Seconds(lease_wait_s);
  options.run.train_binary = train_binary.empty() ? DefaultTrainBinary() : train_binary;
  options.run.checkpoint_root = fs::absolute(checkpoint_dir).string();
  options.run.work_root = fs::absolute(work_dir).string();
  options.run.corpus_dir = corpus_dir.empty() ? "" : fs::absolute(corpus_dir).string();
  options.run.dataset_limits.max_bytes = max_dataset_bytes;
  // One cache per worker (its own --work-dir): several workers on a host do not share the file.
  parity::datasets::VerifyCache verify_cache(
      (fs::path(options.run.work_root) / "dataset-verify-cache.json").string());
  if (absl::Status loaded = verify_cache.Load(); !loaded.ok()) {
    spdlog::warn("worker: {}", loaded.ToString());
  }
  options.run.dataset_check.cache = &verify_cache;
  options.run.dataset_check.verify.mode = *verify_mode;
  options.run.dataset_check.verify.progress = [](const std::string& line) {
    spdlog::info("worker: verifying datasets: {}", line);
  };
  options.run.kill_grace = absl::Seconds(kill_grace_s);
  options.run.progress_timeout = absl::Seconds(progress_timeout_s);
  options.run.startup_timeout = absl::Seconds(startup_timeout_s);
  options.checkpoint_retention_interval = absl::Seconds(checkpoint_retention_s);
  spdlog::info("parity-worker {} → scheduler {}; engine {}; checkpoints {}; max {} runs",
               PARITY_VERSION, scheduler, options.run.train_binary, options.run.checkpoint_root,
               max_runs);

  parity::worker::WorkerMetrics metrics;
  options.metrics = &metrics;
  std::unique_ptr<prometheus::Exposer> exposer;  // declared after metrics: destroyed first
  if (!metrics_listen.empty()) {
    std::string scrape_token;
    if (!metrics_token_file.empty()) {
      std::ifstream in(metrics_token_file);
      if (!in.is_open()) {
        spdlog::error("worker: --metrics-token-file: cannot read '{}'", metrics_token_file);
        return 2;
      }
      std::getline(in, scrape_token);
      scrape_token = std::string(absl::StripAsciiWhitespace(scrape_token));
    }
    absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposed =
        metrics.Expose({.address = metrics_listen,
                        .scrape_token = scrape_token,
                        .insecure_plaintext = metrics_insecure_plaintext});
    if (!exposed.ok()) {
      spdlog::error("worker: {}", exposed.status().ToString());
      return 1;
    }
    exposer = std::move(*exposed);
    const std::vector<int> ports = exposer->GetListeningPorts();
    spdlog::info("worker: metrics on {} (port {})", metrics_listen,
                 ports.empty() ? 0 : ports.front());
  }

  if (channel.token.empty()) {
    std::fprintf(stderr,
                 "parity-worker: no token: give --token-file (or PARITY_TOKEN_FILE / "
                 "PARITY_TOKEN) with a token of role worker (`parity token create --role "
                 "worker`)\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<parity::worker::SchedulerClient>> made =
      parity::worker::MakeGrpcSchedulerClient(channel);
  if (!made.ok()) {
    std::fprintf(stderr, "parity-worker: %s\n", std::string(made.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<parity::worker::SchedulerClient> client = *std::move(made);
  parity::worker::WorkerDaemon daemon(*client, slots, options);
  std::thread signals([&daemon, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("worker: got signal {}", sig);
    daemon.Shutdown();
  });
  signals.detach();  // blocked in sigwait until process exit when no signal comes
  absl::Status s = daemon.Run();
  if (!s.ok()) {
    spdlog::error("worker: {}", s.ToString());
    return 1;
  }
  return 0;
}
