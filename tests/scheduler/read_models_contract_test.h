// The ReadModels contract (server/store/read_models.h), on every store: the results view's rows
// (every field, ΔBPC against the 1C dense baseline, per evaluation set too), their order, filters
// and keyset pages (read_models_contract_paging.h); sweep events by commit watermark and run events
// by id; the counts behind the metrics endpoint; metric listings and samples. PostgreSQL computes
// these in SQL (server/sql/results.view.sql, postgres_metric_sampling.cc); the memory store must
// give the same answers. The harness is StoreContractTest's plus ReadModels& reads().
#pragma once

#include "server/store/read_models.h"
#include "tests/scheduler/store_contract_test.h"

namespace parity::server::testing {

template <typename Harness>
class ReadModelsContractTest : public StoreContractTest<Harness> {
 protected:
  ReadModels& reads() { return this->harness_.reads(); }

  // A run of a planned grid: `role` in compute budget `budget` at `multiple`, seed `seed`; MoE
  // runs are all-moe with 8 experts, top-2, at activation rate `rate`.
  static v1::RunSpec Planned(const std::string& name, v1::RunRole role, const std::string& budget,
                             double multiple, uint64_t seed, double rate) {
    v1::RunSpec run;
    run.set_name(name);
    run.set_role(role);
    run.set_compute_budget(budget);
    run.set_compute_multiple(multiple);
    run.set_data_variant("unique");
    run.mutable_training()->set_seed(seed);
    run.mutable_resources()->set_cpu_threads(1);
    v1::ModelSpec& model = *run.mutable_model();
    model.set_d_model(role == v1::RUN_ROLE_MOE ? 64 : 128);
    model.set_num_layers(2);
    if (role == v1::RUN_ROLE_MOE) {
      model.set_architecture(v1::ARCHITECTURE_MOE);
      model.mutable_moe()->set_layout(v1::MOE_LAYOUT_ALL_MOE);
      model.mutable_moe()->set_num_experts(8);
      model.mutable_moe()->set_top_k(2);
      model.mutable_moe()->set_expert_hidden(32);
      run.set_predicted_efficiency_leverage(1.5 + rate);
    }
    v1::Accounting& a = *run.mutable_accounting();
    a.set_params(1000 + seed);
    a.set_active_params(static_cast<uint64_t>(1000 * rate));
    a.set_activation_rate(rate);
    a.set_compute_flops(2e10 * multiple);
    a.set_unique_tokens(4096);
    a.set_epochs(1);
    return run;
  }

  // The results grid, in grid order:
  //   0 dense-1C     the C1 baseline, seed 0           SUCCEEDED 2.0 {validation 2.0, code 2.5}
  //   1 moe-a        MoE r_a 0.25 in C1, seed 0        SUCCEEDED 1.8 {validation 1.8, code 2.6,
  //                                                                    extra 3.0}
  //   2 moe-b        MoE r_a 0.5 in C1, seed 1         SUCCEEDED 1.9 (no seed-1 baseline)
  //   3 dense-2C     2C of C1, also the 1C of C2        SUCCEEDED 1.7
  //   4 moe-c        MoE r_a 0.25 in C2, seed 0        SUCCEEDED 1.6 (baseline: dense-2C)
  //   5 moe-d        MoE r_a 0.75 in C1, seed 0        FAILED
  //   6 moe-e        MoE r_a 0.5 in C1, seed 0         PENDING
  struct Grid {
    CreatedSweep sweep;
    std::vector<std::string> ids;  // grid order
  };
  Grid ResultsGrid(const std::string& name) {
    NewSweep sweep;
    sweep.spec.set_name(name);
    sweep.spec.set_max_attempts(1);
    sweep.runs = {Planned("dense-1C", v1::RUN_ROLE_DENSE_BASELINE, "C1", 1, 0, 1),
                  Planned("moe-a", v1::RUN_ROLE_MOE, "C1", 1, 0, 0.25),
                  Planned("moe-b", v1::RUN_ROLE_MOE, "C1", 1, 1, 0.5),
                  Planned("dense-2C", v1::RUN_ROLE_DENSE_BASELINE, "C1", 2, 0, 1),
                  Planned("moe-c", v1::RUN_ROLE_MOE, "C2", 1, 0, 0.25),
                  Planned("moe-d", v1::RUN_ROLE_MOE, "C1", 1, 0, 0.75),
                  Planned("moe-e", v1::RUN_ROLE_MOE, "C1", 1, 0, 0.5)};
    v1::GroupRef& serves = *sweep.runs[3].add_also_serves();
    serves.set_compute_budget("C2");
    serves.set_data_variant("unique");
    serves.set_role(v1::RUN_ROLE_DENSE_BASELINE);
    serves.set_compute_multiple(1);
    absl::StatusOr<CreatedSweep> created = this->catalog().CreateSweep(sweep);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return {};
    const std::string worker = this->Worker();
    const double val_bpc[] = {2.0, 1.8, 1.9, 1.7, 1.6};
    for (int i = 0; i < 6; ++i) {
      const LeasedRun leased = this->LeaseOne(worker);
      EXPECT_EQ(leased.run.run_id(), created->run_ids[i]) << "runs lease in grid order";
      Completion done;
      done.run_id = leased.run.run_id();
      done.lease_epoch = leased.lease.lease_epoch();
      if (i == 5) {
        done.failure_class = v1::FAILURE_CLASS_USER_ERROR;
        done.failure_status.set_message("diverged");
        done.retry = {v1::RUN_STATE_FAILED, 1, absl::ZeroDuration()};
        done.decided_at_attempt = 1;
      } else {
        done.success = core::PlannedSummary(leased.run.spec(), val_bpc[i], val_bpc[i] + 0.1);
        done.success->set_measured_flops_per_token(1e6 * (i + 1));
        done.success->mutable_wall_time()->set_seconds(10 + i);
        done.success->mutable_wall_time()->set_nanos(500'000'000);
        done.success->set_dataset_digest(std::string(64, static_cast<char>('a' + i)));
      }
      if (i == 0) {
        (*done.success->mutable_final_eval_bpc())["validation"] = 2.0;
        (*done.success->mutable_final_eval_bpc())["code"] = 2.5;
      } else if (i == 1) {
        (*done.success->mutable_final_eval_bpc())["validation"] = 1.8;
        (*done.success->mutable_final_eval_bpc())["code"] = 2.6;
        (*done.success->mutable_final_eval_bpc())["extra"] = 3.0;
      }
      absl::StatusOr<CompletionResult> completed = this->queue().CompleteRun(done);
      EXPECT_TRUE(completed.ok() && completed->invalid_summary.empty())
          << "run " << i << ": " << completed.status();
    }
    return {*created, created->run_ids};
  }

