#include "server/store/postgres/pg_rows.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/store/postgres/pg_support.h"

namespace parity::server::pg {
namespace {

template <typename T>
T Or(const pqxx::field& field, T fallback) {
  return field.is_null() ? fallback : field.as<T>();
}

}  // namespace

v1::Run RunFromRow(const pqxx::row& row) {
  v1::Run run;
  run.set_run_id(row["run_id"].c_str());
  run.set_sweep_id(row["sweep_id"].c_str());
  run.mutable_spec()->ParseFromString(BytesOf(row["spec_bytes"]));
  run.set_state(RunStateFromText(row["state"].c_str()));
  run.set_priority(row["priority"].as<int32_t>());
  run.set_attempt(row["attempt"].as<uint32_t>());
  run.set_max_attempts(row["max_attempts"].as<uint32_t>());
  run.set_preemptions(row["preemptions"].as<uint32_t>());
  if (!row["lease_owner"].is_null()) {
    v1::Lease* lease = run.mutable_lease();
    lease->set_run_id(run.run_id());
    lease->set_lease_epoch(row["lease_epoch"].as<int64_t>());
    lease->set_worker_id(row["lease_owner"].c_str());
    SetTimestamp(row["lease_expires_us"], lease->mutable_expire_time());
    for (uint32_t index : ParseIntArray(row["devices"].c_str())) lease->add_device_indices(index);
  }
  run.set_cancel_requested(row["cancel_requested"].as<bool>());
  if (!row["checkpoint_step"].is_null()) {
    run.mutable_checkpoint()->set_step(row["checkpoint_step"].as<uint64_t>());
    run.mutable_checkpoint()->set_uri(Or<std::string>(row["checkpoint_uri"], ""));
    SetTimestamp(row["checkpoint_us"], run.mutable_checkpoint()->mutable_create_time());
  }
  if (!row["failure_class"].is_null()) {
    run.set_failure_class(FailureClassFromText(row["failure_class"].c_str()));
    run.mutable_failure()->set_code(Or<int32_t>(row["failure_code"], 0));
    run.mutable_failure()->set_message(Or<std::string>(row["failure_message"], ""));
  }
  if (run.state() == v1::RUN_STATE_SUCCEEDED) {
    v1::RunSummary* summary = run.mutable_summary();
    summary->set_final_train_bpc(Or<double>(row["final_train_bpc"], 0));
    summary->set_final_val_bpc(Or<double>(row["final_val_bpc"], 0));
    summary->set_tokens(Or<uint64_t>(row["summary_tokens"], 0));
    summary->set_steps(Or<uint64_t>(row["summary_steps"], 0));
    summary->set_measured_flops_per_token(Or<double>(row["measured_flops_per_token"], 0));
    const double wall = Or<double>(row["wall_seconds"], 0);
    summary->mutable_wall_time()->set_seconds(static_cast<int64_t>(wall));
    summary->mutable_wall_time()->set_nanos(
        static_cast<int32_t>((wall - static_cast<double>(static_cast<int64_t>(wall))) * 1e9));
    summary->set_peak_memory_bytes(Or<uint64_t>(row["peak_memory_bytes"], 0));
    summary->set_tokens_per_second(Or<double>(row["tokens_per_second"], 0));
    if (!row["final_eval_bpc"].is_null()) {
      ParseEvalBpcJson(row["final_eval_bpc"].c_str(), *summary->mutable_final_eval_bpc());
    }
    summary->set_dataset_digest(Or<std::string>(row["dataset_digest"], ""));
    summary->set_peak_device_memory_bytes(Or<uint64_t>(row["peak_device_memory_bytes"], 0));
    summary->set_estimated_device_memory_bytes(
        Or<uint64_t>(row["estimated_device_memory_bytes"], 0));
  }
  run.set_latest_step(row["latest_step"].as<uint64_t>());
  run.set_latest_val_bpc(Or<double>(row["latest_val_bpc"], 0));
  SetTimestamp(row["created_us"], run.mutable_create_time());
  SetTimestamp(row["started_us"], run.mutable_start_time());
  SetTimestamp(row["ended_us"], run.mutable_end_time());
  return run;
}

v1::Sweep SweepFromRow(const pqxx::row& row) {
  v1::Sweep sweep;
  sweep.set_sweep_id(row["sweep_id"].c_str());
  sweep.mutable_spec()->ParseFromString(BytesOf(row["spec_bytes"]));
  sweep.set_state(SweepStateFromText(row["state"].c_str()));
  sweep.set_owner(row["owner"].c_str());
  sweep.set_idempotency_key(row["idempotency_key"].c_str());
  v1::RunCounts* counts = sweep.mutable_counts();
  counts->set_pending(row["pending"].as<uint32_t>());
  counts->set_leased(row["leased"].as<uint32_t>());
  counts->set_running(row["running"].as<uint32_t>());
  counts->set_succeeded(row["succeeded"].as<uint32_t>());
  counts->set_failed(row["failed"].as<uint32_t>());
  counts->set_cancelled(row["cancelled"].as<uint32_t>());
  counts->set_total(row["total"].as<uint32_t>());
  SetTimestamp(row["created_us"], sweep.mutable_create_time());
  SetTimestamp(row["ended_us"], sweep.mutable_end_time());
  return sweep;
}

RunEvent EventFromRow(const pqxx::row& row) {
  RunEvent event;
  event.event_id = row["event_id"].as<int64_t>();
  event.run_id = row["run_id"].c_str();
  event.from_state = RunStateFromText(row["from_state"].c_str());
  event.to_state = RunStateFromText(row["to_state"].c_str());
  event.attempt = row["attempt"].as<uint32_t>();
  event.reason = row["reason"].c_str();
  event.time = TimeFromMicros(row["created_us"].as<int64_t>());
  return event;
}

v1::MetricPoint MetricFromRow(const pqxx::row& row) {
  v1::MetricPoint point;
  point.set_step(row["step"].as<uint64_t>());
  point.set_attempt(row["attempt"].as<uint32_t>());
  point.set_tokens(row["tokens"].as<uint64_t>());
  point.set_unique_tokens(row["unique_tokens"].as<uint64_t>());
  point.set_epoch(row["epoch"].as<double>());
  point.set_train_bpc(row["train_bpc"].as<double>());
  if (!row["val_bpc"].is_null()) point.set_val_bpc(row["val_bpc"].as<double>());
  point.set_learning_rate(row["learning_rate"].as<double>());
  point.set_grad_norm(row["grad_norm"].as<double>());
  point.set_aux_loss(row["aux_loss"].as<double>());
  point.set_z_loss(row["z_loss"].as<double>());
  point.set_tokens_per_second(row["tokens_per_second"].as<double>());
  point.set_flops_per_second(row["flops_per_second"].as<double>());
  point.set_flops(row["flops"].as<double>());
  if (!row["expert_load"].is_null()) {
    const nlohmann::json loads = nlohmann::json::parse(row["expert_load"].c_str());
    for (const auto& load : loads) {
      (void)google::protobuf::util::JsonStringToMessage(load.dump(), point.add_expert_load());
    }
  }
  if (!row["eval_bpc"].is_null())
    ParseEvalBpcJson(row["eval_bpc"].c_str(), *point.mutable_eval_bpc());
  SetTimestamp(row["logged_us"], point.mutable_time());
  return point;
}

v1::ResultRow ResultFromRow(const pqxx::row& row) {
  v1::ResultRow result;
  result.set_run_id(row["run_id"].c_str());
  result.set_sweep_id(row["sweep_id"].c_str());
  result.set_name(row["name"].c_str());
  result.set_role(RoleFromText(row["role"].c_str()));
  result.set_layout(row["layout"].c_str());
  result.set_state(RunStateFromText(row["state"].c_str()));
  result.set_d_model(row["d_model"].as<uint32_t>());
  result.set_num_layers(row["num_layers"].as<uint32_t>());
  result.set_num_experts(row["num_experts"].as<uint32_t>());
  result.set_top_k(row["top_k"].as<uint32_t>());
  result.set_expert_hidden(row["expert_hidden"].as<uint32_t>());
  result.set_params(row["params"].as<uint64_t>());
  result.set_active_params(row["active_params"].as<uint64_t>());
  result.set_activation_rate(row["activation_rate"].as<double>());
  result.set_flops_per_token(row["planned_flops_per_token"].as<double>());
  result.set_measured_flops_per_token(Or<double>(row["measured_flops_per_token"], 0));
  result.set_compute_flops(row["compute_flops"].as<double>());
  result.set_tokens(row["tokens"].as<uint64_t>());
  result.set_unique_tokens(row["unique_tokens"].as<uint64_t>());
  result.set_epochs(row["epochs"].as<double>());
  result.set_final_val_bpc(Or<double>(row["final_val_bpc"], 0));
  result.set_wall_seconds(Or<double>(row["wall_seconds"], 0));
  result.set_compute_budget(row["compute_budget"].c_str());
  result.set_compute_multiple(row["compute_multiple"].as<double>());
  result.set_data_variant(row["data_variant"].c_str());
  result.set_predicted_efficiency_leverage(row["predicted_efficiency_leverage"].as<double>());
  result.set_delta_bpc_vs_dense(Or<double>(row["delta_bpc_vs_dense"], 0));
  result.set_seed(row["seed"].as<uint64_t>());
  if (!row["final_eval_bpc"].is_null()) {
    ParseEvalBpcJson(row["final_eval_bpc"].c_str(), *result.mutable_final_eval_bpc());
  }
  if (!row["delta_eval_bpc_vs_dense"].is_null()) {
    ParseEvalBpcJson(row["delta_eval_bpc_vs_dense"].c_str(),
                     *result.mutable_delta_eval_bpc_vs_dense());
  }
  result.set_dataset_digest(Or<std::string>(row["dataset_digest"], ""));
  return result;
}

v1::Worker WorkerFromRow(const pqxx::row& row) {
  v1::Worker worker;
  worker.set_worker_id(row["worker_id"].c_str());
  worker.set_hostname(row["hostname"].c_str());
  // Written by RegisterWorker as proto JSON; a row that does not parse lists without devices.
  const nlohmann::json devices = nlohmann::json::parse(row["devices"].c_str(), nullptr, false);
  if (devices.is_array()) {
    for (const nlohmann::json& device : devices) {
      v1::Device parsed;
      if (google::protobuf::util::JsonStringToMessage(device.dump(), &parsed).ok()) {
        *worker.add_devices() = std::move(parsed);
      }
    }
  }
  const nlohmann::json labels = nlohmann::json::parse(row["labels"].c_str(), nullptr, false);
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) {
      if (value.is_string()) (*worker.mutable_labels())[key] = value.get<std::string>();
    }
  }
  worker.set_version(row["version"].c_str());
  const nlohmann::json datasets = nlohmann::json::parse(row["datasets"].c_str(), nullptr, false);
  if (datasets.is_array()) {
    for (const nlohmann::json& dataset : datasets) {
      v1::DatasetHolding parsed;
      if (google::protobuf::util::JsonStringToMessage(dataset.dump(), &parsed).ok()) {
        *worker.add_datasets() = std::move(parsed);
      }
    }
  }
  *worker.mutable_last_seen_time() = TimestampFromMicros(row["last_seen_us"].as<int64_t>());
  worker.set_active_runs(row["active_runs"].as<uint32_t>());
  return worker;
}

