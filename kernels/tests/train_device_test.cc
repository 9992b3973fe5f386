// Device choice and precision: --device parsing and defaults, training.precision through the
// RunSpec adapter, refusals that name the flag or field, and checkpoints tied to the device and
// precision that wrote them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/gpu_limits.h"
#include "kernels/backend/device_choice.h"
#include "kernels/model/memory_shape.h"
#include "kernels/model/model.h"
#include "kernels/spec/run_spec_adapter.h"
#include "kernels/train/checkpoint.h"
#include "kernels/train/session.h"
#include "kernels/train/trainer.h"

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;

class Sink final : public MetricsSink {
 public:
  void Write(const std::string& line) override { lines.push_back(nlohmann::json::parse(line)); }
  std::vector<nlohmann::json> lines;
};

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("parity_device_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_ = (dir_ / "corpus.txt").string();
    std::ofstream out(corpus_, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << "Verse " << i << ": In the beginning was the Word. ";
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json Spec() const {
    return {{"name", "device-test"},
            {"model",
             {{"architecture", "ARCHITECTURE_MOE"},
              {"dModel", 16},
              {"numLayers", 2},
              {"numHeads", 2},
              {"ffnHidden", 32},
              {"tieEmbeddings", true},
              {"moe",
               {{"layout", "MOE_LAYOUT_ALL_MOE"},
                {"numExperts", 4},
                {"topK", 2},
                {"expertHidden", 8},
                {"router", {{"balance", "BALANCE_METHOD_LOSS_FREE"}}}}}}},
            {"training",
             {{"learningRate", 0.003},
              {"batchTokens", 64},
              {"sequenceLength", 16},
              {"steps", 2},
              {"seed", 1},
              {"evalTokens", 32}}},
            {"data", {{"corpus", corpus_}, {"validationFraction", 0.1}}}};
  }
  RunConfig Config(const nlohmann::json& spec) const {
    auto parsed = RunConfigFromRunSpecJson(spec.dump());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? parsed->config : RunConfig{};
  }

  fs::path dir_;
  std::string corpus_;
};

TEST(DeviceChoiceTest, ParsesCpuAndCudaOrdinalsAndNamesTheFlagOtherwise) {
  for (const auto& [text, kind, ordinal] :
       {std::tuple{"cpu", DeviceKind::kCpu, 0}, std::tuple{"cuda", DeviceKind::kCuda, 0},
        std::tuple{"cuda:3", DeviceKind::kCuda, 3}}) {
    auto c = ParseDeviceChoice(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->kind, kind) << text;
    EXPECT_EQ(c->ordinal, ordinal) << text;
  }
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", ""}) {
    auto c = ParseDeviceChoice(bad);
    ASSERT_FALSE(c.ok()) << "accepted --device '" << bad << "'";
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("--device"), std::string::npos) << c.status();
  }
  EXPECT_EQ(DeviceChoiceName(DefaultDeviceChoice(0)), "cpu");
  EXPECT_EQ(DeviceChoiceName(DefaultDeviceChoice(2)), "cuda:0") << "resources.gpus > 0 → cuda:0";
}

// The peak is the most bytes live at once, not what was ever allocated; a buffer that outlives its
// device still frees cleanly.
TEST(CpuDeviceTest, PeakIsTheMostBytesLiveAtOnce) {
  auto device = MakeCpuDevice({.threads = 1});
  EXPECT_EQ(device->PeakBytes(), 0u);
  auto a = device->Allocate(100), b = device->Allocate(200);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(device->PeakBytes(), 300u);
  a->reset();
  auto c = device->Allocate(50);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(device->AllocatedBytes(), 350u) << "allocated counts freed buffers too";
  EXPECT_EQ(device->PeakBytes(), 300u) << "250 live now; 300 was the most";
  auto d = device->Allocate(120);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(device->PeakBytes(), 370u) << "200 + 50 + 120 live";
  device.reset();
  b->reset();
}

