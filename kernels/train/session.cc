#include "kernels/train/session.h"

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/gpu_limits.h"
#include "core/micro_batches.h"
#include "core/status_macros.h"
#include "kernels/train/checkpoint.h"

namespace parity::kernels {

absl::StatusOr<Precision> ResolvePrecision(Precision requested, DeviceKind kind) {
  // bf16 is the throughput mode on a GPU (tensor cores); on the CPU it is an emulation of the
  // GPU's numerics (cpu/ops_bf16.h), slower than fp32, so it runs only when a spec asks for it.
  if (requested != Precision::kUnspecified) return requested;
  return kind == DeviceKind::kCuda ? Precision::kBf16 : Precision::kFp32;
}

absl::Status ValidateForDevice(const ModelConfig& m, DeviceKind kind) {
  if (kind != DeviceKind::kCuda) return absl::OkStatus();
  if (m.head_dim() > core::kCudaMaxHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_heads: head dimension ", m.head_dim(), " exceeds the ", core::kCudaMaxHeadDim,
        " the CUDA attention kernel takes; use more heads (d_model / num_heads <= ",
        core::kCudaMaxHeadDim, ") or --device cpu"));
  }
  bool any_moe = false;
  for (int64_t l = 0; l < m.n_layers; ++l) any_moe = any_moe || m.IsMoeLayer(l);
  if (any_moe && m.n_experts > core::kCudaMaxExperts) {
    return absl::InvalidArgumentError(absl::StrCat("model.moe.num_experts: ", m.n_experts,
                                                   " experts exceed the ", core::kCudaMaxExperts,
                                                   " the CUDA routing kernels take; fewer experts "
                                                   "(a smaller granularity) or --device cpu"));
  }
  return absl::OkStatus();
}

namespace {

// Layout of StepStaging's memory: doubles first (norm², then [slots, 2·MoE layers] router
// losses), then int64 expert loads [MoE layers·E], then int32 tokens and targets [slots, B·S]
// each, then float losses [slots, B·S].
size_t RouteLossesAt() { return sizeof(double); }
size_t LoadsAt(const StepStaging& s) {
  return RouteLossesAt() + static_cast<size_t>(s.slots * 2 * s.moe_layers) * sizeof(double);
}
size_t TokensAt(const StepStaging& s) {
  return LoadsAt(s) + static_cast<size_t>(s.expert_loads) * sizeof(int64_t);
}
size_t TargetsAt(const StepStaging& s) {
  return TokensAt(s) + static_cast<size_t>(s.slots * s.tokens) * sizeof(int32_t);
}
size_t LossesAt(const StepStaging& s) {
  return TargetsAt(s) + static_cast<size_t>(s.slots * s.tokens) * sizeof(int32_t);
}
size_t StagingBytes(const StepStaging& s) {
  return LossesAt(s) + static_cast<size_t>(s.slots * s.tokens) * sizeof(float);
}

absl::StatusOr<StepStaging> AllocateStaging(Device& device, int64_t slots, int64_t tokens,
                                            int64_t moe_layers, int64_t experts) {
  StepStaging s;
  s.slots = slots, s.tokens = tokens, s.moe_layers = moe_layers;
  s.expert_loads = moe_layers * experts;
  PARITY_ASSIGN_OR_RETURN(s.memory, device.AllocateHost(StagingBytes(s)));
  s.grad_norm_sq = s.memory->as<double>();
  s.loads = reinterpret_cast<int64_t*>(static_cast<char*>(s.memory->data()) + LoadsAt(s));
  return s;
}

// Rank r of W trains sequences [r·P, (r+1)·P) of each step (P = batch_sequences / W), so that the
// ranks together train exactly the step one process would; a world size that does not divide the
// step's sequences is refused.
absl::Status ValidateDataParallel(const TrainConfig& tc, const CommOptions& comm) {
  PARITY_RETURN_IF_ERROR(ValidateCommOptions(comm));
  if (tc.batch_sequences % comm.world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.batch_tokens: ", tc.batch_sequences, " sequences per step do not divide among ",
        comm.world_size,
        " ranks (--world-size); each rank trains the same number of whole sequences, so make "
        "batch_tokens / sequence_length a multiple of the world size (the planner rounds a "
        "gang's batch so)"));
  }
  return absl::OkStatus();
}

}  // namespace

int32_t* StepStaging::Tokens(int64_t i) const {
  return reinterpret_cast<int32_t*>(static_cast<char*>(memory->data()) + TokensAt(*this)) +
         i * tokens;
}

