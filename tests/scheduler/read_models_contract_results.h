// The ReadModels contract, first half: results and event feeds (read_models_contract_test.h
// includes this file; read_models_contract_counts.h holds the rest and the registration).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace parity::server::testing {

// Every field of a row, as the results view computes it: planned columns from the plan; the
// success's columns (measured M, final BPC, wall time, BPC per set, dataset digest) once it
// succeeded; ΔBPC against the first SUCCEEDED 1C dense baseline of the same budget, data variant
// and seed — its own group or one it also serves — and per set only sets both report.
TYPED_TEST_P(ReadModelsContractTest, ResultsCarryEveryFieldAndTheDeltaAgainstTheDenseBaseline) {
  const auto grid = this->ResultsGrid("results-fields");
  const std::vector<v1::ResultRow> rows = this->Results(this->OfSweep(grid));
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].run_id(), grid.ids[i]) << "grid order";
    EXPECT_EQ(rows[i].sweep_id(), grid.sweep.sweep.sweep_id());
  }
  const v1::ResultRow& dense = rows[0];
  EXPECT_EQ(dense.name(), "dense-1C");
  EXPECT_EQ(dense.role(), v1::RUN_ROLE_DENSE_BASELINE);
  EXPECT_EQ(dense.layout(), "dense");
  EXPECT_EQ(dense.state(), v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(dense.d_model(), 128u);
  EXPECT_EQ(dense.num_layers(), 2u);
  EXPECT_EQ(dense.num_experts(), 0u);
  EXPECT_EQ(dense.params(), 1000u);
  EXPECT_EQ(dense.active_params(), 1000u);
  EXPECT_DOUBLE_EQ(dense.activation_rate(), 1);
  EXPECT_DOUBLE_EQ(dense.measured_flops_per_token(), 1e6);
  EXPECT_DOUBLE_EQ(dense.compute_flops(), 2e10);
  EXPECT_EQ(dense.unique_tokens(), 4096u);
  EXPECT_DOUBLE_EQ(dense.epochs(), 1);
  EXPECT_DOUBLE_EQ(dense.final_val_bpc(), 2.0);
  EXPECT_DOUBLE_EQ(dense.wall_seconds(), 10.5);
  EXPECT_EQ(dense.compute_budget(), "C1");
  EXPECT_DOUBLE_EQ(dense.compute_multiple(), 1);
  EXPECT_EQ(dense.data_variant(), "unique");
  EXPECT_DOUBLE_EQ(dense.delta_bpc_vs_dense(), 0) << "the baseline against itself";
  EXPECT_EQ(dense.seed(), 0u);
  EXPECT_EQ(dense.dataset_digest(), std::string(64, 'a'));
  EXPECT_THAT(dense.final_eval_bpc(),
              ::testing::UnorderedElementsAre(::testing::Pair("validation", 2.0),
                                              ::testing::Pair("code", 2.5)));
  EXPECT_THAT(dense.delta_eval_bpc_vs_dense(),
              ::testing::UnorderedElementsAre(::testing::Pair("validation", 0.0),
                                              ::testing::Pair("code", 0.0)));

  const v1::ResultRow& moe = rows[1];
  EXPECT_EQ(moe.role(), v1::RUN_ROLE_MOE);
  EXPECT_EQ(moe.layout(), "all-moe");
  EXPECT_EQ(moe.d_model(), 64u);
  EXPECT_EQ(moe.num_experts(), 8u);
  EXPECT_EQ(moe.top_k(), 2u);
  EXPECT_EQ(moe.expert_hidden(), 32u);
  EXPECT_EQ(moe.active_params(), 250u);
  EXPECT_DOUBLE_EQ(moe.activation_rate(), 0.25);
  EXPECT_DOUBLE_EQ(moe.predicted_efficiency_leverage(), 1.75);
  EXPECT_DOUBLE_EQ(moe.wall_seconds(), 11.5);
  EXPECT_DOUBLE_EQ(moe.delta_bpc_vs_dense(), 1.8 - 2.0);
  EXPECT_EQ(moe.final_eval_bpc().size(), 3u);
  EXPECT_THAT(moe.delta_eval_bpc_vs_dense(),
              ::testing::UnorderedElementsAre(::testing::Pair("validation", 1.8 - 2.0),
                                              ::testing::Pair("code", 2.6 - 2.5)))
      << "only the sets both report";
  EXPECT_EQ(moe.dataset_digest(), std::string(64, 'b'));

  EXPECT_EQ(rows[2].seed(), 1u);
  EXPECT_DOUBLE_EQ(rows[2].final_val_bpc(), 1.9);
  EXPECT_DOUBLE_EQ(rows[2].delta_bpc_vs_dense(), 0) << "no baseline of seed 1";
  EXPECT_TRUE(rows[2].delta_eval_bpc_vs_dense().empty());
  EXPECT_TRUE(rows[2].final_eval_bpc().empty()) << "no BPC per set reported";
  EXPECT_DOUBLE_EQ(rows[3].compute_flops(), 4e10);
  EXPECT_DOUBLE_EQ(rows[3].delta_bpc_vs_dense(), 1.7 - 2.0) << "2C against C1's 1C";
  EXPECT_DOUBLE_EQ(rows[4].delta_bpc_vs_dense(), 1.6 - 1.7) << "C2's 1C is C1's 2C (also_serves)";

  for (const int unfinished : {5, 6}) {
    const v1::ResultRow& row = rows[unfinished];
    EXPECT_EQ(row.state(), unfinished == 5 ? v1::RUN_STATE_FAILED : v1::RUN_STATE_PENDING);
    EXPECT_EQ(row.final_val_bpc(), 0) << row.name();
    EXPECT_EQ(row.measured_flops_per_token(), 0) << row.name();
    EXPECT_EQ(row.wall_seconds(), 0) << row.name();
    EXPECT_EQ(row.delta_bpc_vs_dense(), 0) << row.name();
    EXPECT_EQ(row.dataset_digest(), "") << row.name();
    EXPECT_TRUE(row.final_eval_bpc().empty()) << row.name();
  }
}

