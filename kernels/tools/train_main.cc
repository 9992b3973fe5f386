// parity-train: trains one run from a RunSpec JSON file. The interface the worker daemon is built
// against is documented in kernels/README.md ("parity-train interface"); in short:
//
//   parity-train --run RUN.json --out DIR [--resume | --resume-from FILE]
//                [--metrics-fd N | --metrics FILE]
//                [--device cpu|cuda[:N]] [--threads N] [--run-id ID] [--max-steps N]
//                [--max-corpus-bytes N] [--no-prefetch] [--profile-step N]
//                [--rank R --world-size W (--rendezvous-listen HOST | --rendezvous HOST:PORT)
//                 --gang-epoch E [--rendezvous-timeout S] [--collective-timeout S] [--comm-host H]]
//                (ranks > 0: rank 0's gang token in PARITY_RENDEZVOUS_TOKEN, never argv)
//
// Exit codes: 0 completed; 2 bad arguments, run spec or device (nothing trained); 3 stopped by
// SIGTERM/SIGINT or --max-steps after checkpointing (resumable); 4 the checkpoint in DIR is
// incompatible or corrupt; 5 out of memory; 6 training diverged (non-finite loss); 7 the gang
// broke (a rank never arrived, was refused, died or hung: restart the whole gang from the last
// checkpoint); 1 any other failure.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/time/time.h"
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
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return 7;
    default:
      return 1;
  }
}

// The data-parallel flags (kernels/README.md, "Data parallelism").
struct GangFlags {
  int rank = 0, world_size = 1;
  std::string listen, address, comm_host;
  uint64_t epoch = 0;
  double rendezvous_timeout = 300, collective_timeout = 1800;
};

void AddGangFlags(CLI::App& app, GangFlags& g) {
  app.add_option("--rank", g.rank, "this process's rank in its gang (0 = the reporting rank)");
  app.add_option("--world-size", g.world_size, "ranks in the gang (default 1: no gang)");
  app.add_option("--rendezvous-listen", g.listen,
                 "rank 0: host address to serve the gang's rendezvous store on (port chosen by "
                 "the OS, reported as a {\"event\":\"rendezvous\"} line)");
  app.add_option("--rendezvous", g.address, "ranks > 0: rank 0's rendezvous address HOST:PORT");
  app.add_option("--gang-epoch", g.epoch,
                 "the scheduler's attempt epoch; a rank of another epoch is refused");
  app.add_option("--rendezvous-timeout", g.rendezvous_timeout,
                 "seconds to wait for every rank to arrive (default 300)")
      ->check(CLI::PositiveNumber);
  app.add_option("--collective-timeout", g.collective_timeout,
                 "seconds one collective may wait for a peer (default 1800)")
      ->check(CLI::PositiveNumber);
  app.add_option("--comm-host", g.comm_host,
                 "address this rank's transport listens on (default: the interface that routes "
                 "to rank 0)");
}

// Ranks > 0: the gang token from the environment (argv is world-readable in /proc), removed from
// it at once so nothing this process starts inherits it. Rank 0 draws its own.
std::string RendezvousTokenFromEnv(int rank) {
  const char* token = std::getenv("PARITY_RENDEZVOUS_TOKEN");
  std::string out = token != nullptr && rank > 0 ? token : "";
  ::unsetenv("PARITY_RENDEZVOUS_TOKEN");
  return out;
}

parity::kernels::CommOptions CommOptionsFrom(const GangFlags& g, const std::string& run_id,
                                             parity::kernels::MetricsSink& sink, int fd) {
  return {.rank = g.rank,
          .world_size = g.world_size,
          .listen_host = g.listen,
          .address = g.address,
          .transport_host = g.comm_host,
          .gang_epoch = g.epoch,
          .run_id = run_id,
          .rendezvous_timeout = absl::Seconds(g.rendezvous_timeout),
          .collective_timeout = absl::Seconds(g.collective_timeout),
          .token = RendezvousTokenFromEnv(g.rank),
          .on_listening =
              [&sink, fd, g, run_id](const std::string& address, const std::string& token) {
                nlohmann::json j = {{"event", "rendezvous"},
                                    {"run_id", run_id},
                                    {"address", address},
                                    {"world_size", g.world_size},
                                    {"gang_epoch", g.epoch}};
                // The token goes only to the metrics channel (read by the worker that relays it);
                // the copy on stdout, which lands in log files, goes without it.
                if (fd != STDOUT_FILENO) std::cout << j.dump() << std::endl;
                j["token"] = token;
                sink.Write(j.dump());
              },
          .on_wedged = nullptr,  // set in main, where the failure is reported
          .interrupt_grace = parity::kernels::kInterruptGrace};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parity-train: train one Parity run on the CPU or CUDA backend"};
  std::string run_path, out_dir, metrics_path, run_id, device, resume_from;
  int metrics_fd = -1, threads = 0;
  int64_t max_steps = 0, profile_step = 0;
  int64_t max_corpus_bytes = parity::kernels::kDefaultMaxCorpusBytes;
  bool resume = false, no_prefetch = false, graphs = false;
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
  app.add_option("--profile-step", profile_step,
                 "time this step (1-based) op by op, the device synchronised around each: its "
                 "metrics line carries \"profile\" (seconds in gemm, attention, moe_routing, "
                 "moe_experts, optimizer, other)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-corpus-bytes", max_corpus_bytes,
                 "refuse a raw corpus file larger than this (bytes; a prepared dataset "
                 "directory has no limit)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--graphs", graphs,
               "replay each micro-batch's forward and backward from a recorded CUDA graph "
               "(dense models; the same bits, fewer launches; experimental until the GPU "
               "check has run it)");
  app.add_flag("--no-prefetch", no_prefetch,
               "read each micro-batch on the training thread instead of one ahead on a loader "
               "thread (same windows; for measuring the loader)");
  app.add_option("--run-id", run_id, "run id put on every line (default: the spec's name)");
  GangFlags gang;
  AddGangFlags(app, gang);
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
  // A write to a dead peer or reader fails with EPIPE and is reported (a gang rank exits 7 naming
  // the rank that left; metrics to a closed pipe are dropped) instead of killing the process
  // without a word. An orphaned rank still dies with its worker (PR_SET_PDEATHSIG).
  std::signal(SIGPIPE, SIG_IGN);
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
      .profile_step = profile_step,
      .graph_replay = graphs,
      .prefetch = no_prefetch ? parity::kernels::Prefetch::kOff : parity::kernels::Prefetch::kOn,
      .comm = CommOptionsFrom(gang, run_id, sink, fd)};
  // The gang broke and a collective could not be woken: report as any failure, then end here
  // (the engine's thread is stuck inside the collective library).
  options.comm.on_wedged = [&](const absl::Status& s) { std::_Exit(fail(s)); };
  auto summary = parity::kernels::RunTraining(parsed->config, options);
  if (!summary.ok()) return fail(summary.status());
  if (fd != STDOUT_FILENO && gang.rank == 0) std::cout << summary->json << std::endl;
  return summary->outcome == parity::kernels::RunOutcome::kCompleted ? 0 : 3;
}