int32_t* StepStaging::Targets(int64_t i) const {
  return reinterpret_cast<int32_t*>(static_cast<char*>(memory->data()) + TargetsAt(*this)) +
         i * tokens;
}

MicroBatch<float> StepStaging::Slot(int64_t i, int64_t batch) const {
  char* base = static_cast<char*>(memory->data());
  return {.tokens = Tokens(i),
          .targets = Targets(i),
          .batch = batch,
          .token_loss = reinterpret_cast<float*>(base + LossesAt(*this)) + i * tokens,
          .route_losses = reinterpret_cast<double*>(base + RouteLossesAt()) + i * 2 * moe_layers};
}

ForwardResult StepStaging::Losses(int64_t i, int64_t batch, int64_t seq_len) const {
  const MicroBatch<float> mb = Slot(i, batch);
  return SumLosses(mb.token_loss, batch * seq_len, mb.route_losses, moe_layers);
}

absl::StatusOr<std::unique_ptr<Session>> OpenSession(const RunConfig& config,
                                                     const TrainerOptions& options) {
  PARITY_RETURN_IF_ERROR(ValidateRunConfig(config));
  if (options.metrics == nullptr) return absl::InvalidArgumentError("options.metrics is required");
  PARITY_ASSIGN_OR_RETURN(const Precision precision,
                          ResolvePrecision(config.precision, options.device.kind));
  PARITY_RETURN_IF_ERROR(ValidateDataParallel(config.train, options.comm));
  PARITY_RETURN_IF_ERROR(ValidateForDevice(config.model, options.device.kind));
  // Fail before any work if checkpoints could not be written.
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec || options.out_dir.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out '", options.out_dir, "': cannot create: ", ec.message()));
  }
  const TrainConfig& tc = config.train;
  PARITY_ASSIGN_OR_RETURN(TokenCorpus corpus, TokenCorpus::Open(config.data, config.model.seq_len,
                                                                config.model.vocab_size, tc.seed));
  auto s = std::make_unique<Session>(std::move(corpus));
  s->loader = std::make_unique<BatchLoader>(s->corpus, tc.batch_size, options.prefetch);
  s->config = config;
  s->config.precision = precision;
  s->options = options;
  PARITY_ASSIGN_OR_RETURN(s->device, MakeDevice(options.device, options.threads));
  PARITY_ASSIGN_OR_RETURN(s->comm, MakeCommunicator(options.comm, options.device.kind, *s->device));
  const int64_t share = tc.batch_sequences / s->comm->world_size();
  s->first_sequence = s->comm->rank() * share;
  s->micro_sizes = core::SplitIntoMicroBatches(share, tc.batch_size);
  PARITY_ASSIGN_OR_RETURN(s->model, CreateModel(config.model, precision, *s->device, tc.batch_size,
                                                tc.recompute_activations));
  s->model->SetGraphReplay(options.graph_replay);
  const int64_t n = s->model->NumParams();
  const int64_t loads = s->model->NumMoeLayers() * config.model.n_experts;
  for (int64_t bytes : {n * 4, n * 4, std::max<int64_t>(loads, 1) * 8}) {
    PARITY_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> b,
                            s->device->Allocate(static_cast<size_t>(bytes)));
    s->memory.push_back(std::move(b));
  }
  s->adam_m = s->memory[0]->as<float>();
  s->adam_v = s->memory[1]->as<float>();
  s->step_load = s->memory[2]->as<int64_t>();
  s->fingerprint = RunFingerprint(s->config, s->corpus.Digest(), std::string(s->device->Name()));
  s->rng = Rng{.seed = tc.seed};
  s->model->InitParams(s->rng);
  const int64_t tokens = tc.batch_size * config.model.seq_len;
  s->inputs.resize(tokens);
  s->targets.resize(tokens);
  PARITY_ASSIGN_OR_RETURN(s->staging,
                          AllocateStaging(*s->device, s->LocalMicroBatches(), tokens,
                                          s->model->NumMoeLayers(), config.model.n_experts));
  for (const ParamTensor& t : s->model->Tensors()) {
    s->update_tensors.push_back({.offset = t.offset, .size = t.size, .decay = t.decay});
  }
  return s;
}

