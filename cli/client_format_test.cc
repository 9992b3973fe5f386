// `parity results` per evaluation set: one final BPC and one ΔBPC column per set beyond the
// primary, in the table and in CSV (named final_bpc.<set>, delta_bpc.<set>); JSON carries the
// maps as the proto has them.
#include "cli/client_format.h"

#include "gtest/gtest.h"

namespace parity::cli {
namespace {

std::vector<parity::v1::ResultRow> Rows() {
  parity::v1::ResultRow moe;
  moe.set_name("moe-r0.2");
  moe.set_state(parity::v1::RUN_STATE_SUCCEEDED);
  moe.set_final_val_bpc(1.9);
  moe.set_delta_bpc_vs_dense(-0.1);
  (*moe.mutable_final_eval_bpc())["validation"] = 1.9;
  (*moe.mutable_final_eval_bpc())["code"] = 2.45;
  (*moe.mutable_delta_eval_bpc_vs_dense())["code"] = 0.05;
  parity::v1::ResultRow old_engine;  // reports only final_val_bpc
  old_engine.set_name("dense");
  old_engine.set_state(parity::v1::RUN_STATE_SUCCEEDED);
  old_engine.set_final_val_bpc(2.0);
  return {moe, old_engine};
}

TEST(FormatResultsTest, CsvHasAFinalAndADeltaColumnPerExtraSet) {
  const std::string csv = FormatResults(Rows(), ResultsFormat::kCsv);
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find(",final_bpc.code,delta_bpc.code"), std::string::npos) << header;
  EXPECT_EQ(header.find("final_bpc.validation"), std::string::npos)
      << "the primary set is the val BPC column: " << header;
  EXPECT_NE(csv.find("2.4500,+0.0500"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",-,-"), std::string::npos) << "a run without the set shows '-': " << csv;
}

TEST(FormatResultsTest, TableNamesTheSetAndJsonKeepsTheMaps) {
  const std::string table = FormatResults(Rows(), ResultsFormat::kTable);
  EXPECT_NE(table.find("BPC code"), std::string::npos) << table;
  EXPECT_NE(table.find("ΔBPC code"), std::string::npos) << table;
  const std::string json = FormatResults(Rows(), ResultsFormat::kJson);
  EXPECT_NE(json.find("\"final_eval_bpc\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"delta_eval_bpc_vs_dense\""), std::string::npos) << json;
  const std::string plain = FormatResults({Rows()[1]}, ResultsFormat::kCsv);
  EXPECT_EQ(plain.find("final_bpc."), std::string::npos) << "one set: no extra columns";
}

}  // namespace
}  // namespace parity::cli
