// Validation rules, grouped by the part of the spec they read. Each rule appends a violation and
// carries on, so a researcher sees every problem of a spec in one pass.
#include "core/validation.h"

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/dataset_name.h"
#include "core/grid.h"
#include "core/spec_names.h"
#include "core/symbols.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace parity::core {
namespace {

using parity::v1::ModelSpec;
using parity::v1::SweepSpec;

class Checker {
 public:
  void Add(std::string field, std::string description) {
    violations_.push_back({std::move(field), std::move(description)});
  }
  // Adds the violation unless `ok`.
  void Require(bool ok, std::string field, std::string description) {
    if (!ok) Add(std::move(field), std::move(description));
  }
  std::vector<FieldViolation> Take() { return std::move(violations_); }

 private:
  std::vector<FieldViolation> violations_;
};

std::string Num(double v) { return absl::StrFormat("%g", v); }

// A granularity G asks for experts of D_e = 2·D_m/G; the shape solver considers D_e up to 4·D_m,
// so G below 0.5 can never be met (and a tiny one made D_e overflow its integer type).
void CheckGranularity(Checker& c, double g, const std::string& path) {
  if (!std::isfinite(g) || g < 0) {
    c.Add(path, absl::StrCat(Num(g), " must be a finite number ≥ 0"));
  } else if (g > 0 && g < 0.5) {
    c.Add(path, absl::StrCat(Num(g),
                             " asks for experts wider than 4·d_model (D_e = 2·D_m/G); "
                             "G must be ≥ 0.5"));
  }
}

// Names must be unique within an axis: they become parts of run names.
void CheckUniqueNames(Checker& c, const std::vector<std::string>& names, const std::string& path) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    auto [it, inserted] = seen.emplace(names[i], i);
    if (!inserted) {
      c.Add(absl::StrCat(path, "[", i, "].name"),
            absl::StrCat("duplicate label '", names[i], "' (also ", path, "[", it->second, "])"));
    }
  }
}

// Heads, key/value heads and the dense FFN of a model whose width is fixed (`p` is its path).
void CheckAttention(Checker& c, const ModelSpec& m, const std::string& p, bool width_solved) {
  const uint32_t d_m = m.d_model();
  if (!width_solved) {
    c.Require(m.num_heads() > 0 || m.head_dim() > 0, p + ".num_heads",
              "set num_heads or head_dim (D_m = H·D_h)");
    if (m.num_heads() > 0 && d_m % m.num_heads() != 0) {
      c.Add(p + ".num_heads", absl::StrCat(m.num_heads(), " heads do not divide d_model ", d_m));
    }
    if (m.head_dim() > 0 && d_m % m.head_dim() != 0) {
      c.Add(p + ".head_dim",
            absl::StrCat("head_dim ", m.head_dim(), " does not divide d_model ", d_m));
    }
    if (m.num_heads() > 0 && m.head_dim() > 0 && uint64_t{m.num_heads()} * m.head_dim() != d_m) {
      c.Add(p + ".head_dim", absl::StrCat("num_heads ", m.num_heads(), " × head_dim ", m.head_dim(),
                                          " != d_model ", d_m));
    }
  } else if (m.num_heads() > 0) {
    c.Add(p + ".num_heads", "cannot be fixed while d_model is solved; set head_dim instead");
  }
  if (m.num_kv_heads() > 0 && m.num_heads() > 0 &&
      (m.num_kv_heads() > m.num_heads() || m.num_heads() % m.num_kv_heads() != 0)) {
    c.Add(
        p + ".num_kv_heads",
        absl::StrCat(m.num_kv_heads(), " key/value heads do not divide num_heads ", m.num_heads()));
  }
  if (m.attention() == parity::v1::ATTENTION_KIND_GROUPED_QUERY) {
    c.Require(m.num_kv_heads() > 0, p + ".num_kv_heads", "required for grouped-query attention");
  }
  if (m.attention() == parity::v1::ATTENTION_KIND_MULTI_HEAD && m.num_kv_heads() > 0 &&
      m.num_kv_heads() != m.num_heads()) {
    c.Add(p + ".num_kv_heads", absl::StrCat("multi-head attention needs num_kv_heads = num_heads ",
                                            m.num_heads(), ", got ", m.num_kv_heads()));
  }
  c.Require(m.param_tolerance() >= 0 && m.param_tolerance() < 0.5, p + ".param_tolerance",
            absl::StrCat(Num(m.param_tolerance()), " must be in [0, 0.5)"));
  c.Require(m.ffn_ratio() >= 0, p + ".ffn_ratio", "must be ≥ 0");
  c.Require(m.aspect_ratio() >= 0, p + ".aspect_ratio", "must be ≥ 0");
}