  std::vector<v1::ResultRow> Results(ResultsQuery query) {
    std::vector<v1::ResultRow> rows;
    for (int pages = 0; pages < 100; ++pages) {
      absl::StatusOr<Page<v1::ResultRow>> page = reads().QueryResults(query);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      rows.insert(rows.end(), page->items.begin(), page->items.end());
      if (page->next_page_token.empty()) break;
      query.page.page_token = page->next_page_token;
    }
    return rows;
  }

  std::vector<std::string> Names(const ResultsQuery& query) {
    std::vector<std::string> names;
    for (const v1::ResultRow& row : Results(query)) names.push_back(row.name());
    return names;
  }

  ResultsQuery OfSweep(const Grid& grid, const std::string& order_by = "") {
    ResultsQuery query;
    query.sweep_id = grid.sweep.sweep.sweep_id();
    query.order_by = order_by;
    return query;
  }

  // Points 0..99: an evaluation every 10 steps, expert load with shares, a time to the µs.
  static std::vector<v1::MetricPoint> Curve(uint64_t last = 99) {
    std::vector<v1::MetricPoint> points;
    for (uint64_t step = 0; step <= last; ++step) {
      v1::MetricPoint point = StoreContractTest<Harness>::Point(step);
      point.set_attempt(1);
      point.set_tokens(step * 64);
      point.set_unique_tokens(step * 32);
      point.set_epoch(step / 50.0);
      point.set_learning_rate(3e-3);
      point.set_grad_norm(0.5);
      point.set_aux_loss(0.01);
      point.set_z_loss(0.001);
      point.set_tokens_per_second(1e5);
      point.set_flops_per_second(1e11);
      point.set_flops(step * 1e9);
      point.mutable_time()->set_seconds(1'700'000'000 + step);
      point.mutable_time()->set_nanos(123'456'000);
      if (step % 10 == 0) {
        point.set_val_bpc(3.0 - step / 100.0);
        (*point.mutable_eval_bpc())["validation"] = point.val_bpc();
      }
      v1::ExpertLoadStats& load = *point.add_expert_load();
      load.set_layer(0);
      load.set_min_share(0.2);
      load.set_max_share(0.3);
      for (double share : {0.2, 0.3, 0.25, 0.25}) load.add_shares(share);
      points.push_back(point);
    }
    return points;
  }
};

TYPED_TEST_SUITE_P(ReadModelsContractTest);

}  // namespace parity::server::testing

#include "tests/scheduler/read_models_contract_counts.h"   // IWYU pragma: keep
#include "tests/scheduler/read_models_contract_paging.h"   // IWYU pragma: keep
#include "tests/scheduler/read_models_contract_results.h"  // IWYU pragma: keep

namespace parity::server::testing {

REGISTER_TYPED_TEST_SUITE_P(
    ReadModelsContractTest, ResultsCarryEveryFieldAndTheDeltaAgainstTheDenseBaseline,
    ResultsOrderByAColumnWithNullsLastAndRefuseAnythingElse,
    ResultsFilterBySweepStateLayoutAndActivationRate, ResultsPageInEitherOrderAndRefuseBadTokens,
    ResultsPagesAddUpInEveryOrderAndPageSize, ResultsRefuseGarbledForgedAndForeignPageTokens,
    AWalkWhileRunsChangeStateReturnsEveryRowOnce, SweepEventsComeOnceSinceAWatermarkInCommitOrder,
    RunEventsListEveryTransitionAfterAnId, CountsShowTheNewestOpenSweepsTheQueueAndLiveWorkers,
    ARetryingRunIsNotReadyToLeaseUntilItsDelayPasses, MetricsAreListedFromAStepAsTheyWereSent,
    SamplesPickTheSqlsPointsByRunThenStep, RunStatesPageAsListRunsDoes);

}  // namespace parity::server::testing
