#include "web/dashboard_documents.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace parity::web {
namespace {

using nlohmann::json;

// A value of a column, or null: charts leave a gap rather than plot a made-up zero.
json Number(bool present, double value) { return present ? json(value) : json(nullptr); }

json ParsedMessage(const google::protobuf::Message& message) {
  return json::parse(MessageJson(message));
}

// Documents quote what was asked (an error names the path, a bad id or parameter), which may be
// any bytes: dump() would throw on text that is not UTF-8, so it is replaced by U+FFFD instead.
std::string Dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string MessageJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return text;
}

std::string ErrorJson(int http_status, std::string_view code, std::string_view message,
                      std::span<const ParameterViolation> violations) {
  json list = json::array();
  for (const ParameterViolation& v : violations) {
    list.push_back({{"field", v.field}, {"description", v.description}});
  }
  return Dump(json{{"error",
                    {{"http_status", http_status},
                     {"code", code},
                     {"message", message},
                     {"violations", std::move(list)}}}});
}

std::vector<v1::MetricPoint> SampleEvenly(std::span<const v1::MetricPoint> points,
                                          size_t max_points) {
  std::vector<v1::MetricPoint> sampled;
  if (points.empty()) return sampled;
  max_points = std::max<size_t>(max_points, 1);
  const uint64_t last_step = points.back().step();
  const uint64_t stride = std::max<uint64_t>(1, (last_step + max_points) / max_points);
  size_t next = 0;  // first point not yet considered
  for (uint64_t target = 0; target <= last_step && next < points.size(); target += stride) {
    while (next < points.size() && points[next].step() < target) ++next;
    if (next == points.size()) break;
    if (sampled.empty() || sampled.back().step() != points[next].step()) {
      sampled.push_back(points[next]);
    }
  }
  if (sampled.back().step() != last_step) sampled.push_back(points.back());
  return sampled;
}

// doc["eval_bpc"][set] gets the point's BPC on each set at index `at` of the step array; earlier
// points lacking a set read null there, and so does this point for a set it lacks.
void AppendEvalBpc(const v1::MetricPoint& point, size_t at, json& doc) {
  if (!doc.contains("eval_bpc")) doc["eval_bpc"] = json::object();
  json& sets = doc["eval_bpc"];
  for (const auto& [name, bpc] : point.eval_bpc()) {
    if (!sets.contains(name)) sets[name] = json::array();
  }
  for (auto& [name, values] : sets.items()) {
    while (values.size() < at) values.push_back(nullptr);
    auto it = point.eval_bpc().find(name);
    values.push_back(it == point.eval_bpc().end() ? json(nullptr) : json(it->second));
  }
}

std::string CurvesJson(std::span<const v1::MetricPoint> points, const CurvePaging& paging) {
  json runs = json::array();
  std::map<std::string, size_t> index_of;
  for (const v1::MetricPoint& point : points) {
    if (!point.has_val_bpc()) continue;
    auto [it, inserted] = index_of.emplace(point.run_id(), runs.size());
    if (inserted) {
      runs.push_back({{"run_id", point.run_id()},
                      {"step", json::array()},
                      {"tokens", json::array()},
                      {"flops", json::array()},
                      {"val_bpc", json::array()}});
    }
    json& run = runs[it->second];
    run["step"].push_back(point.step());
    run["tokens"].push_back(point.tokens());
    run["flops"].push_back(point.flops());
    run["val_bpc"].push_back(point.val_bpc());
    AppendEvalBpc(point, run["step"].size() - 1, run);
  }
  return Dump(json{{"runs", std::move(runs)},
                   {"next_page_token",
                    paging.next_page_token.empty() ? json(nullptr) : json(paging.next_page_token)},
                   {"runs_per_page", paging.runs_per_page}});
}

std::string HistoryJson(std::string_view run_id, std::span<const v1::MetricPoint> sampled,
                        const v1::MetricPoint* latest) {
  json doc = {{"run_id", run_id}};
  for (const char* column :
       {"step", "tokens", "flops", "epoch", "train_bpc", "val_bpc", "learning_rate", "grad_norm",
        "aux_loss", "z_loss", "tokens_per_second", "flops_per_second"}) {
    doc[column] = json::array();
  }
  doc["eval_bpc"] = json::object();
  // Per MoE layer, one value per sampled point (null where that point lacks the layer).
  std::map<uint32_t, json> layers;
  for (size_t i = 0; i < sampled.size(); ++i) {
    for (const v1::ExpertLoadStats& load : sampled[i].expert_load()) {
      auto [it, inserted] = layers.emplace(load.layer(), json::object());
      if (inserted) {
        for (const char* column : {"max_min_ratio", "coefficient_of_variation", "dead_experts"}) {
          it->second[column] = json::array();
        }
      }
    }
  }
  for (size_t i = 0; i < sampled.size(); ++i) {
    const v1::MetricPoint& p = sampled[i];
    doc["step"].push_back(p.step());
    doc["tokens"].push_back(p.tokens());
    doc["flops"].push_back(p.flops());
    doc["epoch"].push_back(p.epoch());
    doc["train_bpc"].push_back(p.train_bpc());
    doc["val_bpc"].push_back(Number(p.has_val_bpc(), p.val_bpc()));
    doc["learning_rate"].push_back(p.learning_rate());
    doc["grad_norm"].push_back(p.grad_norm());
    doc["aux_loss"].push_back(p.aux_loss());
    doc["z_loss"].push_back(p.z_loss());
    doc["tokens_per_second"].push_back(p.tokens_per_second());
    doc["flops_per_second"].push_back(p.flops_per_second());
    AppendEvalBpc(p, i, doc);
    for (auto& [layer, columns] : layers) {
      const v1::ExpertLoadStats* found = nullptr;
      for (const v1::ExpertLoadStats& load : p.expert_load()) {
        if (load.layer() == layer) found = &load;
      }
      // A dead expert makes max/min infinite: a gap, with dead_experts telling why.
      columns["max_min_ratio"].push_back(Number(found != nullptr && found->min_share() > 0,
                                                found != nullptr && found->min_share() > 0
                                                    ? found->max_share() / found->min_share()
                                                    : 0.0));
      columns["coefficient_of_variation"].push_back(
          Number(found != nullptr, found ? found->coefficient_of_variation() : 0.0));
      columns["dead_experts"].push_back(found ? json(found->dead_experts()) : json(nullptr));
    }
  }
  json expert_load = json::array();
  for (auto& [layer, columns] : layers) {
    columns["layer"] = layer;
    expert_load.push_back(std::move(columns));
  }
  doc["expert_load"] = std::move(expert_load);
  if (latest != nullptr && latest->expert_load_size() > 0) {
    json per_layer = json::array();
    for (const v1::ExpertLoadStats& load : latest->expert_load()) {
      per_layer.push_back(ParsedMessage(load));
    }
    doc["latest_expert_load"] = {{"step", latest->step()}, {"layers", std::move(per_layer)}};
  } else {
    doc["latest_expert_load"] = nullptr;
  }
  return Dump(doc);
}

