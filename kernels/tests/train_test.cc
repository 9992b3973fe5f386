// The training loop end to end: bit-identical resume, determinism, data budget and epochs,
// schedules, run-spec refusal with the field named, and the parity-train command line.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernels/data/token_corpus.h"
#include "kernels/spec/run_spec_adapter.h"
#include "kernels/tests/test_util.h"
#include "kernels/train/checkpoint.h"
#include "kernels/train/schedule.h"
#include "kernels/train/trainer.h"
#include "parity/v1/run.pb.h"

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;

class CollectingSink final : public MetricsSink {
 public:
  void Write(const std::string& line) override { lines.push_back(nlohmann::json::parse(line)); }
  std::vector<nlohmann::json> lines;
};

// The train BPC of each metrics line, in order.
std::vector<double> TrainBpc(const CollectingSink& sink) {
  std::vector<double> bpc;
  for (const nlohmann::json& line : sink.lines) {
    if (line["event"] == "metrics") bpc.push_back(line["train_bpc"].get<double>());
  }
  return bpc;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class TrainTest : public testing::CorpusDirTest {
 protected:
  RunConfig TinyMoeRun() const {
    RunConfig c;
    c.run_id = "tiny";
    c.model.d_model = 16;
    c.model.n_layers = 3;
    c.model.n_heads = 2;
    c.model.n_kv_heads = 1;
    c.model.d_ffn = 32;
    c.model.seq_len = 16;
    c.model.layout = MoeLayout::kOneDenseShared;
    c.model.n_experts = 4;
    c.model.top_k = 2;
    c.model.d_expert = 8;
    c.model.bias_update_rate = 0.001;
    c.optimizer.lr = 3e-3;
    c.optimizer.min_lr = 3e-4;
    c.optimizer.warmup_steps = 2;
    c.train.batch_size = 2;
    c.train.batch_sequences = 4;
    c.train.steps = 8;
    c.train.seed = 7;
    c.train.log_interval = 1;
    c.train.eval_interval = 3;
    c.train.eval_tokens = 64;
    c.train.checkpoint_interval = 4;
    c.data.corpus_path = corpus_;
    c.data.validation_fraction = 0.1;
    c.data.unique_tokens = 16 * 40;  // 40 windows: 8 steps × 4 sequences = 32 → 0.8 epochs
    return c;
  }
};

TEST_F(TrainTest, ResumeIsBitIdenticalToStraightRun) {
  const RunConfig c = TinyMoeRun();
  CollectingSink straight, first, second;
  const std::string a = (dir_ / "a").string(), b = (dir_ / "b").string();
  auto sa = RunTraining(c, {.out_dir = a, .threads = 2, .metrics = &straight});
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto s1 = RunTraining(c, {.out_dir = b, .threads = 2, .metrics = &first, .max_steps = 3});
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(s1->outcome, RunOutcome::kStopped);
  EXPECT_EQ(s1->steps, 3);
  auto s2 = RunTraining(
      c, {.out_dir = b, .resume = ResumeMode::kResumeIfPresent, .threads = 2, .metrics = &second});
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->outcome, RunOutcome::kCompleted);
  EXPECT_EQ(ReadFile(sa->checkpoint_path), ReadFile(s2->checkpoint_path))
      << "final checkpoint (weights, moments, biases, cursor) differs after a resume";
  // Every metric line after the resume equals the straight run's, timing fields aside.
  std::vector<nlohmann::json> resumed = first.lines;
  resumed.pop_back();  // the "stopped" summary
  resumed.insert(resumed.end(), second.lines.begin(), second.lines.end());
  ASSERT_EQ(resumed.size(), straight.lines.size());
  for (size_t i = 0; i + 1 < resumed.size(); ++i) {
    for (auto* j : {&resumed[i], &straight.lines[i]}) {
      j->erase("tokens_per_second");
      j->erase("flops_per_second");
      j->erase("time");
    }
    EXPECT_EQ(resumed[i], straight.lines[i]) << "metrics line " << i;
  }
}

