// The engine's own plain configuration structs (no protobuf here: the run-spec adapters in spec/
// fill these), their validation, and the analytic counts from docs/domain.md that the tests and the
// summary compare the engine's counted FLOPs against. Layer placement, the shared expert's default
// width and the counts are core/model_counts.h's (library parity_accounting), the same code the
// planner counts with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/model_counts.h"
#include "core/spec_defaults.h"
#include "kernels/backend/op_table.h"

namespace parity::kernels {

// The byte vocabulary: a raw corpus file's, and ModelConfig's default.
inline constexpr int64_t kByteVocab = 256;

using MoeLayout = parity::core::MoeLayout;  // kDense, kOneDenseShared, kAllMoe, kInterleaved
enum class HeadTying { kTied, kUntied };
enum class GateNorm { kRaw, kRenormalize };
enum class Schedule { kCosine, kWarmupStableDecay, kConstant };
enum class SubsetMode { kPrefix, kSeeded };
// training.precision. kUnspecified resolves per device (ResolvePrecision in train/): fp32 until a
// backend has bf16 kernels, then bf16 on a GPU and fp32 on the CPU.
enum class Precision { kUnspecified, kFp32, kBf16 };

// A RunSpec's defaults are core's (core/run_spec_defaults.h), filled in by the adapter before it
// reads a field. The member initialisers below serve code that builds a RunConfig directly (the
// tests, the benchmarks): small shapes of their own, and core's constant wherever a value is a
// spec default, so the two cannot drift.
struct ModelConfig {
  int64_t d_model = 64;             // D_m
  int64_t n_layers = 2;             // L
  int64_t n_heads = 4;              // H
  int64_t n_kv_heads = 4;           // H_kv (== H: multi-head; < H: grouped-query)
  int64_t d_ffn = 172;              // D_ffn of the dense SwiGLU layers
  int64_t seq_len = 64;             // S
  int64_t vocab_size = kByteVocab;  // V: rows of the embedding and the output head
  Positions positions = Positions::kRotary;
  double rope_theta = core::kDefaultRopeTheta;
  HeadTying head = HeadTying::kTied;
  // Mixture of experts (ignored when layout == kDense).
  MoeLayout layout = MoeLayout::kDense;
  int64_t interleave_every = 2;  // kInterleaved: layer l is MoE iff (l+1) % every == 0
  int64_t n_experts = 0;         // E
  int64_t top_k = 0;             // K
  int64_t d_expert = 0;          // D_e
  int64_t d_shared = -1;         // D_se; −1 = the layout's default (K·D_e for 1dense+SE, else 0)
  GateNorm gate_norm = GateNorm::kRaw;
  double aux_loss_weight = core::kDefaultAuxLossCoef;  // λ
  double z_loss_weight = core::kDefaultZLossCoef;      // λ_z
  double bias_update_rate = 0.0;                       // u of loss-free balancing; 0 = off
  double init_std = core::kDefaultInitStd;             // standard deviation of initial matrices

