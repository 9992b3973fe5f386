#include "worker/engine_protocol.h"

#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/eval_sets.h"
#include "core/proto_time.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace parity::worker {
namespace {

using nlohmann::json;

// The value under `snake` or its lowerCamelCase twin, or nullptr.
const json* Field(const json& obj, std::string_view snake) {
  auto it = obj.find(std::string(snake));
  if (it != obj.end()) return &*it;
  std::string camel;
  bool up = false;
  for (char c : snake) {
    if (c == '_') {
      up = true;
    } else {
      camel.push_back(up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
      up = false;
    }
  }
  it = obj.find(camel);
  return it != obj.end() ? &*it : nullptr;
}

// A number, also when proto JSON wrote a 64-bit integer as a string.
std::optional<double> Number(const json& obj, std::string_view name) {
  const json* v = Field(obj, name);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return d;
  }
  return std::nullopt;
}
double Num(const json& obj, std::string_view name) { return Number(obj, name).value_or(0.0); }
uint64_t U64(const json& obj, std::string_view name) {
  double d = Num(obj, name);
  return d > 0 && std::isfinite(d) ? static_cast<uint64_t>(std::llround(d)) : 0;
}

// The per-set BPC object under `name` ({"validation": 1.93, "code": 2.41}) into `out`. What the
// scheduler would refuse is dropped here with a warning, so that one bad entry does not cost the
// line's other values (train BPC, step, tokens): a value that is not an object, an entry whose
// name is not a plain set name or whose BPC is not a finite non-negative number, and every entry
// past core::kMaxEvalSets.
void ParseEvalBpc(const json& obj, std::string_view name,
                  google::protobuf::Map<std::string, double>& out) {
  const json* v = Field(obj, name);
  if (v == nullptr || v->is_null()) return;
  if (!v->is_object()) {
    spdlog::warn("engine line: '{}' is not an object of set name to BPC; dropped", name);
    return;
  }
  for (const auto& [set, bpc] : v->items()) {
    if (out.size() >= core::kMaxEvalSets) {
      spdlog::warn("engine line: '{}' holds more than {} evaluation sets; dropped the rest", name,
                   core::kMaxEvalSets);
      return;
    }
    if (absl::Status status = core::CheckEvalSetName(set); !status.ok()) {
      spdlog::warn("engine line: '{}': {}; entry dropped", name, std::string(status.message()));
      continue;
    }
    if (!bpc.is_number() || !std::isfinite(bpc.get<double>()) || bpc.get<double>() < 0) {
      spdlog::warn("engine line: '{}.{}' is {}, not a finite non-negative BPC; entry dropped", name,
                   set, bpc.dump().substr(0, 64));
      continue;
    }
    out[set] = bpc.get<double>();
  }
}

parity::v1::MetricPoint ToMetric(const json& j) {
  parity::v1::MetricPoint p;
  p.set_step(U64(j, "step"));
  p.set_tokens(U64(j, "tokens"));
  p.set_unique_tokens(U64(j, "unique_tokens"));
  p.set_epoch(Num(j, "epoch"));
  p.set_train_bpc(Num(j, "train_bpc"));
  if (std::optional<double> v = Number(j, "val_bpc")) p.set_val_bpc(*v);
  ParseEvalBpc(j, "eval_bpc", *p.mutable_eval_bpc());
  p.set_learning_rate(Num(j, "learning_rate"));
  p.set_grad_norm(Num(j, "grad_norm"));
  p.set_aux_loss(Num(j, "aux_loss"));
  p.set_z_loss(Num(j, "z_loss"));
  p.set_tokens_per_second(Num(j, "tokens_per_second"));
  p.set_flops_per_second(Num(j, "flops_per_second"));
  p.set_flops(Num(j, "flops"));
  if (const json* load = Field(j, "expert_load"); load != nullptr && load->is_array()) {
    for (size_t i = 0; i < load->size(); ++i) {
      const json& l = (*load)[i];
      if (!l.is_object()) continue;
      parity::v1::ExpertLoadStats* s = p.add_expert_load();
      s->set_layer(Number(l, "layer") ? static_cast<uint32_t>(U64(l, "layer"))
                                      : static_cast<uint32_t>(i));
      s->set_min_share(Num(l, "min_share"));
      s->set_max_share(Num(l, "max_share"));
      s->set_coefficient_of_variation(Number(l, "coefficient_of_variation").value_or(Num(l, "cv")));
      s->set_dead_experts(static_cast<uint32_t>(U64(l, "dead_experts")));
      if (const json* shares = Field(l, "shares"); shares != nullptr && shares->is_array()) {
        for (const json& x : *shares) {
          if (x.is_number()) s->add_shares(x.get<double>());
        }
      }
    }
  }
  if (std::optional<double> t = Number(j, "time_unix_seconds")) {
    *p.mutable_time() = ToProtoTime(absl::FromUnixNanos(static_cast<int64_t>(*t * 1e9)));
  } else if (const json* t = Field(j, "time"); t != nullptr && t->is_string()) {
    absl::Time parsed;
    std::string error;
    if (absl::ParseTime(absl::RFC3339_full, t->get<std::string>(), &parsed, &error)) {
      *p.mutable_time() = ToProtoTime(parsed);
    }
  }
  if (!p.has_time()) {
    *p.mutable_time() = ToProtoTime(absl::Now());
  }
  return p;
}

parity::v1::RunSummary ToSummary(const json& j) {
  parity::v1::RunSummary s;
  s.set_final_train_bpc(Number(j, "final_train_bpc").value_or(Num(j, "train_bpc")));
  s.set_final_val_bpc(Number(j, "final_val_bpc").value_or(Num(j, "val_bpc")));
  s.set_tokens(U64(j, "tokens"));
  s.set_steps(Number(j, "steps") ? U64(j, "steps") : U64(j, "step"));
  s.set_measured_flops_per_token(Num(j, "measured_flops_per_token"));
  double wall = Number(j, "wall_time_seconds")
                    .value_or(Number(j, "wall_seconds").value_or(Num(j, "train_seconds")));
  if (const json* w = Field(j, "wall_time"); w != nullptr && w->is_number())
    wall = w->get<double>();
  *s.mutable_wall_time() = ToProtoDuration(absl::Nanoseconds(static_cast<int64_t>(wall * 1e9)));
  s.set_peak_memory_bytes(Number(j, "peak_memory_bytes") ? U64(j, "peak_memory_bytes")
                                                         : U64(j, "peak_rss_bytes"));
  // The device's high-water mark beside the planner's estimate (kernels/train/metrics.cc).
  s.set_peak_device_memory_bytes(U64(j, "peak_device_memory_bytes"));
  s.set_estimated_device_memory_bytes(U64(j, "estimated_device_memory_bytes"));
  s.set_tokens_per_second(Num(j, "tokens_per_second"));
  ParseEvalBpc(j, "final_eval_bpc", *s.mutable_final_eval_bpc());
  // The manifest digest of the prepared dataset the engine read (64 hex); anything else dropped.
  if (const json* d = Field(j, "dataset_digest"); d != nullptr && d->is_string()) {
    const std::string& digest = d->get_ref<const std::string&>();
    if (digest.size() == 64 && digest.find_first_not_of("0123456789abcdef") == std::string::npos) {
      s.set_dataset_digest(digest);
    } else {
      spdlog::warn("engine summary: dataset_digest '{}' is not 64 lowercase hex; dropped",
                   digest.substr(0, 80));
    }
  }
  return s;
}

std::string TypeOf(const json& j) {
  for (const char* key : {"type", "event", "kind"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

}  // namespace

EngineEvent ParseEngineLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty() || line.front() != '{') return EngineIgnored{"not a JSON object"};
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return EngineIgnored{"malformed JSON"};
  const std::string type = TypeOf(j);
  if (type == "summary" || type == "final") return ToSummary(j);
  if (auto it = j.find("summary"); it != j.end() && it->is_object()) return ToSummary(*it);
  if (type == "error") {
    const json* code = Field(j, "code");
    const json* message = Field(j, "message");
    return EngineError{
        code != nullptr && code->is_string() ? code->get<std::string>() : "",
        message != nullptr && message->is_string() ? message->get<std::string>() : ""};
  }
  if (type == "rendezvous") {
    const json* address = Field(j, "address");
    const json* token = Field(j, "token");
    if (address == nullptr || !address->is_string() || token == nullptr || !token->is_string()) {
      return EngineIgnored{"rendezvous without an address and a token"};
    }
    EngineRendezvous r{address->get<std::string>(), token->get<std::string>(),
                       static_cast<int64_t>(U64(j, "gang_epoch"))};
    if (r.address.empty() || r.address.find('#') != std::string::npos || r.token.empty() ||
        r.token.find('#') != std::string::npos) {
      return EngineIgnored{"rendezvous with a malformed address or token"};
    }
    return r;
  }
  if (type == "checkpoint") {
    const json* path = Field(j, "path");
    if (path == nullptr) path = Field(j, "uri");
    if (path == nullptr || !path->is_string()) return EngineIgnored{"checkpoint without a path"};
    return EngineCheckpoint{U64(j, "step"), path->get<std::string>()};
  }
  if (type.empty() || type == "metric" || type == "metrics" || type == "step") {
    if (Field(j, "step") == nullptr) return EngineIgnored{"no step"};
    return ToMetric(j);
  }
  return EngineIgnored{absl::StrCat("type '", type, "'")};
}

std::string RendezvousRelay(const EngineRendezvous& r) {
  return absl::StrCat(r.address, "#", r.token);
}

absl::StatusOr<EngineRendezvous> ParseRendezvousRelay(std::string_view relayed) {
  const size_t hash = relayed.find('#');
  if (hash == std::string_view::npos || hash == 0 || hash + 1 == relayed.size() ||
      relayed.find('#', hash + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "rendezvous: the scheduler relayed no \"HOST:PORT#TOKEN\" from rank 0's worker (a rank "
        "0 engine or worker of another version?)");
  }
  return EngineRendezvous{.address = std::string(relayed.substr(0, hash)),
                          .token = std::string(relayed.substr(hash + 1))};
}

std::vector<std::string> EngineArgv(const EngineInvocation& in) {
  std::vector<std::string> argv = {in.binary,
                                   "--run",
                                   in.run_json_path,
                                   "--out",
                                   in.checkpoint_dir,
                                   "--metrics-fd",
                                   absl::StrCat(in.metrics_fd),
                                   "--threads",
                                   absl::StrCat(in.threads)};
  if (in.max_corpus_bytes > 0) {
    argv.push_back("--max-corpus-bytes");
    argv.push_back(absl::StrCat(in.max_corpus_bytes));
  }
  if (!in.resume_from.empty()) {
    argv.push_back("--resume-from");
    argv.push_back(in.resume_from);
  } else if (in.resume) {
    argv.push_back("--resume");
  }
  if (in.world_size > 1) {
    argv.insert(argv.end(),
                {"--rank", absl::StrCat(in.rank), "--world-size", absl::StrCat(in.world_size),
                 "--gang-epoch", absl::StrCat(in.gang_epoch)});
    if (in.rank == 0) {
      argv.insert(argv.end(), {"--rendezvous-listen", in.rendezvous_listen});
    } else {
      argv.insert(argv.end(), {"--rendezvous", in.rendezvous_address});
    }
  }
  return argv;
}

parity::v1::FailureClass ClassifyEngineExit(const ExitStatus& exit, bool killed_by_worker) {
  if (exit.kind == ExitStatus::Kind::kExited) {
    if (exit.code == 2) return parity::v1::FAILURE_CLASS_USER_ERROR;
    if (exit.code == 3) return parity::v1::FAILURE_CLASS_PREEMPTED;
    if (exit.code == 5) return parity::v1::FAILURE_CLASS_OUT_OF_MEMORY;
    if (exit.code == 6) return parity::v1::FAILURE_CLASS_DIVERGED;
    return parity::v1::FAILURE_CLASS_INFRASTRUCTURE;
  }
  if (exit.signal == SIGKILL && !killed_by_worker) return parity::v1::FAILURE_CLASS_OUT_OF_MEMORY;
  return parity::v1::FAILURE_CLASS_INFRASTRUCTURE;
}

std::optional<EngineCheckpoint> LatestCheckpointIn(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  static const std::regex kStep(R"((?:step|ckpt|checkpoint)[-_.]?0*(\d+))");
  std::optional<EngineCheckpoint> best;
  // The engine's LATEST file names the newest complete checkpoint: trust it when it is there.
  if (std::ifstream latest(dir + "/LATEST"); latest) {
    std::string name;
    std::getline(latest, name);
    std::smatch m;
    if (!name.empty() && std::regex_search(name, m, kStep) && fs::exists(dir + "/" + name, ec)) {
      return EngineCheckpoint{std::stoull(m[1].str()), dir + "/" + name};
    }
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos || name.starts_with(".")) continue;  // half-written
    std::smatch m;
    if (!std::regex_search(name, m, kStep)) continue;
    uint64_t step = std::stoull(m[1].str());
    if (!best || step > best->step) best = EngineCheckpoint{step, e.path().string()};
  }
  return best;
}

std::optional<uint64_t> CheckpointFileStep(const std::string& path) {
  static const std::regex kStep(R"(^step-0*(\d+)\.ckpt$)");
  const std::string name = std::filesystem::path(path).filename().string();
  std::smatch m;
  if (!std::regex_match(name, m, kStep)) return std::nullopt;
  return std::stoull(m[1].str());
}

std::optional<EngineCheckpoint> NewestCheckpointAtOrBefore(const std::string& root,
                                                           uint64_t max_step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::optional<EngineCheckpoint> best;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::optional<uint64_t> step = CheckpointFileStep(it->path().string());
    if (step && *step <= max_step && (!best || *step > best->step)) {
      best = EngineCheckpoint{*step, it->path().string()};
    }
  }
  return best;
}

}  // namespace parity::worker