// A worker resumes from the checkpoint the scheduler recorded (every metric point up to it is
// stored), which may be older than the newest on disk and lie in an earlier attempt's directory.
TEST_F(TrainTest, ResumeFromANamedOlderCheckpointElsewhereIsBitIdentical) {
  const RunConfig c = TinyMoeRun();
  CollectingSink straight, first, second;
  const std::string a = (dir_ / "a").string(), b = (dir_ / "attempt1").string(),
                    next = (dir_ / "attempt2").string();
  auto sa = RunTraining(c, {.out_dir = a, .threads = 2, .metrics = &straight});
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto s1 = RunTraining(c, {.out_dir = b, .threads = 2, .metrics = &first, .max_steps = 6});
  ASSERT_TRUE(s1.ok()) << s1.status();
  const std::string step4 = (fs::path(b) / "step-00000004.ckpt").string();
  ASSERT_TRUE(fs::exists(step4)) << "expected the interval checkpoint at step 4 in " << b;
  auto s2 =
      RunTraining(c, {.out_dir = next, .resume_from = step4, .threads = 2, .metrics = &second});
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->steps, 8);
  EXPECT_EQ(ReadFile(sa->checkpoint_path), ReadFile(s2->checkpoint_path))
      << "final checkpoint differs after resuming from step 4 of another directory";
  ASSERT_FALSE(second.lines.empty());
  EXPECT_EQ(second.lines.front().value("step", 0), 5) << "the resumed attempt re-logs step 5";
  EXPECT_TRUE(fs::exists(fs::path(next) / "LATEST")) << "new checkpoints go to --out";

  CollectingSink none;
  auto missing = RunTraining(c, {.out_dir = next,
                                 .resume_from = (fs::path(b) / "step-00000099.ckpt").string(),
                                 .metrics = &none});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition)
      << "a named checkpoint that is missing must be refused, not trained over: "
      << missing.status();
}

// Time-based cadence: with a step cadence of 0, a checkpoint still lands once the interval passed.
// training.recompute_activations changes memory and time, never the numbers: the same final
// checkpoint, byte for byte, and the same counted model FLOPs per token.
TEST_F(TrainTest, RecomputingActivationsTrainsTheSameBits) {
  RunConfig c = TinyMoeRun();
  CollectingSink kept, again;
  auto a = RunTraining(c, {.out_dir = (dir_ / "a").string(), .threads = 2, .metrics = &kept});
  ASSERT_TRUE(a.ok()) << a.status();
  c.train.recompute_activations = true;
  auto b = RunTraining(c, {.out_dir = (dir_ / "b").string(), .threads = 2, .metrics = &again});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ReadFile(a->checkpoint_path), ReadFile(b->checkpoint_path));
  const nlohmann::json& x = kept.lines.back();
  const nlohmann::json& y = again.lines.back();
  EXPECT_EQ(x["final_train_bpc"], y["final_train_bpc"]);
  EXPECT_EQ(x["measured_flops_per_token"], y["measured_flops_per_token"]) << "M counts the model";
  EXPECT_GT(y["measured_flops_per_token_total"].get<double>(),
            x["measured_flops_per_token_total"].get<double>())
      << "the executed FLOPs include the recomputed forwards";
}

// Graph replay (TrainerOptions::graph_replay): a dense run's micro-batches after the first are
// replayed from one recording; the same ops on the same inputs, so the same bits and counts, in
// fp32 and bf16. On the CPU the recording is the work itself run again (Device::Record); on CUDA
// a graph, which bench/gpu_check.sh compares the same way.
TEST_F(TrainTest, GraphReplayTrainsTheSameBits) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision == Precision::kFp32 ? "fp32" : "bf16");
    RunConfig c = TinyMoeRun();
    c.model.layout = MoeLayout::kDense;
    c.precision = precision;
    const std::string tag = precision == Precision::kFp32 ? "fp32" : "bf16";
    CollectingSink eager, replayed;
    auto a = RunTraining(c, {.out_dir = (dir_ / (tag + "a")).string(), .metrics = &eager});
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = RunTraining(
        c, {.out_dir = (dir_ / (tag + "b")).string(), .metrics = &replayed, .graph_replay = true});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(ReadFile(a->checkpoint_path), ReadFile(b->checkpoint_path))
        << "replayed micro-batches must train the same bits";
    ASSERT_EQ(eager.lines.size(), replayed.lines.size());
    for (size_t i = 0; i < eager.lines.size(); ++i) {
      for (const char* key : {"train_bpc", "val_bpc", "grad_norm", "flops_per_token",
                              "measured_flops_per_token", "measured_flops_per_token_total"}) {
        if (!eager.lines[i].contains(key)) continue;
        EXPECT_EQ(eager.lines[i][key], replayed.lines[i][key]) << "line " << i << ": " << key;
      }
    }
  }
}