void CheckMoeBackbone(Checker& c, const SweepSpec& spec) {
  const ModelSpec& m = spec.moe();
  const auto& moe = m.moe();
  c.Require(m.architecture() == parity::v1::ARCHITECTURE_UNSPECIFIED ||
                m.architecture() == parity::v1::ARCHITECTURE_MOE,
            "moe.architecture", "the MoE backbone's architecture must be moe (or left unset)");
  c.Require(m.d_model() > 0, "moe.d_model", "required for an MoE grid (D_m of the backbone)");
  c.Require(m.num_layers() > 0, "moe.num_layers", "required for an MoE grid (L of the backbone)");
  if (m.d_model() > 0) CheckAttention(c, m, "moe", /*width_solved=*/false);
  switch (moe.layout()) {
    case parity::v1::MOE_LAYOUT_UNSPECIFIED:
      c.Add("moe.moe.layout", "required: 1dense+SE, all-moe or interleaved");
      break;
    case parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT:
      c.Require(m.num_layers() == 0 || m.num_layers() >= 2, "moe.num_layers",
                absl::StrCat("1dense+SE needs at least 2 layers, got ", m.num_layers()));
      c.Require(moe.shared_expert_hidden() == 0, "moe.moe.shared_expert_hidden",
                "1dense+SE sets the shared expert to K·D_e; leave it 0");
      break;
    case parity::v1::MOE_LAYOUT_INTERLEAVED:
      c.Require(moe.interleave_every() >= 1 && moe.interleave_every() <= m.num_layers(),
                "moe.moe.interleave_every",
                absl::StrCat(moe.interleave_every(), " must be in [1, num_layers ", m.num_layers(),
                             "] for the interleaved layout"));
      break;
    default:
      break;
  }
  const bool has_dense_layers =
      moe.layout() == parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT ||
      (moe.layout() == parity::v1::MOE_LAYOUT_INTERLEAVED && moe.interleave_every() > 1);
  if (has_dense_layers) {
    c.Require(m.ffn_hidden() > 0 || m.ffn_ratio() > 0, "moe.ffn_ratio",
              "set ffn_hidden or ffn_ratio for the backbone's dense layers");
  }
  c.Require(moe.total_ffn_ratio() >= 0 && std::isfinite(moe.total_ffn_ratio()),
            "moe.moe.total_ffn_ratio", "must be a finite number ≥ 0");
  CheckGranularity(c, moe.granularity(), "moe.moe.granularity");
  // E, K, D_e and r_a belong to the grid points; on the backbone they would be silently ignored.
  for (const auto& [value, name] :
       {std::pair{moe.num_experts(), "num_experts"}, std::pair{moe.top_k(), "top_k"},
        std::pair{moe.expert_hidden(), "expert_hidden"}}) {
    c.Require(value == 0, absl::StrCat("moe.moe.", name),
              "set it on the grid.moe points; the backbone's is solved per point");
  }
  c.Require(moe.target_activation_rate() == 0, "moe.moe.target_activation_rate",
            "set it on the grid.moe points; the backbone's is solved per point");
  if (moe.shared_expert_hidden() % kExpertHiddenMultiple != 0) {
    c.Add(
        "moe.moe.shared_expert_hidden",
        absl::StrCat(moe.shared_expert_hidden(), " is not a multiple of ", kExpertHiddenMultiple));
  }
  bool needs_target = false;
  for (const auto& p : spec.grid().moe()) {
    if (p.num_experts() == 0 || p.top_k() == 0 || p.expert_hidden() == 0) needs_target = true;
  }
  if (needs_target && m.target_params() == 0 && moe.total_ffn_ratio() <= 0) {
    c.Add("moe.target_params",
          "set target_params or moe.total_ffn_ratio (μ) so the grid points can be solved");
  }
}