std::string MetricPageJson(std::span<const v1::MetricPoint> points, bool more) {
  json doc = {{"points", json::array()}};
  for (const v1::MetricPoint& point : points) doc["points"].push_back(ParsedMessage(point));
  doc["next_after_step"] =
      more && !points.empty() ? json(std::to_string(points.back().step())) : json(nullptr);
  return Dump(doc);
}

}  // namespace parity::web

namespace parity::web {

v1::Run TableRun(v1::Run run) {
  v1::RunSpec& spec = *run.mutable_spec();
  spec.clear_data();
  spec.clear_resources();
  spec.clear_labels();
  spec.clear_grid_point();
  spec.clear_also_serves();
  const uint64_t steps = spec.training().steps();
  spec.clear_training();
  spec.mutable_training()->set_steps(steps);
  run.clear_lease();
  run.clear_checkpoint();
  run.clear_summary();
  return run;
}

std::string TablePageJson(std::span<const TableRow> rows, std::string_view next_page_token) {
  json list = json::array();
  for (const TableRow& row : rows) {
    list.push_back(
        {{"run", ParsedMessage(TableRun(row.run))}, {"result", ParsedMessage(row.result)}});
  }
  return Dump(
      json{{"rows", std::move(list)},
           {"next_page_token", next_page_token.empty() ? json(nullptr) : json(next_page_token)}});
}

void SweepSummary::Add(const v1::Run& run) {
  const v1::RunSpec& spec = run.spec();
  ++runs_;
  const bool dense =
      spec.role() == v1::RUN_ROLE_DENSE_BASELINE || spec.role() == v1::RUN_ROLE_DENSE_FRONTIER;
  ++(dense ? dense_runs_ : moe_runs_);
  total_compute_flops_ += spec.accounting().compute_flops();
  if (std::find(budgets_.begin(), budgets_.end(), spec.compute_budget()) == budgets_.end()) {
    budgets_.push_back(spec.compute_budget());
  }
  const double multiple = spec.compute_multiple() > 0 ? spec.compute_multiple() : 1;
  if (dense && std::find(dense_multiples_.begin(), dense_multiples_.end(), multiple) ==
                   dense_multiples_.end()) {
    dense_multiples_.push_back(multiple);
  }
  if (run.state() != v1::RUN_STATE_FAILED) return;
  ++failed_runs_;
  auto [it, inserted] = failure_index_.try_emplace(
      std::make_pair(static_cast<int>(run.failure_class()), run.failure().message()),
      failures_.size());
  if (inserted) failures_.push_back({run.failure_class(), run.failure().message(), 0});
  ++failures_[it->second].runs;
}

std::string SweepSummary::Json() const {
  std::vector<Failure> failures = failures_;
  std::stable_sort(failures.begin(), failures.end(),
                   [](const Failure& a, const Failure& b) { return a.runs > b.runs; });
  json list = json::array();
  int64_t listed = 0;
  for (size_t i = 0; i < failures.size() && i < kMaxFailures; ++i) {
    list.push_back({{"failure_class", v1::FailureClass_Name(failures[i].failure_class)},
                    {"message", failures[i].message},
                    {"runs", failures[i].runs}});
    listed += failures[i].runs;
  }
  std::vector<std::string> budgets = budgets_;
  std::sort(budgets.begin(), budgets.end());
  std::vector<double> multiples = dense_multiples_;
  std::sort(multiples.begin(), multiples.end());
  return Dump(json{{"runs", runs_},
                   {"moe_runs", moe_runs_},
                   {"dense_runs", dense_runs_},
                   {"compute_budgets", budgets},
                   {"dense_multiples", multiples},
                   {"total_compute_flops", total_compute_flops_},
                   {"failed_runs", failed_runs_},
                   {"failures", std::move(list)},
                   {"other_failed_runs", failed_runs_ - listed}});
}

}  // namespace parity::web
