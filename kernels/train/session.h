// Setup and resume of one training process (internal to train/): everything the loop holds — the
// spec with its precision resolved, the data, the device, the model, the AdamW moments and the
// run's position — and the checkpoint that saves and restores it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/backend/device_choice.h"
#include "kernels/data/batch_loader.h"
#include "kernels/data/token_corpus.h"
#include "kernels/model/config.h"
#include "kernels/model/model.h"
#include "kernels/model/rng.h"
#include "kernels/train/trainer.h"

namespace parity::kernels {

// Host memory of a step's queued transfers (Device::AllocateHost: pinned on CUDA), one slot per
// micro-batch this rank trains in a step: the token ids each Forward uploads and the losses it
// copies back, plus the gradient norm². Nothing in it is read or rewritten before the step's one
// synchronisation, so no copy needs waiting for on its own.
struct StepStaging {
  std::unique_ptr<HostBuffer> memory;
  int64_t slots = 0;               // local micro-batches
  int64_t tokens = 0;              // B·S per slot (B the largest micro-batch)
  int64_t moe_layers = 0;          // {aux, z} pairs per slot
  int64_t expert_loads = 0;        // MoE layers·E
  double* grad_norm_sq = nullptr;  // [1] sum_squares of the step's (summed) gradient
  // [MoE layers·E] the step's expert loads, uploaded queued for bias_update; the host rewrites
  // them only a step later, after the step's closing synchronisation.
  int64_t* loads = nullptr;

  // Slot i's (i < slots) ids [B·S], written by the host before its Forward.
  int32_t* Tokens(int64_t i) const;
  int32_t* Targets(int64_t i) const;
  // Slot i for a forward of `batch` (≤ B) sequences.
  MicroBatch<float> Slot(int64_t i, int64_t batch) const;
  // The means of slot i's losses after the synchronisation (SumLosses).
  ForwardResult Losses(int64_t i, int64_t batch, int64_t seq_len) const;
};

struct Session {
  explicit Session(TokenCorpus c) : corpus(std::move(c)) {}

  RunConfig config;  // precision resolved for the device (never kUnspecified here)
  TrainerOptions options;
  TokenCorpus corpus;
  std::unique_ptr<BatchLoader> loader;          // reads `corpus`; declared after it
  std::unique_ptr<Device> device;               // declared before what lives in its memory
  std::unique_ptr<Communicator> comm;           // the gang (world size 1: a no-op); uses device
  std::vector<std::unique_ptr<Buffer>> memory;  // the optimizer's device arrays below
  std::unique_ptr<Model<float>> model;          // fp32 masters in every precision
  float* adam_m = nullptr;                      // [N] first moments
  float* adam_v = nullptr;                      // [N] second moments
  int64_t* step_load = nullptr;  // [MoE layers·E] the step's expert loads, for bias_update
  uint64_t fingerprint = 0;
  int64_t step = 0;    // optimizer steps completed
  int64_t cursor = 0;  // training windows consumed
  Rng rng;
  std::vector<int32_t> inputs, targets;  // the loader's batch [B·S], copied into `staging`
  StepStaging staging;
  std::vector<TensorSpan> update_tensors;  // model.Tensors() as the multi-tensor AdamW takes it

  const OpTable<float>& ops() const { return *device->OpsF32(); }
  OpContext& context() { return device->Context(); }
  int64_t StepTokens() const { return config.train.TokensPerStep(config.model.seq_len); }
  // This rank's micro-batches of every step: sequences [first_sequence, + batch_sequences / W)
  // of the step, cut into micro_sizes (core/micro_batches.h; the same on every rank).
  int64_t LocalMicroBatches() const { return static_cast<int64_t>(micro_sizes.size()); }
  int64_t first_sequence = 0;
  std::vector<int64_t> micro_sizes;
  bool IsRankZero() const { return comm->rank() == 0; }
  // Whether steps go through the communicator: any gang, a gang of one included (which checks
  // the backend's communicator on a one-device machine); not the plain single process.
  bool Distributed() const { return comm->Name() != "local"; }
};

// The precision a run trains with on a device of `kind`: unspecified → bf16 on CUDA, fp32 on the
// CPU; an explicit one as asked (bf16 on the CPU is the GPU's numerics emulated, for checks).
absl::StatusOr<Precision> ResolvePrecision(Precision requested, DeviceKind kind);

// The model within what `kind`'s kernels take (core/gpu_limits.h for CUDA): InvalidArgument
// naming the field otherwise, before any device memory is touched. Every shape fits the CPU.
absl::Status ValidateForDevice(const ModelConfig& model, DeviceKind kind);

// Validates the spec, creates the output directory, loads the corpus, creates the device and the
// model, and initialises the weights from the seed (step 0).
absl::StatusOr<std::unique_ptr<Session>> OpenSession(const RunConfig& config,
                                                     const TrainerOptions& options);

// Restores the session from DIR/LATEST when there is one. FailedPrecondition (naming what
// differs) for a checkpoint of another device, precision or spec; DataLoss for a corrupt file.
absl::Status ResumeSession(Session& session);

// Makes every rank hold rank 0's state (weights, moments, biases, step, cursor, RNG) after rank 0
// initialised or resumed it; FailedPrecondition on every rank when a rank's run fingerprint (spec,
// dataset content, device kind, precision) differs from rank 0's. No-op for a plain process.
absl::Status SyncRanks(Session& session);

// Writes a checkpoint of the current state; returns its path.
absl::StatusOr<std::string> SaveCheckpoint(Session& session);

}  // namespace parity::kernels
