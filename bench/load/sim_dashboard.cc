#include "bench/load/sim_dashboard.h"

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace parity::load {
namespace {

struct Client {
  int index = 0;
  int address = 0;
  int polls = 0;
  absl::Time due;
  std::unique_ptr<httplib::Client> http;
};

void Connect(Client& client, const DashboardOptions& options) {
  client.http = std::make_unique<httplib::Client>(
      "127.0.0.1", options.http_ports[client.address % options.http_ports.size()]);
  client.http->set_keep_alive(true);
  client.http->set_bearer_token_auth(options.token);
  client.http->set_read_timeout(60, 0);
  client.http->set_connection_timeout(5, 0);
}

// One GET: a latency sample under `name` when the status is 200 (or `also_ok`), an error by
// status otherwise. The body when it succeeded, nullopt when not. A kept-alive connection the
// server closed meanwhile (its request deadline runs from the previous answer) is reopened and
// the request sent again once, as browsers do, without counting an error.
std::optional<std::string> Get(Client& client, const DashboardOptions& options, Recorder& recorder,
                               const std::string& name, const std::string& path,
                               int also_ok = 200) {
  const bool reused = client.http != nullptr;
  if (!reused) Connect(client, options);
  absl::Time start = absl::Now();
  httplib::Result result = client.http->Get(path);
  if (!result && reused &&
      (result.error() == httplib::Error::Read || result.error() == httplib::Error::Write)) {
    recorder.Count("dash_stale_connection_reopened");
    Connect(client, options);
    start = absl::Now();
    result = client.http->Get(path);
  }
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!result) {
    recorder.Error(name, "HTTP_" + httplib::to_string(result.error()), path);
    client.http.reset();  // reconnect, to the next replica
    ++client.address;
    return std::nullopt;
  }
  if (result->status != 200 && result->status != also_ok) {
    recorder.Error(name, absl::StrCat("HTTP_", result->status), result->body.substr(0, 160));
    return std::nullopt;
  }
  recorder.Sample(name, ms);
  return std::move(result->body);
}

// Follows next_page_token from `path` (which has a query already); returns the first page's body.
std::optional<std::string> GetPages(Client& client, const DashboardOptions& options,
                                    Recorder& recorder, const std::string& name,
                                    const std::string& path, bool all) {
  std::optional<std::string> first;
  std::string token;
  for (int page = 0; page < 10000; ++page) {
    const std::string url = token.empty() ? path : absl::StrCat(path, "&page_token=", token);
    std::optional<std::string> body = Get(client, options, recorder, name, url);
    if (!body) return first;
    if (page == 0) first = *body;
    if (!all) break;
    nlohmann::json doc = nlohmann::json::parse(*body, nullptr, false);
    if (!doc.is_object() || !doc.contains("next_page_token") ||
        !doc["next_page_token"].is_string()) {
      break;
    }
    token = httplib::detail::encode_query_param(doc["next_page_token"].get<std::string>());
    if (token.empty()) break;
  }
  return first;
}

// The run ids of up to `limit` running runs of a runs page; the page's first runs when none is
// running (their curves are what the page draws then).
std::vector<std::string> RunningRuns(const std::string& body, int limit) {
  std::vector<std::string> ids;
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc.contains("runs") || !doc["runs"].is_array()) return ids;
  for (const auto& run : doc["runs"]) {
    if (static_cast<int>(ids.size()) >= limit) break;
    if (run.value("state", "").find("RUNNING") != std::string::npos) {
      ids.push_back(run.value("run_id", ""));
    }
  }
  if (!ids.empty()) return ids;
  for (const auto& run : doc["runs"]) {
    if (static_cast<int>(ids.size()) >= limit) break;
    ids.push_back(run.value("run_id", ""));
  }
  return ids;
}

void Poll(Client& client, const DashboardOptions& options, Recorder& recorder) {
  const absl::Time start = absl::Now();
  const std::string base = absl::StrCat("/api/v1/sweeps/", options.sweep_id);
  const int page = options.full_pages ? 1000 : options.page_size;
  auto wanted = [&options](const char* endpoint) { return options.endpoints.count(endpoint) > 0; };
  if (wanted("sweep")) Get(client, options, recorder, "dash_sweep", base);
  std::optional<std::string> runs;
  if (wanted("runs")) {
    runs = GetPages(client, options, recorder, "dash_runs",
                    absl::StrCat(base, "/runs?page_size=", page), options.full_pages);
  }
  if (wanted("results")) {
    GetPages(client, options, recorder, "dash_results",
             absl::StrCat(base, "/results?page_size=", options.full_pages ? 10000 : page),
             options.full_pages);
  }
  if (wanted("analysis") && options.analysis_every > 0 &&
      client.polls % options.analysis_every == 0) {
    // 400 (FAILED_PRECONDITION) until a run has finished: the page shows why, not an error.
    Get(client, options, recorder, "dash_analysis", base + "/analysis", 400);
  }
  if (!wanted("curves")) {
    // not asked for
  } else if (options.full_pages && client.polls == 0) {
    GetPages(client, options, recorder, "dash_curves", base + "/curves?points=200", true);
  } else if (runs) {
    const std::vector<std::string> ids = RunningRuns(*runs, options.curve_runs);
    if (!ids.empty()) {
      Get(client, options, recorder, "dash_curves",
          absl::StrCat(base, "/curves?points=200&run_id=", absl::StrJoin(ids, ",")));
    }
  }
  ++client.polls;
  recorder.Sample("dash_poll", absl::ToDoubleMilliseconds(absl::Now() - start));
}

}  // namespace

void DashboardPool::Start(int clients, absl::Duration ramp) {
  const int threads = std::max(1, std::min(options_.threads, clients));
  for (int t = 0; t < threads; ++t) {
    std::vector<int> mine;
    for (int c = t; c < clients; c += threads) mine.push_back(c);
    threads_.emplace_back([this, mine, ramp, clients] { Serve(mine, ramp, clients); });
  }
}

void DashboardPool::Join() {
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void DashboardPool::Serve(std::vector<int> indices, absl::Duration ramp, int total) {
  const absl::Time origin = absl::Now();
  std::vector<Client> clients(indices.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    clients[i].index = indices[i];
    clients[i].address = indices[i];
    clients[i].due = origin + ramp * indices[i] / std::max(1, total);
  }
  while (!stopping_ && !clients.empty()) {
    Client* next = &clients[0];
    for (Client& c : clients) {
      if (c.due < next->due) next = &c;
    }
    while (!stopping_ && absl::Now() < next->due) {
      absl::SleepFor(std::min(absl::Milliseconds(50), next->due - absl::Now()));
    }
    if (stopping_) break;
    Poll(*next, options_, recorder_);
    next->due = std::max(next->due + options_.interval, absl::Now());
  }
}

}  // namespace parity::load
