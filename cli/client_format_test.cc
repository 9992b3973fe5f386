// `parity results`' table: the export's columns under their export names (grid axes, final BPC
// and ΔBPC per evaluation set and per dense baseline multiple), null as "-", and a failure column
// with the class in the spec's spelling and the message.
#include "cli/client_format.h"

#include "cli/results_export.h"
#include "gtest/gtest.h"

namespace parity::cli {
namespace {

std::vector<parity::v1::ResultRow> Rows() {
  parity::v1::ResultRow dense;
  dense.set_run_id("dense-id");
  dense.set_name("dense");
  dense.set_role(parity::v1::RUN_ROLE_DENSE_BASELINE);
  dense.set_compute_multiple(1);
  dense.set_state(parity::v1::RUN_STATE_SUCCEEDED);
  dense.set_final_val_bpc(2.0);
  (*dense.mutable_final_eval_bpc())["code"] = 2.4;
  parity::v1::ResultRow moe = dense;
  moe.set_run_id("moe-id");
  moe.set_name("moe-r0.2");
  moe.set_role(parity::v1::RUN_ROLE_MOE);
  moe.set_final_val_bpc(1.9);
  (*moe.mutable_final_eval_bpc())["code"] = 2.45;
  parity::v1::ResultRow failed = moe;
  failed.set_run_id("failed-id");
  failed.set_name("moe-r0.1");
  failed.set_state(parity::v1::RUN_STATE_FAILED);
  failed.set_final_val_bpc(0);
  failed.clear_final_eval_bpc();
  return {dense, moe, failed};
}

std::vector<parity::v1::Run> Runs() {
  parity::v1::Run failed;
  failed.set_run_id("failed-id");
  failed.set_failure_class(parity::v1::FAILURE_CLASS_USER_ERROR);
  failed.mutable_failure()->set_message("dataset 'x' not found");
  (*failed.mutable_spec()->mutable_grid_point())["r_a"] = "0.1";
  return {failed};
}

TEST(FormatResultsTableTest, ColumnsUnderTheirExportNames) {
  const std::string table = FormatResultsTable(ExportTableOf(Rows(), Runs()));
  const std::string header = table.substr(0, table.find('\n'));
  for (const char* name : {"run_name", "state", "grid.r_a", "final_val_bpc", "final_bpc.code",
                           "delta_bpc_vs_dense_1c", "failure"}) {
    EXPECT_NE(header.find(name), std::string::npos) << name << " in " << header;
  }
  EXPECT_NE(table.find("-0.1000"), std::string::npos) << "ΔBPC of the MoE point: " << table;
  EXPECT_NE(table.find("user_error: dataset 'x' not found"), std::string::npos) << table;
  const std::string failed = table.substr(table.find("\nmoe-r0.1"));
  EXPECT_EQ(failed.find("0.0000"), std::string::npos)
      << "the failed run's BPC and ΔBPC are '-', not 0: " << failed;
}

}  // namespace
}  // namespace parity::cli