// A point's layout, shared expert and balance over the backbone's (core/grid.h MoePointBackbone):
// the layout's own rules, checked on the point's effective backbone.
void CheckMoePointAblation(Checker& c, const SweepSpec& spec, const parity::v1::MoePoint& p,
                           const std::string& path) {
  if (p.layout() == parity::v1::MOE_LAYOUT_UNSPECIFIED && p.shared_expert_hidden() == 0) return;
  const ModelSpec m = MoePointBackbone(spec.moe(), p);
  const auto& moe = m.moe();
  if (p.shared_expert_hidden() % kExpertHiddenMultiple != 0) {
    c.Add(path + ".shared_expert_hidden",
          absl::StrCat(p.shared_expert_hidden(), " is not a multiple of ", kExpertHiddenMultiple));
  }
  switch (moe.layout()) {
    case parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT:
      c.Require(p.shared_expert_hidden() == 0, path + ".shared_expert_hidden",
                "1dense+SE sets the shared expert to K·D_e; leave it 0 or use all-moe");
      c.Require(
          m.num_layers() == 0 || m.num_layers() >= 2, path + ".layout",
          absl::StrCat("1dense+SE needs at least 2 layers, the backbone has ", m.num_layers()));
      c.Require(m.ffn_hidden() > 0 || m.ffn_ratio() > 0, path + ".layout",
                "1dense+SE needs the backbone's ffn_hidden or ffn_ratio for its dense layer");
      break;
    case parity::v1::MOE_LAYOUT_INTERLEAVED:
      c.Require(moe.interleave_every() >= 1 && moe.interleave_every() <= m.num_layers(),
                path + ".layout",
                "interleaved needs the backbone's moe.interleave_every in [1, num_layers]");
      if (moe.interleave_every() > 1) {
        c.Require(m.ffn_hidden() > 0 || m.ffn_ratio() > 0, path + ".layout",
                  "interleaved needs the backbone's ffn_hidden or ffn_ratio for its dense layers");
      }
      break;
    default:
      break;
  }
}

void CheckMoePoints(Checker& c, const SweepSpec& spec) {
  if (spec.grid().moe_size() > kMaxMoePoints) {
    c.Add("grid.moe", absl::StrCat(spec.grid().moe_size(), " points exceed the limit of ",
                                   kMaxMoePoints, " per sweep"));
  }
  std::vector<std::string> names;
  for (int i = 0; i < spec.grid().moe_size(); ++i) {
    const auto& p = spec.grid().moe(i);
    const std::string path = absl::StrCat("grid.moe[", i, "]");
    names.push_back(MoePointLabel(p));
    const double ra = p.target_activation_rate();
    const bool triple = p.num_experts() > 0 && p.top_k() > 0 && p.expert_hidden() > 0;
    if (ra != 0 && !(ra > 0 && ra <= 1)) {
      c.Add(path + ".target_activation_rate", absl::StrCat(Num(ra), " must be in (0, 1]"));
    }
    if (ra == 0 && !triple) {
      c.Add(path, "set target_activation_rate or all of num_experts, top_k and expert_hidden");
    }
    if (ra > 0 && triple) {
      c.Add(path + ".target_activation_rate",
            "over-determined: num_experts, top_k and expert_hidden already fix r_a; leave it 0");
    }
    if (p.num_experts() > 0 && p.top_k() > p.num_experts()) {
      c.Add(path + ".top_k", absl::StrCat(p.top_k(), " exceeds num_experts ", p.num_experts()));
    }
    if (p.expert_hidden() % kExpertHiddenMultiple != 0) {
      c.Add(path + ".expert_hidden",
            absl::StrCat(p.expert_hidden(), " is not a multiple of ", kExpertHiddenMultiple));
    }
    CheckGranularity(c, p.granularity(), path + ".granularity");
    if (p.granularity() > 0 && p.expert_hidden() > 0) {
      c.Add(path + ".granularity", "over-determined: expert_hidden already fixes G = 2·D_m/D_e");
    }
    CheckMoePointAblation(c, spec, p, path);
  }
  CheckUniqueNames(c, names, "grid.moe");
}