// --profile-step: the step's metrics line carries its time split by kind of work; timing
// synchronises the device but changes no number.
TEST_F(TrainTest, AProfiledStepReportsItsTimeSplitAndChangesNoNumber) {
  RunConfig c = TinyMoeRun();
  c.train.log_interval = 100;  // the profiled step is logged anyway
  CollectingSink plain, profiled;
  auto a = RunTraining(c, {.out_dir = (dir_ / "a").string(), .threads = 2, .metrics = &plain});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = RunTraining(
      c, {.out_dir = (dir_ / "b").string(), .threads = 2, .metrics = &profiled, .profile_step = 5});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ReadFile(a->checkpoint_path), ReadFile(b->checkpoint_path));
  const nlohmann::json* line = nullptr;
  for (const nlohmann::json& j : profiled.lines) {
    if (j.contains("profile")) {
      EXPECT_EQ(line, nullptr) << "one profiled step";
      line = &j;
    }
  }
  ASSERT_NE(line, nullptr) << "the profiled step's metrics line was not written";
  EXPECT_EQ((*line)["step"], 5);
  const nlohmann::json& p = (*line)["profile"];
  double sum = 0;
  for (const char* bucket : {"gemm", "attention", "moe_routing", "moe_experts", "optimizer"}) {
    const double seconds = p[std::string(bucket) + "_seconds"].get<double>();
    EXPECT_GT(seconds, 0.0) << bucket << ": this MoE model does every kind of work";
    sum += seconds;
  }
  EXPECT_GE(p["other_seconds"].get<double>(), 0.0);
  EXPECT_NEAR(sum + p["other_seconds"].get<double>(), p["step_seconds"].get<double>(), 1e-9)
      << "the buckets and the rest make up the step";
}

TEST_F(TrainTest, CheckpointsAreAlsoWrittenByElapsedTime) {
  RunConfig c = TinyMoeRun();
  c.train.checkpoint_interval = 0;
  c.train.checkpoint_seconds = 1e-9;  // every step has taken longer than this
  c.train.keep_checkpoints = 100;
  CollectingSink sink;
  const std::string out = (dir_ / "timed").string();
  auto s = RunTraining(c, {.out_dir = out, .threads = 2, .metrics = &sink});
  ASSERT_TRUE(s.ok()) << s.status();
  int files = 0;
  for (const auto& e : fs::directory_iterator(out)) files += e.path().extension() == ".ckpt";
  EXPECT_EQ(files, 8) << "expected a checkpoint after each of the 8 steps";
}

TEST_F(TrainTest, SameSpecSameThreadsGivesIdenticalWeights) {
  RunConfig c = TinyMoeRun();
  c.train.steps = 3;
  CollectingSink s1, s2;
  auto r1 = RunTraining(c, {.out_dir = (dir_ / "x").string(), .threads = 2, .metrics = &s1});
  auto r2 = RunTraining(c, {.out_dir = (dir_ / "y").string(), .threads = 2, .metrics = &s2});
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(ReadFile(r1->checkpoint_path), ReadFile(r2->checkpoint_path));
}

TEST_F(TrainTest, MetricsCarryTelemetryAndFlopsMatchFormula) {
  RunConfig c = TinyMoeRun();
  c.train.steps = 3;
  CollectingSink sink;
  auto r = RunTraining(c, {.out_dir = (dir_ / "m").string(), .threads = 2, .metrics = &sink});
  ASSERT_TRUE(r.ok()) << r.status();
  const nlohmann::json& last = sink.lines[sink.lines.size() - 2];
  for (const char* field : {"step", "tokens", "unique_tokens", "epoch", "train_bpc", "val_bpc",
                            "learning_rate", "grad_norm", "aux_loss", "z_loss", "tokens_per_second",
                            "flops_per_second", "expert_load"}) {
    EXPECT_TRUE(last.contains(field)) << "metrics line lacks " << field << ": " << last.dump();
  }
  EXPECT_EQ(last["expert_load"].size(), 2u);  // layers 1 and 2 are MoE in 1dense+SE
  EXPECT_EQ(last["expert_load"][0]["shares"].size(), 4u);
  EXPECT_EQ(last["unique_tokens"], 3 * 4 * 16) << "12 distinct windows seen in 3 steps";
  const nlohmann::json& summary = sink.lines.back();
  EXPECT_EQ(summary["event"], "summary");
  // The lines are supersets of the API's MetricPoint and RunSummary messages.
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  parity::v1::MetricPoint point;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(last.dump(), &point, lenient).ok());
  EXPECT_EQ(point.step(), 3u);
  EXPECT_TRUE(point.has_val_bpc());
  EXPECT_EQ(point.expert_load_size(), 2);
  EXPECT_GT(point.time().seconds(), 0);
  parity::v1::RunSummary run_summary;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(summary.dump(), &run_summary, lenient).ok());
  EXPECT_EQ(run_summary.steps(), 3u);
  EXPECT_GT(run_summary.peak_memory_bytes(), 0u);
  EXPECT_GT(run_summary.peak_device_memory_bytes(), 0u) << "the device's high-water mark";
  EXPECT_GT(run_summary.estimated_device_memory_bytes(), 0u) << "the planner's estimate";
  EXPECT_LT(std::abs(summary["flops_relative_error"].get<double>()), 0.01);
  EXPECT_EQ(summary["tokens"], 3 * 2 * 2 * 16);
}

