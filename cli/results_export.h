// `parity results` and `parity report`'s runs files: a sweep's export table
// (export/export_schema.h) fetched page by page from the scheduler, and written as the table a
// person reads or as CSV, JSON or Parquet for tools — the same columns in every format.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/scheduler_connection.h"
#include "export/export_schema.h"
#include "parity/v1/sweep_service.grpc.pb.h"

namespace parity::cli {

enum class ResultsFormat { kTable, kCsv, kJson, kParquet };

// The sweep's export table from its runs (ListRuns, pages of 1,000 in grid order), each turned
// into its result row (exports::ResultRowOfRun) and slimmed to what the export reads as its page
// arrives, so a 100,000-run sweep holds rows and slim runs, not full specs. On an RPC error
// `status` says why.
// A sweep as the export reads it: every run's result row, and the run slimmed.
struct FetchedSweep {
  std::vector<parity::v1::ResultRow> rows;      // grid order
  std::map<std::string, parity::v1::Run> runs;  // by run id
};
FetchedSweep FetchSweepForExport(parity::v1::SweepService::Stub& stub, const std::string& sweep_id,
                                 const SchedulerOptions& options, grpc::Status& status);

// FetchSweepForExport, then every row's cells at once (for the table a person reads).
exports::ExportTable FetchExportTable(parity::v1::SweepService::Stub& stub,
                                      const std::string& sweep_id, const SchedulerOptions& options,
                                      grpc::Status& status);

// The same from rows and runs already fetched (parity report).
exports::ExportTable ExportTableOf(const std::vector<parity::v1::ResultRow>& rows,
                                   const std::vector<parity::v1::Run>& runs);

// The table for a person: the export's columns that fit a terminal, under their export names,
// rounded (4 decimals of BPC, r_a in %, counts as 1.2M), a failure column "class: message".
std::string FormatResultsTable(const exports::ExportTable& table);

// Writes the export in `format` to `out` (Parquet is binary). CSV, JSON and Parquet compute the
// cells a chunk at a time (1 MiB of text, a row group of 16,384 rows); the table holds them all.
absl::Status WriteResults(const exports::ExportBuilder& export_rows, ResultsFormat format,
                          std::ostream& out);

}  // namespace parity::cli
