// The ReadModels contract, results pages (read_models_contract_test.h includes this file): keyset
// page tokens in every order, refused when garbled or when they belong to another query, and a
// walk through the pages while runs change state returns each row at most once and every row
// that existed throughout exactly once.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"

namespace parity::server::testing {

// Every order (grid order, each column up and down) walked in pages of 1, 2 and 3 rows gives
// the rows of one big page, in its order.
TYPED_TEST_P(ReadModelsContractTest, ResultsPagesAddUpInEveryOrderAndPageSize) {
  const auto grid = this->ResultsGrid("results-keyset");
  std::vector<std::string> orders = {""};
  for (std::string_view column : kResultsOrderColumns) {
    orders.emplace_back(column);
    orders.push_back(std::string(column) + " desc");
  }
  for (const std::string& order : orders) {
    ResultsQuery query = this->OfSweep(grid, order);
    std::vector<std::string> whole;
    for (const v1::ResultRow& row : this->Results(query)) whole.push_back(row.run_id());
    ASSERT_EQ(whole.size(), 7u) << order;
    for (const uint32_t size : {1u, 2u, 3u}) {
      query.page.page_size = size;
      std::vector<std::string> paged;
      for (const v1::ResultRow& row : this->Results(query)) paged.push_back(row.run_id());
      EXPECT_EQ(paged, whole) << "order '" << order << "', pages of " << size;
    }
  }
}

// A token is opaque and bound to its query: a garbled one, a forged one and one from another
// order_by or filter are INVALID_ARGUMENT naming page_token.
TYPED_TEST_P(ReadModelsContractTest, ResultsRefuseGarbledForgedAndForeignPageTokens) {
  const auto grid = this->ResultsGrid("results-tokens");
  ResultsQuery query = this->OfSweep(grid, "final_val_bpc desc");
  query.page.page_size = 2;
  absl::StatusOr<Page<v1::ResultRow>> first = this->reads().QueryResults(query);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE(first->next_page_token.empty());
  const std::string token = first->next_page_token;
  auto refused = [&](ResultsQuery asked, const std::string& page_token, const std::string& why) {
    asked.page.page_token = page_token;
    const absl::Status status = this->reads().QueryResults(asked).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why << ": " << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "page_token")) << why << ": " << status;
  };
  std::string cursor;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token, &cursor));
  refused(query, "%%not-base64", "garbled");
  refused(query, token.substr(0, token.size() / 2), "cut short");
  refused(query, absl::WebSafeBase64Escape("7"), "an offset token of old");
  refused(query, absl::WebSafeBase64Escape(cursor + "|extra"), "a key that is not a number");
  std::string forged = cursor;
  forged[forged.find('|', 3) + 1] = 'x';  // the walk's start
  refused(query, absl::WebSafeBase64Escape(forged), "a forged start");
  refused(this->OfSweep(grid, "final_val_bpc"), token, "another direction");
  refused(this->OfSweep(grid, "wall_seconds desc"), token, "another column");
  refused(this->OfSweep(grid), token, "grid order");
  ResultsQuery filtered = query;
  filtered.states = {v1::RUN_STATE_SUCCEEDED};
  refused(filtered, token, "another filter");
  ResultsQuery other_sweep = query;
  other_sweep.sweep_id = "7a1c3f6e-0000-4000-8000-0000000000dd";
  refused(other_sweep, token, "another sweep");
  // A key forged into a token of the right query: each must still be of the column's kind.
  auto forged_key = [&](const std::string& order, const std::string& key) {
    ResultsQuery asked = this->OfSweep(grid, order);
    asked.page.page_size = 2;
    absl::StatusOr<Page<v1::ResultRow>> page = this->reads().QueryResults(asked);
    EXPECT_TRUE(page.ok()) << page.status();
    std::string text;
    EXPECT_TRUE(page.ok() && absl::WebSafeBase64Unescape(page->next_page_token, &text));
    refused(asked, absl::WebSafeBase64Escape(text.substr(0, text.rfind('|') + 1) + key),
            order + " with key '" + key + "'");
  };
  forged_key("name", "\xff\xfe");
  forged_key("name", std::string("a\0b", 3));
  forged_key("d_model", "99999999999");
  forged_key("seed", "1.5");
  forged_key("final_val_bpc", "not a number");
  query.page.page_token = token;
  EXPECT_TRUE(this->reads().QueryResults(query).ok()) << "the token itself still works";
}