std::vector<uint32_t> ParseIntArray(const std::string& text) {
  std::vector<uint32_t> values;
  absl::string_view body(text);
  if (body.size() >= 2) body = body.substr(1, body.size() - 2);  // strip { }
  for (absl::string_view item : absl::StrSplit(body, ',', absl::SkipEmpty())) {
    uint32_t value = 0;
    if (absl::SimpleAtoi(item, &value)) values.push_back(value);
  }
  return values;
}

std::string IntArrayLiteral(const std::vector<uint32_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

std::string TextArrayLiteral(const std::vector<std::string>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

void ArrayLiteral::Add(double value) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  Next().append(buffer, error == std::errc() ? end : buffer);
}

void ArrayLiteral::AddQuoted(std::string_view text) {
  std::string& out = Next();
  out.push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

std::string ArrayLiteral::Take() {
  if (text_.empty()) return "{}";
  return std::move(text_.append("}"));
}

std::string EvalBpcJson(const google::protobuf::Map<std::string, double>& bpc) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : bpc) object[name] = value;
  return object.dump();
}

void ParseEvalBpcJson(const char* text, google::protobuf::Map<std::string, double>& out) {
  const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return;
  for (const auto& [name, value] : object.items()) {
    if (value.is_number()) out[name] = value.get<double>();
  }
}