// Micro-batches sum into one gradient: 2 micro-batches of 2 sequences, uneven ones (2 + 2 + 1 of
// 5: core/micro_batches.h) and ones below the cap (3 + 3 of 6 under a cap of 4) take the same step
// as one batch (dense, so no per-micro-batch balance statistics differ), up to float rounding; so
// do the logged losses.
TEST_F(TrainTest, GradientAccumulationEqualsOneLargeBatch) {
  for (const auto& [sequences, cap] :
       std::vector<std::pair<int64_t, int64_t>>{{4, 2}, {5, 2}, {6, 4}, {5, 3}}) {
    RunConfig whole = TinyMoeRun();
    whole.model.layout = MoeLayout::kDense;
    whole.train.steps = 2;
    whole.train.batch_size = sequences;
    whole.train.batch_sequences = sequences;
    whole.train.log_interval = 1;
    RunConfig split = whole;
    split.train.batch_size = cap;
    CollectingSink whole_sink, split_sink;
    const std::string name = absl::StrCat(sequences, "-", cap);
    const std::string a = (dir_ / ("whole" + name)).string(),
                      b = (dir_ / ("split" + name)).string();
    ASSERT_TRUE(RunTraining(whole, {.out_dir = a, .threads = 2, .metrics = &whole_sink}).ok());
    ASSERT_TRUE(RunTraining(split, {.out_dir = b, .threads = 2, .metrics = &split_sink}).ok());
    auto ca = ReadLatestCheckpoint(a), cb = ReadLatestCheckpoint(b);
    ASSERT_TRUE(ca.ok() && cb.ok() && ca->has_value() && cb->has_value());
    const auto& pa = (*ca)->params;
    const auto& pb = (*cb)->params;
    ASSERT_EQ(pa.size(), pb.size());
    double max_diff = 0;
    for (size_t i = 0; i < pa.size(); ++i)
      max_diff = std::max<double>(max_diff, std::abs(pa[i] - pb[i]));
    // Two Adam steps move weights by ~2·lr = 6e-3; accumulation must agree far below that.
    EXPECT_LT(max_diff, 1e-5) << name << ": accumulated micro-batches diverge from the whole batch";
    const std::vector<double> wa = TrainBpc(whole_sink), wb = TrainBpc(split_sink);
    ASSERT_EQ(wa.size(), 2u) << name;
    ASSERT_EQ(wb.size(), 2u) << name;
    for (size_t i = 0; i < wa.size(); ++i) {
      EXPECT_NEAR(wa[i], wb[i], 1e-6) << name << ": step " << i + 1 << "'s train BPC";
    }
  }
}

