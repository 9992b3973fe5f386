// Writes the binary seed corpora (tests/fuzz/README.md): requests for scheduler_requests_fuzzer
// in wire format, and checkpoints for checkpoint_fuzzer as the engine writes them less their
// trailing checksum (the target appends it).
//   parity_fuzz_make_seeds tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/spec_loader.h"
#include "kernels/train/checkpoint.h"
#include "parity/v1/sweep_service.pb.h"
#include "parity/v1/worker_service.pb.h"
#include "tests/fuzz/fuzz_world.h"

namespace {

namespace v1 = parity::v1;
namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

void Request(const fs::path& dir, const std::string& name, int method,
             const google::protobuf::Message& request) {
  Write(dir / name, std::string(1, static_cast<char>(method)) + request.SerializeAsString());
}

v1::Device Cpu() {
  v1::Device device;
  device.set_kind(v1::DEVICE_KIND_CPU);
  device.set_threads(4);
  device.set_memory_bytes(8ull << 30);
  return device;
}

void Requests(const fs::path& dir) {
  const v1::SweepSpec spec =
      *parity::core::ParseSweepSpec(parity::fuzz::kSeedSweepYaml, parity::core::SpecFormat::kYaml);
  {
    v1::PlanSweepRequest r;
    *r.mutable_spec() = spec;
    Request(dir, "plan_sweep", 0, r);
  }
  {
    v1::SubmitSweepRequest r;
    *r.mutable_spec() = spec;
    r.set_owner("fuzz");
    r.set_idempotency_key("key-1");
    Request(dir, "submit_sweep", 1, r);
  }
  {
    v1::GetSweepRequest r;
    r.set_sweep_id("@sweep");
    Request(dir, "get_sweep", 2, r);
  }
  {
    v1::ListSweepsRequest r;
    r.set_state(v1::SWEEP_STATE_ACTIVE);
    r.set_page_size(1);
    Request(dir, "list_sweeps", 3, r);
  }
  {
    v1::CancelSweepRequest r;
    r.set_sweep_id("@sweep");
    r.set_reason("fuzz");
    Request(dir, "cancel_sweep", 4, r);
  }
  {
    v1::DeleteSweepRequest r;
    r.set_sweep_id("@sweep");
    Request(dir, "delete_sweep", 5, r);
  }
  {
    v1::ListRunsRequest r;
    r.set_sweep_id("@sweep");
    r.add_states(v1::RUN_STATE_PENDING);
    r.add_states(v1::RUN_STATE_SUCCEEDED);
    r.set_page_size(2);
    Request(dir, "list_runs", 6, r);
  }
  {
    v1::GetRunRequest r;
    r.set_run_id("@run");
    Request(dir, "get_run", 7, r);
  }
  {
    v1::QueryResultsRequest r;
    r.mutable_filter()->set_sweep_id("@sweep");
    r.mutable_filter()->set_min_activation_rate(0.1);
    r.mutable_filter()->set_max_activation_rate(0.9);
    r.set_order_by("final_val_bpc desc");
    r.set_page_size(2);
    Request(dir, "query_results", 8, r);
  }
  {
    v1::AnalyzeSweepRequest r;
    r.set_sweep_id("@sweep");
    Request(dir, "analyze_sweep", 9, r);
  }
  {
    v1::ListWorkersRequest r;
    r.set_seen_within_seconds(600);
    Request(dir, "list_workers", 10, r);
  }
  {
    v1::WatchSweepRequest r;
    r.set_sweep_id("@sweep");
    r.set_include_metrics(true);
    Request(dir, "watch_sweep", 11, r);
  }
  {
    v1::WatchRunRequest r;
    r.set_run_id("@run2");
    Request(dir, "watch_run", 12, r);
  }
  {
    v1::RegisterWorkerRequest r;
    r.set_hostname("host-2");
    *r.add_devices() = Cpu();
    v1::Device* gpu = r.add_devices();
    gpu->set_kind(v1::DEVICE_KIND_CUDA);
    gpu->set_index(0);
    gpu->set_memory_bytes(80ull << 30);
    (*r.mutable_labels())["zone"] = "a";
    r.set_version("0.1.0");
    Request(dir, "register_worker", 13, r);
  }
  {
    v1::LeaseRunRequest r;
    r.set_worker_id("@worker");
    *r.add_free_devices() = Cpu();
    r.mutable_wait_time()->set_seconds(1);
    Request(dir, "lease_run", 14, r);
  }
  {
    v1::HeartbeatRequest r;
    r.set_worker_id("@worker");
    r.set_run_id("@run2");
    r.set_lease_epoch(1);
    r.set_step(70);
    r.mutable_checkpoint()->set_uri("@run2/recorded-1/step-00000070.ckpt");
    r.mutable_checkpoint()->set_step(70);
    Request(dir, "heartbeat", 15, r);
    // What a lease holder recorded against a clean build (issue #23): refused on checkpoint.uri.
    r.mutable_checkpoint()->set_uri("../../root/.ssh/id_rsa");
    Request(dir, "heartbeat_checkpoint_outside", 15, r);
  }
  {
    v1::ReportMetricsRequest r;
    r.set_run_id("@run2");
    r.set_lease_epoch(1);
    for (uint64_t step : {70, 80}) {
      v1::MetricPoint* p = r.add_points();
      p->set_attempt(1);
      p->set_step(step);
      p->set_tokens(step * 64);
      p->set_train_bpc(3.2);
      p->set_val_bpc(3.3);
      p->set_learning_rate(1e-3);
      v1::ExpertLoadStats* load = p->add_expert_load();
      load->set_layer(0);
      load->add_shares(0.5);
      load->add_shares(0.5);
    }
    Request(dir, "report_metrics", 16, r);
  }
  {
    v1::CompleteRunRequest r;
    r.set_run_id("@run2");
    r.set_lease_epoch(1);
    r.mutable_failure()->set_failure_class(v1::FAILURE_CLASS_INFRASTRUCTURE);
    r.mutable_failure()->mutable_status()->set_code(13);
    r.mutable_failure()->mutable_status()->set_message("crashed");
    r.mutable_checkpoint()->set_uri("@run2/epoch-1/step-00000080.ckpt");
    r.mutable_checkpoint()->set_step(80);
    Request(dir, "complete_run_failure", 17, r);
    r.mutable_success()->set_steps(312);
    r.mutable_success()->set_final_val_bpc(3.1);
    Request(dir, "complete_run_success", 17, r);
  }
  {
    v1::CheckpointRetentionRequest r;
    r.set_worker_id("@worker");
    r.add_run_ids("@run");
    r.add_run_ids("@run2");
    r.add_run_ids("@pending");
    Request(dir, "checkpoint_retention", 18, r);
  }
}

void Checkpoints(const fs::path& dir) {
  const fs::path scratch = fs::temp_directory_path() / "parity-fuzz-seeds";
  int index = 0;
  for (int layers : {0, 2}) {
    parity::kernels::CheckpointHeader header;
    header.fingerprint = 0x1234abcd;
    header.device = layers ? "cuda:NVIDIA H200" : "cpu";
    header.precision = layers ? "bf16" : "fp32";
    header.step = 120;
    header.cursor = 7;
    header.rng = {42, 99};
    for (int l = 0; l < layers; ++l) header.balance_bias.push_back({0.1f, -0.2f, 0.3f, 0.0f});
    const int64_t n = layers ? 16 : 3;
    auto read = [](parity::kernels::CheckpointArray array, int64_t offset, int64_t count,
                   float* dst) {
      for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(array) + 0.5f * (offset + i);
    };
    fs::remove_all(scratch);
    const std::string path = *parity::kernels::WriteCheckpoint(scratch, header, n, read, 1);
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bytes.resize(bytes.size() - 8);  // the target appends the checksum
    Write(dir / ("checkpoint_" + std::to_string(index++)), bytes);
  }
  fs::remove_all(scratch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 64;
  }
  const fs::path corpus = argv[1];
  Requests(corpus / "scheduler_requests_fuzzer");
  Checkpoints(corpus / "checkpoint_fuzzer");
  return 0;
}