MetricArrays MetricsAsArrays(const std::vector<v1::MetricPoint>& points) {
  ArrayLiteral step, attempt, tokens, unique_tokens, epoch, train_bpc, val_bpc, learning_rate,
      grad_norm, aux_loss, z_loss, tokens_per_second, flops_per_second, flops, expert_load,
      eval_bpc, logged_us;
  MetricArrays out;
  out.increasing = true;
  for (size_t i = 0; i < points.size(); ++i) {
    const v1::MetricPoint& p = points[i];
    if (i > 0 && p.step() <= points[i - 1].step()) out.increasing = false;
    step.Add(static_cast<int64_t>(p.step()));
    attempt.Add(static_cast<int64_t>(p.attempt()));
    tokens.Add(static_cast<int64_t>(p.tokens()));
    unique_tokens.Add(static_cast<int64_t>(p.unique_tokens()));
    epoch.Add(p.epoch());
    train_bpc.Add(p.train_bpc());
    p.has_val_bpc() ? val_bpc.Add(p.val_bpc()) : val_bpc.AddNull();
    learning_rate.Add(p.learning_rate());
    grad_norm.Add(p.grad_norm());
    aux_loss.Add(p.aux_loss());
    z_loss.Add(p.z_loss());
    tokens_per_second.Add(p.tokens_per_second());
    flops_per_second.Add(p.flops_per_second());
    flops.Add(p.flops());
    if (p.expert_load_size() > 0) {
      std::string loads = "[";
      for (const v1::ExpertLoadStats& load : p.expert_load()) {
        if (loads.size() > 1) loads.push_back(',');
        loads.append(JsonOf(load));
      }
      loads.push_back(']');
      expert_load.AddQuoted(loads);
    } else {
      expert_load.AddNull();
    }
    p.eval_bpc().empty() ? eval_bpc.AddNull() : eval_bpc.AddQuoted(EvalBpcJson(p.eval_bpc()));
    if (p.has_time()) {
      logged_us.Add(static_cast<int64_t>(p.time().seconds() * 1000000 + p.time().nanos() / 1000));
    } else {
      logged_us.AddNull();
    }
  }
  out.step = step.Take();
  out.attempt = attempt.Take();
  out.tokens = tokens.Take();
  out.unique_tokens = unique_tokens.Take();
  out.epoch = epoch.Take();
  out.train_bpc = train_bpc.Take();
  out.val_bpc = val_bpc.Take();
  out.learning_rate = learning_rate.Take();
  out.grad_norm = grad_norm.Take();
  out.aux_loss = aux_loss.Take();
  out.z_loss = z_loss.Take();
  out.tokens_per_second = tokens_per_second.Take();
  out.flops_per_second = flops_per_second.Take();
  out.flops = flops.Take();
  out.expert_load = expert_load.Take();
  out.eval_bpc = eval_bpc.Take();
  out.logged_us = logged_us.Take();
  return out;
}

std::string JsonOf(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace parity::server::pg