// A CPU run's summary: the device's peak is every byte the session allocated (nothing is freed
// during a run), and the estimate is core's for this config and precision, the buffers alone on
// the CPU (no CUDA workspace), so on the CPU the two are equal to the byte.
TEST_F(DeviceTest, SummaryReportsTheDevicePeakBesideTheEstimateInBothPrecisions) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(absl::StrCat(PrecisionName(precision), recompute ? ", recomputing" : ""));
      RunConfig c = Config(Spec());
      c.precision = precision;
      c.train.recompute_activations = recompute;
      Sink sink;
      auto r = RunTraining(
          c, {.out_dir = (dir_ / absl::StrCat(PrecisionName(precision), recompute)).string(),
              .metrics = &sink});
      ASSERT_TRUE(r.ok()) << r.status();
      const nlohmann::json& summary = sink.lines.back();
      ASSERT_EQ(summary["event"], "summary");
      ASSERT_EQ(summary["precision"], PrecisionName(precision));

      // The session's allocations on a device of our own: the model, AdamW's m and v, step loads.
      auto device = MakeCpuDevice({.threads = 1});
      auto model = CreateModel(c.model, precision, *device, c.train.batch_size, recompute);
      ASSERT_TRUE(model.ok()) << model.status();
      const size_t n = static_cast<size_t>((*model)->NumParams());
      const int64_t loads = std::max<int64_t>((*model)->NumMoeLayers() * c.model.n_experts, 1);
      auto m = device->Allocate(n * 4), v = device->Allocate(n * 4);
      auto step_load = device->Allocate(static_cast<size_t>(loads) * 8);
      ASSERT_TRUE(m.ok() && v.ok() && step_load.ok());
      EXPECT_EQ(summary["peak_device_memory_bytes"].get<uint64_t>(), device->AllocatedBytes())
          << summary.dump();

      core::MemoryShape shape = MemoryShapeOf(c.model);
      shape.recompute = recompute;
      const core::MemoryEstimate estimate =
          core::EstimateTrainingMemory(shape, c.train.batch_size, MemoryPrecisionOf(precision));
      EXPECT_EQ(summary["estimated_device_memory_bytes"].get<uint64_t>(), estimate.BufferBytes())
          << "core's estimate for this config, less the CUDA workspace the CPU has not";
      EXPECT_EQ(summary["peak_device_memory_bytes"], summary["estimated_device_memory_bytes"])
          << "on the CPU the estimate is exact";
      EXPECT_GT(summary["peak_memory_bytes"].get<uint64_t>(), 0u) << "the host's peak RSS";
    }
  }
}

TEST_F(DeviceTest, AdapterCarriesPrecisionAndGpus) {
  nlohmann::json j = Spec();
  auto plain = RunConfigFromRunSpecJson(j.dump());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->config.precision, Precision::kUnspecified);
  EXPECT_EQ(plain->gpus, 0);
  j["training"]["precision"] = "PRECISION_FP32";
  j["resources"] = {{"gpus", 1}};
  auto fp32 = RunConfigFromRunSpecJson(j.dump());
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_EQ(fp32->config.precision, Precision::kFp32);
  EXPECT_EQ(fp32->gpus, 1);
  j["training"]["precision"] = "PRECISION_BF16";
  EXPECT_EQ(RunConfigFromRunSpecJson(j.dump())->config.precision, Precision::kBf16);
}

TEST_F(DeviceTest, UnsetPrecisionTrainsFp32OnCpuAndBf16WhenTheSpecAsks) {
  EXPECT_EQ(*ResolvePrecision(Precision::kUnspecified, DeviceKind::kCpu), Precision::kFp32);
  EXPECT_EQ(*ResolvePrecision(Precision::kUnspecified, DeviceKind::kCuda), Precision::kBf16)
      << "bf16 is the GPU's default";
  EXPECT_EQ(*ResolvePrecision(Precision::kFp32, DeviceKind::kCuda), Precision::kFp32);
  Sink sink;
  RunConfig c = Config(Spec());
  auto r = RunTraining(c, {.out_dir = (dir_ / "a").string(), .metrics = &sink});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sink.lines.back()["precision"], "fp32");
  EXPECT_EQ(sink.lines.back()["device"], "cpu");
  c.precision = Precision::kBf16;
  r = RunTraining(c, {.out_dir = (dir_ / "b").string(), .metrics = &sink});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sink.lines.back()["precision"], "bf16") << "the CPU emulates the bf16 mode";
  // A bf16 checkpoint does not resume as fp32: the run's numerics would change mid-curve.
  c.precision = Precision::kFp32;
  c.train.steps += 1;
  r = RunTraining(
      c,
      {.out_dir = (dir_ / "b").string(), .resume = ResumeMode::kResumeIfPresent, .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("training.precision"), std::string::npos) << r.status();
}