// The dense frontier: each size by exactly one of a multiple of the dense N, a target N or an
// explicit (d_model, num_layers) whose width the head dimension divides.
void CheckDenseSizes(Checker& c, const SweepSpec& spec) {
  const ModelSpec& d = spec.dense();
  uint32_t head_dim = d.head_dim();
  if (head_dim == 0 && d.num_heads() > 0 && d.d_model() > 0) head_dim = d.d_model() / d.num_heads();
  if (head_dim == 0 && spec.moe().num_heads() > 0 && spec.moe().d_model() > 0) {
    head_dim = spec.moe().d_model() / spec.moe().num_heads();
  }
  std::vector<std::string> names;
  for (int i = 0; i < spec.grid().dense_sizes_size(); ++i) {
    const auto& size = spec.grid().dense_sizes(i);
    const std::string path = absl::StrCat("grid.dense_sizes[", i, "]");
    names.push_back(DenseSizeLabel(size));
    const bool shape = size.d_model() > 0 || size.num_layers() > 0;
    const int ways = (size.params_multiple() > 0) + (size.target_params() > 0) + shape;
    if (ways != 1) {
      c.Add(path, "set exactly one of params_multiple, target_params or d_model with num_layers");
      continue;
    }
    if (shape && (size.d_model() == 0 || size.num_layers() == 0)) {
      c.Add(path, "an explicit dense size needs both d_model and num_layers");
    } else if (shape && head_dim > 0 && size.d_model() % head_dim != 0) {
      c.Add(path + ".d_model",
            absl::StrCat(size.d_model(), " is not a multiple of the dense head_dim ", head_dim));
    }
  }
  CheckUniqueNames(c, names, "grid.dense_sizes");
}

void CheckDense(Checker& c, const SweepSpec& spec) {
  const ModelSpec& d = spec.dense();
  c.Require(d.architecture() == parity::v1::ARCHITECTURE_UNSPECIFIED ||
                d.architecture() == parity::v1::ARCHITECTURE_DENSE,
            "dense.architecture", "the dense model's architecture must be dense (or left unset)");
  const bool solved = d.d_model() == 0;
  CheckAttention(c, d, "dense", solved);
  if (!solved && d.num_layers() == 0 && d.target_params() == 0 && spec.grid().moe().empty()) {
    c.Add("dense.num_layers", "set num_layers or target_params");
  }
  if (solved && d.target_params() == 0 && spec.grid().moe().empty()) {
    c.Add("dense.target_params", "required when the sweep has no MoE backbone to match");
  }
  c.Require(d.ffn_hidden() > 0 || d.ffn_ratio() > 0 || spec.moe().ffn_ratio() > 0 ||
                spec.moe().ffn_hidden() > 0,
            "dense.ffn_ratio", "set ffn_hidden or ffn_ratio (α) of the dense model");
  for (int i = 0; i < spec.baselines_size(); ++i) {
    const double m = spec.baselines(i).compute_multiple();
    c.Require(m > 0 && std::isfinite(m), absl::StrCat("baselines[", i, "].compute_multiple"),
              absl::StrCat(Num(m), " must be > 0 (e.g. 1, 2 or 1.91)"));
    c.Require(spec.baselines(i).reuse() != parity::v1::REUSE_MODE_LOOSE,
              absl::StrCat("baselines[", i, "].reuse"),
              "a baseline's own data policy is unique or strict; loose reuse belongs to grid.data");
  }
  std::vector<std::string> names;
  for (const auto& b : spec.baselines()) names.push_back(BaselineLabel(b));
  CheckUniqueNames(c, names, "baselines");
  CheckDenseSizes(c, spec);
}

void CheckBudgets(Checker& c, const SweepSpec& spec) {
  const auto& grid = spec.grid();
  c.Require(!grid.compute().empty(), "grid.compute", "at least one compute budget is required");
  std::vector<std::string> names;
  for (int i = 0; i < grid.compute_size(); ++i) {
    const auto& b = grid.compute(i);
    const std::string path = absl::StrCat("grid.compute[", i, "]");
    names.push_back(BudgetLabel(b, i));
    if ((b.compute_flops() != 0) == (b.dense_tokens() != 0)) {
      c.Add(path, "set exactly one of compute_flops and dense_tokens");
    }
    if (b.compute_flops() < 0 || !std::isfinite(b.compute_flops())) {
      c.Add(path + ".compute_flops",
            absl::StrCat(Num(b.compute_flops()), " must be a positive number of FLOPs"));
    }
  }
  CheckUniqueNames(c, names, "grid.compute");
  c.Require(!grid.moe().empty() || !spec.baselines().empty() || !grid.dense_sizes().empty(),
            "grid.moe", "nothing to plan: no MoE points, no dense baselines and no dense sizes");
}

