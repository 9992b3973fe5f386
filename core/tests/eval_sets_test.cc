// Evaluation sets: the name rule every boundary applies (core/eval_sets.h) and the analysis on
// another set's final BPC (core/analysis_eval_sets.h): ΔBPC and the optimum per set.
#include "core/eval_sets.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/analysis_eval_sets.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

TEST(EvalSetNameTest, PlainNamesPassAndPathsOrOddCharactersDoNot) {
  for (const char* good : {"validation", "code", "wiki-103", "set_2.v1", "A"}) {
    EXPECT_TRUE(CheckEvalSetName(good).ok()) << good;
  }
  for (const char* bad : {"", ".hidden", "-x", "a/b", "..", "a..b", "a b", "x,y", "ü"}) {
    const absl::Status status = CheckEvalSetName(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_FALSE(CheckEvalSetName(std::string(65, 'a')).ok()) << "at most 64 bytes";
}

TEST(EvalSetNameTest, BpcMapsAreBoundedAndFinite) {
  google::protobuf::Map<std::string, double> bpc;
  bpc["validation"] = 1.9;
  bpc["code"] = 2.4;
  EXPECT_TRUE(CheckEvalBpc(bpc).ok());
  bpc["code"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(CheckEvalBpc(bpc).message().find("'code'"), std::string::npos)
      << CheckEvalBpc(bpc).message();
  bpc["code"] = -1;
  EXPECT_FALSE(CheckEvalBpc(bpc).ok()) << "a negative BPC";
  bpc.erase("code");
  for (int i = 0; i < 16; ++i) bpc[absl::StrCat("s", i)] = 1;
  EXPECT_EQ(bpc.size(), 17u);
  EXPECT_NE(CheckEvalBpc(bpc).message().find("17 evaluation sets"), std::string::npos);
}

v1::Run FinishedRun(const std::string& name, v1::RunRole role, double ra, double validation,
                    std::optional<double> code) {
  v1::Run run;
  run.set_run_id("id-" + name);
  v1::RunSpec& spec = *run.mutable_spec();
  spec.set_name(name);
  spec.set_role(role);
  spec.set_compute_budget("C1");
  spec.set_data_variant("unique");
  spec.set_compute_multiple(1);
  spec.mutable_accounting()->set_compute_flops(1e20);
  spec.mutable_accounting()->set_activation_rate(ra);
  spec.mutable_accounting()->set_params(1000000);
  spec.mutable_data()->add_eval_sets("validation");
  spec.mutable_data()->add_eval_sets("code");
  run.mutable_summary()->set_final_val_bpc(validation);
  (*run.mutable_summary()->mutable_final_eval_bpc())["validation"] = validation;
  if (code) (*run.mutable_summary()->mutable_final_eval_bpc())["code"] = *code;
  return run;
}

TEST(EvalSetAnalysisTest, FinalBpcOnSetFallsBackToThePrimaryOnlyForIt) {
  v1::RunSummary old_engine;
  old_engine.set_final_val_bpc(2.0);
  EXPECT_EQ(FinalBpcOnSet(old_engine, ""), 2.0);
  EXPECT_EQ(FinalBpcOnSet(old_engine, "validation"), 2.0) << "an engine of one set";
  EXPECT_FALSE(FinalBpcOnSet(old_engine, "code").has_value());
  (*old_engine.mutable_final_eval_bpc())["code"] = 2.5;
  EXPECT_EQ(FinalBpcOnSet(old_engine, "code"), 2.5);
  EXPECT_FALSE(FinalBpcOnSet(old_engine, "validation").has_value())
      << "an engine that reports sets is read as it reports them";
}

// ΔBPC against the dense baseline, and the best grid point, per set: on "validation" the MoE
// run at r_a 0.2 is best and beats dense; on "code" r_a 0.5 is best and dense wins.
TEST(EvalSetAnalysisTest, DeltaAndBestGridPointArePerSet) {
  const std::vector<v1::Run> runs = {
      FinishedRun("dense", v1::RUN_ROLE_DENSE_BASELINE, 1.0, 2.00, 2.40),
      FinishedRun("moe-r0.1", v1::RUN_ROLE_MOE, 0.1, 1.95, 2.70),
      FinishedRun("moe-r0.2", v1::RUN_ROLE_MOE, 0.2, 1.90, 2.60),
      FinishedRun("moe-r0.5", v1::RUN_ROLE_MOE, 0.5, 1.97, 2.50),
      FinishedRun("moe-r0.7", v1::RUN_ROLE_MOE, 0.7, 1.99, std::nullopt)};
  EXPECT_EQ(EvalSetsOf(runs), (std::vector<std::string>{"validation", "code"}));

  auto delta_of = [](const SweepAnalysis& analysis, const std::string& name) {
    for (const GridPointSummary& point : analysis.grid_points) {
      if (point.name == name) return point.delta_bpc.value_or(NAN);
    }
    return static_cast<double>(NAN);
  };
  absl::StatusOr<RunsOnSet> validation = FinishedRunsOnSet(runs, "");
  ASSERT_TRUE(validation.ok()) << validation.status();
  EXPECT_EQ(validation->runs.size(), 5u);
  const SweepAnalysis on_validation = AnalyzeFinishedRuns(validation->runs);
  EXPECT_NEAR(delta_of(on_validation, "moe-r0.2"), -0.10, 1e-9);

  absl::StatusOr<RunsOnSet> code = FinishedRunsOnSet(runs, "code");
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->runs.size(), 4u);
  EXPECT_EQ(code->without_the_set, 1u) << "the run not evaluated on code is left out";
  const SweepAnalysis on_code = AnalyzeFinishedRuns(code->runs);
  EXPECT_NEAR(delta_of(on_code, "moe-r0.2"), 0.20, 1e-9);
  EXPECT_NEAR(delta_of(on_code, "moe-r0.5"), 0.10, 1e-9);
  EXPECT_TRUE(std::isnan(delta_of(on_code, "moe-r0.7"))) << "not on the code grid";

  ASSERT_EQ(on_validation.optimal_activation.size(), 1u);
  ASSERT_EQ(on_code.optimal_activation.size(), 1u);
  ASSERT_TRUE(on_validation.optimal_activation[0].fit.ok())
      << on_validation.optimal_activation[0].fit.status();
  ASSERT_TRUE(on_code.optimal_activation[0].fit.ok()) << on_code.optimal_activation[0].fit.status();
  EXPECT_DOUBLE_EQ(on_validation.optimal_activation[0].fit->best_grid_activation_rate, 0.2);
  EXPECT_DOUBLE_EQ(on_code.optimal_activation[0].fit->best_grid_activation_rate, 0.5);

  const absl::StatusOr<RunsOnSet> unknown = FinishedRunsOnSet(runs, "wiki");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("validation, code"), std::string::npos)
      << unknown.status().message();
}

}  // namespace
}  // namespace parity::core
