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

}  // namespace

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
