// The dashboard's JSON documents: what the front end (web/src) reads, field by field.
#include "web/dashboard_documents.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace parity::web {
namespace {

using nlohmann::json;

std::vector<v1::MetricPoint> Points(const std::string& run_id, uint64_t last_step, uint64_t every) {
  std::vector<v1::MetricPoint> points;
  for (uint64_t step = 0; step <= last_step; step += every) {
    v1::MetricPoint p;
    p.set_run_id(run_id);
    p.set_step(step);
    p.set_tokens(step * 64);
    p.set_flops(step * 1e6);
    p.set_train_bpc(3.0 - step * 1e-4);
    if (step % (every * 5) == 0) p.set_val_bpc(3.1 - step * 1e-4);
    points.push_back(std::move(p));
  }
  return points;
}

TEST(SampleEvenly, KeepsFirstAndLastAndAtMostAboutMaxPoints) {
  const std::vector<v1::MetricPoint> points = Points("r", 99'990, 10);  // 10k points
  const std::vector<v1::MetricPoint> sampled = SampleEvenly(points, 200);
  ASSERT_FALSE(sampled.empty());
  EXPECT_EQ(sampled.front().step(), 0u);
  EXPECT_EQ(sampled.back().step(), 99'990u);
  EXPECT_LE(sampled.size(), 201u);
  EXPECT_GE(sampled.size(), 150u);
  for (size_t i = 1; i < sampled.size(); ++i) {
    EXPECT_LT(sampled[i - 1].step(), sampled[i].step());
  }
}

TEST(SampleEvenly, ShortHistoriesAreReturnedWhole) {
  const std::vector<v1::MetricPoint> points = Points("r", 90, 10);
  EXPECT_EQ(SampleEvenly(points, 200).size(), points.size());
  EXPECT_TRUE(SampleEvenly({}, 10).empty());
}

TEST(CurvesJson, ValidationPointsOnlyGroupedByRun) {
  std::vector<v1::MetricPoint> points = Points("a", 100, 10);
  const std::vector<v1::MetricPoint> b = Points("b", 50, 10);
  points.insert(points.end(), b.begin(), b.end());
  const json doc = json::parse(CurvesJson(points));
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["run_id"], "a");
  EXPECT_EQ(doc["runs"][0]["step"], json({0, 50, 100}));
  EXPECT_EQ(doc["runs"][0]["tokens"], json({0, 3200, 6400}));
  EXPECT_EQ(doc["runs"][1]["val_bpc"].size(), 2u);
  EXPECT_TRUE(doc["next_page_token"].is_null()) << "no paging given: the last page";
  const json paged = json::parse(CurvesJson(points, {.next_page_token = "t", .runs_per_page = 5}));
  EXPECT_EQ(paged["next_page_token"], "t");
  EXPECT_EQ(paged["runs_per_page"], 5);
}

TEST(HistoryJson, ColumnsWithNullsAndExpertLoad) {
  std::vector<v1::MetricPoint> points = Points("r", 20, 10);  // steps 0, 10, 20; val at 0
  for (v1::MetricPoint& p : points) {
    v1::ExpertLoadStats* load = p.add_expert_load();
    load->set_layer(1);
    load->set_min_share(p.step() == 20 ? 0.0 : 0.1);
    load->set_max_share(0.4);
    load->set_dead_experts(p.step() == 20 ? 1 : 0);
  }
  v1::MetricPoint latest = points.back();
  for (double share : {0.4, 0.3, 0.3, 0.0}) latest.mutable_expert_load(0)->add_shares(share);
  const json doc = json::parse(HistoryJson("r", points, &latest));
  EXPECT_EQ(doc["step"], json({0, 10, 20}));
  EXPECT_EQ(doc["val_bpc"][0], 3.1);
  EXPECT_TRUE(doc["val_bpc"][1].is_null());
  ASSERT_EQ(doc["expert_load"].size(), 1u);
  EXPECT_EQ(doc["expert_load"][0]["layer"], 1);
  EXPECT_DOUBLE_EQ(doc["expert_load"][0]["max_min_ratio"][0].get<double>(), 4.0);
  EXPECT_TRUE(doc["expert_load"][0]["max_min_ratio"][2].is_null());  // a dead expert
  EXPECT_EQ(doc["expert_load"][0]["dead_experts"][2], 1);
  EXPECT_EQ(doc["latest_expert_load"]["step"], 20);
  EXPECT_EQ(doc["latest_expert_load"]["layers"][0]["shares"].size(), 4u);
  EXPECT_TRUE(json::parse(HistoryJson("r", points, nullptr))["latest_expert_load"].is_null());
}

// Per evaluation set, one value per point, aligned with "step": null where a point lacks the set
// (no evaluation there, or a set that starts reporting later).
TEST(HistoryJson, EvalBpcPerSetAlignedWithSteps) {
  std::vector<v1::MetricPoint> points = Points("r", 30, 10);  // steps 0, 10, 20, 30
  (*points[1].mutable_eval_bpc())["validation"] = 2.0;
  (*points[3].mutable_eval_bpc())["validation"] = 1.8;
  (*points[3].mutable_eval_bpc())["code"] = 2.6;
  const json doc = json::parse(HistoryJson("r", points, nullptr));
  ASSERT_EQ(doc["eval_bpc"].size(), 2u) << doc["eval_bpc"].dump();
  EXPECT_EQ(doc["eval_bpc"]["validation"], json({nullptr, 2.0, nullptr, 1.8}));
  EXPECT_EQ(doc["eval_bpc"]["code"], json({nullptr, nullptr, nullptr, 2.6}));
  EXPECT_TRUE(json::parse(HistoryJson("r", {}, nullptr))["eval_bpc"].empty());
  for (v1::MetricPoint& p : points) p.set_val_bpc(3.0);
  const json curves = json::parse(CurvesJson(points));
  ASSERT_EQ(curves["runs"].size(), 1u);
  EXPECT_EQ(curves["runs"][0]["eval_bpc"]["code"], json({nullptr, nullptr, nullptr, 2.6}));
}

TEST(MetricPageJson, NextCursorOnlyWhenThePageWasFull) {
  const std::vector<v1::MetricPoint> points = Points("r", 30, 10);
  const json full = json::parse(MetricPageJson(points, true));
  EXPECT_EQ(full["points"].size(), 4u);
  EXPECT_EQ(full["points"][3]["step"], "30");  // uint64 as a string (proto3 JSON)
  EXPECT_EQ(full["next_after_step"], "30");
  EXPECT_TRUE(json::parse(MetricPageJson(points, false))["next_after_step"].is_null());
}

v1::Run FailedRun(const std::string& id, v1::FailureClass failure_class,
                  const std::string& message) {
  v1::Run run;
  run.set_run_id(id);
  run.set_state(v1::RUN_STATE_FAILED);
  run.set_failure_class(failure_class);
  run.mutable_failure()->set_message(message);
  run.mutable_spec()->set_role(v1::RUN_ROLE_MOE);
  run.mutable_spec()->set_compute_budget("C2");
  run.mutable_spec()->mutable_accounting()->set_compute_flops(1e10);
  return run;
}

TEST(TablePageJson, RowsPairTheTrimmedRunWithItsResult) {
  v1::Run run = FailedRun("r1", v1::FAILURE_CLASS_DIVERGED, "NaN");
  run.mutable_spec()->set_name("moe-ra25");
  run.mutable_spec()->mutable_training()->set_steps(500);
  run.mutable_spec()->mutable_training()->set_learning_rate(3e-4);
  run.mutable_spec()->mutable_data()->set_corpus("kjv");
  run.mutable_summary()->set_final_val_bpc(2.0);
  run.set_latest_step(120);
  v1::ResultRow result;
  result.set_run_id("r1");
  result.set_final_val_bpc(2.0);
  const TableRow rows[] = {{.run = run, .result = result}};
  const json page = json::parse(TablePageJson(rows, "tok"));
  ASSERT_EQ(page["rows"].size(), 1u);
  const json& shown = page["rows"][0]["run"];
  EXPECT_EQ(shown["spec"]["name"], "moe-ra25");
  EXPECT_EQ(shown["spec"]["training"]["steps"], "500") << "the progress column's denominator";
  EXPECT_EQ(shown["spec"]["training"]["learning_rate"], 0) << "not drawn by the table";
  EXPECT_FALSE(shown["spec"].contains("data")) << shown.dump();
  EXPECT_FALSE(shown.contains("summary")) << "the result holds the finals";
  EXPECT_EQ(shown["failure"]["message"], "NaN");
  EXPECT_EQ(shown["latest_step"], "120");
  EXPECT_EQ(page["rows"][0]["result"]["final_val_bpc"], 2.0);
  EXPECT_EQ(page["next_page_token"], "tok");
  EXPECT_TRUE(json::parse(TablePageJson({}, ""))["next_page_token"].is_null());
}

TEST(SweepSummary, FoldsRolesBudgetsComputeAndDistinctFailures) {
  SweepSummary summary;
  for (int i = 0; i < 3; ++i) summary.Add(FailedRun("a", v1::FAILURE_CLASS_OUT_OF_MEMORY, "OOM"));
  summary.Add(FailedRun("b", v1::FAILURE_CLASS_DIVERGED, "NaN"));
  v1::Run dense;
  dense.set_state(v1::RUN_STATE_SUCCEEDED);
  dense.mutable_spec()->set_role(v1::RUN_ROLE_DENSE_BASELINE);
  dense.mutable_spec()->set_compute_budget("C1");
  dense.mutable_spec()->set_compute_multiple(2);
  dense.mutable_spec()->mutable_accounting()->set_compute_flops(2e10);
  summary.Add(dense);
  const json doc = json::parse(summary.Json());
  EXPECT_EQ(doc["runs"], 5);
  EXPECT_EQ(doc["moe_runs"], 4);
  EXPECT_EQ(doc["dense_runs"], 1);
  EXPECT_EQ(doc["compute_budgets"], json::array({"C1", "C2"}));
  EXPECT_EQ(doc["dense_multiples"], json::array({2.0}));
  EXPECT_DOUBLE_EQ(doc["total_compute_flops"].get<double>(), 6e10);
  EXPECT_EQ(doc["failed_runs"], 4);
  ASSERT_EQ(doc["failures"].size(), 2u);
  EXPECT_EQ(doc["failures"][0]["failure_class"], "FAILURE_CLASS_OUT_OF_MEMORY")
      << "most runs first";
  EXPECT_EQ(doc["failures"][0]["runs"], 3);
  EXPECT_EQ(doc["failures"][1]["message"], "NaN");
  EXPECT_EQ(doc["other_failed_runs"], 0);
}

TEST(SweepSummary, ListsAtMostMaxFailuresAndCountsTheRest) {
  SweepSummary summary;
  const size_t distinct = SweepSummary::kMaxFailures + 5;
  for (size_t i = 0; i < distinct; ++i) {
    summary.Add(FailedRun("r", v1::FAILURE_CLASS_INFRASTRUCTURE, "crash " + std::to_string(i)));
  }
  const json doc = json::parse(summary.Json());
  EXPECT_EQ(doc["failures"].size(), SweepSummary::kMaxFailures);
  EXPECT_EQ(doc["other_failed_runs"], 5);
}

TEST(MessageJson, ProtoFieldNamesAndZeros) {
  v1::ExpertLoadStats load;
  const json doc = json::parse(MessageJson(load));
  EXPECT_EQ(doc["dead_experts"], 0);
  EXPECT_EQ(doc["min_share"], 0);
}

// runs/ID is GetRunResponse as JSON: the run page's ranks table and rendezvous line read `gang`.
TEST(MessageJson, ARunDocumentCarriesItsGangRanksHostsAndRendezvous) {
  v1::GetRunResponse response;
  response.mutable_run()->set_run_id("r");
  EXPECT_FALSE(json::parse(MessageJson(response)).contains("gang")) << "a run of one rank";

  v1::RunGang& gang = *response.mutable_gang();
  gang.set_world_size(2);
  gang.set_lease_epoch(7);
  gang.mutable_placed_time()->set_seconds(1'800'000'000);
  gang.mutable_rendezvous_deadline()->set_seconds(1'800'000'300);
  for (uint32_t i = 0; i < 2; ++i) {
    v1::RunGangRank& rank = *gang.add_ranks();
    rank.set_rank(i);
    rank.set_worker_id(i == 0 ? "w0" : "w1");
    rank.set_hostname(i == 0 ? "node-a" : "node-b");
    rank.add_device_indices(0);
    rank.add_device_indices(1);
  }
  gang.mutable_ranks(0)->set_checked_in(true);
  gang.mutable_ranks(0)->mutable_check_in_time()->set_seconds(1'800'000'002);
  const json doc = json::parse(MessageJson(response));
  ASSERT_TRUE(doc.contains("gang"));
  const json& g = doc["gang"];
  EXPECT_EQ(g["world_size"], 2);
  EXPECT_EQ(g["lease_epoch"], "7") << "64-bit integers are strings in proto JSON";
  EXPECT_EQ(g["placed_time"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(g["rendezvous_deadline"], "2027-01-15T08:05:00Z");
  EXPECT_EQ(g["released"], false) << "zeros are printed: the page need not guess";
  EXPECT_FALSE(g.contains("released_time")) << "unset until released";
  ASSERT_EQ(g["ranks"].size(), 2u);
  EXPECT_EQ(g["ranks"][1]["rank"], 1);
  EXPECT_EQ(g["ranks"][1]["worker_id"], "w1");
  EXPECT_EQ(g["ranks"][1]["hostname"], "node-b");
  EXPECT_EQ(g["ranks"][1]["device_indices"], json::array({0, 1}));
  EXPECT_EQ(g["ranks"][1]["checked_in"], false);
  EXPECT_EQ(g["ranks"][0]["checked_in"], true);
  EXPECT_EQ(g["ranks"][0]["check_in_time"], "2027-01-15T08:00:02Z");
}

TEST(ErrorJson, CodeMessageAndViolations) {
  const ParameterViolation violations[] = {{"limit", "must be 1..10000"}};
  const json doc = json::parse(ErrorJson(400, "INVALID_ARGUMENT", "bad", violations));
  EXPECT_EQ(doc["error"]["http_status"], 400);
  EXPECT_EQ(doc["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ(doc["error"]["violations"][0]["field"], "limit");
}

// Found by tests/fuzz (dashboard_api_fuzzer): GET /api/v1/runs/%FF quoted the byte in its
// "no API route" message and dump() threw on it, so the reply was an uncaught exception.
TEST(ErrorJson, TextThatIsNotUtf8IsReplacedNotThrown) {
  const ParameterViolation violations[] = {{"run_id", "'\xff\xfe' is not a UUID"}};
  std::string text;
  ASSERT_NO_THROW(text = ErrorJson(404, "NOT_FOUND", "no API route /api/v1/runs/\xff", violations));
  ASSERT_TRUE(json::accept(text)) << text;
  const json doc = json::parse(text);
  EXPECT_EQ(doc["error"]["message"], "no API route /api/v1/runs/\xef\xbf\xbd");
  EXPECT_EQ(doc["error"]["violations"][0]["description"],
            "'\xef\xbf\xbd\xef\xbf\xbd' is not a UUID");
}

}  // namespace
}  // namespace parity::web