TEST_F(TrainTest, LossFreeBiasesMoveByTheUpdateRateEachStep) {
  RunConfig c = TinyMoeRun();
  c.train.steps = 3;
  c.model.bias_update_rate = 0.25;  // exactly representable, so b is an exact multiple of u
  CollectingSink sink;
  const std::string out = (dir_ / "bias").string();
  ASSERT_TRUE(RunTraining(c, {.out_dir = out, .threads = 2, .metrics = &sink}).ok());
  auto ckpt = ReadLatestCheckpoint(out);
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  ASSERT_EQ((*ckpt)->balance_bias.size(), 2u);
  bool moved = false;
  for (const auto& layer : (*ckpt)->balance_bias) {
    double sum = 0;
    for (float b : layer) {
      EXPECT_EQ(std::fmod(std::abs(b), 0.25f), 0.0f) << "bias " << b << " is not k·u";
      EXPECT_LE(std::abs(b), 3 * 0.25f);
      moved |= b != 0;
      sum += b;
    }
    // sign(mean − load) sums to ≤ E−1 in magnitude per step; the biases cannot all move one way.
    EXPECT_LT(std::abs(sum), 3 * 0.25 * layer.size());
  }
  EXPECT_TRUE(moved) << "no balance bias changed in 3 steps";
}

TEST_F(TrainTest, EpochsReshuffleExactlyTheUniqueBudget) {
  // Random bytes, so every window's content is distinct and identifies the window.
  const std::string random_corpus = (dir_ / "random.bin").string();
  {
    std::ofstream out(random_corpus, std::ios::binary);
    Rng rng{.seed = 1};
    for (int i = 0; i < 20000; ++i) out.put(static_cast<char>(rng.Below(256)));
  }
  DataConfig d{.corpus_path = random_corpus, .validation_fraction = 0.1, .unique_tokens = 16 * 10};
  auto corpus = TokenCorpus::Open(d, 16, kByteVocab, 3);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->NumUniqueWindows(), 10);
  std::vector<int32_t> in(16), out(16);
  std::vector<std::set<std::string>> seen(2);
  std::vector<std::string> order[2];
  for (int64_t g = 0; g < 20; ++g) {
    ASSERT_TRUE(corpus->FillTraining(g, 1, in.data(), out.data()).ok());
    std::string w(in.begin(), in.end());
    seen[g / 10].insert(w);
    order[g / 10].push_back(w);
  }
  EXPECT_EQ(seen[0].size(), 10u);
  EXPECT_EQ(seen[0], seen[1]) << "each epoch must be a permutation of the same unique windows";
  EXPECT_NE(order[0], order[1]) << "epochs should be reshuffled";
}

// Defence in depth behind the worker's dataset resolver (issue #23): the engine itself reads only
// a regular file, never past its size limit, and its refusal names neither the path nor a size.
TEST_F(TrainTest, CorpusIsARegularFileWithinTheLimit) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string small = (dir_ / "small.bin").string();
  std::ofstream(small, std::ios::binary) << std::string(4096, 'a');
  struct Case {
    const char* what;
    std::string path;
    int64_t limit;
    absl::StatusCode code;
  };
  for (const Case& c :
       {Case{"an endless device", "/dev/zero", kDefaultMaxCorpusBytes,
             absl::StatusCode::kInvalidArgument},
        Case{"a FIFO (must not block)", fifo, kDefaultMaxCorpusBytes,
             absl::StatusCode::kInvalidArgument},
        Case{"a directory without manifest.json", dir_.string(), kDefaultMaxCorpusBytes,
             absl::StatusCode::kNotFound},
        Case{"a file over the limit", small, 4095, absl::StatusCode::kInvalidArgument},
        Case{"a missing file", (dir_ / "absent").string(), kDefaultMaxCorpusBytes,
             absl::StatusCode::kNotFound}}) {
    DataConfig d{.corpus_path = c.path, .validation_fraction = 0.1, .max_corpus_bytes = c.limit};
    absl::StatusOr<TokenCorpus> corpus = TokenCorpus::Open(d, 16, kByteVocab, 1);
    ASSERT_FALSE(corpus.ok()) << c.what << " must be refused";
    EXPECT_EQ(corpus.status().code(), c.code) << c.what << ": " << corpus.status();
    EXPECT_EQ(corpus.status().message().find(dir_.string()), std::string::npos)
        << c.what << ": the message must not name the path: " << corpus.status();
    EXPECT_EQ(corpus.status().message().find("4096"), std::string::npos)
        << c.what << ": the message must not tell the file's size: " << corpus.status();
  }
  DataConfig at_limit{.corpus_path = small, .validation_fraction = 0.1, .max_corpus_bytes = 4096};
  EXPECT_TRUE(TokenCorpus::Open(at_limit, 16, kByteVocab, 1).ok())
      << "a file of exactly the limit is read";
}

