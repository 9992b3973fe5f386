#include "cli/sweep_reference.h"

#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "cli/client_format.h"
#include "cli/commands.h"
#include "fmt/format.h"

namespace parity::cli {
namespace {

// Canonical UUID text: 8-4-4-4-12 hex digits.
bool IsUuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !absl::ascii_isxdigit(static_cast<unsigned char>(text[i]))) {
      return false;
    }
  }
  return true;
}

bool IsIdPrefix(const std::string& text) {
  if (text.size() < 4) return false;
  for (char c : text) {
    if (c != '-' && !absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Every sweep the token may see, newest first (paged; a lab's list is thousands, not millions).
bool ListEverySweep(parity::v1::SweepService::Stub& stub, const SchedulerOptions& options,
                    std::vector<parity::v1::Sweep>& sweeps, grpc::Status& status) {
  parity::v1::ListSweepsRequest request;
  request.set_page_size(1000);
  for (;;) {
    parity::v1::ListSweepsResponse response;
    status = stub.ListSweeps(UnaryContext(options).get(), request, &response);
    if (!status.ok()) return false;
    sweeps.insert(sweeps.end(), response.sweeps().begin(), response.sweeps().end());
    if (response.next_page_token().empty()) return true;
    request.set_page_token(response.next_page_token());
  }
}

bool NamedBy(const std::string& reference, const std::string& name, const std::string& id) {
  return name == reference ||
         (IsIdPrefix(reference) && absl::StartsWith(id, absl::AsciiStrToLower(reference)));
}

// The runs of every sweep the caller may see, as candidates (a run id, name and sweep each).
bool ListEveryRun(parity::v1::SweepService::Stub& stub, const SchedulerOptions& options,
                  const std::vector<parity::v1::Sweep>& sweeps, std::vector<RunCandidate>& runs,
                  grpc::Status& status) {
  for (const parity::v1::Sweep& sweep : sweeps) {
    parity::v1::ListRunsRequest request;
    request.set_sweep_id(sweep.sweep_id());
    request.set_page_size(1000);
    do {
      parity::v1::ListRunsResponse page;
      status = stub.ListRuns(UnaryContext(options).get(), request, &page);
      if (!status.ok()) return false;
      for (const parity::v1::Run& run : page.runs()) {
        runs.push_back(
            {run.run_id(), run.spec().name(), sweep.sweep_id(), sweep.spec().name(), run.state()});
      }
      request.set_page_token(page.next_page_token());
    } while (!request.page_token().empty());
  }
  return true;
}

}  // namespace

std::vector<RunCandidate> RunsNamedBy(const std::string& reference,
                                      const std::vector<RunCandidate>& runs) {
  std::vector<RunCandidate> named;
  const size_t slash = reference.find('/');
  for (const RunCandidate& run : runs) {
    const bool match = slash == std::string::npos
                           ? NamedBy(reference, run.name, run.run_id)
                           : NamedBy(reference.substr(0, slash), run.sweep_name, run.sweep_id) &&
                                 NamedBy(reference.substr(slash + 1), run.name, run.run_id);
    if (match) named.push_back(run);
  }
  return named;
}

bool ResolveSweepOrRunReference(parity::v1::SweepService::Stub& stub,
                                const SchedulerOptions& options, const std::string& reference,
                                std::string* id, bool* is_run, int* exit_code) {
  *is_run = false;
  if (IsUuid(reference)) {
    *id = absl::AsciiStrToLower(reference);
    return true;
  }
  std::vector<parity::v1::Sweep> sweeps;
  grpc::Status status;
  if (!ListEverySweep(stub, options, sweeps, status)) {
    *exit_code = ReportRpcError(status, "'" + reference + "'", options);
    return false;
  }
  if (reference.find('/') == std::string::npos) {
    const std::vector<parity::v1::Sweep> named = SweepsNamedBy(reference, sweeps);
    if (!named.empty()) return ResolveSweepReference(stub, options, reference, id, exit_code);
  }
  std::vector<RunCandidate> runs;
  if (!ListEveryRun(stub, options, sweeps, runs, status)) {
    *exit_code = ReportRpcError(status, "'" + reference + "'", options);
    return false;
  }
  const std::vector<RunCandidate> named = RunsNamedBy(reference, runs);
  if (named.size() == 1) {
    *id = named.front().run_id;
    *is_run = true;
    return true;
  }
  if (named.empty()) {
    std::cerr << fmt::format(
        "error: '{}': no sweep or run you may see has this name or an id starting with it "
        "(`parity status` lists sweeps, `parity status SWEEP` their runs; name a run as "
        "SWEEP/RUN, an id prefix needs at least 4 hex digits)\n",
        reference);
    *exit_code = kExitNotFound;
    return false;
  }
  std::cerr << fmt::format("error: '{}' names {} runs; give more of the id, or SWEEP/RUN:\n",
                           reference, named.size());
  for (const RunCandidate& run : named) {
    std::cerr << fmt::format("  {}  {}/{}  {}\n", run.run_id.substr(0, 8), run.sweep_name, run.name,
                             RunStateName(run.state));
  }
  *exit_code = kExitInvalidSpec;
  return false;
}

std::vector<parity::v1::Sweep> SweepsNamedBy(const std::string& reference,
                                             const std::vector<parity::v1::Sweep>& sweeps) {
  std::vector<parity::v1::Sweep> named;
  const std::string prefix = absl::AsciiStrToLower(reference);
  for (const parity::v1::Sweep& sweep : sweeps) {
    if (sweep.spec().name() == reference ||
        (IsIdPrefix(reference) && absl::StartsWith(sweep.sweep_id(), prefix))) {
      named.push_back(sweep);
    }
  }
  return named;
}

bool ResolveSweepReference(parity::v1::SweepService::Stub& stub, const SchedulerOptions& options,
                           const std::string& reference, std::string* sweep_id, int* exit_code) {
  if (reference.empty() || IsUuid(reference)) {
    *sweep_id = absl::AsciiStrToLower(reference);
    return true;
  }
  std::vector<parity::v1::Sweep> sweeps;
  grpc::Status status;
  if (!ListEverySweep(stub, options, sweeps, status)) {
    *exit_code = ReportRpcError(status, "sweep '" + reference + "'", options);
    return false;
  }
  const std::vector<parity::v1::Sweep> named = SweepsNamedBy(reference, sweeps);
  if (named.size() == 1) {
    *sweep_id = named.front().sweep_id();
    return true;
  }
  if (named.empty()) {
    std::cerr << fmt::format(
        "error: sweep '{}': no sweep you may see has this name or an id starting with it "
        "(`parity status` lists them; an id prefix needs at least 4 hex digits)\n",
        reference);
    *exit_code = kExitNotFound;
    return false;
  }
  std::cerr << fmt::format("error: sweep '{}' names {} sweeps; give more of the id:\n", reference,
                           named.size());
  for (const parity::v1::Sweep& sweep : named) {
    std::cerr << fmt::format("  {}  {}  {}\n", sweep.sweep_id().substr(0, 8), sweep.spec().name(),
                             SweepStateName(sweep.state()));
  }
  *exit_code = kExitInvalidSpec;
  return false;
}

}  // namespace parity::cli