// order_by: a results column, optionally "desc"; NULLs (an unfinished run's BPC, a run without
// a baseline's ΔBPC) last either way; ties by run id. Anything else is refused.
TYPED_TEST_P(ReadModelsContractTest, ResultsOrderByAColumnWithNullsLastAndRefuseAnythingElse) {
  const auto grid = this->ResultsGrid("results-order");
  std::map<std::string, std::string> id_of;  // name → run id
  for (const v1::ResultRow& row : this->Results(this->OfSweep(grid)))
    id_of[row.name()] = row.run_id();
  // `names` in the order given, each run of a tie group by run id.
  auto by_id = [&](std::vector<std::vector<std::string>> groups) {
    std::vector<std::string> order;
    for (std::vector<std::string>& group : groups) {
      std::sort(group.begin(), group.end(),
                [&](const auto& a, const auto& b) { return id_of.at(a) < id_of.at(b); });
      order.insert(order.end(), group.begin(), group.end());
    }
    return order;
  };
  EXPECT_EQ(
      this->Names(this->OfSweep(grid, "final_val_bpc")),
      by_id({{"moe-c"}, {"dense-2C"}, {"moe-a"}, {"moe-b"}, {"dense-1C"}, {"moe-d", "moe-e"}}));
  EXPECT_EQ(
      this->Names(this->OfSweep(grid, "final_val_bpc DESC")),
      by_id({{"dense-1C"}, {"moe-b"}, {"moe-a"}, {"dense-2C"}, {"moe-c"}, {"moe-d", "moe-e"}}))
      << "NULLs last when descending too";
  EXPECT_EQ(this->Names(this->OfSweep(grid, "delta_bpc_vs_dense")),
            by_id({{"dense-2C"}, {"moe-a"}, {"moe-c"}, {"dense-1C"}, {"moe-b", "moe-d", "moe-e"}}));
  EXPECT_EQ(this->Names(this->OfSweep(grid, "name desc")),
            (std::vector<std::string>{"moe-e", "moe-d", "moe-c", "moe-b", "moe-a", "dense-2C",
                                      "dense-1C"}));
  EXPECT_EQ(this->Names(this->OfSweep(grid, "role")),
            by_id({{"dense-1C", "dense-2C"}, {"moe-a", "moe-b", "moe-c", "moe-d", "moe-e"}}))
      << "roles order by their text: DENSE_BASELINE before MOE";
  EXPECT_EQ(this->Names(this->OfSweep(grid, "state")),
            by_id({{"moe-d"}, {"moe-e"}, {"dense-1C", "moe-a", "moe-b", "dense-2C", "moe-c"}}))
      << "states order by their text: FAILED, PENDING, SUCCEEDED";
  EXPECT_EQ(this->Names(this->OfSweep(grid, "seed desc")),
            by_id({{"moe-b"}, {"dense-1C", "moe-a", "dense-2C", "moe-c", "moe-d", "moe-e"}}));
  EXPECT_EQ(this->Names(this->OfSweep(grid, "activation_rate desc")),
            by_id({{"dense-1C", "dense-2C"}, {"moe-d"}, {"moe-b", "moe-e"}, {"moe-a", "moe-c"}}));
  EXPECT_EQ(
      this->Names(this->OfSweep(grid, "measured_flops_per_token desc")),
      by_id({{"moe-c"}, {"dense-2C"}, {"moe-b"}, {"moe-a"}, {"dense-1C"}, {"moe-d", "moe-e"}}));
  EXPECT_EQ(this->Names(this->OfSweep(grid, "compute_flops")),
            by_id({{"dense-1C", "moe-a", "moe-b", "moe-c", "moe-d", "moe-e"}, {"dense-2C"}}));

  for (std::string_view column : kResultsOrderColumns) {
    for (const std::string& order : {std::string(column), std::string(column) + " desc"}) {
      std::vector<std::string> names = this->Names(this->OfSweep(grid, order));
      std::sort(names.begin(), names.end());
      EXPECT_EQ(names.size(), 7u) << order << " lists every row once";
      EXPECT_TRUE(std::adjacent_find(names.begin(), names.end()) == names.end()) << order;
    }
  }
  for (const char* bad :
       {"bogus", "name asc", "name desc extra", "name; DROP TABLE runs", "run_id", "ordinal"}) {
    EXPECT_EQ(this->reads().QueryResults(this->OfSweep(grid, bad)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TYPED_TEST_P(ReadModelsContractTest, ResultsFilterBySweepStateLayoutAndActivationRate) {
  const auto grid = this->ResultsGrid("results-filters");
  const CreatedSweep other = this->Sweep("results-other", 2);
  auto names = [&](std::function<void(ResultsQuery&)> filter) {
    ResultsQuery query = this->OfSweep(grid);
    filter(query);
    return this->Names(query);
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names([](ResultsQuery& q) {
              q.states = {v1::RUN_STATE_FAILED, v1::RUN_STATE_PENDING};
            }),
            (Names{"moe-d", "moe-e"}));
  EXPECT_EQ(names([](ResultsQuery& q) { q.states = {v1::RUN_STATE_SUCCEEDED}; }).size(), 5u);
  EXPECT_EQ(names([](ResultsQuery& q) { q.layout = "dense"; }), (Names{"dense-1C", "dense-2C"}));
  EXPECT_EQ(names([](ResultsQuery& q) { q.layout = "interleaved"; }), Names{});
  EXPECT_EQ(names([](ResultsQuery& q) { q.min_activation_rate = 0.5; }),
            (Names{"dense-1C", "moe-b", "dense-2C", "moe-d", "moe-e"}))
      << "the bounds are inclusive";
  EXPECT_EQ(names([](ResultsQuery& q) { q.max_activation_rate = 0.5; }),
            (Names{"moe-a", "moe-b", "moe-c", "moe-e"}));
  EXPECT_EQ(names([](ResultsQuery& q) {
              q.min_activation_rate = 0.3;
              q.max_activation_rate = 0.6;
              q.states = {v1::RUN_STATE_SUCCEEDED};
            }),
            (Names{"moe-b"}));

  // Every sweep: grid order is by sweep id, then each sweep's grid order.
  Names expected = {"results-other-0", "results-other-1"};
  const Names grid_names = {"dense-1C", "moe-a", "moe-b", "dense-2C", "moe-c", "moe-d", "moe-e"};
  expected.insert(
      other.sweep.sweep_id() < grid.sweep.sweep.sweep_id() ? expected.end() : expected.begin(),
      grid_names.begin(), grid_names.end());
  EXPECT_EQ(this->Names(ResultsQuery()), expected);
  ResultsQuery unknown;
  unknown.sweep_id = "7a1c3f6e-0000-4000-8000-0000000000dd";
  EXPECT_EQ(this->Names(unknown), Names{}) << "an unknown sweep has no rows";
}

// Page tokens, in grid order and in a custom order alike; a malformed token is refused (more in
// read_models_contract_paging.h).
TYPED_TEST_P(ReadModelsContractTest, ResultsPageInEitherOrderAndRefuseBadTokens) {
  const auto grid = this->ResultsGrid("results-pages");
  for (const std::string order : {"", "final_val_bpc desc"}) {
    ResultsQuery query = this->OfSweep(grid, order);
    const std::vector<std::string> whole = this->Names(query);
    query.page.page_size = 3;
    absl::StatusOr<Page<v1::ResultRow>> first = this->reads().QueryResults(query);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->items.size(), 3u);
    EXPECT_FALSE(first->next_page_token.empty());
    EXPECT_EQ(this->Names(query), whole)
        << "pages of 3 add up to the whole, order '" << order << "'";
    query.page.page_size = 7;
    absl::StatusOr<Page<v1::ResultRow>> exact = this->reads().QueryResults(query);
    ASSERT_TRUE(exact.ok()) << exact.status();
    EXPECT_TRUE(exact->next_page_token.empty()) << "no next page when the rows fit exactly";
  }
  ResultsQuery bad = this->OfSweep(grid);
  for (const char* token : {"%%not-a-token", "LTE", "YWJj"}) {  // junk, "-1", "abc"
    bad.page.page_token = token;
    EXPECT_EQ(this->reads().QueryResults(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << token;
  }
}

// A sweep's events by commit watermark: 0 gives the current watermark only; a watermark gives
// every event committed since, in order, once; another sweep's events never.
TYPED_TEST_P(ReadModelsContractTest, SweepEventsComeOnceSinceAWatermarkInCommitOrder) {
  const CreatedSweep sweep = this->Sweep("events", 3);
  const CreatedSweep other = this->Sweep("events-other", 1, /*priority=*/-1);
  const std::string sweep_id = sweep.sweep.sweep_id();
  absl::StatusOr<SweepEventPage> start = this->reads().ListSweepEvents(sweep_id, 0);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(start->events.empty()) << "watermark 0 returns the watermark only";
  EXPECT_GT(start->next_horizon, 0u);

  const std::string worker = this->Worker();
  const LeasedRun leased = this->LeaseOne(worker);
  ASSERT_EQ(leased.run.run_id(), sweep.run_ids[0]);
  HeartbeatUpdate beat{worker, leased.run.run_id(), leased.lease.lease_epoch(),
                       1,      std::nullopt,        absl::Seconds(60)};
  ASSERT_TRUE(this->queue().Heartbeat(beat).ok());
  ASSERT_TRUE(this->catalog().CancelSweep(sweep_id, "enough").ok());
  ASSERT_TRUE(this->queue().Heartbeat(beat).ok());  // the live run ends CANCELLED here

  absl::StatusOr<SweepEventPage> page =
      this->reads().ListSweepEvents(sweep_id, start->next_horizon);
  ASSERT_TRUE(page.ok()) << page.status();
  using Row = std::tuple<std::string, v1::RunState, v1::RunState, uint32_t, std::string>;
  std::vector<Row> seen;
  std::set<std::string> cancelled;
  for (const RunEvent& event : page->events) {
    EXPECT_GE(event.time, this->harness_.Now() - absl::Minutes(1)) << event.reason;
    if (event.reason == "enough") {
      cancelled.insert(event.run_id);
      EXPECT_EQ(event.from_state, v1::RUN_STATE_PENDING);
      EXPECT_EQ(event.to_state, v1::RUN_STATE_CANCELLED);
      continue;
    }
    seen.emplace_back(event.run_id, event.from_state, event.to_state, event.attempt, event.reason);
  }
  const std::string run = sweep.run_ids[0];
  EXPECT_THAT(seen, ::testing::ElementsAre(
                        Row{run, v1::RUN_STATE_PENDING, v1::RUN_STATE_LEASED, 1, "leased"},
                        Row{run, v1::RUN_STATE_LEASED, v1::RUN_STATE_RUNNING, 1, "started"},
                        Row{run, v1::RUN_STATE_RUNNING, v1::RUN_STATE_CANCELLED, 1,
                            "cancelled at heartbeat"}));
  EXPECT_EQ(cancelled, (std::set<std::string>{sweep.run_ids[1], sweep.run_ids[2]}))
      << "the pending runs' cancellations carry the reason given";
  for (size_t i = 1; i < page->events.size(); ++i) {
    EXPECT_LT(page->events[i - 1].event_id, page->events[i].event_id) << "commit order";
  }
  EXPECT_GE(page->next_horizon, start->next_horizon);
  absl::StatusOr<SweepEventPage> again =
      this->reads().ListSweepEvents(sweep_id, page->next_horizon);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->events.empty()) << "each event comes once";
  absl::StatusOr<SweepEventPage> theirs =
      this->reads().ListSweepEvents(other.sweep.sweep_id(), start->next_horizon);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_TRUE(theirs->events.empty()) << "the other sweep had no event since";
}

// A run's history: every transition with its attempt and the reason the store writes.
TYPED_TEST_P(ReadModelsContractTest, RunEventsListEveryTransitionAfterAnId) {
  const CreatedSweep sweep = this->Sweep("run-events", 1);  // max_attempts 2
  const std::string run = sweep.run_ids[0];
  const std::string worker = this->Worker();
  this->LeaseOne(worker, absl::Milliseconds(100));
  this->harness_.LetTimePass(absl::Milliseconds(400));
  ASSERT_TRUE(this->queue().ReapExpiredLeases(100).ok());
  const LeasedRun second = this->LeaseOne(worker);
  Completion failure;
  failure.run_id = run;
  failure.lease_epoch = second.lease.lease_epoch();
  failure.failure_class = v1::FAILURE_CLASS_USER_ERROR;
  failure.failure_status.set_message("bad config");
  failure.retry = {v1::RUN_STATE_FAILED, 2, absl::ZeroDuration()};
  failure.decided_at_attempt = 2;
  ASSERT_TRUE(this->queue().CompleteRun(failure).ok());

  absl::StatusOr<std::vector<RunEvent>> events = this->reads().ListRunEvents(run, 0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  using Row = std::tuple<v1::RunState, v1::RunState, uint32_t, std::string>;
  std::vector<Row> seen;
  for (const RunEvent& event : *events) {
    EXPECT_EQ(event.run_id, run);
    seen.emplace_back(event.from_state, event.to_state, event.attempt, event.reason);
  }
  EXPECT_THAT(seen,
              ::testing::ElementsAre(
                  Row{v1::RUN_STATE_UNSPECIFIED, v1::RUN_STATE_PENDING, 1, "submitted"},
                  Row{v1::RUN_STATE_PENDING, v1::RUN_STATE_LEASED, 1, "leased"},
                  Row{v1::RUN_STATE_LEASED, v1::RUN_STATE_PENDING, 2, "lease expired"},
                  Row{v1::RUN_STATE_PENDING, v1::RUN_STATE_LEASED, 2, "leased"},
                  Row{v1::RUN_STATE_LEASED, v1::RUN_STATE_FAILED, 2, "USER_ERROR: bad config"}));
  ASSERT_EQ(events->size(), 5u);
  absl::StatusOr<std::vector<RunEvent>> after =
      this->reads().ListRunEvents(run, (*events)[1].event_id, 2);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 2u) << "the limit";
  EXPECT_EQ((*after)[0].event_id, (*events)[2].event_id) << "strictly after the id";
  EXPECT_EQ((*after)[1].event_id, (*events)[3].event_id);
  absl::StatusOr<std::vector<RunEvent>> none =
      this->reads().ListRunEvents("7a1c3f6e-0000-4000-8000-0000000000ee", 0, 100);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  // Retention: once the sweep has ended long enough, each run keeps only its last event.
  RetentionPolicy policy;
  policy.events = absl::Milliseconds(100);
  this->harness_.LetTimePass(absl::Milliseconds(400));
  absl::StatusOr<RetentionResult> pruned = this->retention().ApplyRetention(policy);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->sweeps_pruned, 1);
  EXPECT_EQ(pruned->events_deleted, 4);
  events = this->reads().ListRunEvents(run, 0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].to_state, v1::RUN_STATE_FAILED) << "how it ended";
}

}  // namespace parity::server::testing