TEST_F(DeviceTest, ShapesTheCudaKernelsCannotTakeAreRefusedNamingTheFieldBeforeAnyWork) {
  RunConfig c = Config(Spec());
  EXPECT_TRUE(ValidateForDevice(c.model, DeviceKind::kCuda).ok()) << "the test model fits";
  c.model.n_heads = 1;
  c.model.n_kv_heads = 1;
  c.model.d_model = core::kCudaMaxHeadDim * 2;
  const absl::Status wide = ValidateForDevice(c.model, DeviceKind::kCuda);
  EXPECT_EQ(wide.code(), absl::StatusCode::kInvalidArgument) << wide;
  EXPECT_NE(wide.message().find("model.num_heads"), std::string::npos) << wide;
  EXPECT_TRUE(ValidateForDevice(c.model, DeviceKind::kCpu).ok()) << "every shape fits the CPU";
  c = Config(Spec());
  c.model.layout = MoeLayout::kAllMoe;
  c.model.n_experts = core::kCudaMaxExperts + 1;
  c.model.top_k = 1;
  const absl::Status many = ValidateForDevice(c.model, DeviceKind::kCuda);
  EXPECT_EQ(many.code(), absl::StatusCode::kInvalidArgument) << many;
  EXPECT_NE(many.message().find("model.moe.num_experts"), std::string::npos) << many;
}

TEST_F(DeviceTest, UnavailableCudaDeviceIsRefusedNamingTheFlag) {
  Sink sink;
  RunConfig c = Config(Spec());
  c.precision = Precision::kFp32;
  auto r = RunTraining(c, {.out_dir = (dir_ / "a").string(),
                           .device = {.kind = DeviceKind::kCuda, .ordinal = 99},
                           .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("--device cuda:99"), std::string::npos) << r.status();
}

// A checkpoint says which device and precision wrote it; another kind of device is refused with
// both named (the same bytes relabelled as a GPU's checkpoint).
TEST_F(DeviceTest, ResumeRefusesACheckpointFromAnotherDevice) {
  Sink sink;
  const RunConfig c = Config(Spec());
  const std::string out = (dir_ / "r").string();
  ASSERT_TRUE(RunTraining(c, {.out_dir = out, .metrics = &sink, .max_steps = 1}).ok());
  auto ckpt = ReadLatestCheckpoint(out);
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value()) << ckpt.status();
  Checkpoint k = **ckpt;
  EXPECT_EQ(k.device, "cpu");
  EXPECT_EQ(k.precision, "fp32");
  ASSERT_EQ(k.balance_bias.size(), 2u);
  k.device = "cuda:NVIDIA H200";
  const std::vector<float>* arrays[3] = {&k.params, &k.adam_m, &k.adam_v};
  auto read = [&](CheckpointArray a, int64_t offset, int64_t count, float* dst) {
    std::copy_n(arrays[static_cast<int>(a)]->data() + offset, count, dst);
  };
  ASSERT_TRUE(WriteCheckpoint(out, k, static_cast<int64_t>(k.params.size()), read, 2).ok());
  auto r =
      RunTraining(c, {.out_dir = out, .resume = ResumeMode::kResumeIfPresent, .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  const std::string message(r.status().message());
  EXPECT_NE(message.find("cuda:NVIDIA H200"), std::string::npos) << message;
  EXPECT_NE(message.find("on cpu"), std::string::npos) << message;
}

int RunCommand(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(DeviceTest, CommandLineRefusesBadDevicesWithExit2AndTrainsBf16OnCpu) {
  const std::string spec = (dir_ / "run.json").string();
  nlohmann::json fp32 = Spec();
  fp32["training"]["precision"] = "PRECISION_FP32";
  std::ofstream(spec) << fp32.dump();
  const std::string base =
      std::string(PARITY_TRAIN_BIN) + " --run " + spec + " --out " + (dir_ / "o").string();
  struct Case {
    std::string args, named;
  };
  for (const Case& c :
       {Case{" --device gpu", "--device"}, Case{" --device cuda:99", "--device cuda:99"}}) {
    std::string out;
    EXPECT_EQ(RunCommand(base + c.args, &out), 2) << c.args << ": " << out;
    EXPECT_NE(out.find(c.named), std::string::npos) << c.args << ": " << out;
  }
  nlohmann::json bf16 = Spec();
  bf16["training"]["precision"] = "PRECISION_BF16";
  std::ofstream(spec, std::ios::trunc) << bf16.dump();
  std::string out;
  EXPECT_EQ(RunCommand(base + " --device cpu", &out), 0) << out;
}

}  // namespace
}  // namespace parity::kernels