  int64_t head_dim() const { return d_model / n_heads; }
  bool IsMoeLayer(int64_t layer) const;  // core::IsMoeLayer of Placement()
  int64_t SharedDim() const;             // resolved D_se
  parity::core::LayerPlacement Placement() const;
};

struct OptimizerConfig {
  double lr = 1e-3;          // peak learning rate
  double min_lr = 1e-4;      // floor the decay ends at
  int64_t warmup_steps = 0;  // linear warmup from 0
  Schedule schedule = Schedule::kCosine;
  // kWarmupStableDecay: the last fraction of steps decays (linearly).
  double decay_fraction = core::kDefaultDecayFraction;
  double beta1 = core::kDefaultAdamBeta1;
  double beta2 = core::kDefaultAdamBeta2;
  double eps = core::kDefaultAdamEpsilon;
  double weight_decay = core::kDefaultWeightDecay;
  double grad_clip = core::kDefaultGradClip;  // global-norm clip; 0 = off
};

struct TrainConfig {
  // At most this many sequences a micro-batch (training.micro_batch_sequences): each rank cuts its
  // share of a step into the fewest micro-batches under it, as even as can be
  // (core/micro_batches.h).
  int64_t batch_size = 8;
  int64_t batch_sequences = 8;  // sequences per optimizer step, all ranks (batch_tokens / S)
  int64_t steps = 0;  // optimizer steps; the run consumes steps·batch_sequences·S tokens (D)
  uint64_t seed = 1;
  // Steps between metrics lines (first and last always logged).
  int64_t log_interval = core::kDefaultLogEverySteps;
  // Steps between validation evaluations (and at the end).
  int64_t eval_interval = core::kDefaultEvalEverySteps;
  int64_t eval_tokens = 16384;      // size of the fixed held-out slice (a spec: kDefaultEvalTokens)
  int64_t checkpoint_interval = 0;  // steps between checkpoints; 0 = only at the end
  double checkpoint_seconds = 0;    // also once this much training time passed; 0 = off
  int64_t keep_checkpoints = 2;
  // training.recompute_activations: the model keeps each layer's input only and recomputes the
  // layer in the backward (Transformer's `recompute`); the same bits, a third more compute.
  bool recompute_activations = false;

  int64_t TokensPerStep(int64_t seq_len) const { return batch_sequences * seq_len; }
};

// The largest raw corpus file the engine takes (4 GiB) unless told otherwise (--max-corpus-bytes).
// The file is memory-mapped, so memory is no longer the reason; its SHA-256 is computed at every
// start, and a corpus at the papers' scale belongs in a prepared dataset (`parity data prepare`),
// which has no such limit.
inline constexpr int64_t kDefaultMaxCorpusBytes = int64_t{4} << 30;

struct DataConfig {
  // A prepared dataset directory (holding manifest.json) or a raw byte file (data/token_corpus.h).
  std::string corpus_path;
  double validation_fraction =
      0.05;  // raw files: the last fraction held out (a spec: kDefaultValidationFraction)
  int64_t unique_tokens = 0;                // D̂ (tokens); 0 = the whole training split
  SubsetMode subset = SubsetMode::kSeeded;  // kPrefix: the split's first D̂ tokens
  // Evaluation sets to report, by name; empty = all of the dataset's, "validation" first. The
  // first is the primary one (val_bpc).
  std::vector<std::string> eval_sets = {};
  // A larger raw file, or one that is not a regular file, is refused (bytes; prepared datasets
  // are not limited).
  int64_t max_corpus_bytes = kDefaultMaxCorpusBytes;
};

struct RunConfig {
  std::string run_id;
  Precision precision = Precision::kUnspecified;
  ModelConfig model;
  OptimizerConfig optimizer;
  TrainConfig train;
  DataConfig data;
};

// InvalidArgument naming the offending field or OK. Does not touch files. Field names are the
// RunSpec's (proto/parity/v1) paths, e.g. "model.num_heads: ...", since that is what a user wrote.
absl::Status ValidateRunConfig(const RunConfig& config);

// Analytic counts (docs/domain.md): non-vocabulary parameters N, activated N_a, and the training
// FLOPs per token M = 3·(2·N_a + 4·D_m·S·L). Norm weights excluded, router included.
struct AnalyticCounts {
  double params = 0;           // N
  double active_params = 0;    // N_a
  double vocab_params = 0;     // embedding (+ untied head)
  double flops_per_token = 0;  // M
};
AnalyticCounts ComputeAnalyticCounts(const ModelConfig& model);

// The model's shape as the shared counting rules take it (L_d and L_e from its layer placement).
// Meaningful for a config that ValidateRunConfig accepts.
parity::core::Shape CountingShape(const ModelConfig& model);

const char* LayoutName(MoeLayout layout);
const char* PrecisionName(Precision precision);  // "fp32", "bf16", "unspecified"

}  // namespace parity::kernels
