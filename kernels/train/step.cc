#include "kernels/train/step.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/train/schedule.h"

namespace parity::kernels {
absl::StatusOr<StepResult> TrainStep(Session& s) {
  const auto t0 = std::chrono::steady_clock::now();
  const RunConfig& config = s.config;
  const TrainConfig& tc = config.train;
  Transformer<float>& model = *s.model;
  FlopCounter& flops = *s.context().flops;
  const int64_t accum = tc.grad_accum, n = model.NumParams();
  StepResult r;
  flops.Reset();
  model.ZeroGrads();
  r.loads.assign(model.NumMoeLayers(), std::vector<int64_t>(config.model.n_experts, 0));
  const double waited = s.loader->wait_seconds();
  for (int64_t micro = 0; micro < accum; ++micro) {
    PARITY_ASSIGN_OR_RETURN(const int64_t bytes, s.loader->Next(s.cursor, s.inputs, s.targets));
    r.target_bytes += bytes;
    s.cursor += tc.batch_size;
    const ForwardResult f = model.Forward(s.inputs.data(), s.targets.data(), tc.batch_size);
    model.Backward(1.0 / static_cast<double>(s.StepTokens()), 1.0 / static_cast<double>(accum));
    r.ce += f.ce / accum, r.aux += f.aux / accum, r.z += f.z / accum;
    for (int64_t i = 0; i < model.NumMoeLayers(); ++i) {
      const std::vector<int64_t>& load = model.Routing(i).load;
      for (size_t e = 0; e < load.size(); ++e) r.loads[i][e] += load[e];
    }
  }
  // Global-norm clipping folded into the optimizer's gradient scale.
  r.grad_norm = std::sqrt(s.ops().sum_squares(s.context(), n, model.Grads()));
  if (!std::isfinite(r.ce) || !std::isfinite(r.grad_norm)) {
    // Nothing is applied: the last checkpoint stays the last good state.
    return absl::OutOfRangeError(absl::StrCat("training diverged at step ", s.step + 1, ": loss ",
                                              r.ce, ", gradient norm ", r.grad_norm));
  }
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
  for (const ParamTensor& t : model.Tensors()) {
    s.ops().adamw_update(s.context(), t.size, model.Params() + t.offset, s.adam_m + t.offset,
                         s.adam_v + t.offset, model.Grads() + t.offset, clip, args, t.decay);
  }
  BalanceExperts(s, r.loads);
  ++s.step;
  // The step's work is queued on the device's stream; its time is only known once it is done.
  s.device->DefaultStream().Synchronize();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.data_wait_seconds = s.loader->wait_seconds() - waited;
  r.model_flops = flops.Get(FlopKind::kModel);
  r.total_flops = r.model_flops + flops.Get(FlopKind::kVocab) + flops.Get(FlopKind::kElementwise);
  return r;
}

void BalanceExperts(Session& s, const std::vector<std::vector<int64_t>>& loads) {
  const double rate = s.config.model.bias_update_rate;
  const int64_t layers = s.model->NumMoeLayers(), e = s.config.model.n_experts;
  if (rate <= 0 || layers == 0) return;
  // The loads are host numbers already (the routing plan's offsets, read back for the grouped
  // GEMMs); one upload per step feeds every layer's update.
  std::vector<int64_t> flat;
  flat.reserve(layers * e);
  for (const auto& layer : loads) flat.insert(flat.end(), layer.begin(), layer.end());
  s.device->FromHost(s.step_load, flat.data(), flat.size() * sizeof(int64_t));
  for (int64_t i = 0; i < layers; ++i) {
    s.ops().bias_update(s.context(), e, s.model->BalanceBias(i), s.step_load + i * e, rate);
  }
}

absl::StatusOr<std::vector<double>> Evaluate(Session& s) {
  const int64_t S = s.config.model.seq_len, B = s.config.train.batch_size;
  std::vector<double> bpc;
  for (size_t set = 0; set < s.corpus.NumEvalSets(); ++set) {
    const int64_t windows = std::min(s.corpus.NumEvalWindows(set), s.config.train.eval_tokens / S);
    double sum = 0;
    int64_t bytes = 0;
    for (int64_t done = 0; done < windows;) {
      const int64_t b = std::min(B, windows - done);
      for (int64_t i = 0; i < b; ++i) {
        PARITY_ASSIGN_OR_RETURN(
            const int64_t window_bytes,
            s.corpus.FillEval(set, done + i, s.inputs.data() + i * S, s.targets.data() + i * S));
        bytes += window_bytes;
      }
      sum += s.model->Forward(s.inputs.data(), s.targets.data(), b).ce * b;
      done += b;
    }
    bpc.push_back(BitsPerByte(sum / windows, windows * S, bytes));
  }
  return bpc;
}

}  // namespace parity::kernels
