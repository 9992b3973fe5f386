// The planner and the engine count the same model the same way: every run planned from
// examples/*.yaml, and every RunSpec in kernels/examples/*.json, is converted to the engine's
// RunConfig exactly as parity-train does, and its N, N_a, M and layer placement must equal the
// plan's Accounting to the parameter. For models small enough to build, the parameter tensors the
// engine actually allocates are counted too (norm weights and the vocabulary excluded, as in N).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/accounting.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "kernels/backend/device.h"
#include "kernels/model/transformer.h"
#include "kernels/spec/run_spec_adapter.h"
#include "parity/v1/sweep.pb.h"

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;

// Models up to this many parameters (N) are also built, to count their allocated tensors.
constexpr uint64_t kMaxBuiltParams = 20'000'000;

std::vector<fs::path> FilesIn(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == extension) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The plan's layer placement against the engine's, and the engine's analytic counts against the
// plan's accounting. `what` names the run in every failure.
void ExpectCountsMatch(const std::string& what, const v1::ModelSpec& model,
                       const v1::Accounting& plan, const ModelConfig& engine) {
  ASSERT_EQ(engine.n_layers, int64_t{model.num_layers()}) << what;
  uint32_t engine_moe_layers = 0;
  for (uint32_t l = 0; l < model.num_layers(); ++l) {
    EXPECT_EQ(engine.IsMoeLayer(l), core::IsMoeLayer(model, l))
        << what << ": layer " << l << " is MoE in one and dense in the other";
    engine_moe_layers += engine.IsMoeLayer(l) ? 1 : 0;
  }
  EXPECT_EQ(engine_moe_layers, plan.moe_layers()) << what << ": L_e";
  EXPECT_EQ(model.num_layers() - engine_moe_layers, plan.dense_layers()) << what << ": L_d";

  const AnalyticCounts counts = ComputeAnalyticCounts(engine);
  EXPECT_EQ(counts.params, double(plan.params())) << what << ": N (engine vs plan)";
  EXPECT_EQ(counts.active_params, double(plan.active_params())) << what << ": N_a";
  EXPECT_EQ(counts.flops_per_token, plan.flops_per_token()) << what << ": M";
  EXPECT_EQ(counts.vocab_params, double(plan.vocab_params())) << what << ": vocabulary params";
}

// The parameters the engine really allocates for `engine`, without norms and vocabulary.
void ExpectBuiltModelMatches(const std::string& what, const v1::Accounting& plan,
                             const ModelConfig& engine) {
  if (plan.params() > kMaxBuiltParams) return;
  auto device = MakeCpuDevice({.threads = 1});
  auto model = Transformer<float>::Create(engine, *device, /*max_batch=*/1);
  ASSERT_TRUE(model.ok()) << what << ": " << model.status();
  uint64_t counted = 0, routers = 0;
  for (const ParamTensor& t : (*model)->Tensors()) {
    if (t.name == "wte" || t.name == "head" || absl::EndsWith(t.name, "norm")) continue;
    counted += static_cast<uint64_t>(t.size);
    if (absl::EndsWith(t.name, ".router")) ++routers;
  }
  EXPECT_EQ(counted, plan.params()) << what << ": parameters the engine allocates vs planned N";
  EXPECT_EQ(routers, plan.moe_layers()) << what << ": one router per planned MoE layer";
  ASSERT_EQ((*model)->NumMoeLayers(), int64_t{plan.moe_layers()}) << what;
}

TEST(AccountingParityTest, EveryPlannedExampleRunCountsTheSameInTheEngine) {
  const auto files = FilesIn("examples", ".yaml");
  ASSERT_FALSE(files.empty()) << "expected examples/*.yaml (tests run from the source root)";
  int runs_checked = 0, moe_runs = 0;
  for (const fs::path& file : files) {
    auto spec = core::LoadSweepSpecFile(file);
    ASSERT_TRUE(spec.ok()) << file << ": " << spec.status();
    auto runs = core::PlanSweep(*spec);
    ASSERT_TRUE(runs.ok()) << file << ": " << runs.status();
    ASSERT_FALSE(runs->empty()) << file << " plans no run";
    for (const v1::RunSpec& run : *runs) {
      const std::string what = file.filename().string() + " / " + run.name();
      auto engine = RunConfigFromRunSpec(run);
      ASSERT_TRUE(engine.ok()) << what << ": the engine refuses a planned run: " << engine.status();
      ExpectCountsMatch(what, run.model(), run.accounting(), engine->config.model);
      ExpectBuiltModelMatches(what, run.accounting(), engine->config.model);
      ++runs_checked;
      moe_runs += run.accounting().moe_layers() > 0 ? 1 : 0;
    }
  }
  EXPECT_GT(moe_runs, 0) << "the examples should plan MoE runs";
  EXPECT_GT(runs_checked, moe_runs) << "the examples should plan dense runs too";
}

TEST(AccountingParityTest, EveryEngineExampleCountsAsThePlannerWould) {
  const auto files = FilesIn("kernels/examples", ".json");
  ASSERT_FALSE(files.empty()) << "expected kernels/examples/*.json";
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    v1::RunSpec spec;
    ASSERT_TRUE(core::ParseMessage(text.str(), core::SpecFormat::kJson, spec).ok()) << file;
    auto plan = core::ComputeAccounting(spec.model(), spec.training().sequence_length());
    ASSERT_TRUE(plan.ok()) << file << ": " << plan.status();
    auto engine = RunConfigFromRunSpecJson(text.str());
    ASSERT_TRUE(engine.ok()) << file << ": " << engine.status();
    ExpectCountsMatch(file.filename().string(), spec.model(), *plan, engine->config.model);
    ExpectBuiltModelMatches(file.filename().string(), *plan, engine->config.model);
  }
}

TEST(AccountingParityTest, InterleavedWithoutAPeriodHasNoMoeLayerInEither) {
  // proto3 leaves interleave_every at 0 when a spec omits it; both sides must read that the same
  // way (no MoE layer, refused) rather than one of them dividing by zero.
  ModelConfig engine;
  engine.layout = MoeLayout::kInterleaved;
  engine.interleave_every = 0;
  engine.n_layers = 4;
  v1::ModelSpec model;
  model.set_architecture(v1::ARCHITECTURE_MOE);
  model.set_num_layers(4);
  model.mutable_moe()->set_layout(v1::MOE_LAYOUT_INTERLEAVED);
  for (uint32_t l = 0; l < 4; ++l) {
    EXPECT_FALSE(engine.IsMoeLayer(l)) << "layer " << l;
    EXPECT_FALSE(core::IsMoeLayer(model, l)) << "layer " << l;
  }
}

}  // namespace
}  // namespace parity::kernels
