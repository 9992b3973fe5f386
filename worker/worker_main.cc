// parity-worker: the worker daemon. Flags (each with an environment fallback where noted):
//   --scheduler HOST:PORT    (PARITY_SCHEDULER, default localhost:50051)
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
//   --rendezvous-host ADDR   where a gang's rank 0 here serves its store (default 0.0.0.0)
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
// The flags are WorkerFlags' (worker_flags.h): declared once with their defaults, checked by
// Validate(); this file turns them into the daemon and runs it.
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
#include "google/protobuf/util/json_util.h"
#include "logging/log_format.h"
#include "prometheus/exposer.h"
#include "spdlog/spdlog.h"
#include "worker/device_inventory.h"
#include "worker/scheduler_client.h"
#include "worker/worker.h"
#include "worker/worker_flags.h"
#include "worker/worker_metrics.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "dev"
#endif

namespace {

namespace fs = std::filesystem;
using parity::worker::WorkerFlags;

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

int Probe(const WorkerFlags& flags) {
  absl::Status health = parity::worker::ProbeSchedulerHealth(flags.channel, absl::Seconds(2));
  if (!health.ok()) {
    std::fprintf(stderr, "%s: %s\n", flags.scheduler.c_str(), health.ToString().c_str());
    return 1;
  }
  std::printf("%s: SERVING\n", flags.scheduler.c_str());
  return 0;
}

// What RegisterWorker would send, for operators and the GPU check (bench/gpu_check.sh).
int ListDevices(const WorkerFlags& flags) {
  google::protobuf::util::JsonPrintOptions json;
  json.always_print_primitive_fields = true;
  for (const parity::v1::Device& d : parity::worker::DiscoverDevices(
           {.threads = flags.threads, .discover_gpus = !flags.no_gpus})) {
    std::string line;
    if (!google::protobuf::util::MessageToJsonString(d, &line, json).ok()) return 1;
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

// The daemon's options from the flags (the verify cache and metrics are attached by the caller).
parity::worker::WorkerOptions WorkerOptionsOf(const WorkerFlags& flags) {
  parity::worker::WorkerOptions options;
  options.hostname = Hostname();
  options.labels = flags.label_map();
  options.version = PARITY_VERSION;
  options.worker_id = flags.worker_id;
  options.worker_id_file = (fs::path(flags.work_dir) / "worker-id").string();
  options.lease_wait = absl::Seconds(flags.lease_wait_s);
  options.run.train_binary = flags.train_binary.empty() ? DefaultTrainBinary() : flags.train_binary;
  options.run.checkpoint_root = fs::absolute(flags.checkpoint_dir).string();
  options.run.work_root = fs::absolute(flags.work_dir).string();
  options.run.corpus_dir = flags.corpus_dir.empty() ? "" : fs::absolute(flags.corpus_dir).string();
  options.run.dataset_limits.max_bytes = flags.max_dataset_bytes;
  options.run.dataset_check.verify.mode = flags.verify_mode();
  options.run.dataset_check.verify.progress = [](const std::string& line) {
    spdlog::info("worker: verifying datasets: {}", line);
  };
  options.run.kill_grace = absl::Seconds(flags.kill_grace_s);
  options.run.rendezvous_host = flags.rendezvous_host;
  options.run.progress_timeout = absl::Seconds(flags.progress_timeout_s);
  options.run.startup_timeout = absl::Seconds(flags.startup_timeout_s);
  options.checkpoint_retention_interval = absl::Seconds(flags.checkpoint_retention_s);
  return options;
}

// Serves the worker's /metrics into `exposer` when --metrics-listen is set. 0, or the exit code
// of a failure (logged).
int ExposeMetrics(const WorkerFlags& flags, parity::worker::WorkerMetrics& metrics,
                  std::unique_ptr<prometheus::Exposer>& exposer) {
  if (flags.metrics_listen.empty()) return 0;
  std::string scrape_token;
  if (!flags.metrics_token_file.empty()) {
    std::ifstream in(flags.metrics_token_file);
    if (!in.is_open()) {
      spdlog::error("worker: --metrics-token-file: cannot read '{}'", flags.metrics_token_file);
      return 2;
    }
    std::getline(in, scrape_token);
    scrape_token = std::string(absl::StripAsciiWhitespace(scrape_token));
  }
  absl::StatusOr<std::unique_ptr<prometheus::Exposer>> exposed =
      metrics.Expose({.address = flags.metrics_listen,
                      .scrape_token = scrape_token,
                      .insecure_plaintext = flags.metrics_insecure_plaintext});
  if (!exposed.ok()) {
    spdlog::error("worker: {}", exposed.status().ToString());
    return 1;
  }
  exposer = std::move(*exposed);
  const std::vector<int> ports = exposer->GetListeningPorts();
  spdlog::info("worker: metrics on {} (port {})", flags.metrics_listen,
               ports.empty() ? 0 : ports.front());
  return 0;
}

// Discovers the devices, starts the daemon and runs it until a signal in `stop_signals`.
int RunDaemon(const WorkerFlags& flags, const sigset_t& stop_signals) {
  std::error_code ec;
  fs::create_directories(flags.checkpoint_dir, ec);
  fs::create_directories(flags.work_dir, ec);
  if (ec) {
    spdlog::error("cannot create {}: {}", flags.work_dir, ec.message());
    return 1;
  }
  std::vector<parity::v1::Device> devices =
      parity::worker::DiscoverDevices({.threads = flags.threads, .discover_gpus = !flags.no_gpus});
  size_t gpus = devices.size() - 1;
  for (const parity::v1::Device& d : devices) {
    spdlog::info("device {}:{} {} threads={} memory={} MiB", parity::v1::DeviceKind_Name(d.kind()),
                 d.index(), d.name(), d.threads(), d.memory_bytes() >> 20);
  }
  // Capacity: one run per GPU on a GPU host, else as many runs as threads (each run books at
  // least one thread, or its ResourceRequest.cpu_threads).
  uint32_t max_runs = flags.max_runs;
  if (max_runs == 0) max_runs = gpus > 0 ? static_cast<uint32_t>(gpus) : devices[0].threads();
  parity::worker::DeviceSlots slots(devices, max_runs);

  parity::worker::WorkerOptions options = WorkerOptionsOf(flags);
  // One cache per worker (its own --work-dir): several workers on a host do not share the file.
  parity::datasets::VerifyCache verify_cache(
      (fs::path(options.run.work_root) / "dataset-verify-cache.json").string());
  if (absl::Status loaded = verify_cache.Load(); !loaded.ok()) {
    spdlog::warn("worker: {}", loaded.ToString());
  }
  options.run.dataset_check.cache = &verify_cache;
  spdlog::info("parity-worker {} → scheduler {}; engine {}; checkpoints {}; max {} runs",
               PARITY_VERSION, flags.scheduler, options.run.train_binary,
               options.run.checkpoint_root, max_runs);

  parity::worker::WorkerMetrics metrics;
  options.metrics = &metrics;
  std::unique_ptr<prometheus::Exposer> exposer;  // declared after metrics: destroyed first
  if (int failed = ExposeMetrics(flags, metrics, exposer); failed != 0) return failed;

  if (flags.channel.token.empty()) {
    std::fprintf(stderr,
                 "parity-worker: no token: give --token-file (or PARITY_TOKEN_FILE / "
                 "PARITY_TOKEN) with a token of role worker (`parity token create --role "
                 "worker`)\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<parity::worker::SchedulerClient>> made =
      parity::worker::MakeGrpcSchedulerClient(flags.channel);
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "parity-worker: leases runs from the Parity scheduler and trains them with parity-train"};
  WorkerFlags flags;
  flags.AddFlags(app);
  CLI11_PARSE(app, argc, argv);
  if (absl::Status valid = flags.Validate(); !valid.ok()) {
    std::fprintf(stderr, "parity-worker: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  flags.channel.address = flags.scheduler;
  if (absl::Status resolved =
          parity::clients::ResolveFromEnvironment(flags.channel, flags.token_file);
      !resolved.ok()) {
    std::fprintf(stderr, "parity-worker: %s\n", std::string(resolved.message()).c_str());
    return 2;
  }
  // The engines are this process's children: they need no token, so they do not inherit one
  // (RunSupervisor also withholds kEngineWithheldEnv from every engine it starts).
  unsetenv("PARITY_TOKEN");
  unsetenv("PARITY_TOKEN_FILE");

  if (flags.probe) return Probe(flags);
  if (flags.list_devices) return ListDevices(flags);
  if (absl::Status logging =
          parity::logging::ConfigureLogging("parity-worker", flags.log_format, flags.log_level);
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
  return RunDaemon(flags, stop_signals);
}
