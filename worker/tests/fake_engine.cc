// A stand-in for parity-train in worker tests: same command line, same output protocol, same
// checkpoint layout (DIR/step-NNNNNNNN.ckpt + DIR/LATEST), deterministic numbers (a function of the
// step only, so a resumed run ends exactly where an uninterrupted one does), and faults on demand.
//
//   parity_fake_engine --run RUN.json --out DIR [--resume | --resume-from FILE] [--metrics-fd N]
//                      [--threads N]
// Steps, log and checkpoint intervals come from the spec's training section (defaults 20, 1, 5).
// Environment:
//   FAKE_STEP_MS=20           time per step
//   FAKE_CRASH_AT=S           abort() when reaching step S (SIGABRT)
//   FAKE_EXIT_CODE=C          exit C instead of finishing (at the first step)
//   FAKE_HANG_AT=S            stop making progress after step S (sleep until killed)
//   FAKE_NO_SUMMARY=1         finish with exit 0 but print no summary line
//   FAKE_IGNORE_TERM=1        ignore SIGTERM (the worker must SIGKILL)
//   FAKE_GRANDCHILD_PID_FILE=P  fork a sleeping grandchild first and write its pid to P
//   FAKE_CRASH_ONCE_FILE=P    crash at FAKE_CRASH_AT only if P does not exist yet (creates it)
//   FAKE_ERROR_MESSAGE=TEXT   the message of the error line FAKE_EXIT_CODE prints (also to stderr)
//   FAKE_ENV_DUMP_FILE=P      write the environment it got to P, one VAR=value a line (a gang's
//                             rank R > 0: to P.rankR)
// A gang: --rank R --gang-epoch E; rank 0 with --rendezvous-listen H prints a rendezvous line
// (address H:1, a fixed token); ranks > 0 print nothing.
// SIGTERM: write a checkpoint at the current step, print a "stopped" summary and exit 3, as
// parity-train does.
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"

extern char** environ;

namespace {

volatile std::sig_atomic_t g_term = 0;
void OnTerm(int) { g_term = 1; }

long EnvLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtol(v, nullptr, 10) : fallback;
}

long SpecLong(const nlohmann::json& training, const char* snake, const char* camel, long fallback) {
  for (const char* key : {snake, camel}) {
    auto it = training.find(key);
    if (it == training.end()) continue;
    if (it->is_number()) return it->get<long>();
    if (it->is_string()) return std::strtol(it->get<std::string>().c_str(), nullptr, 10);
  }
  return fallback;
}

bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string Checkpoint(const std::string& dir, long step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08ld.ckpt", step);
  const std::string path = dir + "/" + name;
  WriteAtomically(path, std::to_string(step) + "\n");
  WriteAtomically(dir + "/LATEST", std::string(name) + "\n");
  return path;
}

double TrainBpc(long step) { return 2.0 + 6.0 / (1.0 + 0.1 * static_cast<double>(step)); }
double ValBpc(long step) { return TrainBpc(step) + 0.05; }

}  // namespace