// The unique budget is a sample of the whole training split (a corpus is ordered by source, so its
// first D̂ tokens are one part of the text), and a smaller budget is a subset of a larger one.
TEST_F(TrainTest, UniqueWindowsSpanTheWholeSplitAndNest) {
  const std::string random_corpus = (dir_ / "random.bin").string();
  std::string bytes;
  Rng rng{.seed = 5};
  for (int i = 0; i < 40000; ++i) bytes.push_back(static_cast<char>(rng.Below(256)));
  std::ofstream(random_corpus, std::ios::binary) << bytes;
  // Start byte of every unique window (random bytes: 16 of them identify the position).
  auto starts = [&](int64_t windows) {
    DataConfig d{
        .corpus_path = random_corpus, .validation_fraction = 0.1, .unique_tokens = 16 * windows};
    auto corpus = TokenCorpus::Open(d, 16, kByteVocab, 7);
    EXPECT_TRUE(corpus.ok()) << corpus.status();
    std::set<int64_t> out;
    std::vector<int32_t> in(16), tg(16);
    for (int64_t g = 0; g < windows; ++g) {
      EXPECT_TRUE(corpus->FillTraining(g, 1, in.data(), tg.data()).ok());
      out.insert(static_cast<int64_t>(bytes.find(std::string(in.begin(), in.end()))));
    }
    return out;
  };
  const std::set<int64_t> large = starts(200), small = starts(50);
  ASSERT_EQ(large.size(), 200u);
  const int64_t split = 36000;
  std::vector<int> quarters(4, 0);
  for (int64_t s : large) {
    ASSERT_EQ(s % 16, 0) << "window at byte " << s << " is not on the window grid";
    ASSERT_LT(s + 16, split) << "window at byte " << s << " reaches into the validation split";
    ++quarters[s * 4 / split];
  }
  for (int q = 0; q < 4; ++q) {
    EXPECT_GE(quarters[q], 25) << "quarter " << q << " of the split holds " << quarters[q]
                               << " of 200 unique windows; expected about 50 (a prefix holds "
                                  "them all in the first 3200 bytes)";
  }
  for (int64_t s : small) EXPECT_TRUE(large.contains(s)) << "D̂ 50 window " << s << " not in D̂ 200";
}

TEST(ScheduleTest, WarmupCosineAndWsd) {
  OptimizerConfig o{.lr = 1.0, .min_lr = 0.1, .warmup_steps = 10};
  EXPECT_DOUBLE_EQ(LearningRate(o, 0, 100), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(o, 9, 100), 1.0);
  EXPECT_NEAR(LearningRate(o, 100, 100), 0.1, 1e-12);
  o.schedule = Schedule::kWarmupStableDecay;
  o.decay_fraction = 0.2;
  EXPECT_DOUBLE_EQ(LearningRate(o, 50, 100), 1.0);
  EXPECT_NEAR(LearningRate(o, 99, 100), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(o, 89, 100), 0.55, 1e-12);
}

// ---- run spec ----------------------------------------------------------------------------------

nlohmann::json GoodSpec(const std::string& corpus) {
  return {{"name", "spec-test"},
          {"model",
           {{"architecture", "ARCHITECTURE_MOE"},
            {"dModel", 16},
            {"numLayers", 2},
            {"numHeads", 2},
            {"numKvHeads", 2},
            {"ffnHidden", 32},
            {"tieEmbeddings", true},
            {"moe",
             {{"layout", "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT"},
              {"numExperts", 4},
              {"topK", 2},
              {"expertHidden", 8}}}}},
          {"training",
           {{"learningRate", 0.003},
            {"batchTokens", 64},
            {"sequenceLength", 16},
            {"steps", 2},
            {"microBatchSequences", 2},
            {"seed", 1},
            {"evalTokens", 32}}},
          {"data", {{"corpus", corpus}, {"validationFraction", 0.1}}}};
}