void CheckTraining(Checker& c, const SweepSpec& spec) {
  const auto& t = spec.training();
  std::map<std::string, bool> axis_fields;
  for (const auto& axis : spec.grid().hyperparameters()) axis_fields[axis.field()] = true;
  c.Require(t.sequence_length() > 0, "training.sequence_length", "required (S, tokens)");
  const bool explicit_rule = t.rule() != parity::v1::HYPERPARAMETER_RULE_STEP_LAW;
  if (explicit_rule) {
    c.Require(t.learning_rate() > 0 || axis_fields.count("learning_rate"), "training.learning_rate",
              "required with the explicit rule (or use rule: step_law)");
    c.Require(t.batch_tokens() > 0 || axis_fields.count("batch_tokens"), "training.batch_tokens",
              "required with the explicit rule (or use rule: step_law)");
  }
  c.Require(t.learning_rate() >= 0, "training.learning_rate", "must be > 0");
  if (t.sequence_length() > 0 && t.batch_tokens() % t.sequence_length() != 0) {
    c.Add("training.batch_tokens",
          absl::StrCat(t.batch_tokens(), " is not a multiple of sequence_length ",
                       t.sequence_length()));
  }
  c.Require(t.warmup_fraction() >= 0 && t.warmup_fraction() < 1, "training.warmup_fraction",
            absl::StrCat(Num(t.warmup_fraction()), " must be in [0, 1)"));
  c.Require(!t.has_min_lr_ratio() || (t.min_lr_ratio() >= 0 && t.min_lr_ratio() <= 1),
            "training.min_lr_ratio", absl::StrCat(Num(t.min_lr_ratio()), " must be in [0, 1]"));
  c.Require(t.decay_fraction() >= 0 && t.decay_fraction() <= 1, "training.decay_fraction",
            absl::StrCat(Num(t.decay_fraction()), " must be in [0, 1]"));
  c.Require(!t.has_adam_beta2() || (t.adam_beta2() >= 0 && t.adam_beta2() < 1),
            "training.adam_beta2", absl::StrCat(Num(t.adam_beta2()), " must be in [0, 1)"));
  c.Require(t.steps() == 0, "training.steps", "planned as ceil(D / batch_tokens); leave it 0");

  std::map<uint64_t, int> seeds;
  for (int i = 0; i < spec.grid().seeds_size(); ++i) {
    if (!seeds.emplace(spec.grid().seeds(i), i).second) {
      c.Add(absl::StrCat("grid.seeds[", i, "]"),
            absl::StrCat("duplicate seed ", spec.grid().seeds(i)));
    }
  }
  std::map<std::string, int> axes;
  for (int i = 0; i < spec.grid().hyperparameters_size(); ++i) {
    const auto& axis = spec.grid().hyperparameters(i);
    const std::string path = absl::StrCat("grid.hyperparameters[", i, "]");
    if (!axes.emplace(axis.field(), i).second) {
      c.Add(path + ".field", absl::StrCat("axis '", axis.field(), "' appears twice"));
    }
    if (axis.field() == "steps" || axis.field() == "seed" || axis.field() == "sequence_length") {
      c.Add(
          path + ".field",
          absl::StrCat("'", axis.field(), "' cannot be an axis (",
                       axis.field() == "seed" ? "use grid.seeds" : "the planner derives it", ")"));
      continue;
    }
    c.Require(!axis.values().empty(), path + ".values", "at least one value is required");
    const google::protobuf::FieldDescriptor* field =
        parity::v1::TrainingSpec::descriptor()->FindFieldByName(axis.field());
    if (field == nullptr) {
      c.Add(path + ".field",
            absl::StrCat(
                "'", axis.field(), "' is not a TrainingSpec field",
                DidYouMean(axis.field(), MessageKeys(*parity::v1::TrainingSpec::descriptor()))));
      continue;
    }
    for (int j = 0; j < axis.values_size(); ++j) {
      parity::v1::TrainingSpec probe;
      if (absl::Status s = SetTrainingField(probe, axis.field(), axis.values(j)); !s.ok()) {
        const bool field_wrong = s.message().find("not a numeric") != std::string_view::npos;
        c.Add(field_wrong ? path + ".field" : absl::StrCat(path, ".values[", j, "]"),
              std::string(s.message()));
        if (field_wrong) break;
      } else if (axis.field() == "batch_tokens" && t.sequence_length() > 0 &&
                 probe.batch_tokens() % t.sequence_length() != 0) {
        c.Add(absl::StrCat(path, ".values[", j, "]"),
              absl::StrCat(probe.batch_tokens(), " is not a multiple of sequence_length ",
                           t.sequence_length()));
      }
    }
  }
}