int main(int argc, char** argv) {
  std::string run_path, out_dir, resume_from, listen;
  long rank = 0, gang_epoch = 0;
  bool resume = false;
  int metrics_fd = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--run")
      run_path = next();
    else if (a == "--out")
      out_dir = next();
    else if (a == "--resume")
      resume = true;
    else if (a == "--resume-from")
      resume_from = next();
    else if (a == "--metrics-fd")
      metrics_fd = std::atoi(next().c_str());
    else if (a == "--threads")
      next();
    else if (a == "--rank")
      rank = std::atol(next().c_str());
    else if (a == "--gang-epoch")
      gang_epoch = std::atol(next().c_str());
    else if (a == "--rendezvous-listen")
      listen = next();
  }
  std::ifstream in(run_path);
  nlohmann::json spec = nlohmann::json::parse(in, nullptr, false);
  if (run_path.empty() || out_dir.empty() || spec.is_discarded()) {
    std::fprintf(stderr, "fake engine: bad spec or arguments\n");
    return 2;
  }
  const nlohmann::json training = spec.value("training", nlohmann::json::object());
  const long steps = SpecLong(training, "steps", "steps", 20);
  const long log_every = std::max(1L, SpecLong(training, "log_every_steps", "logEverySteps", 1));
  const long ckpt_every = SpecLong(training, "checkpoint_every_steps", "checkpointEverySteps", 5);
  const long eval_every = std::max(1L, SpecLong(training, "eval_every_steps", "evalEverySteps", 5));
  const long step_ms = EnvLong("FAKE_STEP_MS", 20);
  const long crash_at = EnvLong("FAKE_CRASH_AT", -1);
  const long exit_code = EnvLong("FAKE_EXIT_CODE", -1);
  const long hang_at = EnvLong("FAKE_HANG_AT", -1);

  if (EnvLong("FAKE_IGNORE_TERM", 0) != 0) {
    std::signal(SIGTERM, SIG_IGN);
  } else {
    std::signal(SIGTERM, OnTerm);
  }
  if (const char* p = std::getenv("FAKE_GRANDCHILD_PID_FILE"); p != nullptr && *p != '\0') {
    pid_t g = fork();
    if (g == 0) {
      std::signal(SIGTERM, SIG_IGN);  // only a SIGKILL of the group ends it
      for (;;) pause();
    }
    std::ofstream(p) << g << "\n";
  }
  if (const char* p = std::getenv("FAKE_ENV_DUMP_FILE"); p != nullptr && *p != '\0') {
    std::ofstream dump(rank > 0 ? std::string(p) + ".rank" + std::to_string(rank) : std::string(p));
    for (char** e = environ; *e != nullptr; ++e) dump << *e << "\n";
  }
  // A gang's rank > 0 prints nothing, as parity-train's (the worker must not need its lines).
  FILE* out = rank > 0 ? std::fopen("/dev/null", "w") : fdopen(metrics_fd, "w");
  if (out == nullptr) return 1;
  std::setvbuf(out, nullptr, _IOLBF, 0);
  if (!listen.empty()) {  // rank 0 of a gang: "listening" (nobody dials the fake)
    std::fprintf(out, "%s\n",
                 nlohmann::json({{"event", "rendezvous"},
                                 {"address", listen + ":1"},
                                 {"token", "0123456789abcdef0123456789abcdef"},
                                 {"gang_epoch", gang_epoch}})
                     .dump()
                     .c_str());
  }

  long step = 0;
  if (!resume_from.empty()) {
    std::ifstream named(resume_from);
    if (!named) {
      std::fprintf(stderr, "fake engine: --resume-from %s: no such checkpoint\n",
                   resume_from.c_str());
      return 4;
    }
    if (!(named >> step)) {  // as parity-train reports a checkpoint it cannot read
      std::fprintf(out, "%s\n",
                   nlohmann::json({{"event", "error"},
                                   {"code", "DATA_LOSS"},
                                   {"message", "checkpoint " + resume_from + ": corrupt"}})
                       .dump()
                       .c_str());
      return 4;
    }
    std::fprintf(stderr, "fake engine: resuming from step %ld of %s\n", step, resume_from.c_str());
  } else if (resume) {
    std::ifstream latest(out_dir + "/LATEST");
    std::string name;
    if (std::getline(latest, name)) std::sscanf(name.c_str(), "step-%ld.ckpt", &step);
    std::fprintf(stderr, "fake engine: resuming from step %ld\n", step);
  }
  std::fprintf(out, "fake engine starting at step %ld of %ld\n", step, steps);  // a non-JSON line
  while (step < steps) {
    if (exit_code >= 0) {
      const char* told = std::getenv("FAKE_ERROR_MESSAGE");
      const std::string message = told != nullptr ? told : "fake engine told to fail";
      std::fprintf(stderr, "fake engine: %s\n", message.c_str());
      std::fprintf(
          out, "%s\n",
          nlohmann::json({{"event", "error"}, {"code", "INVALID_ARGUMENT"}, {"message", message}})
              .dump()
              .c_str());
      return static_cast<int>(exit_code);
    }
    if (step == hang_at) {
      for (;;) pause();  // a deadlock or a stuck device: no progress, no exit
    }
    usleep(static_cast<useconds_t>(step_ms * 1000));
    ++step;
    if (step == crash_at) {
      const char* once = std::getenv("FAKE_CRASH_ONCE_FILE");
      if (once == nullptr || access(once, F_OK) != 0) {
        if (once != nullptr) std::ofstream(once) << "crashed\n";
        std::abort();
      }
    }
    if (step % log_every == 0 || step == steps) {
      nlohmann::json m = {{"event", "metrics"},
                          {"step", step},
                          {"tokens", step * 1024},
                          {"unique_tokens", std::min(step * 1024, 8192L)},
                          {"epoch", static_cast<double>(step * 1024) / 8192.0},
                          {"train_bpc", TrainBpc(step)},
                          {"learning_rate", 1e-3},
                          {"grad_norm", 1.0},
                          {"tokens_per_second", 5e4},
                          {"flops_per_second", 1e9}};
      if (step % eval_every == 0 || step == steps) m["val_bpc"] = ValBpc(step);
      std::fprintf(out, "%s\n", m.dump().c_str());
    }
    if ((ckpt_every > 0 && step % ckpt_every == 0) || step == steps) {
      std::string path = Checkpoint(out_dir, step);
      std::fprintf(
          out, "%s\n",
          nlohmann::json({{"type", "checkpoint"}, {"step", step}, {"path", path}}).dump().c_str());
    }
    if (g_term) {
      std::string path = Checkpoint(out_dir, step);
      std::fprintf(
          out, "%s\n",
          nlohmann::json({{"type", "checkpoint"}, {"step", step}, {"path", path}}).dump().c_str());
      std::fprintf(stderr, "fake engine: SIGTERM, checkpointed step %ld\n", step);
      std::fprintf(out, "%s\n",
                   nlohmann::json({{"event", "summary"}, {"status", "stopped"}, {"steps", step}})
                       .dump()
                       .c_str());
      return 3;
    }
  }
  nlohmann::json summary = {{"event", "summary"},
                            {"final_train_bpc", TrainBpc(steps)},
                            {"final_val_bpc", ValBpc(steps)},
                            {"tokens", steps * 1024},
                            {"steps", steps},
                            {"measured_flops_per_token", 6e6},
                            {"wall_time_seconds", 0.5},
                            {"tokens_per_second", 5e4}};
  if (EnvLong("FAKE_NO_SUMMARY", 0) == 0) std::fprintf(out, "%s\n", summary.dump().c_str());
  return 0;
}
