// How often a training step makes the host wait for the device: the CPU device counts the calls
// that wait on a GPU (blocking transfers, stream synchronisations) and the queued transfers, and a
// dense step must wait the same few times whatever its number of micro-batches; an MoE step adds
// exactly its layers' routing-offset readbacks per micro-batch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/tests/test_util.h"
#include "kernels/train/session.h"
#include "kernels/train/step.h"

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;

class NullSink final : public MetricsSink {
 public:
  void Write(const std::string&) override {}
};

class StepSyncTest : public testing::CorpusDirTest {
 protected:
  RunConfig Run(int64_t grad_accum, bool moe) const {
    RunConfig c;
    c.run_id = "sync";
    c.model.d_model = 16;
    c.model.n_layers = 3;
    c.model.n_heads = 2;
    c.model.n_kv_heads = 1;
    c.model.d_ffn = 32;
    c.model.seq_len = 16;
    if (moe) {
      c.model.layout = MoeLayout::kOneDenseShared;  // layers 1 and 2 route
      c.model.n_experts = 4;
      c.model.top_k = 2;
      c.model.d_expert = 8;
      c.model.bias_update_rate = 0.001;
    }
    c.train.batch_size = 2;
    c.train.batch_sequences = 2 * grad_accum;
    c.train.steps = 4;
    c.train.seed = 7;
    c.train.eval_tokens = 32;
    c.data.corpus_path = (dir_ / "corpus.txt").string();
    c.data.validation_fraction = 0.1;
    return c;
  }

  struct PerStep {
    TransferCounts counts;  // of the last step
    int64_t moe_layers = 0;
  };

  // Trains three steps and returns the counts of the third (the first may set up caches).
  PerStep CountThirdStep(int64_t grad_accum, bool moe) {
    NullSink sink;
    auto session = OpenSession(
        Run(grad_accum, moe),
        {.out_dir = (dir_ / ("out" + std::to_string(grad_accum))).string(), .metrics = &sink});
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    Session& s = **session;
    TransferCounts before;
    for (int step = 0; step < 3; ++step) {
      before = s.device->Transfers();
      const absl::StatusOr<StepResult> r = TrainStep(s);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return {};
      EXPECT_TRUE(std::isfinite(r->ce) && r->ce > 0) << "the losses came back";
    }
    const TransferCounts after = s.device->Transfers();
    return {.counts = {.to_host = after.to_host - before.to_host,
                       .from_host = after.from_host - before.from_host,
                       .synchronize = after.synchronize - before.synchronize,
                       .queued = after.queued - before.queued},
            .moe_layers = s.model->NumMoeLayers()};
  }
};

TEST_F(StepSyncTest, ADenseStepWaitsTwiceWhateverItsMicroBatches) {
  const PerStep one = CountThirdStep(1, false), four = CountThirdStep(4, false);
  // The one wait for the losses and the gradient norm before the update, and the step's end.
  EXPECT_EQ(one.counts.Waits(), 2)
      << "to_host " << one.counts.to_host << ", from_host " << one.counts.from_host
      << ", synchronize " << one.counts.synchronize;
  EXPECT_EQ(four.counts.Waits(), one.counts.Waits())
      << "a dense step's waits must not grow with grad_accum (4 micro-batches vs 1)";
  EXPECT_EQ(four.counts.to_host + four.counts.from_host, 0) << "no blocking transfer at all";
  // Each micro-batch queues its tokens and targets up and its losses back.
  EXPECT_EQ(one.counts.queued, 3);
  EXPECT_EQ(four.counts.queued, 4 * 3);
}

TEST_F(StepSyncTest, AnMoeStepAddsOnlyItsRoutingOffsetReadbacksPerMicroBatch) {
  const PerStep one = CountThirdStep(1, true), four = CountThirdStep(4, true);
  ASSERT_EQ(one.moe_layers, 2);
  // Per micro-batch each MoE layer reads its routing plan's E+1 offsets (the grouped GEMMs'
  // shapes); everything else waits once per step as in a dense step.
  EXPECT_EQ(one.counts.to_host, one.moe_layers);
  EXPECT_EQ(four.counts.to_host, 4 * one.moe_layers);
  EXPECT_EQ(four.counts.synchronize, one.counts.synchronize);
  EXPECT_EQ(four.counts.Waits() - four.counts.to_host, 2) << "otherwise a dense step's two waits";
  EXPECT_EQ(four.counts.from_host, 0) << "the loads for the bias update go up queued";
  EXPECT_EQ(four.counts.queued, 4 * 4 + 1) << "ids up, token and router losses back; the loads";
}

}  // namespace
}  // namespace parity::kernels
