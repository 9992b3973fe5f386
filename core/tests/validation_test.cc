// Every kind of bad input gets its own field path and message. Each case breaks one thing in an
// otherwise valid spec and names the violation it expects.
#include "core/validation.h"

#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using parity::v1::SweepSpec;

constexpr char kValid[] = R"(
name: valid
moe:
  d_model: 64
  num_layers: 3
  num_heads: 4
  ffn_ratio: 3
  moe: {layout: 1dense+SE, total_ffn_ratio: 12}
dense: {ffn_ratio: 3, head_dim: 16}
training: {learning_rate: 3e-3, batch_tokens: 128, sequence_length: 64}
data: {corpus: kjv}
grid:
  moe: [{target_activation_rate: 0.5}, {num_experts: 8, top_k: 2, expert_hidden: 64}]
  compute: [{name: C1, compute_flops: 1e10}]
  data: [{reuse: unique}, {reuse: strict}]
  seeds: [0, 1]
  hyperparameters: [{field: learning_rate, values: [1e-3, 3e-3]}]
baselines: [{compute_multiple: 1}, {compute_multiple: 2}]
)";

SweepSpec Valid() {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kValid, SpecFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::string Describe(const std::vector<FieldViolation>& violations) {
  std::string out;
  for (const auto& v : violations) out += "\n  " + v.field + ": " + v.description;
  return out.empty() ? " (none)" : out;
}

TEST(ValidationTest, TheBaseSpecIsValid) {
  const auto violations = ValidateSweepSpec(Valid());
  EXPECT_TRUE(violations.empty()) << "expected no violations, got" << Describe(violations);
}

struct BadInput {
  const char* kind;
  std::function<void(SweepSpec&)> breaks;
  const char* field;
  const char* message;  // a substring of the description
};

class BadInputTest : public testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, IsReportedWithItsPathAndReason) {
  const BadInput& bad = GetParam();
  SweepSpec spec = Valid();
  bad.breaks(spec);
  const auto violations = ValidateSweepSpec(spec);
  bool found = false;
  for (const auto& v : violations) {
    found |= v.field == bad.field && v.description.find(bad.message) != std::string::npos;
  }
  EXPECT_TRUE(found) << bad.kind << ": expected '" << bad.field << ": ..." << bad.message
                     << "...', got" << Describe(violations);
}