TEST_F(TrainTest, RunSpecAdapterAppliesDefaults) {
  auto parsed = RunConfigFromRunSpecJson(GoodSpec(corpus_).dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const RunConfig& c = parsed->config;
  EXPECT_EQ(c.model.SharedDim(), 16);  // 1dense+SE: D_se = K·D_e
  EXPECT_EQ(c.train.batch_sequences, 4);
  EXPECT_EQ(c.train.batch_size, 2);
  EXPECT_DOUBLE_EQ(c.model.aux_loss_weight, 0.01);
  EXPECT_DOUBLE_EQ(c.model.z_loss_weight, 0.001);
  EXPECT_DOUBLE_EQ(c.optimizer.min_lr, 0.0003);
  EXPECT_EQ(c.data.subset, SubsetMode::kSeeded) << "unique data must sample the whole split";
  EXPECT_EQ(c.model.vocab_size, 256) << "vocab_size 0 is the byte vocabulary";
  EXPECT_TRUE(c.data.eval_sets.empty());
  // A tokenizer's vocabulary and named evaluation sets pass through (the dataset checks them).
  nlohmann::json j = GoodSpec(corpus_);
  j["model"]["vocabSize"] = 32000;
  j["data"]["evalSets"] = {"wiki", "validation"};
  auto bpe = RunConfigFromRunSpecJson(j.dump());
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ(bpe->config.model.vocab_size, 32000);
  EXPECT_EQ(bpe->config.data.eval_sets, (std::vector<std::string>{"wiki", "validation"}));
  EXPECT_EQ(ComputeAnalyticCounts(bpe->config.model).params, ComputeAnalyticCounts(c.model).params)
      << "N excludes the vocabulary";
  EXPECT_GT(ComputeAnalyticCounts(bpe->config.model).vocab_params,
            ComputeAnalyticCounts(c.model).vocab_params);
}

struct BadSpec {
  const char* field;  // must appear in the error message
  std::function<void(nlohmann::json&)> mutate;
};

TEST_F(TrainTest, BadRunSpecsAreRefusedNamingTheField) {
  const std::vector<BadSpec> cases = {
      {"model.num_heads", [](auto& j) { j["model"]["numHeads"] = 3; }},
      {"model.num_kv_heads", [](auto& j) { j["model"]["numKvHeads"] = 3; }},
      {"model.moe.top_k", [](auto& j) { j["model"]["moe"]["topK"] = 9; }},
      {"model.moe.expert_hidden", [](auto& j) { j["model"]["moe"]["expertHidden"] = 0; }},
      {"model.moe.layout", [](auto& j) { j["model"]["moe"].erase("layout"); }},
      {"model.architecture", [](auto& j) { j["model"].erase("architecture"); }},
      {"training.batch_tokens", [](auto& j) { j["training"]["batchTokens"] = 60; }},
      {"training.steps", [](auto& j) { j["training"]["steps"] = 0; }},
      {"training.learning_rate", [](auto& j) { j["training"]["learningRate"] = -1; }},
      {"training.sequence_length", [](auto& j) { j["training"]["sequenceLength"] = 1; }},
      {"data.corpus", [](auto& j) { j["data"]["corpus"] = ""; }},
      {"data.validation_fraction", [](auto& j) { j["data"]["validationFraction"] = 1.5; }},
      {"numHeds", [](auto& j) { j["model"]["numHeds"] = 2; }},  // a typo is not ignored
  };
  for (const BadSpec& c : cases) {
    nlohmann::json j = GoodSpec(corpus_);
    c.mutate(j);
    auto parsed = RunConfigFromRunSpecJson(j.dump());
    ASSERT_FALSE(parsed.ok()) << "accepted a spec with a bad " << c.field;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(std::string(parsed.status().message()).find(c.field), std::string::npos)
        << "error does not name " << c.field << ": " << parsed.status().message();
  }
}

TEST_F(TrainTest, DivergenceIsReportedNotTrainedThrough) {
  RunConfig c = TinyMoeRun();
  c.model.init_std = 1e30;  // overflows to inf in the first forward
  CollectingSink sink;
  auto r = RunTraining(c, {.out_dir = (dir_ / "nan").string(), .threads = 1, .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
}

TEST_F(TrainTest, ResumeRefusesACheckpointOfAnotherSpec) {
  RunConfig c = TinyMoeRun();
  c.train.steps = 1;
  CollectingSink sink;
  const std::string out = (dir_ / "r").string();
  ASSERT_TRUE(RunTraining(c, {.out_dir = out, .threads = 1, .metrics = &sink}).ok());
  c.optimizer.lr *= 2;
  auto r = RunTraining(
      c, {.out_dir = out, .resume = ResumeMode::kResumeIfPresent, .threads = 1, .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST_F(TrainTest, ResumeFollowsCorpusContentNotPath) {
  RunConfig c = TinyMoeRun();
  CollectingSink sink;
  const std::string out = (dir_ / "moved").string();
  ASSERT_TRUE(
      RunTraining(c, {.out_dir = out, .threads = 1, .metrics = &sink, .max_steps = 2}).ok());
  // Same bytes at another path (another worker's mount): accepted.
  const std::string moved = (dir_ / "elsewhere.txt").string();
  fs::copy_file(corpus_, moved);
  c.data.corpus_path = moved;
  auto r = RunTraining(c, {.out_dir = out,
                           .resume = ResumeMode::kResumeIfPresent,
                           .threads = 1,
                           .metrics = &sink,
                           .max_steps = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  // Different bytes: refused.
  std::ofstream(moved, std::ios::app) << "more text";
  r = RunTraining(
      c, {.out_dir = out, .resume = ResumeMode::kResumeIfPresent, .threads = 1, .metrics = &sink});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

// A checkpoint file by hand, in the format of checkpoint.h, ending in a valid checksum: a reader
// that refuses it cannot blame the checksum.
std::string CheckpointBytes(uint32_t layers, const std::vector<uint32_t>& experts, uint64_t n) {
  std::string bytes = "PARITYCK";
  auto put = [&bytes](const auto& v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  put(uint32_t{3});  // version
  put(uint64_t{7});  // fingerprint
  put(uint32_t{3});  // device name
  bytes += "cpu";
  put(uint32_t{4});  // precision name
  bytes += "fp32";
  put(int64_t{5});    // step
  put(int64_t{6});    // cursor
  put(uint64_t{42});  // rng seed
  put(uint64_t{1});   // rng counter
  put(layers);
  for (uint32_t e : experts) {
    put(e);
    for (uint32_t i = 0; i < e; ++i) put(0.5f);
  }
  put(n);
  for (uint64_t i = 0; i < 3 * n; ++i) put(1.0f);
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ULL;
  put(h);
  return bytes;
}

// Found by tests/fuzz (checkpoint_fuzzer): the MoE layer count sized an allocation before any
// layer was read, so a file claiming 4 billion layers asked for ~100 GB (out of memory) instead
// of being refused as corrupt.
TEST_F(TrainTest, CheckpointClaimingMoreLayersThanItHoldsIsCorrupt) {
  const std::string path = (dir_ / "layers.ckpt").string();
  for (uint32_t layers : {0xFFFFFFFFu, 1000u, 2u}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << CheckpointBytes(layers, {1}, 1);
    auto c = ReadCheckpointFile(path);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << layers << ": " << c.status();
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << CheckpointBytes(1, {1}, 1);
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->balance_bias.size(), 1u);
  EXPECT_EQ(c->balance_bias[0], std::vector<float>{0.5f});
}

// Found by tests/fuzz under UBSan: empty arrays (a layer of no experts, no parameters) were read
// with memcpy into an empty vector's null data().
TEST_F(TrainTest, CheckpointWithEmptyArraysReads) {
  const std::string path = (dir_ / "empty.ckpt").string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << CheckpointBytes(2, {0, 0}, 0);
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 5);
  EXPECT_EQ(c->device, "cpu");
  EXPECT_EQ(c->balance_bias.size(), 2u);
  EXPECT_TRUE(c->params.empty() && c->adam_m.empty() && c->adam_v.empty());
}

// ---- the binary --------------------------------------------------------------------------------

int RunCommand(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(TrainTest, CommandLineExitCodesAndSummary) {
  const std::string spec = (dir_ / "run.json").string();
  nlohmann::json j = GoodSpec(corpus_);
  j["model"]["numHeads"] = 5;
  std::ofstream(spec) << j.dump();
  std::string out;
  EXPECT_EQ(RunCommand(std::string(PARITY_TRAIN_BIN) + " --run " + spec + " --out " +
                           (dir_ / "o").string(),
                       &out),
            2);
  EXPECT_NE(out.find("model.num_heads"), std::string::npos) << out;

  std::ofstream(spec, std::ios::trunc) << GoodSpec(corpus_).dump();
  out.clear();
  EXPECT_EQ(RunCommand(std::string(PARITY_TRAIN_BIN) + " --run " + spec + " --out " +
                           (dir_ / "o").string() + " --threads 1",
                       &out),
            0)
      << out;
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  const auto summary = nlohmann::json::parse(last);
  EXPECT_EQ(summary["event"], "summary");
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_TRUE(fs::exists(dir_ / "o" / "LATEST"));
}

}  // namespace
}  // namespace parity::kernels