// Runs lease, fail and succeed (their baseline last, so every ΔBPC appears mid-walk) between
// the pages of a walk in each order whose key changes, and in grid order with a state filter:
// no row comes twice, and every run comes once (each existed throughout; with the filter, each
// run that matched throughout).
TYPED_TEST_P(ReadModelsContractTest, AWalkWhileRunsChangeStateReturnsEveryRowOnce) {
  const std::vector<std::string> orders = {"",
                                           "state",
                                           "state desc",
                                           "final_val_bpc",
                                           "final_val_bpc desc",
                                           "wall_seconds",
                                           "delta_bpc_vs_dense",
                                           "delta_bpc_vs_dense desc",
                                           "name desc"};
  const std::string worker = this->Worker();
  for (size_t o = 0; o <= orders.size(); ++o) {
    const bool filtered = o == orders.size();  // grid order, PENDING and SUCCEEDED runs only
    const std::string order = filtered ? "" : orders[o];
    NewSweep sweep;
    sweep.spec.set_name("walk-" + std::to_string(o));
    sweep.spec.set_max_attempts(1);
    for (int i = 0; i < 9; ++i) {
      sweep.runs.push_back(
          this->Planned("moe-" + std::to_string(i), v1::RUN_ROLE_MOE, "C1", 1, 0, 0.25 + 0.05 * i));
    }
    sweep.runs.push_back(this->Planned("dense", v1::RUN_ROLE_DENSE_BASELINE, "C1", 1, 0, 1));
    absl::StatusOr<CreatedSweep> created = this->catalog().CreateSweep(sweep);
    ASSERT_TRUE(created.ok()) << created.status();
    // Leases go in grid order: moe-0 .. moe-8, then the baseline.
    auto finish = [&](bool succeed, double val_bpc) {
      const LeasedRun leased = this->LeaseOne(worker);
      Completion done;
      done.run_id = leased.run.run_id();
      done.lease_epoch = leased.lease.lease_epoch();
      if (succeed) {
        done.success = core::PlannedSummary(leased.run.spec(), val_bpc, val_bpc + 0.1);
        done.success->mutable_wall_time()->set_seconds(static_cast<int64_t>(val_bpc * 10));
      } else {
        done.failure_class = v1::FAILURE_CLASS_USER_ERROR;
        done.failure_status.set_message("diverged");
        done.retry = {v1::RUN_STATE_FAILED, 1, absl::ZeroDuration()};
        done.decided_at_attempt = 1;
      }
      absl::StatusOr<CompletionResult> completed = this->queue().CompleteRun(done);
      EXPECT_TRUE(completed.ok()) << completed.status();
    };
    finish(true, 2.0);  // moe-0
    finish(true, 1.0);  // moe-1
    // Between the pages (5 of 2 rows): successes that sort before and after the cursor, a
    // failure, a run leased and left running, and the baseline while pages remain.
    std::vector<std::function<void()>> changes = {
        [&] { finish(true, 0.5); },  // moe-2
        [&] {
          finish(false, 0);   // moe-3
          finish(true, 3.0);  // moe-4
        },
        [&] {
          this->LeaseOne(worker);  // moe-5 stays RUNNING
          finish(true, 1.5);       // moe-6
          finish(true, 0.1);       // moe-7
        },
        [&] {
          finish(true, 2.5);  // moe-8
          finish(true, 1.2);  // the baseline: every ΔBPC appears
        }};
    ResultsQuery query = this->OfSweep({*created, created->run_ids}, order);
    if (filtered) query.states = {v1::RUN_STATE_PENDING, v1::RUN_STATE_SUCCEEDED};
    query.page.page_size = 2;
    std::map<std::string, int> seen;
    for (size_t page = 0;; ++page) {
      absl::StatusOr<Page<v1::ResultRow>> got = this->reads().QueryResults(query);
      ASSERT_TRUE(got.ok()) << order << " page " << page << ": " << got.status();
      for (const v1::ResultRow& row : got->items) ++seen[row.name()];
      if (got->next_page_token.empty()) break;
      query.page.page_token = got->next_page_token;
      this->harness_.LetTimePass(absl::Milliseconds(2));
      if (page < changes.size()) changes[page]();
    }
    for (const auto& [name, times] : seen) {
      EXPECT_EQ(times, 1) << "order '" << order << "'" << (filtered ? " filtered" : "") << ": "
                          << name << " came " << times << " times";
    }
    // Filtered: moe-3 failed and moe-5 left PENDING mid-walk; every other run matched throughout.
    std::set<std::string> expected;
    for (const v1::RunSpec& run : sweep.runs) {
      if (!filtered || (run.name() != "moe-3" && run.name() != "moe-5"))
        expected.insert(run.name());
    }
    for (const std::string& name : expected) {
      EXPECT_TRUE(seen.contains(name)) << "order '" << order << "'" << (filtered ? " filtered" : "")
                                       << ": " << name << " existed throughout and never came";
    }
    ASSERT_TRUE(this->catalog().CancelSweep(created->sweep.sweep_id(), "walked").ok());
  }
}