const BadInput kBadInputs[] = {
    // Every number on every axis is finite and not negative; every size is bounded.
    {"NaN learning rate",
     [](SweepSpec& s) { s.mutable_training()->set_learning_rate(std::nan("")); },
     "training.learning_rate", "must be a finite number"},
    {"infinite compute",
     [](SweepSpec& s) {
       s.mutable_grid()->mutable_compute(0)->set_compute_flops(
           std::numeric_limits<double>::infinity());
     },
     "grid.compute[0].compute_flops", "must be a finite number"},
    {"negative warmup", [](SweepSpec& s) { s.mutable_training()->set_warmup_fraction(-0.1); },
     "training.warmup_fraction", "-0.1 must not be negative"},
    {"negative value on a hyperparameter axis",
     [](SweepSpec& s) { s.mutable_grid()->mutable_hyperparameters(0)->set_values(1, -3e-3); },
     "grid.hyperparameters[0].values[1]", "must not be negative"},
    {"NaN granularity of a point",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(0)->set_granularity(std::nan("")); },
     "grid.moe[0].granularity", "must be a finite number"},
    {"negative init std", [](SweepSpec& s) { s.mutable_moe()->set_init_std(-0.02); },
     "moe.init_std", "must not be negative"},
    {"too many labels",
     [](SweepSpec& s) {
       for (int i = 0; i < 33; ++i) s.mutable_labels()->insert({absl::StrCat("k", i), "v"});
     },
     "labels", "33 labels, over the limit of 32"},
    {"label key with a space",
     [](SweepSpec& s) {
       static const std::string kKey = "a b";
       s.mutable_labels()->insert({kKey, kKey});
     },
     "labels[a b]", "a key must match"},
    {"long label value",
     [](SweepSpec& s) { (*s.mutable_labels())["team"] = std::string(257, 'x'); }, "labels[team]",
     "257 bytes, over the limit of 256"},
    {"long description", [](SweepSpec& s) { s.set_description(std::string(4097, 'd')); },
     "description", "4097 bytes, over the limit of 4096"},
    {"long text field", [](SweepSpec& s) { s.mutable_data()->set_corpus(std::string(1025, 'c')); },
     "data.corpus", "1025 bytes, over the limit of 1024"},
    {"too many attempts", [](SweepSpec& s) { s.set_max_attempts(101); }, "max_attempts",
     "101 exceeds 100"},
    {"priority out of range", [](SweepSpec& s) { s.set_priority(-2000000); }, "priority",
     "outside [-1000000, 1000000]"},
    {"gang GPUs not one per rank",
     [](SweepSpec& s) {
       s.mutable_resources()->set_ranks(4);
       s.mutable_resources()->set_gpus(8);
     },
     "resources.gpus", "8 GPUs for 4 ranks: each rank trains on one GPU"},
    {"one process on several GPUs",
     [](SweepSpec& s) {
       s.mutable_resources()->set_ranks(1);
       s.mutable_resources()->set_gpus(8);
     },
     "resources.ranks", "7 of the 8 GPUs would sit idle"},
    {"missing name", [](SweepSpec& s) { s.clear_name(); }, "name", "required"},
    {"malformed name", [](SweepSpec& s) { s.set_name("My Sweep"); }, "name", "must match"},
    {"no budget", [](SweepSpec& s) { s.mutable_grid()->clear_compute(); }, "grid.compute",
     "at least one compute budget"},
    {"budget with both C and D",
     [](SweepSpec& s) { s.mutable_grid()->mutable_compute(0)->set_dense_tokens(5); },
     "grid.compute[0]", "exactly one of compute_flops and dense_tokens"},
    {"negative compute",
     [](SweepSpec& s) { s.mutable_grid()->mutable_compute(0)->set_compute_flops(-1); },
     "grid.compute[0].compute_flops", "positive number of FLOPs"},
    {"top_k above num_experts",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(1)->set_top_k(9); }, "grid.moe[1].top_k",
     "9 exceeds num_experts 8"},
    {"activation rate above 1",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(0)->set_target_activation_rate(1.5); },
     "grid.moe[0].target_activation_rate", "1.5 must be in (0, 1]"},
    {"point with neither r_a nor triple",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(1)->set_num_experts(0); }, "grid.moe[1]",
     "set target_activation_rate or all of"},
    {"over-determined point",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(1)->set_target_activation_rate(0.3); },
     "grid.moe[1].target_activation_rate", "over-determined"},
    {"expert width not a multiple of 32",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(1)->set_expert_hidden(100); },
     "grid.moe[1].expert_hidden", "100 is not a multiple of 32"},
    {"duplicate point labels",
     [](SweepSpec& s) {
       s.mutable_grid()->mutable_moe(0)->set_name("a");
       s.mutable_grid()->mutable_moe(1)->set_name("a");
     },
     "grid.moe[1].name", "duplicate label 'a'"},
    {"backbone without width", [](SweepSpec& s) { s.mutable_moe()->set_d_model(0); }, "moe.d_model",
     "required for an MoE grid"},
    {"heads not dividing width", [](SweepSpec& s) { s.mutable_moe()->set_num_heads(5); },
     "moe.num_heads", "5 heads do not divide d_model 64"},
    {"kv heads not dividing heads", [](SweepSpec& s) { s.mutable_moe()->set_num_kv_heads(3); },
     "moe.num_kv_heads", "3 key/value heads do not divide num_heads 4"},
    {"GQA without kv heads",
     [](SweepSpec& s) { s.mutable_moe()->set_attention(parity::v1::ATTENTION_KIND_GROUPED_QUERY); },
     "moe.num_kv_heads", "required for grouped-query attention"},
    {"missing layout", [](SweepSpec& s) { s.mutable_moe()->mutable_moe()->clear_layout(); },
     "moe.moe.layout", "required: 1dense+SE, all-moe or interleaved"},
    {"interleave beyond the stack",
     [](SweepSpec& s) {
       s.mutable_moe()->mutable_moe()->set_layout(parity::v1::MOE_LAYOUT_INTERLEAVED);
       s.mutable_moe()->mutable_moe()->set_interleave_every(7);
     },
     "moe.moe.interleave_every", "7 must be in [1, num_layers 3]"},
    {"1dense+SE with one layer", [](SweepSpec& s) { s.mutable_moe()->set_num_layers(1); },
     "moe.num_layers", "1dense+SE needs at least 2 layers"},
    {"nothing to size the points",
     [](SweepSpec& s) { s.mutable_moe()->mutable_moe()->set_total_ffn_ratio(0); },
     "moe.target_params", "set target_params or moe.total_ffn_ratio"},
    {"expert count on the backbone",
     [](SweepSpec& s) { s.mutable_moe()->mutable_moe()->set_num_experts(8); },
     "moe.moe.num_experts", "set it on the grid.moe points"},
    {"tolerance too wide", [](SweepSpec& s) { s.mutable_moe()->set_param_tolerance(0.7); },
     "moe.param_tolerance", "0.7 must be in [0, 0.5)"},
    {"non-positive baseline multiple",
     [](SweepSpec& s) { s.mutable_baselines(1)->set_compute_multiple(0); },
     "baselines[1].compute_multiple", "must be > 0"},
    {"no sequence length", [](SweepSpec& s) { s.mutable_training()->set_sequence_length(0); },
     "training.sequence_length", "required"},
    {"explicit rule without batch", [](SweepSpec& s) { s.mutable_training()->set_batch_tokens(0); },
     "training.batch_tokens", "required with the explicit rule"},
    {"batch not a multiple of S", [](SweepSpec& s) { s.mutable_training()->set_batch_tokens(100); },
     "training.batch_tokens", "100 is not a multiple of sequence_length 64"},
    {"steps given", [](SweepSpec& s) { s.mutable_training()->set_steps(10); }, "training.steps",
     "leave it 0"},
    {"duplicate seed", [](SweepSpec& s) { s.mutable_grid()->add_seeds(1); }, "grid.seeds[2]",
     "duplicate seed 1"},
    {"unknown hyperparameter",
     [](SweepSpec& s) { s.mutable_grid()->mutable_hyperparameters(0)->set_field("lr"); },
     "grid.hyperparameters[0].field", "'lr' is not a TrainingSpec field"},
    {"non-numeric hyperparameter",
     [](SweepSpec& s) { s.mutable_grid()->mutable_hyperparameters(0)->set_field("schedule"); },
     "grid.hyperparameters[0].field", "not a numeric field"},
    {"fractional integer hyperparameter",
     [](SweepSpec& s) {
       auto* axis = s.mutable_grid()->mutable_hyperparameters(0);
       axis->set_field("warmup_steps");
       axis->set_values(1, 2.5);
     },
     "grid.hyperparameters[0].values[1]", "does not fit 'warmup_steps'"},
    {"batch axis value not a multiple of S",
     [](SweepSpec& s) {
       auto* axis = s.mutable_grid()->mutable_hyperparameters(0);
       axis->set_field("batch_tokens");
       axis->set_values(0, 128);
       axis->set_values(1, 100);
     },
     "grid.hyperparameters[0].values[1]", "100 is not a multiple of sequence_length 64"},
    {"seed as an axis",
     [](SweepSpec& s) { s.mutable_grid()->mutable_hyperparameters(0)->set_field("seed"); },
     "grid.hyperparameters[0].field", "use grid.seeds"},
    {"missing corpus", [](SweepSpec& s) { s.mutable_data()->clear_corpus(); }, "data.corpus",
     "required"},
    // A dataset is a name the worker resolves in its --corpus-dir: a path made a worker train on
    // (and tell the size of) any file it could read (issue #23).
    {"corpus as an absolute path",
     [](SweepSpec& s) { s.mutable_data()->set_corpus("/etc/passwd"); }, "data.corpus",
     "name a dataset in the worker's --corpus-dir"},
    {"corpus climbing out of the data directory",
     [](SweepSpec& s) { s.mutable_data()->set_corpus("../../etc/passwd"); }, "data.corpus",
     "not a path"},
    {"corpus naming a device", [](SweepSpec& s) { s.mutable_data()->set_corpus("/dev/zero"); },
     "data.corpus", "not a path"},
    {"corpus with a leading dot", [](SweepSpec& s) { s.mutable_data()->set_corpus(".ssh"); },
     "data.corpus", "does not start with '.'"},
    {"loose reuse without epochs",
     [](SweepSpec& s) {
       s.mutable_grid()->mutable_data(1)->set_reuse(parity::v1::REUSE_MODE_LOOSE);
     },
     "grid.data[1].epochs", "loose reuse needs epochs > 0"},
    {"unique tokens on unique data",
     [](SweepSpec& s) { s.mutable_grid()->mutable_data(0)->set_unique_tokens(1000); },
     "grid.data[0].unique_tokens", "applies only to strict reuse"},
    {"validation share of 1", [](SweepSpec& s) { s.mutable_data()->set_validation_fraction(1); },
     "data.validation_fraction", "must be in [0, 1)"},
    {"dense model as MoE",
     [](SweepSpec& s) { s.mutable_dense()->set_architecture(parity::v1::ARCHITECTURE_MOE); },
     "dense.architecture", "must be dense (or left unset)"},
    {"dense heads fixed while width solved",
     [](SweepSpec& s) { s.mutable_dense()->set_num_heads(4); }, "dense.num_heads",
     "cannot be fixed while d_model is solved"},
    {"nothing to plan",
     [](SweepSpec& s) {
       s.mutable_grid()->clear_moe();
       s.clear_baselines();
     },
     "grid.moe", "nothing to plan"},
    {"too many runs",
     [](SweepSpec& s) {
       for (int i = 0; i < 3000; ++i) s.mutable_grid()->add_seeds(100 + i);
     },
     "grid", "over the limit of 10000"},
    {"too many MoE points",
     [](SweepSpec& s) {
       for (int i = 0; i < 1000; ++i) {
         s.mutable_grid()->add_moe()->set_target_activation_rate(0.1 + i * 1e-4);
       }
     },
     "grid.moe", "1002 points exceed the limit of 1000"},
    // Found by tests/fuzz (scheduler_requests_fuzzer, under UBSan): a tiny granularity made the
    // shape solver's D_e = 2·D_m/G infinite, cast to uint32_t (undefined), and an infinite μ
    // passed as ≥ 0.
    {"granularity asking for experts wider than the solver's",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(0)->set_granularity(1e-300); },
     "grid.moe[0].granularity", "G must be ≥ 0.5"},
    {"granularity not a number",
     [](SweepSpec& s) { s.mutable_grid()->mutable_moe(0)->set_granularity(std::nan("")); },
     "grid.moe[0].granularity", "must be a finite number ≥ 0"},
    {"backbone granularity below 0.5",
     [](SweepSpec& s) { s.mutable_moe()->mutable_moe()->set_granularity(0.25); },
     "moe.moe.granularity", "G must be ≥ 0.5"},
    {"infinite total FFN ratio",
     [](SweepSpec& s) {
       s.mutable_moe()->mutable_moe()->set_total_ffn_ratio(std::numeric_limits<double>::infinity());
     },
     "moe.moe.total_ffn_ratio", "must be a finite number ≥ 0"},
    // The dense frontier, baselines' data policy and the MoE points' ablation fields.
    {"dense size by two ways",
     [](SweepSpec& s) {
       auto* size = s.mutable_grid()->add_dense_sizes();
       size->set_params_multiple(0.5);
       size->set_target_params(1000);
     },
     "grid.dense_sizes[0]", "set exactly one of params_multiple, target_params or d_model"},
    {"explicit dense size without layers",
     [](SweepSpec& s) { s.mutable_grid()->add_dense_sizes()->set_d_model(64); },
     "grid.dense_sizes[0]", "needs both d_model and num_layers"},
    {"explicit dense size off the head dimension",
     [](SweepSpec& s) {
       auto* size = s.mutable_grid()->add_dense_sizes();
       size->set_d_model(72);
       size->set_num_layers(2);
     },
     "grid.dense_sizes[0].d_model", "not a multiple of the dense head_dim 16"},
    {"duplicate dense size",
     [](SweepSpec& s) {
       s.mutable_grid()->add_dense_sizes()->set_params_multiple(2);
       s.mutable_grid()->add_dense_sizes()->set_params_multiple(2);
     },
     "grid.dense_sizes[1].name", "duplicate label 'n2'"},
    {"baseline with loose reuse",
     [](SweepSpec& s) { s.mutable_baselines(1)->set_reuse(parity::v1::REUSE_MODE_LOOSE); },
     "baselines[1].reuse", "unique or strict"},
    {"shared expert on a 1dense+SE point",
     [](SweepSpec& s) {
       s.mutable_moe()->mutable_moe()->set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
       auto* p = s.mutable_grid()->mutable_moe(0);
       p->set_layout(parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT);
       p->set_shared_expert_hidden(64);
     },
     "grid.moe[0].shared_expert_hidden", "1dense+SE sets the shared expert to K·D_e"},
    {"point's shared expert off the multiple",
     [](SweepSpec& s) {
       auto* p = s.mutable_grid()->mutable_moe(0);
       p->set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
       p->set_shared_expert_hidden(40);
     },
     "grid.moe[0].shared_expert_hidden", "40 is not a multiple of 32"},
    {"interleaved point without interleave_every",
     [](SweepSpec& s) {
       s.mutable_grid()->mutable_moe(0)->set_layout(parity::v1::MOE_LAYOUT_INTERLEAVED);
     },
     "grid.moe[0].layout", "interleaved needs the backbone's moe.interleave_every"},
};

