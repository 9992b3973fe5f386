// GPU sizing in the planner: the largest micro-batch whose memory estimate fits the GPU the spec
// names, the memory a run then asks for, the violation when one sequence does not fit, CPU specs
// left alone, byte sizes in specs, and a gang's batch shared by its ranks in whole micro-batches.
#include "core/gpu_sizing.h"

#include <cmath>
#include <iostream>

#include "core/field_violation.h"
#include "core/hyperparameters.h"
#include "core/memory_estimate.h"
#include "core/micro_batches.h"
#include "core/planner.h"
#include "core/spec_loader.h"
#include "gtest/gtest.h"

namespace parity::core {
namespace {

using parity::v1::RunSpec;
using parity::v1::SweepSpec;

// One dense run: batch 4096 tokens = 64 sequences of S = 64.
constexpr char kSpec[] = R"(
name: sized
dense: {d_model: 128, num_layers: 4, num_heads: 8, ffn_hidden: 384}
training: {learning_rate: 1e-3, batch_tokens: 4096, sequence_length: 64}
data: {corpus: kjv}
grid:
  compute: [{name: C1, compute_flops: 1e12}]
baselines: [{compute_multiple: 1}]
)";

SweepSpec Spec(uint32_t gpus, uint64_t budget) {
  absl::StatusOr<SweepSpec> spec = ParseSweepSpec(kSpec, SpecFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->mutable_resources()->set_gpus(gpus);
  spec->mutable_resources()->set_gpu_memory_budget_bytes(budget);
  return *spec;
}

RunSpec PlanOne(const SweepSpec& spec) {
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  EXPECT_TRUE(runs.ok()) << "expected the spec to plan, got: " << runs.status();
  if (!runs.ok() || runs->size() != 1) {
    ADD_FAILURE() << "expected one run";
    return {};
  }
  return runs->front();
}

// In the precision the run trains in: unset on a GPU run is bf16, as the engine resolves it.
MemoryEstimate EstimateOf(const RunSpec& run, int64_t micro) {
  absl::StatusOr<MemoryShape> shape = MemoryShapeOf(run.model(), run.training().sequence_length());
  EXPECT_TRUE(shape.ok()) << shape.status();
  return EstimateTrainingMemory(*shape, micro, PrecisionOf(run));
}

// The smallest budget under which `micro` sequences fit.
uint64_t BudgetFor(const RunSpec& run, int64_t micro) {
  return static_cast<uint64_t>(
             std::ceil(double(EstimateOf(run, micro).total) / kUsableBudgetFraction)) +
         1;
}

TEST(MicroBatchSplitTest, TheFewestMicroBatchesUnderTheCapAsEvenAsCanBe) {
  using Sizes = std::vector<int64_t>;
  EXPECT_EQ(SplitIntoMicroBatches(64, 16), Sizes(4, 16)) << "a divisor: equal micro-batches";
  EXPECT_EQ(SplitIntoMicroBatches(149, 41), (Sizes{38, 37, 37, 37})) << "a prime share";
  EXPECT_EQ(SplitIntoMicroBatches(43, 8), (Sizes{8, 7, 7, 7, 7, 7}));
  EXPECT_EQ(SplitIntoMicroBatches(5, 100), Sizes{5}) << "a cap above the share: one micro-batch";
  EXPECT_EQ(SplitIntoMicroBatches(7, 1), Sizes(7, 1));
  EXPECT_TRUE(SplitIntoMicroBatches(0, 4).empty());
  EXPECT_TRUE(SplitIntoMicroBatches(4, 0).empty());
  for (int64_t share = 1; share <= 300; ++share) {
    for (int64_t cap = 1; cap <= share + 2; ++cap) {
      const Sizes sizes = SplitIntoMicroBatches(share, cap);
      int64_t sum = 0;
      for (int64_t b : sizes) sum += b;
      ASSERT_EQ(sum, share) << share << " / " << cap;
      ASSERT_EQ(static_cast<int64_t>(sizes.size()), (share + cap - 1) / cap) << "the fewest";
      ASSERT_LE(sizes.front() - sizes.back(), 1) << share << " / " << cap << ": even";
      ASSERT_EQ(LargestMicroBatch(share, cap), sizes.front()) << share << " / " << cap;
      ASSERT_LE(sizes.front(), cap) << share << " / " << cap;
      // Recording the largest and cutting again gives the same micro-batches.
      ASSERT_EQ(SplitIntoMicroBatches(share, sizes.front()), sizes) << share << " / " << cap;
    }
  }
}

TEST(GpuSizingTest, AmpleBudgetTakesTheWholeBatchAndAsksForItsEstimate) {
  const RunSpec run = PlanOne(Spec(1, 141'000'000'000));
  EXPECT_EQ(run.training().micro_batch_sequences(), 64u);
  EXPECT_EQ(run.resources().gpu_memory_bytes(), EstimateOf(run, 64).total)
      << "the run asks a worker for what it was sized to use";
}

TEST(GpuSizingTest, SmallerBudgetPicksASmallerMicroBatch) {
  const RunSpec reference = PlanOne(Spec(1, 141'000'000'000));
  // Room for 16 sequences but not 32: 16 is the largest divisor of 64 that fits.
  const uint64_t budget = BudgetFor(reference, 16);
  ASSERT_LT(budget, BudgetFor(reference, 32));
  const RunSpec run = PlanOne(Spec(1, budget));
  EXPECT_EQ(run.training().micro_batch_sequences(), 16u);
  EXPECT_EQ(run.resources().gpu_memory_bytes(), EstimateOf(run, 16).total);
  EXPECT_LE(run.resources().gpu_memory_bytes(), budget * kUsableBudgetFraction);
  // Room for 47 sequences: 64 takes two micro-batches then, evened out to 32 each.
  EXPECT_EQ(PlanOne(Spec(1, BudgetFor(reference, 47))).training().micro_batch_sequences(), 32u);
  // Room for 30: three micro-batches (22, 21, 21), not the divisor 16 (four).
  const RunSpec thirty = PlanOne(Spec(1, BudgetFor(reference, 30)));
  EXPECT_EQ(thirty.training().micro_batch_sequences(), 22u);
  EXPECT_EQ(thirty.resources().gpu_memory_bytes(), EstimateOf(thirty, 22).total)
      << "the estimate is the largest micro-batch's";
}

TEST(GpuSizingTest, AFixedMicroBatchThatDoesNotDivideTheShareIsEvenedOut) {
  SweepSpec spec = Spec(1, 141'000'000'000);
  spec.mutable_training()->set_micro_batch_sequences(48);  // 64 = 32 + 32 under a cap of 48
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 32u);
  spec.mutable_training()->set_micro_batch_sequences(1000);  // above the share: one micro-batch
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 64u);
}

TEST(GpuSizingTest, MultiGpuRunsSizeEachRanksShare) {
  const RunSpec reference = PlanOne(Spec(1, 141'000'000'000));
  // 8 GPUs: each takes 8 of the 64 sequences per step, whatever the room.
  EXPECT_EQ(PlanOne(Spec(8, 141'000'000'000)).training().micro_batch_sequences(), 8u);
  EXPECT_EQ(PlanOne(Spec(8, BudgetFor(reference, 5))).training().micro_batch_sequences(), 4u);
}

TEST(GpuSizingTest, OneSequenceThatDoesNotFitNamesTheField) {
  const SweepSpec spec = Spec(1, 1'000'000'000);  // below the workspace constant alone
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  ASSERT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument)
      << "expected INVALID_ARGUMENT, got: " << runs.status();
  const std::vector<FieldViolation> violations = FieldViolationsOf(runs.status());
  ASSERT_EQ(violations.size(), 1u) << runs.status();
  EXPECT_EQ(violations[0].field, "resources.gpu_memory_budget_bytes");
  EXPECT_NE(violations[0].description.find("one sequence of S = 64 needs"), std::string::npos)
      << violations[0].description;
  EXPECT_NE(violations[0].description.find("1 GB budget"), std::string::npos)
      << violations[0].description;
}

TEST(GpuSizingTest, AFixedMicroBatchIsCheckedNotChanged) {
  const RunSpec reference = PlanOne(Spec(1, 141'000'000'000));
  SweepSpec spec = Spec(1, BudgetFor(reference, 16));
  spec.mutable_training()->set_micro_batch_sequences(8);
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 8u);
  spec.mutable_training()->set_micro_batch_sequences(32);
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(spec);
  const std::vector<FieldViolation> violations = FieldViolationsOf(runs.status());
  ASSERT_EQ(violations.size(), 1u) << runs.status();
  EXPECT_EQ(violations[0].field, "resources.gpu_memory_budget_bytes");
  EXPECT_NE(violations[0].description.find("micro_batch_sequences 32"), std::string::npos)
      << violations[0].description;
}

TEST(GpuSizingTest, CpuSpecsAreUnchanged) {
  for (const uint64_t budget : {uint64_t{0}, uint64_t{1'000'000'000}}) {
    const RunSpec run = PlanOne(Spec(0, budget));
    EXPECT_EQ(run.training().micro_batch_sequences(), 0u) << "budget " << budget;
    EXPECT_EQ(run.resources().gpu_memory_bytes(), 0u) << "budget " << budget;
  }
  const RunSpec unsized = PlanOne(Spec(1, 0));
  EXPECT_EQ(unsized.training().micro_batch_sequences(), 0u) << "no budget, no sizing";
}

TEST(GpuSizingTest, SpecsTakeByteSizes) {
  EXPECT_EQ(ParseQuantity("141GB"), 141e9);
  EXPECT_EQ(ParseQuantity("80GiB"), 80.0 * (1 << 30));
  EXPECT_EQ(ParseQuantity("1.5TB"), 1.5e12);
  EXPECT_EQ(ParseQuantity("68B"), 68e9) << "a bare B stays billions (tokens)";
  EXPECT_EQ(ParseQuantity("12QB"), std::nullopt);
  absl::StatusOr<SweepSpec> spec =
      ParseSweepSpec(std::string(kSpec) + "resources: {gpus: 1, gpu_memory_budget_bytes: 141GB}\n",
                     SpecFormat::kYaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->resources().gpu_memory_budget_bytes(), 141'000'000'000u);
}

// The 2B study on H200s: every run fits, and the figures of the dense baseline and r_a = 20% at
// S = 2048 (printed for the record) are what sizing chose.
// The planner sizes a run in the precision the engine will train it in (session.cc's
// ResolvePrecision): bf16 on a GPU unless the spec says fp32, fp32 on the CPU.
TEST(GpuSizingTest, UnsetPrecisionIsBf16OnAGpuAndFp32OnTheCpu) {
  RunSpec run;
  EXPECT_EQ(PrecisionOf(run), MemoryPrecision::kFp32) << "a CPU run";
  run.mutable_resources()->set_gpus(1);
  EXPECT_EQ(PrecisionOf(run), MemoryPrecision::kBf16) << "a GPU run, precision unset";
  run.mutable_training()->set_precision(parity::v1::PRECISION_FP32);
  EXPECT_EQ(PrecisionOf(run), MemoryPrecision::kFp32) << "the fp32 parity mode, asked for";
  run.mutable_resources()->set_gpus(0);
  run.mutable_training()->set_precision(parity::v1::PRECISION_BF16);
  EXPECT_EQ(PrecisionOf(run), MemoryPrecision::kBf16) << "bf16 asked for on the CPU";
  // A spec that fixes fp32 on a GPU is sized larger than the default.
  const RunSpec bf16 = PlanOne(Spec(1, 141'000'000'000));
  SweepSpec fp32_spec = Spec(1, 141'000'000'000);
  fp32_spec.mutable_training()->set_precision(parity::v1::PRECISION_FP32);
  const RunSpec fp32 = PlanOne(fp32_spec);
  EXPECT_GT(fp32.resources().gpu_memory_bytes(), bf16.resources().gpu_memory_bytes());
}

// training.recompute_activations: the planner sizes with one layer's activations of each kind,
// so a budget too small for one sequence with every activation kept names it as the remedy, and
// with it the run fits and takes a larger micro-batch than without.
TEST(GpuSizingTest, RecomputingActivationsFitsMoreAndIsNamedAsTheRemedy) {
  const RunSpec reference = PlanOne(Spec(1, 141'000'000'000));
  absl::StatusOr<MemoryShape> shape = MemoryShapeOf(reference.model(), 64);
  ASSERT_TRUE(shape.ok()) << shape.status();
  MemoryShape recomputed = *shape;
  recomputed.recompute = true;
  const MemoryPrecision precision = PrecisionOf(reference);
  // A budget between one sequence recomputed and one sequence kept.
  const uint64_t budget = static_cast<uint64_t>(std::ceil(
      double(EstimateTrainingMemory(recomputed, 1, precision).total) / kUsableBudgetFraction));
  ASSERT_GT(EstimateTrainingMemory(*shape, 1, precision).total, budget * kUsableBudgetFraction);
  absl::StatusOr<std::vector<RunSpec>> refused = PlanSweep(Spec(1, budget));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  const std::vector<FieldViolation> violations = FieldViolationsOf(refused.status());
  ASSERT_EQ(violations.size(), 1u) << refused.status();
  EXPECT_NE(violations[0].description.find("set training.recompute_activations: true"),
            std::string::npos)
      << violations[0].description;

  SweepSpec with = Spec(1, budget);
  with.mutable_training()->set_recompute_activations(true);
  const RunSpec run = PlanOne(with);
  EXPECT_GE(run.training().micro_batch_sequences(), 1u);
  EXPECT_EQ(
      run.resources().gpu_memory_bytes(),
      EstimateTrainingMemory(recomputed, run.training().micro_batch_sequences(), precision).total)
      << "the run asks for what it was sized with, recomputation included";
}

TEST(GpuSizingTest, FullStudyFitsAnH200) {
  absl::StatusOr<SweepSpec> spec = LoadSweepSpecFile("examples/full_study_2b.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->resources().gpu_memory_budget_bytes(), 141'000'000'000u);
  absl::StatusOr<std::vector<RunSpec>> runs = PlanSweep(*spec);
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (const RunSpec& run : *runs) {
    const uint32_t micro = run.training().micro_batch_sequences();
    // The batch is rounded to whole sequences a rank; each rank's share (often a prime: 43, 67,
    // 149 sequences) is cut into micro-batches as even as the memory allows.
    const uint64_t sequences = run.training().batch_tokens() / 2048;
    const uint64_t gpus = run.resources().gpus();
    ASSERT_EQ(sequences % gpus, 0u) << run.name();
    const int64_t share = static_cast<int64_t>(sequences / gpus);
    ASSERT_GT(micro, 0u) << run.name();
    EXPECT_EQ(LargestMicroBatch(share, micro), micro) << run.name() << ": an evened-out size";
    EXPECT_LE(run.resources().gpu_memory_bytes(), 141e9 * kUsableBudgetFraction) << run.name();
    if (micro < share) {
      // The next larger cap must not fit (else it would have been taken), memory allowing.
      const int64_t fewer = static_cast<int64_t>(SplitIntoMicroBatches(share, micro).size()) - 1;
      absl::StatusOr<MemoryShape> shape = MemoryShapeOf(run.model(), 2048);
      ASSERT_TRUE(shape.ok()) << shape.status();
      EXPECT_GT(EstimateTrainingMemory(*shape, (share + fewer - 1) / fewer, PrecisionOf(run)).total,
                141e9 * kUsableBudgetFraction)
          << run.name() << ": " << fewer << " micro-batches of " << share
          << " sequences would have fitted";
    }
  }
  for (const char* name : {"dense-1C-C1-unique-s0", "moe-ra20-C1-unique-s0"}) {
    const RunSpec* run = nullptr;
    for (const RunSpec& r : *runs) {
      if (r.name() == name) run = &r;
    }
    ASSERT_NE(run, nullptr) << "no run named " << name;
    absl::StatusOr<MemoryShape> shape = MemoryShapeOf(run->model(), 2048);
    ASSERT_TRUE(shape.ok()) << shape.status();
    const uint32_t micro = run->training().micro_batch_sequences();
    const MemoryEstimate fp32 = EstimateTrainingMemory(*shape, micro, MemoryPrecision::kFp32);
    const MemoryEstimate bf16 = EstimateTrainingMemory(*shape, micro, MemoryPrecision::kBf16);
    EXPECT_EQ(PrecisionOf(*run), MemoryPrecision::kBf16) << name << ": unset on a GPU is bf16";
    EXPECT_EQ(bf16.total, run->resources().gpu_memory_bytes()) << name;
    EXPECT_LT(bf16.activations, fp32.activations) << name;
    std::cout << name << ": batch " << run->training().batch_tokens() / 2048 << " sequences on "
              << run->resources().gpus() << " GPUs, micro-batch " << micro << "\n  FP32 "
              << HumanBytes(fp32.total) << " (" << fp32.Describe() << ")\n  BF16 "
              << HumanBytes(bf16.total) << " (" << bf16.Describe() << ")\n";
  }
}

TEST(GangBatchTest, GpusAloneMakeOneRankPerGpuAndEachRankTrainsWholeMicroBatches) {
  // 8 GPUs, ranks unset: an 8-rank gang (never one process beside seven idle GPUs); 64 sequences
  // a step are 8 a rank, and the sized micro-batch divides them.
  const RunSpec run = PlanOne(Spec(8, 141'000'000'000));
  EXPECT_EQ(run.resources().ranks(), 8u);
  EXPECT_EQ(run.resources().gpus(), 8u);
  EXPECT_EQ(run.training().micro_batch_sequences(), 8u) << "the whole share of a rank fits";
}

TEST(GangBatchTest, ACpuGangGetsOneMicroBatchARankWhenUnset) {
  SweepSpec spec = Spec(0, 0);
  spec.mutable_resources()->set_ranks(4);
  const RunSpec run = PlanOne(spec);
  EXPECT_EQ(run.resources().ranks(), 4u);
  EXPECT_EQ(run.training().micro_batch_sequences(), 16u) << "64 sequences over 4 ranks";
  spec.mutable_training()->set_micro_batch_sequences(8);
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 8u) << "a divisor is kept";
}

TEST(GangBatchTest, ABatchTheRanksCannotShareIsAViolationNamingIt) {
  SweepSpec spec = Spec(0, 0);
  spec.mutable_resources()->set_ranks(3);  // 64 sequences do not divide among 3
  std::vector<FieldViolation> violations = FieldViolationsOf(PlanSweep(spec).status());
  ASSERT_FALSE(violations.empty()) << "expected the batch to be refused for 3 ranks";
  EXPECT_EQ(violations[0].field, "training.batch_tokens");
  EXPECT_NE(violations[0].description.find("do not divide among 3 ranks"), std::string::npos)
      << violations[0].description;
}

TEST(GangBatchTest, AMicroBatchThatDoesNotDivideARanksShareIsEvenedOut) {
  SweepSpec spec = Spec(0, 0);
  spec.mutable_resources()->set_ranks(4);  // 16 sequences a rank
  spec.mutable_training()->set_micro_batch_sequences(32);
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 16u) << "capped at the share";
  spec.mutable_training()->set_micro_batch_sequences(6);  // 16 = 6 + 5 + 5
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 6u);
  spec.mutable_training()->set_micro_batch_sequences(7);  // 16 = 6 + 5 + 5 as well
  EXPECT_EQ(PlanOne(spec).training().micro_batch_sequences(), 6u);
}

TEST(GangBatchTest, TheStepLawBatchIsRoundedToWholeSequencesARank) {
  for (uint32_t ranks : {1u, 2u, 8u, 64u}) {
    const uint64_t batch = StepLawBatchTokens(4e10, 4096, ranks);
    EXPECT_EQ(batch % (uint64_t{4096} * ranks), 0u) << ranks << " ranks";
    const double unrounded = double(StepLawBatchTokens(4e10, 4096));
    EXPECT_LE(std::abs(double(batch) - unrounded), 4096.0 * ranks / 2 + 1)
        << "the nearest multiple: " << ranks << " ranks";
  }
  EXPECT_EQ(StepLawBatchTokens(1e3, 64, 8), 8u * 64) << "at least one sequence a rank";
}

TEST(CudaShapesTest, AGpuRunTheCudaKernelsCannotTakeIsRefusedAtSubmissionNamingTheField) {
  // d_model 512 over one head: D_h = 512 > 256.
  SweepSpec spec = Spec(1, 0);
  spec.mutable_dense()->set_d_model(512);
  spec.mutable_dense()->set_num_heads(1);
  spec.mutable_dense()->set_ffn_hidden(1536);
  std::vector<FieldViolation> violations = FieldViolationsOf(PlanSweep(spec).status());
  ASSERT_FALSE(violations.empty()) << "expected a head dimension of 512 refused on a GPU";
  EXPECT_EQ(violations[0].field, "dense.num_heads");
  EXPECT_NE(violations[0].description.find("head dimension 512 exceeds the 256"), std::string::npos)
      << violations[0].description;
  spec.mutable_resources()->set_gpus(0);
  EXPECT_TRUE(PlanSweep(spec).ok()) << "every shape fits the CPU";
}

}  // namespace
}  // namespace parity::core
