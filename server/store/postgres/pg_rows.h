// Rows of PostgresRunStore's queries → API messages. Each reader expects the column list named
// beside it in pg_statements.h.
#pragma once

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>
#include <vector>

#include "parity/v1/run.pb.h"
#include "parity/v1/sweep_service.pb.h"
#include "server/store/run_store.h"

namespace parity::server::pg {

v1::Run RunFromRow(const pqxx::row& row);             // {{run_columns}}
v1::Sweep SweepFromRow(const pqxx::row& row);         // {{sweep_select}}
RunEvent EventFromRow(const pqxx::row& row);          // sweep_events / run_events
v1::MetricPoint MetricFromRow(const pqxx::row& row);  // list_metrics
v1::ResultRow ResultFromRow(const pqxx::row& row);    // SELECT * FROM results
v1::Worker WorkerFromRow(const pqxx::row& row);       // list_workers

// "{0,1}" → {0, 1} and back.
std::vector<uint32_t> ParseIntArray(const std::string& text);
std::string IntArrayLiteral(const std::vector<uint32_t>& values);
// {"PENDING", "RUNNING"} → "{PENDING,RUNNING}" (values must be plain words).
std::string TextArrayLiteral(const std::vector<std::string>& values);

// A reported checkpoint's step and URI as nullable columns (NULL = keep the stored one).
inline std::optional<int64_t> CheckpointStep(const std::optional<v1::Checkpoint>& checkpoint) {
  if (!checkpoint) return std::nullopt;
  return static_cast<int64_t>(checkpoint->step());
}
inline std::optional<std::string> CheckpointUri(const std::optional<v1::Checkpoint>& checkpoint) {
  if (!checkpoint) return std::nullopt;
  return checkpoint->uri();
}

// One array literal ("{1,2,NULL}") built element by element, for the functions that take a
// batch as one typed array per column.
class ArrayLiteral {
 public:
  void Add(int64_t value) { Next().append(std::to_string(value)); }
  void Add(uint64_t value) { Next().append(std::to_string(value)); }
  // The shortest text that reads back as the same double.
  void Add(double value);
  void AddNull() { Next().append("NULL"); }
  // A quoted element (JSON for a jsonb[], a uuid, an array literal for a text[]).
  void AddQuoted(std::string_view text);
  template <typename T>
  void AddOptional(const std::optional<T>& value) {
    value ? Add(*value) : AddNull();
  }
  std::string Take();

 private:
  std::string& Next() {
    text_.push_back(text_.empty() ? '{' : ',');
    return text_;
  }
  std::string text_;
};

// A batch of points as one PostgreSQL array literal per column, for append_metric_arrays
// (server/sql/). `increasing`: steps strictly increase through the batch.
struct MetricArrays {
  std::string step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
      grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
      eval_bpc, logged_us;
  bool increasing = true;
};
MetricArrays MetricsAsArrays(const std::vector<v1::MetricPoint>& points);

// A map of evaluation set → BPC as a JSON object (the eval_bpc / final_eval_bpc jsonb columns),
// and back; a malformed or non-object text reads as no sets.
std::string EvalBpcJson(const google::protobuf::Map<std::string, double>& bpc);
void ParseEvalBpcJson(const char* text, google::protobuf::Map<std::string, double>& out);

// Proto3 JSON of a message (for the jsonb columns).
std::string JsonOf(const google::protobuf::Message& message);

}  // namespace parity::server::pg
