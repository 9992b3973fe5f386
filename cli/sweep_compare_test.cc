// The join of `parity compare` on fixture runs: cells match by budget, data variant and grid
// point (not seed); a run planned once for several groups counts in each; unfinished runs do not
// enter the means; unmatched cells are listed on both sides.
#include "cli/sweep_compare.h"

#include <string>

#include "gtest/gtest.h"

namespace parity::cli {
namespace {

using Runs = std::vector<parity::v1::Run>;

parity::v1::Run MakeRun(const std::string& budget, const std::string& axis,
                        const std::string& label, int seed, double bpc,
                        parity::v1::RunState state = parity::v1::RUN_STATE_SUCCEEDED) {
  parity::v1::Run run;
  auto* spec = run.mutable_spec();
  spec->set_sweep_name("fixture");
  spec->set_compute_budget(budget);
  spec->set_data_variant("unique");
  spec->set_role(axis == "moe" ? parity::v1::RUN_ROLE_MOE : parity::v1::RUN_ROLE_DENSE_BASELINE);
  auto& point = *spec->mutable_grid_point();
  point[axis] = label;
  point["compute"] = budget;
  point["data"] = "unique";
  point["seed"] = std::to_string(seed);
  run.set_state(state);
  if (state == parity::v1::RUN_STATE_SUCCEEDED) run.mutable_summary()->set_final_val_bpc(bpc);
  return run;
}

const ComparedCell* Find(const SweepComparison& c, const std::string& cell) {
  for (const ComparedCell& m : c.matched) {
    if (m.cell == cell) return &m;
  }
  ADD_FAILURE() << "no matched cell '" << cell << "'";
  return nullptr;
}

TEST(SweepCompareTest, MatchesCellsOverSeedsAndReportsTheDifference) {
  const Runs a = {MakeRun("C1", "moe", "ra20", 0, 2.0), MakeRun("C1", "moe", "ra20", 1, 2.2),
                  MakeRun("C1", "baseline", "dense-1C", 0, 2.5)};
  const Runs b = {MakeRun("C1", "moe", "ra20", 7, 1.9),
                  MakeRun("C1", "baseline", "dense-1C", 7, 2.4)};
  const SweepComparison c = CompareSweeps(a, b);
  ASSERT_EQ(c.matched.size(), 2u) << "seeds differ between the sweeps; the cells still match";
  const ComparedCell* moe = Find(c, "C1 unique moe=ra20");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->finished_a, 2);
  EXPECT_DOUBLE_EQ(moe->bpc_a, 2.1) << "A's mean over its two seeds";
  EXPECT_DOUBLE_EQ(moe->bpc_b, 1.9);
  EXPECT_TRUE(c.only_a.empty());
  EXPECT_TRUE(c.only_b.empty());
  const std::string table = FormatComparison(c, "a", "b");
  EXPECT_NE(table.find("-0.2000"), std::string::npos) << "ΔBPC = B − A = 1.9 − 2.1:\n" << table;
}

TEST(SweepCompareTest, SharedRunsCountInEveryGroupTheyServe) {
  parity::v1::Run shared = MakeRun("C1", "baseline", "dense-2C", 0, 2.3);
  auto* also = shared.mutable_spec()->add_also_serves();
  also->set_compute_budget("C2");
  also->set_data_variant("unique");
  also->set_role(parity::v1::RUN_ROLE_DENSE_BASELINE);
  (*also->mutable_grid_point())["baseline"] = "dense-1C";
  (*also->mutable_grid_point())["seed"] = "0";
  const Runs a = {shared};
  const Runs b = {MakeRun("C2", "baseline", "dense-1C", 0, 2.2)};
  const SweepComparison c = CompareSweeps(a, b);
  const ComparedCell* cell = Find(c, "C2 unique baseline=dense-1C");
  ASSERT_NE(cell, nullptr) << "A's dense-2C of C1 also serves as dense-1C of C2";
  EXPECT_DOUBLE_EQ(cell->bpc_a, 2.3);
  ASSERT_EQ(c.only_a.size(), 1u);
  EXPECT_EQ(c.only_a[0], "C1 unique baseline=dense-2C");
}

TEST(SweepCompareTest, UnfinishedRunsStayOutOfTheMeansAndUnmatchedCellsAreListed) {
  const Runs a = {MakeRun("C1", "moe", "ra20", 0, 2.0),
                  MakeRun("C1", "moe", "ra20", 1, 0, parity::v1::RUN_STATE_FAILED),
                  MakeRun("C1", "moe", "ra30", 0, 2.1)};
  const Runs b = {MakeRun("C1", "moe", "ra20", 0, 0, parity::v1::RUN_STATE_RUNNING),
                  MakeRun("C1", "moe", "ra45", 0, 2.4)};
  const SweepComparison c = CompareSweeps(a, b);
  const ComparedCell* cell = Find(c, "C1 unique moe=ra20");
  ASSERT_NE(cell, nullptr);
  EXPECT_EQ(cell->finished_a, 1) << "the FAILED seed does not count";
  EXPECT_DOUBLE_EQ(cell->bpc_a, 2.0);
  EXPECT_EQ(cell->finished_b, 0);
  ASSERT_EQ(c.only_a.size(), 1u);
  EXPECT_EQ(c.only_a[0], "C1 unique moe=ra30");
  ASSERT_EQ(c.only_b.size(), 1u);
  EXPECT_EQ(c.only_b[0], "C1 unique moe=ra45");
  const std::string table = FormatComparison(c, "a", "b");
  EXPECT_NE(table.find("only in A: C1 unique moe=ra30"), std::string::npos) << table;
  EXPECT_NE(table.find("only in B: C1 unique moe=ra45"), std::string::npos) << table;
}

}  // namespace
}  // namespace parity::cli
