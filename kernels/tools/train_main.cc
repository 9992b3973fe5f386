// parity-train: trains one run from a RunSpec JSON file. The interface the worker daemon is built
// against is documented in kernels/README.md ("parity-train interface"); in short:
//
//   parity-train --run RUN.json --out DIR [--resume | --resume-from FILE]
//                [--metrics-fd N | --metrics FILE]
//                [--device cpu|cuda[:N]] [--threads N] [--run-id ID] [--max-steps N]
//                [--max-corpus-bytes N] [--no-prefetch]
//
// Exit codes: 0 completed; 2 bad arguments, run spec or device (nothing trained); 3 stopped by
// SIGTERM/SIGINT or --max-steps after checkpointing (resumable); 4 the checkpoint in DIR is
// incompatible or corrupt; 5 out of memory; 6 training diverged (non-finite loss); 1 any other
// failure.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "kernels/spec/run_spec_adapter.h"
#include "kernels/train/trainer.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

// Writes each line plus '\n' to a file descriptor with write(2), so lines reach a pipe whole and
// unbuffered (the worker reads them live).
class FdMetricsSink final : public parity::kernels::MetricsSink {
 public:
  explicit FdMetricsSink(int fd) : fd_(fd) {}
  void Write(const std::string& line) override {
    const std::string s = line + "\n";
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::write(fd_, s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the reader went away; training continues, checkpoints still land
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return 2;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
      return 4;
    case absl::StatusCode::kResourceExhausted:
      return 5;
    case absl::StatusCode::kOutOfRange:
      return 6;
    default:
      return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parity-train: train one Parity run on the CPU or CUDA backend"};
  std::string run_path, out_dir, metrics_path, run_id, device, resume_from;
  int metrics_fd = -1, threads = 0;
  int64_t max_steps = 0;
  int64_t max_corpus_bytes = parity::kernels::kDefaultMaxCorpusBytes;
  bool resume = false, no_prefetch = false;
  app.add_option("--run", run_path,
                 "RunSpec JSON file (parity.v1.RunSpec); its data.corpus is a prepared dataset "
                 "directory (manifest.json) or a raw byte file")
      ->required();
  app.add_option("--out", out_dir, "checkpoint directory")->required();
  app.add_flag("--resume", resume, "continue from DIR/LATEST if present");
  app.add_option("--resume-from", resume_from,
                 "continue from exactly this checkpoint file (may be outside --out)");
  auto* fd_opt = app.add_option("--metrics-fd", metrics_fd, "write metrics JSON lines to this fd");
  app.add_option("--metrics", metrics_path, "append metrics JSON lines to this file")
      ->excludes(fd_opt);
  app.add_option("--device", device,
                 "cpu, cuda or cuda:N (default: cuda:0 when the spec's resources.gpus > 0, "
                 "else cpu)");
  app.add_option("--threads", threads, "CPU threads (default: the spec's, else 1)");
  app.add_option("--max-steps", max_steps,
                 "stop after this many steps in this process (checkpoint, exit 3)");
  app.add_option("--max-corpus-bytes", max_corpus_bytes,
                 "refuse a raw corpus file larger than this (bytes; a prepared dataset "
                 "directory has no limit)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-prefetch", no_prefetch,
               "read each micro-batch on the training thread instead of one ahead on a loader "
               "thread (same windows; for measuring the loader)");
  app.add_option("--run-id", run_id, "run id put on every line (default: the spec's name)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  std::ifstream in(run_path);
  if (!in) {
    std::cerr << "parity-train: INVALID_ARGUMENT: --run: cannot read " << run_path << "\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto parsed = parity::kernels::RunConfigFromRunSpecJson(buffer.str());

  int fd = STDOUT_FILENO;
  if (metrics_fd >= 0) fd = metrics_fd;
  if (!metrics_path.empty()) {
    fd = ::open(metrics_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::cerr << "parity-train: INVALID_ARGUMENT: --metrics: " << std::strerror(errno) << "\n";
      return 2;
    }
  }
  FdMetricsSink sink(fd);
  auto fail = [&](const absl::Status& s) {
    const nlohmann::json j = {{"event", "error"},
                              {"run_id", run_id},
                              {"code", absl::StatusCodeToString(s.code())},
                              {"message", std::string(s.message())}};
    sink.Write(j.dump());
    std::cerr << "parity-train: " << s << "\n";
    return ExitCodeFor(s);
  };
  if (!parsed.ok()) return fail(parsed.status());
  parsed->config.data.max_corpus_bytes = max_corpus_bytes;
  if (run_id.empty()) run_id = parsed->config.run_id;
  parsed->config.run_id = run_id;
  parity::kernels::DeviceChoice choice = parity::kernels::DefaultDeviceChoice(parsed->gpus);
  if (!device.empty()) {
    auto given = parity::kernels::ParseDeviceChoice(device);
    if (!given.ok()) return fail(given.status());
    choice = *given;
  }

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  parity::kernels::TrainerOptions options{
      .out_dir = out_dir,
      .resume = resume ? parity::kernels::ResumeMode::kResumeIfPresent
                       : parity::kernels::ResumeMode::kFresh,
      .resume_from = resume_from,
      .device = choice,
      .threads = threads > 0 ? threads : std::max(1, parsed->threads),
      .metrics = &sink,
      .stop = &g_stop,
      .max_steps = max_steps,
      .prefetch = no_prefetch ? parity::kernels::Prefetch::kOff : parity::kernels::Prefetch::kOn};
  auto summary = parity::kernels::RunTraining(parsed->config, options);
  if (!summary.ok()) return fail(summary.status());
  if (fd != STDOUT_FILENO) std::cout << summary->json << std::endl;
  return summary->outcome == parity::kernels::RunOutcome::kCompleted ? 0 : 3;
}
