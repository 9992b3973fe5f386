// The export schema: every value at full precision, null for missing (a failed run's BPC is not
// 0), enums in the spec's spelling, JSON numbers as numbers, ΔBPC against every dense baseline
// multiple, grid-point and hyperparameter columns, and the documented column list.
#include "export/export_schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "export/export_writers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace parity::exports {
namespace {

using nlohmann::json;
using parity::v1::ResultRow;
using parity::v1::Run;

ResultRow Row(const std::string& id, parity::v1::RunRole role, double multiple, double bpc) {
  ResultRow row;
  row.set_run_id(id);
  row.set_sweep_id("sweep-1");
  row.set_name(id);
  row.set_role(role);
  row.set_state(bpc > 0 ? parity::v1::RUN_STATE_SUCCEEDED : parity::v1::RUN_STATE_FAILED);
  row.set_compute_budget("C1");
  row.set_data_variant("strict");
  row.set_compute_multiple(multiple);
  row.set_final_val_bpc(bpc);
  row.set_activation_rate(0.19999999999999998);
  row.set_compute_flops(1.2345678901234567e20);
  row.set_params(uint64_t{1} << 60);
  return row;
}

struct Sweep {
  std::vector<ResultRow> rows;
  std::map<std::string, Run> runs;
};

// Dense 1C, dense 2C, an MoE point and a failed MoE point, seed 0 (a zero that must survive).
Sweep TestSweep() {
  Sweep s;
  s.rows = {Row("dense1", parity::v1::RUN_ROLE_DENSE_BASELINE, 1, 2.0),
            Row("dense2", parity::v1::RUN_ROLE_DENSE_BASELINE, 2, 1.875),
            Row("moe", parity::v1::RUN_ROLE_MOE, 1, 1.9),
            Row("failed", parity::v1::RUN_ROLE_MOE, 1, 0)};
  (*s.rows[0].mutable_final_eval_bpc())["code"] = 2.5;
  (*s.rows[2].mutable_final_eval_bpc())["code"] = 2.25;
  s.rows[2].set_predicted_efficiency_leverage(1.5);
  Run& moe = s.runs["moe"];
  (*moe.mutable_spec()->mutable_grid_point())["r_a"] = "0.2";
  (*moe.mutable_spec()->mutable_grid_point())["granularity"] = "4";
  moe.mutable_spec()->mutable_training()->set_learning_rate(3e-4);
  moe.mutable_spec()->mutable_training()->set_schedule(parity::v1::LR_SCHEDULE_WSD);
  moe.mutable_spec()->mutable_training()->set_weight_decay(0);  // set: 0 is a value, not null
  Run& failed = s.runs["failed"];
  failed.set_failure_class(parity::v1::FAILURE_CLASS_USER_ERROR);
  failed.mutable_failure()->set_message("data.corpus_path: cannot open 'kjv'");
  return s;
}

size_t Index(const ExportTable& t, const std::string& name) {
  for (size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].name == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(ExportSchemaTest, FamiliesExpandInPlaceAndInOrder) {
  const Sweep s = TestSweep();
  const ExportTable t = BuildExportTable(s.rows, s.runs);
  std::vector<std::string> names;
  for (const Column& c : t.columns) names.push_back(c.name);
  EXPECT_LT(Index(t, "seed"), Index(t, "grid.granularity"));
  EXPECT_EQ(Index(t, "grid.granularity") + 1, Index(t, "grid.r_a")) << "axes sorted";
  EXPECT_LT(Index(t, "grid.r_a"), Index(t, "d_model"));
  EXPECT_LT(Index(t, "final_val_bpc"), Index(t, "final_bpc.code"));
  EXPECT_EQ(Index(t, "delta_bpc_vs_dense_1c") + 1, Index(t, "delta_bpc_vs_dense_2c"));
  EXPECT_EQ(Index(t, "delta_bpc_vs_dense_2c") + 1, Index(t, "delta_bpc_vs_dense_1c.code"));
  EXPECT_EQ(names.back(), "dataset_digest");
  for (const auto& row : t.rows) EXPECT_EQ(row.size(), t.columns.size());
}

TEST(ExportSchemaTest, DeltaAgainstEveryBaselineMultipleAndNullsForMissing) {
  const Sweep s = TestSweep();
  const ExportTable t = BuildExportTable(s.rows, s.runs);
  const auto& moe = t.rows[2];
  EXPECT_DOUBLE_EQ(std::get<double>(moe[Index(t, "delta_bpc_vs_dense_1c")]), 1.9 - 2.0);
  EXPECT_DOUBLE_EQ(std::get<double>(moe[Index(t, "delta_bpc_vs_dense_2c")]), 1.9 - 1.875);
  EXPECT_DOUBLE_EQ(std::get<double>(moe[Index(t, "delta_bpc_vs_dense_1c.code")]), 2.25 - 2.5);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(moe[Index(t, "delta_bpc_vs_dense_2c.code")]))
      << "dense 2C did not report the set";
  const auto& failed = t.rows[3];
  for (const char* name :
       {"final_val_bpc", "delta_bpc_vs_dense_1c", "delta_bpc_vs_dense_2c",
        "measured_flops_per_token", "wall_seconds", "grid.r_a", "predicted_efficiency_leverage"}) {
    EXPECT_TRUE(std::holds_alternative<std::monostate>(failed[Index(t, name)]))
        << name << " of a failed run is null, not 0";
  }
  EXPECT_EQ(std::get<int64_t>(failed[Index(t, "seed")]), 0) << "seed 0 is a value";
  EXPECT_EQ(std::get<double>(moe[Index(t, "weight_decay")]), 0.0) << "a set optional 0 stays";
  EXPECT_TRUE(std::holds_alternative<std::monostate>(t.rows[0][Index(t, "weight_decay")]));
  EXPECT_EQ(std::get<double>(t.rows[0][Index(t, "delta_bpc_vs_dense_1c")]), 0.0)
      << "the baseline against itself";
}

TEST(ExportSchemaTest, EnumsInTheSpecsSpelling) {
  const Sweep s = TestSweep();
  const ExportTable t = BuildExportTable(s.rows, s.runs);
  EXPECT_EQ(std::get<std::string>(t.rows[0][Index(t, "role")]), "dense_baseline");
  EXPECT_EQ(std::get<std::string>(t.rows[2][Index(t, "role")]), "moe");
  EXPECT_EQ(std::get<std::string>(t.rows[2][Index(t, "state")]), "succeeded");
  EXPECT_EQ(std::get<std::string>(t.rows[3][Index(t, "state")]), "failed");
  EXPECT_EQ(std::get<std::string>(t.rows[2][Index(t, "lr_schedule")]), "wsd");
  EXPECT_EQ(std::get<std::string>(t.rows[3][Index(t, "failure_class")]), "user_error");
  EXPECT_EQ(std::get<std::string>(t.rows[3][Index(t, "failure_message")]),
            "data.corpus_path: cannot open 'kjv'");
}

TEST(ExportSchemaTest, AResultRowFromTheRunAloneAsTheResultsViewHasIt) {
  parity::v1::Run run;
  run.set_run_id("r1");
  run.set_sweep_id("s1");
  run.set_state(parity::v1::RUN_STATE_SUCCEEDED);
  parity::v1::RunSpec& spec = *run.mutable_spec();
  spec.set_name("moe-ra25-C1-s3");
  spec.set_role(parity::v1::RUN_ROLE_MOE);
  spec.mutable_model()->set_architecture(parity::v1::ARCHITECTURE_MOE);
  spec.mutable_model()->mutable_moe()->set_layout(parity::v1::MOE_LAYOUT_ALL_MOE);
  spec.mutable_model()->mutable_moe()->set_num_experts(16);
  spec.mutable_accounting()->set_params(425984);
  spec.mutable_accounting()->set_epochs(2.5);
  spec.mutable_training()->set_seed(3);
  run.mutable_summary()->set_final_val_bpc(1.95);
  run.mutable_summary()->mutable_wall_time()->set_seconds(12);
  run.mutable_summary()->mutable_wall_time()->set_nanos(500000000);
  (*run.mutable_summary()->mutable_final_eval_bpc())["code"] = 2.5;
  const ResultRow row = ResultRowOfRun(run);
  EXPECT_EQ(row.layout(), "all-moe");
  EXPECT_EQ(row.num_experts(), 16u);
  EXPECT_EQ(row.params(), 425984u);
  EXPECT_EQ(row.seed(), 3u);
  EXPECT_EQ(row.final_val_bpc(), 1.95);
  EXPECT_EQ(row.wall_seconds(), 12.5);
  EXPECT_EQ(row.final_eval_bpc().at("code"), 2.5);
  parity::v1::Run dense;
  dense.set_state(parity::v1::RUN_STATE_FAILED);
  dense.mutable_summary()->set_final_val_bpc(9);  // never read: only a success has a summary
  EXPECT_EQ(ResultRowOfRun(dense).layout(), "dense");
  EXPECT_EQ(ResultRowOfRun(dense).final_val_bpc(), 0);
}

TEST(ExportWritersTest, DoublesRoundTripAtFullPrecision) {
  for (double v : {0.1, 1.0 / 3, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, -2.5e-17,
                   0.19999999999999998, 1.2345678901234567e20}) {
    const std::string text = FormatDouble(v);
    double back = 0;
    std::from_chars(text.data(), text.data() + text.size(), back);
    EXPECT_EQ(back, v) << text;
  }
  EXPECT_EQ(FormatDouble(0.1), "0.1") << "shortest, not %.17g's 0.10000000000000001";
  // The same table is in clients/python/tests/test_export.py (the Python client's CSV writes
  // numbers as this does).
  const std::vector<std::pair<double, std::string>> spelled = {
      {2e10, "2e+10"},
      {1e15, "1e+15"},
      {123456789.0, "123456789"},
      {1.2345678901234567e20, "123456789012345667584"},
      {1e-5, "1e-05"},
      {100.0, "100"},
      {-0.0, "-0"},
      {1.5e16, "1.5e+16"},
      {1.0 / 3, "0.3333333333333333"}};
  for (const auto& [value, text] : spelled) EXPECT_EQ(FormatDouble(value), text);
}

TEST(ExportWritersTest, CsvHasEmptyCellsForNullAndFullPrecision) {
  const Sweep s = TestSweep();
  const ExportTable t = BuildExportTable(s.rows, s.runs);
  std::ostringstream csv;
  WriteCsv(t, csv);
  const std::string text = csv.str();
  EXPECT_EQ(text.rfind("sweep_id,run_id,run_name,role,layout,state,", 0), 0u) << text;
  EXPECT_NE(text.find(",0.19999999999999998,"), std::string::npos) << text;
  EXPECT_NE(text.find(",1152921504606846976,"), std::string::npos) << "2^60 whole: " << text;
  EXPECT_NE(text.find(",user_error,data.corpus_path: cannot open 'kjv',"), std::string::npos);
  EXPECT_EQ(text.find("RUN_STATE_"), std::string::npos) << text;
  const std::string failed_line = text.substr(text.find("\nsweep-1,failed,"));
  EXPECT_NE(failed_line.find(",failed,C1,"), std::string::npos) << failed_line;
}

TEST(ExportWritersTest, JsonHasNumbersAsNumbersAndNulls) {
  const Sweep s = TestSweep();
  const ExportTable t = BuildExportTable(s.rows, s.runs);
  std::ostringstream out;
  WriteJson(t, out);
  const json doc = json::parse(out.str());
  ASSERT_EQ(doc.size(), 4u);
  const json& failed = doc[3];
  EXPECT_TRUE(failed["seed"].is_number_integer()) << failed.dump();
  EXPECT_EQ(failed["seed"], 0);
  EXPECT_TRUE(failed["params"].is_number_unsigned() || failed["params"].is_number_integer());
  EXPECT_EQ(failed["params"].get<int64_t>(), int64_t{1} << 60);
  EXPECT_TRUE(failed["final_val_bpc"].is_null()) << failed.dump();
  EXPECT_EQ(failed["failure_class"], "user_error");
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_TRUE(doc[2]["final_val_bpc"].is_number_float());
  EXPECT_EQ(doc[2]["activation_rate"].get<double>(), 0.19999999999999998);
  EXPECT_EQ(doc[2]["grid.r_a"], "0.2");
  std::vector<std::string> keys;
  for (const auto& [key, value] : doc[0].items()) keys.push_back(key);
  EXPECT_EQ(keys.size(), t.columns.size());
}

TEST(ExportWritersTest, RowsComputedAsWrittenEqualTheWholeTable) {
  const Sweep s = TestSweep();
  const ExportBuilder builder(s.rows, s.runs);
  const ExportTable table = BuildExportTable(s.rows, s.runs);
  std::ostringstream streamed_csv, table_csv, streamed_json, table_json, streamed_pq, table_pq;
  WriteCsv(RowsOf(builder), streamed_csv);
  WriteCsv(table, table_csv);
  WriteJson(RowsOf(builder), streamed_json);
  WriteJson(table, table_json);
  ASSERT_TRUE(WriteParquet(RowsOf(builder), streamed_pq, 3).ok());
  ASSERT_TRUE(WriteParquet(table, table_pq, 3).ok());
  EXPECT_EQ(streamed_csv.str(), table_csv.str());
  EXPECT_EQ(streamed_json.str(), table_json.str());
  EXPECT_EQ(streamed_pq.str(), table_pq.str());
  EXPECT_EQ(builder.size(), 4u);
}

TEST(ExportWritersTest, EmptyTableIsAHeaderAndAnEmptyArray) {
  const ExportTable t = BuildExportTable({}, {});
  std::ostringstream csv, js;
  WriteCsv(t, csv);
  WriteJson(t, js);
  const std::string text = csv.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(json::parse(js.str()), json::array());
}

TEST(ExportColumnsTest, EveryDocumentedColumnHasATypeAndAMeaning) {
  std::set<std::string> names;
  for (const Column& c : DocumentedColumns()) {
    EXPECT_FALSE(c.meaning.empty()) << c.name;
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
  }
  const json columns = json::parse(ColumnsJson());
  EXPECT_EQ(columns.size(), DocumentedColumns().size());
  EXPECT_NE(ColumnsMarkdown().find("| `failure_class` | string |"), std::string::npos);
  EXPECT_EQ(MultipleSuffix(0.5), "0p5c");
}

}  // namespace
}  // namespace parity::exports
