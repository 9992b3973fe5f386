#include "kernels/train/step.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/train/grad_sync.h"
#include "kernels/train/schedule.h"

namespace parity::kernels {
namespace {

// The share of a step's sequences a micro-batch of `batch` sequences holds, as a divisor: each
// micro-batch's balance losses (means over its own tokens) are weighted by it, and its mean losses
// summed into the step's. Divided rather than multiplied so that equal micro-batches (the
// quotient then exactly the micro-batch count) keep the bits of `x / grad_accum`.
double MicroBatchDivisor(const Session& s, int64_t batch) {
  return static_cast<double>(s.config.train.batch_sequences) / static_cast<double>(batch);
}

// Forward + backward of this rank's micro-batches of the step, summed into the gradient, all
// queued: each micro-batch's ids go up from, and its losses come back into, its own slot of the
// staging memory, read only after the step's one synchronisation (AddLosses). With an
// overlapping `sync`, the last micro-batch's backward posts each finished layer to it.
absl::Status RunMicroBatches(Session& s, StepResult& r, GradientSync* sync) {
  Model<float>& model = *s.model;
  const int64_t local = s.LocalMicroBatches(), step_start = s.cursor, S = s.config.model.seq_len;
  int64_t cursor = step_start + s.first_sequence;
  for (int64_t i = 0; i < local; ++i) {
    const int64_t b = s.micro_sizes[i];
    // This rank's next batch: its following micro-batch, or its first of the next step.
    const BatchLoader::Window next =
        i + 1 < local
            ? BatchLoader::Window{cursor + b, s.micro_sizes[i + 1]}
            : BatchLoader::Window{step_start + s.config.train.batch_sequences + s.first_sequence,
                                  s.micro_sizes[0]};
    PARITY_ASSIGN_OR_RETURN(const int64_t bytes,
                            s.loader->Next({cursor, b}, s.inputs, s.targets, next));
    r.target_bytes += bytes;
    std::copy_n(s.inputs.begin(), b * S, s.staging.Tokens(i));
    std::copy_n(s.targets.begin(), b * S, s.staging.Targets(i));
    if (sync != nullptr && sync->overlapping() && i + 1 == local) {
      model.SetGradsReadyHook([sync](int64_t offset, int64_t count) { sync->Post(offset, count); });
    }
    const absl::Status trained =
        model.TrainMicroBatch(s.staging.Slot(i, b), 1.0 / static_cast<double>(s.StepTokens()),
                              1.0 / MicroBatchDivisor(s, b));
    model.SetGradsReadyHook(nullptr);
    PARITY_RETURN_IF_ERROR(trained);
    for (int64_t l = 0; l < model.NumMoeLayers(); ++l) {
      const std::vector<int64_t>& load = model.Routing(l).load;
      for (size_t e = 0; e < load.size(); ++e) r.loads[l][e] += load[e];
    }
    cursor += b;
  }
  s.cursor = step_start + s.config.train.batch_sequences;
  return absl::OkStatus();
}

// The step's losses from the staging memory, once the device has been synchronised: each
// micro-batch's means, weighted by its share of the step and summed in micro-batch order (the
// order, and so the bits, of summing each Forward's result as it came).
void AddLosses(const Session& s, StepResult& r) {
  for (int64_t i = 0; i < s.LocalMicroBatches(); ++i) {
    const int64_t b = s.micro_sizes[i];
    const ForwardResult f = s.staging.Losses(i, b, s.config.model.seq_len);
    const double divisor = MicroBatchDivisor(s, b);
    r.ce += f.ce / divisor, r.aux += f.aux / divisor, r.z += f.z / divisor;
  }
}

// Sums the step's statistics over the ranks (one host all-reduce): losses, target bytes, the
// forward/backward FLOPs, the stop flags and the expert loads, so that every rank balances its
// experts from the same global loads and rank 0 reports the whole step.
absl::Status ReduceStepStats(Session& s, StepResult& r, bool stop) {
  FlopCounter& flops = *s.context().flops;
  std::vector<double> v = {r.ce,
                           r.aux,
                           r.z,
                           static_cast<double>(r.target_bytes),
                           flops.Get(FlopKind::kModel),
                           flops.Total() - flops.Get(FlopKind::kModel),
                           stop ? 1.0 : 0.0};
  const size_t fixed = v.size();
  for (const auto& layer : r.loads) v.insert(v.end(), layer.begin(), layer.end());
  PARITY_RETURN_IF_ERROR(s.comm->AllReduceSumHost(v.data(), static_cast<int64_t>(v.size())));
  r.ce = v[0], r.aux = v[1], r.z = v[2];
  r.target_bytes = static_cast<int64_t>(v[3]);
  // The other ranks' share of the forward/backward FLOPs; the optimizer's are replicated.
  r.model_flops = v[4] - flops.Get(FlopKind::kModel);
  r.total_flops = v[4] + v[5] - flops.Total();
  r.stop = v[6] > 0;
  size_t k = fixed;
  for (auto& layer : r.loads) {
    for (int64_t& load : layer) load = static_cast<int64_t>(v[k++]);
  }
  return absl::OkStatus();
}

// The step's one wait for the device: the gradient norm² is queued behind the (summed) gradient,
// then the host waits for it and for every micro-batch's losses, sums the losses and, in a gang,
// the step's statistics over the ranks. The norm cannot share AdamW's pass: the clip factor needs
// the whole gradient's norm before any parameter moves; it is one launch of a fixed-order double
// sum.
absl::Status WaitForLossesAndNorm(Session& s, StepResult& r, bool stop) {
  s.ops().sum_squares(s.context(), s.model->NumParams(), s.model->Grads(), s.staging.grad_norm_sq);
  s.device->DefaultStream().Synchronize();
  AddLosses(s, r);
  if (s.Distributed()) {
    const auto c0 = std::chrono::steady_clock::now();
    PARITY_RETURN_IF_ERROR(ReduceStepStats(s, r, stop));
    r.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  }
  r.grad_norm = std::sqrt(*s.staging.grad_norm_sq);
  return absl::OkStatus();
}

// Hands the model a profile for the step being timed and takes it back on every return path.
class ProfileScope {
 public:
  ProfileScope(Model<float>& model, std::optional<StepProfile>& profile) : model_(model) {
    if (profile.has_value()) model_.SetProfile(&*profile);
  }
  ~ProfileScope() { model_.SetProfile(nullptr); }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Model<float>& model_;
};

}  // namespace

absl::StatusOr<StepResult> TrainStep(Session& s, bool stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const RunConfig& config = s.config;
  const TrainConfig& tc = config.train;
  Model<float>& model = *s.model;
  FlopCounter& flops = *s.context().flops;
  const int64_t n = model.NumParams();
  StepResult r;
  flops.Reset();
  model.ZeroGrads();
  r.loads.assign(model.NumMoeLayers(), std::vector<int64_t>(config.model.n_experts, 0));
  const double waited = s.loader->wait_seconds();
  // Layers are summed while the backward goes on: Gloo's on a thread (it sums host memory from
  // any thread), NCCL's queued on its own stream after each layer's backward (grad_sync.h).
  GradientSync sync(*s.comm, model.Grads(), n, s.Distributed());
  if (s.options.profile_step == s.step + 1) r.profile.emplace();
  {
    ProfileScope scope(model, r.profile);
    PARITY_RETURN_IF_ERROR(RunMicroBatches(s, r, s.Distributed() ? &sync : nullptr));
  }
  // Everything after the micro-batches is the optimizer's share of a profiled step.
  std::chrono::steady_clock::time_point update_start;
  if (r.profile.has_value()) {
    s.device->DefaultStream().Synchronize();
    update_start = std::chrono::steady_clock::now();
  }
  r.stop = stop;
  if (s.Distributed()) {
    const auto c0 = std::chrono::steady_clock::now();
    PARITY_RETURN_IF_ERROR(sync.Finish());
    r.comm_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  }
  PARITY_RETURN_IF_ERROR(WaitForLossesAndNorm(s, r, stop));
  if (!std::isfinite(r.ce) || !std::isfinite(r.grad_norm)) {
    // Nothing is applied: the last checkpoint stays the last good state.
    return absl::OutOfRangeError(absl::StrCat("training diverged at step ", s.step + 1, ": loss ",
                                              r.ce, ", gradient norm ", r.grad_norm));
  }
  // Global-norm clipping folded into the optimizer's gradient scale.
  const OptimizerConfig& o = config.optimizer;
  const double clip =
      o.grad_clip > 0 && r.grad_norm > o.grad_clip ? o.grad_clip / r.grad_norm : 1.0;
  r.learning_rate = LearningRate(o, s.step, tc.steps);
  const AdamWArgs args{.lr = r.learning_rate,
                       .beta1 = o.beta1,
                       .beta2 = o.beta2,
                       .eps = o.eps,
                       .weight_decay = o.weight_decay,
                       .step = s.step + 1};
  // Every tensor in one call, each with its own weight decay.
  s.ops().adamw_multi_tensor(s.context(), static_cast<int64_t>(s.update_tensors.size()),
                             s.update_tensors.data(), model.Params(), s.adam_m, s.adam_v,
                             model.Grads(), clip, args);
  BalanceExperts(s, r.loads);
  ++s.step;
  // The step's work is queued on the device's stream; its time is only known once it is done.
  s.device->DefaultStream().Synchronize();
  const auto end = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(end - t0).count();
  if (r.profile.has_value()) {
    r.profile->Add(OpBucket::kOptimizer, std::chrono::duration<double>(end - update_start).count());
  }
  r.data_wait_seconds = s.loader->wait_seconds() - waited;
  r.model_flops += flops.Get(FlopKind::kModel);
  r.total_flops += flops.Total();  // executed FLOPs, recomputation included
  return r;
}

void BalanceExperts(Session& s, const std::vector<std::vector<int64_t>>& loads) {
  const double rate = s.config.model.bias_update_rate;
  const int64_t layers = s.model->NumMoeLayers(), e = s.config.model.n_experts;
  if (rate <= 0 || layers == 0) return;
  // The loads are host numbers already (the routing plan's offsets, read back for the grouped
  // GEMMs); one queued upload per step, from the pinned staging, feeds every layer's update.
  int64_t* flat = s.staging.loads;
  for (const auto& layer : loads) flat = std::copy(layer.begin(), layer.end(), flat);
  s.device->FromHostAsync(s.step_load, s.staging.loads, layers * e * sizeof(int64_t));
  for (int64_t i = 0; i < layers; ++i) {
    s.ops().bias_update(s.context(), e, s.model->BalanceBias(i), s.step_load + i * e, rate);
  }
}

absl::StatusOr<std::vector<double>> Evaluate(Session& s) {
  const int64_t S = s.config.model.seq_len, B = s.config.train.batch_size;
  const int64_t ranks = s.comm->world_size(), rank = s.comm->rank();
  const size_t sets = s.corpus.NumEvalSets();
  // Per set: Σ chunk mean loss × chunk windows, and target bytes. Chunk k (windows [kB, kB+B))
  // is evaluated by rank k mod W; the chunks are the single process's, so only the order of the
  // (double) sums changes with the world size.
  std::vector<double> sums(2 * sets, 0.0);
  std::vector<int64_t> windows(sets);
  for (size_t set = 0; set < sets; ++set) {
    windows[set] = std::min(s.corpus.NumEvalWindows(set), s.config.train.eval_tokens / S);
    for (int64_t done = 0, chunk = 0; done < windows[set]; done += B, ++chunk) {
      if (chunk % ranks != rank) continue;
      const int64_t b = std::min(B, windows[set] - done);
      // The training step's first staging slot and queued Forward, waited for once per chunk.
      for (int64_t i = 0; i < b; ++i) {
        PARITY_ASSIGN_OR_RETURN(const int64_t window_bytes,
                                s.corpus.FillEval(set, done + i, s.staging.Tokens(0) + i * S,
                                                  s.staging.Targets(0) + i * S));
        sums[2 * set + 1] += static_cast<double>(window_bytes);
      }
      s.model->Forward(s.staging.Slot(0, b));
      s.device->DefaultStream().Synchronize();
      sums[2 * set] += s.staging.Losses(0, b, S).ce * b;
    }
  }
  if (s.Distributed()) {
    PARITY_RETURN_IF_ERROR(
        s.comm->AllReduceSumHost(sums.data(), static_cast<int64_t>(sums.size())));
  }
  std::vector<double> bpc;
  for (size_t set = 0; set < sets; ++set) {
    bpc.push_back(BitsPerByte(sums[2 * set] / windows[set], windows[set] * S,
                              static_cast<int64_t>(sums[2 * set + 1])));
  }
  return bpc;
}

}  // namespace parity::kernels
