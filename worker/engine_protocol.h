// The adapter between the worker and the `parity-train` engine: how it is invoked, what its output
// lines mean, and what its exit statuses mean. The only file that knows the engine's formats, so
// a change in the engine is absorbed here.
//
// Written against kernels/tools/train_main.cc and kernels/train/trainer.cc ("parity-train
// interface"). Invocation: parity-train --run RUN.json --out CKPT_DIR --metrics-fd FD --threads N
// [--resume]
//   (RUN.json is a parity.v1.RunSpec in proto JSON; data.corpus must be a path: the worker resolves
//   names through --corpus-dir. CKPT_DIR is the run's directory in the checkpoint store.)
// Output: one JSON object per line on FD, told apart by "event" (or "type"/"kind"):
//   - "metrics": {"step":..,"tokens":..,"train_bpc":..,"val_bpc" at evaluation steps,...}, field
//     names as in parity.v1.MetricPoint (snake_case or lowerCamelCase); a line with no event and a
//     "step" is taken as metrics too;
//     at evaluation steps also "eval_bpc": {"validation": 1.93, "code": 2.41} (every evaluation
//     set, the primary too);
//   - "checkpoint": {"step":..,"path":".."} (optional: the store is scanned for DIR/LATEST anyway);
//   - "summary": fields as in RunSummary; also final_* / wall_seconds / peak_rss_bytes spellings;
//     {"summary":{...}} too; "final_eval_bpc" per set as eval_bpc, "dataset_digest" (64 hex);
//   eval_bpc/final_eval_bpc entries the scheduler would refuse (a name that is not a plain set
//   name, core/eval_sets.h; a BPC that is not finite and non-negative; past 16 sets; a value
//   that is not an object) are dropped with a warning, the rest of the line kept;
//   - "error": {"code":"INVALID_ARGUMENT","message":".."}, the reason for a non-zero exit;
//   - "rendezvous": {"address":"HOST:PORT","token":"<hex>","gang_epoch":E,..}, rank 0 of a gang
//     listening for the others (kernels/README.md, "Data parallelism"); exit 7 = the gang broke;
//   - anything else (not JSON, other events): ignored.
// Checkpoints: CKPT_DIR/step-NNNNNNNN.ckpt and CKPT_DIR/LATEST naming the newest, written
// atomically. Exit: 0 completed; 2 bad spec (USER_ERROR); 3 stopped by SIGTERM after checkpointing
// (PREEMPTED); 4 incompatible or corrupt checkpoint (INFRASTRUCTURE); 5 out of memory
// (OUT_OF_MEMORY); 6 training diverged, a non-finite loss (DIVERGED); SIGKILL not sent by the
// worker → OUT_OF_MEMORY (the kernel's OOM killer); anything else INFRASTRUCTURE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "parity/v1/run.pb.h"
#include "worker/child_process.h"

namespace parity::worker {

struct EngineCheckpoint {
  uint64_t step = 0;
  std::string path;
};
// The engine's own account of why it is about to fail.
struct EngineError {
  std::string code;
  std::string message;
};
struct EngineIgnored {
  std::string reason;
};
// Rank 0 of a gang listens for the other ranks: its store's address and the gang's secret token.
struct EngineRendezvous {
  std::string address;  // "HOST:PORT"
  std::string token;    // hex; a secret: relayed only through the scheduler, never logged
  int64_t gang_epoch = 0;
};
using EngineEvent = std::variant<EngineIgnored, parity::v1::MetricPoint, EngineCheckpoint,
                                 parity::v1::RunSummary, EngineError, EngineRendezvous>;

// The environment variable a rank > 0 reads the gang token from (never argv: /proc/PID/cmdline
// is world-readable).
inline constexpr char kRendezvousTokenEnv[] = "PARITY_RENDEZVOUS_TOKEN";

// The one string the scheduler relays from rank 0's worker to the others (PostRendezvous.address,
// ≤ 1024 bytes): "HOST:PORT#TOKEN". '#' appears in neither part (a host name, "[v6]", a port,
// hex digits).
std::string RendezvousRelay(const EngineRendezvous& rendezvous);
// Splits a relayed string back; INVALID_ARGUMENT naming the rendezvous when it is not one.
absl::StatusOr<EngineRendezvous> ParseRendezvousRelay(std::string_view relayed);

// Decodes one output line. Never fails: unknown lines come back as EngineIgnored with the reason.
EngineEvent ParseEngineLine(std::string_view line);

struct EngineInvocation {
  std::string binary;
  std::string run_json_path;
  std::string checkpoint_dir;
  int metrics_fd = 3;
  uint32_t threads = 1;
  bool resume = false;
  // Resume from exactly this checkpoint file (--resume-from); wins over `resume`.
  std::string resume_from = {};
  // The most corpus bytes the engine may read (--max-corpus-bytes); 0 = the engine's default.
  int64_t max_corpus_bytes = 0;
  // A gang's rank (world_size > 1): --rank --world-size --gang-epoch, and rank 0's
  // --rendezvous-listen HOST or another rank's --rendezvous HOST:PORT (its token goes in the
  // environment, kRendezvousTokenEnv, not here).
  uint32_t rank = 0;
  uint32_t world_size = 0;
  int64_t gang_epoch = 0;
  std::string rendezvous_listen = {};
  std::string rendezvous_address = {};
};
std::vector<std::string> EngineArgv(const EngineInvocation& invocation);

// The failure class of an engine that ended with `exit` (which is not a success);
// `killed_by_worker` when the worker itself sent the final SIGKILL/SIGTERM.
parity::v1::FailureClass ClassifyEngineExit(const ExitStatus& exit, bool killed_by_worker);

// The newest checkpoint in `dir` by the step number in its file name ("step-000120.ckpt",
// "ckpt_120.bin", a "latest" file naming one), or nullopt when there is none. Fallback for an
// engine that does not print checkpoint notices; used to decide --resume too.
std::optional<EngineCheckpoint> LatestCheckpointIn(const std::string& dir);

// The step of a checkpoint file named step-NNNNNNNN.ckpt, nullopt for any other name.
std::optional<uint64_t> CheckpointFileStep(const std::string& path);

// The newest checkpoint file anywhere under `root` (the run's attempt directories) whose step is
// at most `max_step`, or nullopt. Where a resume goes when the recorded checkpoint was pruned.
std::optional<EngineCheckpoint> NewestCheckpointAtOrBefore(const std::string& root,
                                                           uint64_t max_step);

}  // namespace parity::worker
