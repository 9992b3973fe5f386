// One example per section of the spec reference. core/tests/spec_reference_test.cc parses each
// into its message type with the loader (and plans the top-level one), so an example that stops
// being valid fails a test rather than misleading a reader.
#include <vector>

#include "core/spec_reference.h"
#include "parity/v1/sweep.pb.h"

namespace parity::core {

std::span<const SpecExample> SpecExamples() {
  namespace v1 = parity::v1;
  static const std::vector<SpecExample>* const examples = new std::vector<SpecExample>{
      {v1::SweepSpec::descriptor(), R"(name: my-study
description: one MoE point against dense 1C and 2C
allow_undertrained: true     # a demo-scale study, far below D/N = 20 on purpose
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe: {layout: all-moe, total_ffn_ratio: 16, granularity: 4}
dense: {d_model: 128, num_layers: 2, num_heads: 8, ffn_hidden: 384}
training: {rule: explicit, learning_rate: 3e-3, batch_tokens: 64, sequence_length: 64}
data: {corpus: kjv}
grid:
  moe: [{target_activation_rate: 0.25}]
  compute: [{name: C1, compute_flops: 2e10}]
baselines:
  - {name: dense-1C, compute_multiple: 1}
  - {name: dense-2C, compute_multiple: 2}
)"},
      {v1::ModelSpec::descriptor(), R"(d_model: 2048
num_layers: 24
num_heads: 16
ffn_ratio: 2.7
moe: {layout: 1dense+SE, total_ffn_ratio: 12, granularity: 8}
)"},
      {v1::MoeSpec::descriptor(), R"(layout: 1dense+SE
total_ffn_ratio: 12
granularity: 8
router: {balance: aux_loss}
)"},
      {v1::RouterSpec::descriptor(), R"(balance: loss_free
bias_update_rate: 0.001
)"},
      {v1::TrainingSpec::descriptor(), R"(rule: step_law
sequence_length: 2048
schedule: wsd
decay_fraction: 0.2
precision: bf16
)"},
      {v1::DataSpec::descriptor(), R"(corpus: kjv
reuse: loose
epochs: 4
)"},
      {v1::Grid::descriptor(), R"(moe:
  - {target_activation_rate: 0.2}
  - {num_experts: 64, top_k: 4, expert_hidden: 128}
compute: [{name: C1, compute_flops: 2.86e21}]
data:
  - {name: unique, reuse: unique}
  - {name: strict68B, reuse: strict, unique_tokens: 68B}
seeds: [0, 1]
hyperparameters: [{field: learning_rate, values: [1e-3, 3e-3]}]
)"},
      {v1::MoePoint::descriptor(),
       R"({name: ra20-lossfree, target_activation_rate: 0.2, balance: loss_free}
)"},
      {v1::ComputeBudget::descriptor(), R"({name: C1, dense_tokens: 68B}
)"},
      {v1::DataVariant::descriptor(), R"({name: loose4ep, reuse: loose, epochs: 4}
)"},
      {v1::HyperparameterAxis::descriptor(), R"({field: weight_decay, values: [0.0, 0.1]}
)"},
      {v1::DenseSize::descriptor(), R"({name: n0.5, params_multiple: 0.5}
)"},
      {v1::DenseBaseline::descriptor(), R"({name: dense-2C, compute_multiple: 1.91, reuse: unique}
)"},
      {v1::ResourceRequest::descriptor(), R"({gpus: 1, gpu_memory_budget_bytes: 141GB}
)"},
  };
  return *examples;
}

}  // namespace parity::core
