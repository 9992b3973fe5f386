// Simulated dashboard clients: browsers with the sweep page open, polling the JSON API under
// /api/v1 every few seconds (web/src/main.js refreshes every 3 s) with a bearer token, over
// HTTP/1.1 keep-alive. One poll is what the sweep page asks for: the sweep, a page of its runs,
// a page of results, the curves of the page's running runs (and, every Nth poll, the analysis).
// `full_pages` instead follows every next_page_token of runs and results, as the page did before
// server-side paging. Clients share a bounded pool of threads (client c on thread c % threads):
// a slow answer delays that thread's other clients, which the poll latency then shows.
#pragma once

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "bench/load/load_support.h"

namespace parity::load {

struct DashboardOptions {
  std::vector<int> http_ports;  // 127.0.0.1, one per replica
  std::string token;
  std::string sweep_id;
  absl::Duration interval = absl::Seconds(3);
  int page_size = 100;
  int curve_runs = 20;     // running runs of the page whose curves are fetched
  int analysis_every = 0;  // polls; 0 = never
  bool full_pages = false;
  // Which of the page's requests a poll makes: sweep, runs, results, curves, analysis.
  std::set<std::string> endpoints = {"sweep", "runs", "results", "curves", "analysis"};
  int threads = 8;
};

class DashboardPool {
 public:
  DashboardPool(DashboardOptions options, Recorder& recorder, const std::atomic<bool>& stopping)
      : options_(std::move(options)), recorder_(recorder), stopping_(stopping) {}
  ~DashboardPool() { Join(); }
  // Client c starts at c/clients × ramp.
  void Start(int clients, absl::Duration ramp);
  void Join();

 private:
  void Serve(std::vector<int> clients, absl::Duration ramp, int total);

  const DashboardOptions options_;
  Recorder& recorder_;
  const std::atomic<bool>& stopping_;
  std::vector<std::thread> threads_;
};

}  // namespace parity::load
