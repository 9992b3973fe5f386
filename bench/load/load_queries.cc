// load_queries: the read paths at a lab's scale, timed through the public APIs on one sweep
// (run.sh --queries grows the loaded sweep to 100,000 runs first, seed_copies.sh):
//   grpc ListRuns        first page, then every page (page_size 1000)
//   grpc QueryResults    first page, then every page (page_size 10, 100, 1000; grid order, then
//                        1000 a page by final_val_bpc desc, name and delta_bpc_vs_dense)
//   http runs/results    the dashboard's first page (page_size 100), then every page (1000)
//   http curves          the first curves page (points=200), then every page
// A walk through every page stops after --budget seconds and says how far it got, so one slow
// path cannot hold the run for hours; the rate it reached gives the projected total.
#include <httplib.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/scheduler_channel.h"
#include "parity/v1/sweep_service.grpc.pb.h"

namespace {

using namespace parity;  // NOLINT: a benchmark main

// One page: its item count and next token, or an error text.
struct PageResult {
  int items = 0;
  std::string next_token;
  std::string error;
};

// Walks pages with `fetch` until the last one or `budget`; prints first-page and total figures.
void Walk(const std::string& name, absl::Duration budget,
          const std::function<PageResult(const std::string& token)>& fetch) {
  const absl::Time start = absl::Now();
  std::string token;
  int pages = 0;
  long items = 0;
  double first_ms = 0;
  bool finished = false;
  do {  // the first page always; more while the budget lasts
    const PageResult page = fetch(token);
    if (!page.error.empty()) {
      std::printf("%-18s error after %d pages: %s\n", name.c_str(), pages, page.error.c_str());
      return;
    }
    if (pages++ == 0) first_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    items += page.items;
    token = page.next_token;
    if (token.empty()) {
      finished = true;
      break;
    }
  } while (absl::Now() - start < budget);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("%-18s first_page_ms=%-9.1f %s pages=%d items=%ld seconds=%.1f items_per_s=%.0f\n",
              name.c_str(), first_ms,
              finished                         ? "all"
              : budget == absl::ZeroDuration() ? "first_page_only"
                                               : "STOPPED_AT_BUDGET",
              pages, items, seconds, items / seconds);
}

std::string GrpcError(const grpc::Status& status) {
  return status.ok() ? "" : absl::StrCat(status.error_code(), " ", status.error_message());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_queries: listing, results and curves of a large sweep, timed"};
  std::string address, token_file, sweep_id;
  int http_port = 0;
  double budget_s = 120;
  app.add_option("--address", address, "scheduler gRPC address")->required();
  app.add_option("--http-port", http_port, "dashboard port on 127.0.0.1")->required();
  app.add_option("--token-file", token_file, "admin token file")->required();
  app.add_option("--sweep-id", sweep_id, "the sweep")->required();
  app.add_option("--budget", budget_s, "seconds one walk through every page may take");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::StatusOr<std::string> token = clients::ReadSecretFile(token_file);
  if (!token.ok()) return 2;
  clients::SchedulerChannelOptions options;
  options.address = address;
  options.token = *token;
  auto channel = clients::MakeSchedulerChannel(options);
  if (!channel.ok()) return 2;
  auto sweeps = v1::SweepService::NewStub(*channel);
  const absl::Duration budget = absl::Seconds(budget_s);

  Walk("grpc_list_runs", budget, [&](const std::string& page_token) {
    v1::ListRunsRequest request;
    request.set_sweep_id(sweep_id);
    request.set_page_size(1000);
    request.set_page_token(page_token);
    v1::ListRunsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + budget));
    const grpc::Status status = sweeps->ListRuns(&context, request, &response);
    return PageResult{response.runs_size(), response.next_page_token(), GrpcError(status)};
  });
  auto results = [&](uint32_t page_size, const std::string& order_by) {
    return [&, page_size, order_by](const std::string& page_token) {
      v1::QueryResultsRequest request;
      request.mutable_filter()->set_sweep_id(sweep_id);
      request.set_order_by(order_by);
      request.set_page_size(page_size);
      request.set_page_token(page_token);
      v1::QueryResultsResponse response;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + budget));
      const grpc::Status status = sweeps->QueryResults(&context, request, &response);
      return PageResult{response.rows_size(), response.next_page_token(), GrpcError(status)};
    };
  };
  // Every page at 10, 100 and 1,000 rows in grid order (keyset: a page costs its rows), then in
  // two orders of a column runs change (sorted per page over the sweep's runs, or its view).
  Walk("grpc_results_p10", budget, results(10, ""));
  Walk("grpc_results_p100", budget, results(100, ""));
  Walk("grpc_results", budget, results(1000, ""));
  Walk("grpc_results_bpc", budget, results(1000, "final_val_bpc desc"));
  Walk("grpc_results_name", budget, results(1000, "name"));
  Walk("grpc_results_delta", budget, results(1000, "delta_bpc_vs_dense"));

  httplib::Client http("127.0.0.1", http_port);
  http.set_bearer_token_auth(*token);
  http.set_read_timeout(static_cast<time_t>(budget_s), 0);
  const std::string base = absl::StrCat("/api/v1/sweeps/", sweep_id);
  auto http_pages = [&](const std::string& path, const char* list_key) {
    return [&http, path, list_key](const std::string& page_token) {
      const std::string url =
          page_token.empty()
              ? path
              : absl::StrCat(path, "&page_token=", httplib::detail::encode_query_param(page_token));
      httplib::Result result = http.Get(url);
      if (!result) return PageResult{0, "", httplib::to_string(result.error())};
      if (result->status != 200) {
        return PageResult{0, "", absl::StrCat("HTTP ", result->status, " ", result->body)};
      }
      nlohmann::json doc = nlohmann::json::parse(result->body, nullptr, false);
      PageResult page;
      if (doc.is_object() && doc.contains(list_key) && doc[list_key].is_array()) {
        page.items = static_cast<int>(doc[list_key].size());
      }
      if (doc.is_object() && doc.contains("next_page_token") &&
          doc["next_page_token"].is_string()) {
        page.next_token = doc["next_page_token"].get<std::string>();
      }
      return page;
    };
  };
  Walk("http_runs_page", absl::ZeroDuration(), http_pages(base + "/runs?page_size=100", "runs"));
  Walk("http_runs", budget, http_pages(base + "/runs?page_size=1000", "runs"));
  Walk("http_results_page", absl::ZeroDuration(),
       http_pages(base + "/results?page_size=100", "rows"));
  Walk("http_results", budget, http_pages(base + "/results?page_size=1000", "rows"));
  Walk("http_curves", budget, http_pages(base + "/curves?points=200", "runs"));
  return 0;
}