absl::Status ResumeSession(Session& s) {
  std::optional<Checkpoint> ckpt;
  if (!s.options.resume_from.empty()) {
    absl::StatusOr<Checkpoint> named = ReadCheckpointFile(s.options.resume_from);
    if (absl::IsNotFound(named.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--resume-from ", s.options.resume_from, ": no such checkpoint; refusing to resume"));
    }
    PARITY_ASSIGN_OR_RETURN(ckpt, std::move(named));
  } else {
    PARITY_ASSIGN_OR_RETURN(ckpt, ReadLatestCheckpoint(s.options.out_dir));
  }
  if (!ckpt.has_value()) return absl::OkStatus();
  const std::string& source =
      s.options.resume_from.empty() ? s.options.out_dir : s.options.resume_from;
  Checkpoint& c = *ckpt;
  Model<float>& model = *s.model;
  const std::string device(s.device->Name()), precision = PrecisionName(s.config.precision);
  // Resume is bit-identical only on the same kind of device in the same arithmetic.
  if (c.device != device || c.precision != precision) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", source, " was written on ", c.device, " in ", c.precision,
        "; this run is on ", device, " in ", precision,
        ": a resume must use the same device kind and training.precision; refusing to resume"));
  }
  const int64_t n = model.NumParams(), layers = model.NumMoeLayers();
  if (c.fingerprint != s.fingerprint || static_cast<int64_t>(c.params.size()) != n ||
      static_cast<int64_t>(c.balance_bias.size()) != layers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", source, " belongs to a different run spec; refusing to resume"));
  }
  Device& d = *s.device;
  d.FromHost(model.Params(), c.params.data(), n * sizeof(float));
  d.FromHost(s.adam_m, c.adam_m.data(), n * sizeof(float));
  d.FromHost(s.adam_v, c.adam_v.data(), n * sizeof(float));
  for (int64_t i = 0; i < layers; ++i) {
    if (static_cast<int64_t>(c.balance_bias[i].size()) != s.config.model.n_experts) {
      return absl::DataLossError(absl::StrCat("checkpoint ", source,
                                              ": balance biases of MoE layer ", i, " have ",
                                              c.balance_bias[i].size(), " experts"));
    }
    d.FromHost(model.BalanceBias(i), c.balance_bias[i].data(),
               c.balance_bias[i].size() * sizeof(float));
  }
  s.step = c.step;
  s.cursor = c.cursor;
  s.rng = c.rng;
  return absl::OkStatus();
}

absl::Status SyncRanks(Session& s) {
  Communicator& comm = *s.comm;
  if (!s.Distributed()) return absl::OkStatus();
  uint64_t header[5] = {s.fingerprint, static_cast<uint64_t>(s.step),
                        static_cast<uint64_t>(s.cursor), s.rng.seed, s.rng.counter};
  PARITY_RETURN_IF_ERROR(comm.BroadcastHost(header, sizeof(header), 0));
  // Every rank learns whether any differs, so none is left waiting in a collective.
  double differs = header[0] != s.fingerprint ? 1 : 0;
  PARITY_RETURN_IF_ERROR(comm.AllReduceSumHost(&differs, 1));
  if (differs > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--world-size: ", static_cast<int64_t>(differs),
        " rank(s) of the gang have a run spec, "
        "dataset content, device kind or precision different from rank 0's (run fingerprints "
        "differ); every rank must be started with the same --run and data"));
  }
  s.step = static_cast<int64_t>(header[1]);
  s.cursor = static_cast<int64_t>(header[2]);
  s.rng = Rng{.seed = header[3], .counter = header[4]};
  Model<float>& model = *s.model;
  const size_t bytes = static_cast<size_t>(model.NumParams()) * sizeof(float);
  for (float* array : {model.Params(), s.adam_m, s.adam_v}) {
    PARITY_RETURN_IF_ERROR(comm.Broadcast(array, bytes, 0));
  }
  for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
    PARITY_RETURN_IF_ERROR(
        comm.Broadcast(model.BalanceBias(i), s.config.model.n_experts * sizeof(float), 0));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SaveCheckpoint(Session& s) {
  Model<float>& model = *s.model;
  Device& d = *s.device;
  CheckpointHeader c;
  c.fingerprint = s.fingerprint;
  c.device = std::string(d.Name());
  c.precision = PrecisionName(s.config.precision);
  c.step = s.step;
  c.cursor = s.cursor;
  c.rng = s.rng;
  for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
    std::vector<float>& bias = c.balance_bias.emplace_back(s.config.model.n_experts);
    d.ToHost(bias.data(), model.BalanceBias(i), bias.size() * sizeof(float));
  }
  const float* arrays[3] = {model.Params(), s.adam_m, s.adam_v};
  auto read = [&](CheckpointArray a, int64_t offset, int64_t count, float* dst) {
    d.ToHost(dst, arrays[static_cast<int>(a)] + offset, count * sizeof(float));
  };
  return WriteCheckpoint(s.options.out_dir, c, model.NumParams(), read,
                         s.config.train.keep_checkpoints);
}

}  // namespace parity::kernels