void CheckData(Checker& c, const SweepSpec& spec) {
  // A dataset is a name the worker resolves inside its own --corpus-dir, never a path: a path
  // would let a spec make a worker read any file it can (docs/access.md, "Datasets and
  // checkpoints").
  if (absl::Status name = CheckDatasetName(spec.data().corpus()); !name.ok()) {
    c.Add("data.corpus", spec.data().corpus().empty()
                             ? absl::StrCat("required: ", kDatasetNameRemedy)
                             : std::string(name.message()));
  }
  // The SHA-256 of the prepared dataset's manifest.json, as `parity workers` lists it.
  const std::string& digest = spec.data().dataset_digest();
  if (!digest.empty() &&
      (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    c.Add("data.dataset_digest",
          "must be 64 lowercase hex characters, the SHA-256 of the dataset's manifest.json (as "
          "`parity workers` lists it), or empty to pin the digest the live workers hold");
  }
  const double vf = spec.data().validation_fraction();
  c.Require(vf >= 0 && vf < 1, "data.validation_fraction",
            absl::StrCat(Num(vf), " must be in [0, 1)"));
  const std::vector<parity::v1::DataVariant> variants = DataVariantsOf(spec);
  std::vector<std::string> names;
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    names.push_back(v.name());
    const std::string path =
        spec.grid().data().empty() ? std::string("data") : absl::StrCat("grid.data[", i, "]");
    switch (v.reuse()) {
      case parity::v1::REUSE_MODE_STRICT:
        c.Require(v.epochs() == 0, path + ".epochs",
                  "strict reuse derives epochs from unique_tokens; epochs is for loose reuse");
        break;
      case parity::v1::REUSE_MODE_LOOSE:
        c.Require(v.epochs() > 0, path + ".epochs",
                  absl::StrCat("loose reuse needs epochs > 0, got ", Num(v.epochs())));
        c.Require(
            v.unique_tokens() == 0, path + ".unique_tokens",
            "loose reuse derives unique tokens from epochs; unique_tokens is for strict reuse");
        break;
      default:
        c.Require(v.unique_tokens() == 0, path + ".unique_tokens",
                  "unique data has D̂ = D; unique_tokens applies only to strict reuse");
        c.Require(v.epochs() == 0 || v.epochs() == 1, path + ".epochs",
                  "unique data is one epoch; epochs applies only to loose reuse");
    }
  }
  if (!spec.grid().data().empty()) CheckUniqueNames(c, names, "grid.data");
}

// Every number of a spec, on every axis, nested or repeated: finite and not negative (no field of
// a spec means anything below zero but the priority), and every text field of a bounded size.
// By reflection, so that a field added later is held to it without a new rule.
void CheckNumbersAndText(Checker& c, const google::protobuf::Message& message,
                         const std::string& path) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->is_map()) continue;                                 // labels: CheckLabels
    if (path.empty() && field->name() == "description") continue;  // its own, larger limit
    const std::string name = path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      const std::string at = field->is_repeated() ? absl::StrCat(name, "[", i, "]") : name;
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_DOUBLE:
        case FieldDescriptor::CPPTYPE_FLOAT: {
          const double v =
              field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE
                  ? (field->is_repeated() ? reflection->GetRepeatedDouble(message, field, i)
                                          : reflection->GetDouble(message, field))
                  : (field->is_repeated() ? reflection->GetRepeatedFloat(message, field, i)
                                          : reflection->GetFloat(message, field));
          if (!std::isfinite(v)) {
            c.Add(at, "must be a finite number");
          } else if (v < 0) {
            c.Add(at, absl::StrCat(Num(v), " must not be negative"));
          }
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          const size_t size = field->is_repeated()
                                  ? reflection->GetRepeatedString(message, field, i).size()
                                  : reflection->GetString(message, field).size();
          if (size > kMaxSpecTextBytes) {
            c.Add(at, absl::StrCat(size, " bytes, over the limit of ", kMaxSpecTextBytes));
          }
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          CheckNumbersAndText(c,
                              field->is_repeated()
                                  ? reflection->GetRepeatedMessage(message, field, i)
                                  : reflection->GetMessage(message, field),
                              at);
          break;
        default:
          break;
      }
    }
  }
}