// A watch snapshot's pages (ListRunStates) say what ListRuns says of each run's state, attempt
// and latest step, in grid order, over the same page tokens; an unknown sweep is NOT_FOUND.
TYPED_TEST_P(ReadModelsContractTest, RunStatesPageAsListRunsDoes) {
  const auto grid = this->ResultsGrid("run-states");  // SUCCEEDED, FAILED and PENDING runs
  const std::string& sweep_id = grid.sweep.sweep.sweep_id();
  std::vector<v1::Run> runs;
  PageRequest page{.page_size = 1000, .page_token = ""};
  absl::StatusOr<Page<v1::Run>> all = this->catalog().ListRuns(sweep_id, {}, page);
  ASSERT_TRUE(all.ok()) << all.status();
  for (uint32_t page_size : {1u, 2u, 3u, 1000u}) {
    std::vector<RunStateRow> states;
    PageRequest request{.page_size = page_size, .page_token = ""};
    for (int pages = 0; pages < 20; ++pages) {
      absl::StatusOr<Page<RunStateRow>> got = this->reads().ListRunStates(sweep_id, request);
      ASSERT_TRUE(got.ok()) << got.status();
      states.insert(states.end(), got->items.begin(), got->items.end());
      // The same token ListRuns gives for a page of this size.
      absl::StatusOr<Page<v1::Run>> same = this->catalog().ListRuns(sweep_id, {}, request);
      ASSERT_TRUE(same.ok()) << same.status();
      EXPECT_EQ(got->next_page_token, same->next_page_token) << "page size " << page_size;
      if (got->next_page_token.empty()) break;
      request.page_token = got->next_page_token;
    }
    ASSERT_EQ(states.size(), all->items.size()) << "page size " << page_size;
    for (size_t i = 0; i < states.size(); ++i) {
      const v1::Run& run = all->items[i];
      EXPECT_EQ(states[i].run_id, run.run_id()) << "grid order, row " << i;
      EXPECT_EQ(states[i].state, run.state()) << run.spec().name();
      EXPECT_EQ(states[i].attempt, run.attempt()) << run.spec().name();
      EXPECT_EQ(states[i].latest_step, run.latest_step()) << run.spec().name();
    }
  }
  EXPECT_EQ(this->reads()
                .ListRunStates("00000000-0000-0000-0000-0000000000aa",
                               {.page_size = 10, .page_token = ""})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(this->reads()
                .ListRunStates(sweep_id, {.page_size = 10, .page_token = "nonsense"})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace parity::server::testing