INSTANTIATE_TEST_SUITE_P(AllKinds, BadInputTest, testing::ValuesIn(kBadInputs),
                         [](const testing::TestParamInfo<BadInput>& info) {
                           std::string name = info.param.kind;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The new axes are valid when used as documented: a frontier by multiple, target and shape, a
// baseline at 1.91× on unique data, a K-pinned point and an ablated one.
TEST(ValidationTest, FrontierBaselinePolicyAndAblationsAreValid) {
  SweepSpec spec = Valid();
  spec.mutable_grid()->add_dense_sizes()->set_params_multiple(0.5);
  spec.mutable_grid()->add_dense_sizes()->set_target_params(200000);
  auto* shape = spec.mutable_grid()->add_dense_sizes();
  shape->set_d_model(96);
  shape->set_num_layers(2);
  auto* strong = spec.add_baselines();
  strong->set_compute_multiple(1.91);
  strong->set_reuse(parity::v1::REUSE_MODE_UNIQUE);
  auto* pinned = spec.mutable_grid()->add_moe();
  pinned->set_target_activation_rate(0.4);
  pinned->set_top_k(2);
  auto* ablated = spec.mutable_grid()->add_moe();
  ablated->set_target_activation_rate(0.5);
  ablated->set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
  ablated->set_shared_expert_hidden(64);
  ablated->set_balance(parity::v1::BALANCE_METHOD_LOSS_FREE);
  const auto violations = ValidateSweepSpec(spec);
  EXPECT_TRUE(violations.empty()) << "expected no violations, got" << Describe(violations);
}

TEST(ValidationTest, CollectsEveryViolationAtOnce) {
  SweepSpec spec = Valid();
  spec.clear_name();
  spec.mutable_grid()->mutable_moe(1)->set_top_k(9);
  spec.mutable_training()->set_sequence_length(0);
  EXPECT_GE(ValidateSweepSpec(spec).size(), 3u) << "validation must not stop at the first error";
}

}  // namespace
}  // namespace parity::core
