// Plan rendering. The table is for reading (three significant figures, units); CSV and JSON are
// for tools (full precision).
#include "cli/plan_format.h"

#include <cmath>

#include "cli/table.h"
#include "core/accounting.h"
#include "core/memory_estimate.h"
#include "fmt/format.h"
#include "google/protobuf/util/json_util.h"

namespace parity::cli {
namespace {

using parity::v1::RunSpec;

std::string Layout(const RunSpec& run) {
  if (run.model().architecture() != parity::v1::ARCHITECTURE_MOE) return "dense";
  switch (run.model().moe().layout()) {
    case parity::v1::MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT:
      return "1dense+SE";
    case parity::v1::MOE_LAYOUT_ALL_MOE:
      return "all-moe";
    case parity::v1::MOE_LAYOUT_INTERLEAVED:
      return fmt::format("interleaved/{}", run.model().moe().interleave_every());
    default:
      return "moe";
  }
}

// D/N, tokens per non-embedding parameter: the papers train every model to ≥ 20.
double TokensPerParam(const RunSpec& run) {
  const auto& a = run.accounting();
  return a.params() > 0 ? double(a.tokens()) / double(a.params()) : 0.0;
}

// The other groups a run serves, e.g. "C2 dense-1C; C1 strict dense-1C": budget, the data
// variant when it differs from the run's, and the group's label in it.
std::string AlsoServes(const RunSpec& run) {
  std::string out;
  for (const parity::v1::GroupRef& g : run.also_serves()) {
    std::string label;
    for (const char* key : {"baseline", "dense_size", "moe"}) {
      auto it = g.grid_point().find(key);
      if (it != g.grid_point().end()) {
        label = std::string(key) == "dense_size" ? "dense-" + it->second : it->second;
        break;
      }
    }
    if (!out.empty()) out += "; ";
    out += g.compute_budget();
    if (g.data_variant() != run.data_variant()) out += " " + g.data_variant();
    out += " " + label;
  }
  return out;
}

TableRow PlanRow(const RunSpec& run) {
  const auto& a = run.accounting();
  const auto& m = run.model();
  const bool moe = m.architecture() == parity::v1::ARCHITECTURE_MOE;
  auto moe_int = [&](uint32_t v) { return moe ? std::to_string(v) : std::string("-"); };
  return {run.name(),
          Layout(run),
          std::to_string(m.d_model()),
          std::to_string(m.num_layers()),
          moe_int(m.moe().num_experts()),
          moe_int(m.moe().top_k()),
          moe_int(m.moe().expert_hidden()),
          HumanCount(double(a.params())),
          HumanCount(double(a.active_params())),
          fmt::format("{:.1f}%", a.activation_rate() * 100),
          Sci(a.flops_per_token()),
          Sci(a.compute_flops()),
          HumanCount(double(a.tokens())),
          fmt::format("{:.3g}", TokensPerParam(run)),
          HumanCount(double(a.unique_tokens())),
          fmt::format("{:.2f}", a.epochs()),
          std::to_string(run.training().steps()),
          Sci(run.training().learning_rate()),
          HumanCount(double(run.training().batch_tokens())),
          moe ? fmt::format("{:.2f}", run.predicted_efficiency_leverage()) : std::string("-"),
          run.training().micro_batch_sequences() > 0
              ? std::to_string(run.training().micro_batch_sequences())
              : std::string("-"),
          run.resources().gpu_memory_bytes() > 0
              ? core::HumanBytes(run.resources().gpu_memory_bytes())
              : std::string("-"),
          run.also_serves().empty() ? std::string("-") : AlsoServes(run)};
}

std::string Table(const std::vector<RunSpec>& runs) {
  std::vector<TableRow> rows;
  for (const RunSpec& run : runs) rows.push_back(PlanRow(run));
  // Names and layouts read left-aligned; numbers right-aligned so magnitudes line up.
  return RenderTable({"name",  "layout", "D_m",   "L",      "E",     "K",   "D_e", "N",
                      "N_a",   "r_a",    "M",     "C",      "D",     "D/N", "D̂",   "epochs",
                      "steps", "lr",     "batch", "EL law", "micro", "mem", "also"},
                     rows, {"name", "layout", "also"});
}

std::string Csv(const std::vector<RunSpec>& runs) {
  std::string out =
      "name,layout,d_model,num_layers,num_experts,top_k,expert_hidden,params,active_params,"
      "activation_rate,flops_per_token,compute_flops,tokens,tokens_per_param,unique_tokens,epochs,"
      "steps,learning_rate,batch_tokens,predicted_efficiency_leverage,micro_batch_sequences,"
      "gpu_memory_bytes,also_serves\n";
  for (const RunSpec& run : runs) {
    const auto& a = run.accounting();
    const auto& m = run.model();
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.6g},{:.6e},{:.6e},{},{:.6g},{},{:.6g},{},{:.6g},{},{:.6g},{}"
        ",{},"
        "\"{}\"\n",
        run.name(), Layout(run), m.d_model(), m.num_layers(), m.moe().num_experts(),
        m.moe().top_k(), m.moe().expert_hidden(), a.params(), a.active_params(),
        a.activation_rate(), a.flops_per_token(), a.compute_flops(), a.tokens(),
        TokensPerParam(run), a.unique_tokens(), a.epochs(), run.training().steps(),
        run.training().learning_rate(), run.training().batch_tokens(),
        run.predicted_efficiency_leverage(), run.training().micro_batch_sequences(),
        run.resources().gpu_memory_bytes(), AlsoServes(run));
  }
  return out;
}

std::string Json(const std::vector<RunSpec>& runs) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out = "[";
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string one;
    (void)google::protobuf::util::MessageToJsonString(runs[i], &one, options);
    out += (i == 0 ? "\n  " : ",\n  ") + one;
  }
  out += runs.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace

std::string FormatPlan(const std::vector<RunSpec>& runs, PlanFormat format) {
  switch (format) {
    case PlanFormat::kCsv:
      return Csv(runs);
    case PlanFormat::kJson:
      return Json(runs);
    default:
      return Table(runs);
  }
}

}  // namespace parity::cli