void CheckLabels(Checker& c, const SweepSpec& spec) {
  static const std::regex kKey("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
  if (spec.labels_size() > kMaxLabels) {
    c.Add("labels", absl::StrCat(spec.labels_size(), " labels, over the limit of ", kMaxLabels));
  }
  for (const auto& [key, value] : spec.labels()) {
    if (!std::regex_match(key, kKey)) {
      c.Add(absl::StrCat("labels[", key.substr(0, 64), "]"),
            "a key must match [A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
    }
    if (value.size() > kMaxLabelValueBytes) {
      c.Add(absl::StrCat("labels[", key.substr(0, 64), "]"),
            absl::StrCat(value.size(), " bytes, over the limit of ", kMaxLabelValueBytes));
    }
  }
}

// The engine trains one GPU per process (data parallelism only; no tensor or expert parallelism),
// so a run's GPUs and its ranks are one number: more GPUs than ranks would sit idle, silently.
// Unset ranks become gpus (FillResourceDefaults). A gang's global batch is shared by its ranks in
// whole sequences (the batch itself is checked per run by the planner, where it is resolved).
void CheckRanks(Checker& c, const SweepSpec& spec) {
  const parity::v1::ResourceRequest& resources = spec.resources();
  constexpr uint32_t kMaxRanks = 4096;
  if (resources.ranks() > kMaxRanks) {
    c.Add("resources.ranks", absl::StrCat(resources.ranks(), " exceeds ", kMaxRanks));
  } else if (resources.ranks() == 1 && resources.gpus() > 1) {
    c.Add("resources.ranks", absl::StrCat("1 process trains on one GPU, so ", resources.gpus() - 1,
                                          " of the ", resources.gpus(),
                                          " GPUs would sit idle: leave ranks unset (one rank per "
                                          "GPU) or set ranks: ",
                                          resources.gpus()));
  } else if (resources.ranks() > 1 && resources.gpus() > 0 &&
             resources.gpus() != resources.ranks()) {
    c.Add("resources.gpus",
          absl::StrCat(resources.gpus(), " GPUs for ", resources.ranks(),
                       " ranks: each rank trains on one GPU, so give gpus equal to ranks (",
                       resources.ranks(), "), or leave ranks unset"));
  }
}

void CheckSchedulingFields(Checker& c, const SweepSpec& spec) {
  if (spec.description().size() > kMaxDescriptionBytes) {
    c.Add("description", absl::StrCat(spec.description().size(), " bytes, over the limit of ",
                                      kMaxDescriptionBytes));
  }
  if (spec.max_attempts() > kMaxAttempts) {
    c.Add("max_attempts", absl::StrCat(spec.max_attempts(), " exceeds ", kMaxAttempts));
  }
  if (spec.priority() < -kMaxPriorityMagnitude || spec.priority() > kMaxPriorityMagnitude) {
    c.Add("priority", absl::StrCat(spec.priority(), " is outside [-", kMaxPriorityMagnitude, ", ",
                                   kMaxPriorityMagnitude, "]"));
  }
  CheckRanks(c, spec);
}

}  // namespace

std::vector<FieldViolation> ValidateSweepSpec(const SweepSpec& spec) {
  Checker c;
  static const std::regex kName("[a-z0-9][a-z0-9._-]{0,62}");
  if (spec.name().empty()) {
    c.Add("name", "required: [a-z0-9][a-z0-9._-]{0,62}");
  } else if (!std::regex_match(spec.name(), kName)) {
    c.Add("name", absl::StrCat("'", spec.name(), "' must match [a-z0-9][a-z0-9._-]{0,62}"));
  }
  CheckNumbersAndText(c, spec, "");
  CheckLabels(c, spec);
  CheckSchedulingFields(c, spec);
  CheckBudgets(c, spec);
  if (!spec.grid().moe().empty()) {
    CheckMoeBackbone(c, spec);
    CheckMoePoints(c, spec);
  }
  if (!spec.baselines().empty() || !spec.grid().dense_sizes().empty()) CheckDense(c, spec);
  CheckTraining(c, spec);
  CheckData(c, spec);
  const uint64_t runs = ExpectedRunCount(spec);
  if (runs > static_cast<uint64_t>(kMaxRunsPerSweep)) {
    c.Add("grid", absl::StrCat("expands to ", runs, " runs, over the limit of ", kMaxRunsPerSweep,
                               " per sweep; split the study"));
  }
  return c.Take();
}

}  // namespace parity::core
