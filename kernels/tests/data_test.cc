// The data path (kernels/data/): keyed permutations, token streams across shard boundaries, the
// prepared-dataset and raw-file inputs giving the same windows and the same training curve,
// prefetching that changes nothing, BPC per byte of text, evaluation sets, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "kernels/data/batch_loader.h"
#include "kernels/data/permutation.h"
#include "kernels/data/token_corpus.h"
#include "kernels/tests/prepared_dataset_writer.h"
#include "kernels/train/session.h"
#include "kernels/train/step.h"
#include "kernels/train/trainer.h"

namespace parity::kernels {
namespace {

namespace fs = std::filesystem;
using testing::PreparedDatasetSpec;
using testing::WritePreparedDataset;

class CollectingSink final : public MetricsSink {
 public:
  void Write(const std::string& line) override { lines.push_back(nlohmann::json::parse(line)); }
  std::vector<nlohmann::json> lines;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<int64_t> Iota(int64_t n, int64_t modulo) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % modulo;
  return v;
}

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("parity_data_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A dense model small enough to train in milliseconds.
  RunConfig TinyDenseRun(const std::string& corpus) const {
    RunConfig c;
    c.run_id = "tiny";
    c.model.d_model = 16;
    c.model.n_layers = 2;
    c.model.n_heads = 2;
    c.model.n_kv_heads = 2;
    c.model.d_ffn = 32;
    c.model.seq_len = 16;
    c.optimizer.lr = 3e-3;
    c.optimizer.warmup_steps = 2;
    c.train.batch_size = 2;
    c.train.batch_sequences = 4;
    c.train.steps = 8;
    c.train.seed = 7;
    c.train.log_interval = 1;
    c.train.eval_interval = 3;
    c.train.eval_tokens = 64;
    c.train.checkpoint_interval = 4;
    c.data.corpus_path = corpus;
    c.data.validation_fraction = 0.1;
    return c;
  }

  fs::path dir_;
};

TEST(KeyedPermutationTest, IsABijectionOfEverySize) {
  for (int64_t n : {1, 2, 3, 4, 5, 17, 64, 1000, 4097}) {
    const KeyedPermutation p(n, 42);
    std::set<int64_t> images;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t y = p(i);
      ASSERT_GE(y, 0) << "n " << n;
      ASSERT_LT(y, n) << "n " << n;
      images.insert(y);
    }
    EXPECT_EQ(static_cast<int64_t>(images.size()), n) << "n " << n << ": not a bijection";
  }
  // Another key, another order (and not the identity).
  int64_t same = 0, fixed = 0;
  const KeyedPermutation a(1000, 1), b(1000, 2);
  for (int64_t i = 0; i < 1000; ++i) same += a(i) == b(i), fixed += a(i) == i;
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

// Every training window of a split cut into 7-token shards (so every 17-token window crosses one
// or more boundaries) holds exactly the stream's tokens, for 2-byte and 4-byte ids.
TEST_F(DataTest, WindowsCrossShardBoundaries) {
  for (int64_t vocab : {1000, 70000}) {
    SCOPED_TRACE(vocab);
    const std::vector<int64_t> stream = Iota(2000, vocab);
    std::vector<int64_t> wide = stream;
    if (vocab > 65536) {
      for (auto& t : wide) t = (t * 37) % vocab;  // ids above 16 bits
    }
    const fs::path ds = dir_ / ("ds" + std::to_string(vocab));
    WritePreparedDataset(ds, {.vocab_size = vocab,
                              .train = {.name = "train", .tokens = wide, .shard_tokens = 7},
                              .eval_sets = {{.name = "validation", .tokens = Iota(100, vocab)}}});
    DataConfig d{.corpus_path = ds.string()};
    absl::StatusOr<TokenCorpus> corpus = TokenCorpus::Open(d, 16, vocab, 3);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    ASSERT_EQ(corpus->NumTrainWindows(), (2000 - 1) / 16);
    std::vector<int32_t> in(16), tg(16);
    for (int64_t g = 0; g < corpus->NumTrainWindows(); ++g) {
      ASSERT_TRUE(corpus->FillTraining(g, 1, in.data(), tg.data()).ok());
      const int64_t start = corpus->TrainingWindow(g) * 16;
      for (int64_t j = 0; j < 16; ++j) {
        ASSERT_EQ(in[j], wide[start + j]) << "window " << g << " input " << j;
        ASSERT_EQ(tg[j], wide[start + j + 1]) << "window " << g << " target " << j;
      }
    }
  }
}

// A byte corpus prepared as shards (its training bytes as "train", its tail as "validation")
// trains bit-identically to the raw file: same windows, same orders, same BPC at every step.
TEST_F(DataTest, PreparedBytesTrainLikeTheRawFile) {
  const std::string raw = (dir_ / "corpus.txt").string();
  std::string text;
  for (int i = 0; i < 300; ++i) text += "Verse " + std::to_string(i) + ": Let there be light. ";
  std::ofstream(raw, std::ios::binary) << text;
  const int64_t split = static_cast<int64_t>(static_cast<double>(text.size()) * (1.0 - 0.1));
  std::vector<int64_t> train(text.begin(), text.begin() + split),
      validation(text.begin() + split, text.end());
  for (auto* v : {&train, &validation}) {
    for (auto& t : *v) t = static_cast<unsigned char>(t);
  }
  const fs::path ds = dir_ / "kjv";
  WritePreparedDataset(
      ds, {.train = {.name = "train", .tokens = train, .shard_tokens = 1000},
           .eval_sets = {{.name = "validation", .tokens = validation, .shard_tokens = 333}}});
  RunConfig c = TinyDenseRun(raw);
  c.data.unique_tokens = 16 * 20;  // 8 steps × 4 windows over 20: 1.6 epochs
  CollectingSink from_raw, from_shards;
  ASSERT_TRUE(RunTraining(c, {.out_dir = (dir_ / "a").string(), .metrics = &from_raw}).ok());
  c.data.corpus_path = ds.string();
  ASSERT_TRUE(RunTraining(c, {.out_dir = (dir_ / "b").string(), .metrics = &from_shards}).ok());
  ASSERT_EQ(from_raw.lines.size(), from_shards.lines.size());
  for (size_t i = 0; i < from_raw.lines.size(); ++i) {
    for (const char* key : {"train_bpc", "val_bpc", "eval_bpc", "grad_norm", "unique_tokens",
                            "final_train_bpc", "final_val_bpc", "final_eval_bpc"}) {
      EXPECT_EQ(from_raw.lines[i].value(key, nlohmann::json()),
                from_shards.lines[i].value(key, nlohmann::json()))
          << "line " << i << " key " << key;
    }
  }
  EXPECT_EQ(from_raw.lines.back()["dataset_digest"], datasets::Sha256Hex(text));
  EXPECT_EQ(from_shards.lines.back()["dataset_digest"],
            datasets::Sha256Hex(ReadFile((ds / "manifest.json").string())));
}

// Strict (D̂ below D, whole epochs) and loose (fractional epochs) reuse resume bit-identically on a
// sharded dataset: the cursor is the only data state.
TEST_F(DataTest, ReuseAndResumeAreBitIdenticalOnShards) {
  const fs::path ds = dir_ / "ds";
  WritePreparedDataset(ds,
                       {.vocab_size = 300,
                        .train = {.name = "train", .tokens = Iota(5000, 293), .shard_tokens = 111},
                        .eval_sets = {{.name = "validation", .tokens = Iota(500, 300)}}});
  for (int64_t unique_windows : {8, 20}) {  // 32 windows consumed: 4 epochs, 1.6 epochs
    SCOPED_TRACE(unique_windows);
    RunConfig c = TinyDenseRun(ds.string());
    c.model.vocab_size = 300;
    c.data.unique_tokens = 16 * unique_windows;
    const std::string a = (dir_ / ("a" + std::to_string(unique_windows))).string(),
                      b = (dir_ / ("b" + std::to_string(unique_windows))).string();
    CollectingSink straight, first, second;
    auto sa = RunTraining(c, {.out_dir = a, .metrics = &straight});
    ASSERT_TRUE(sa.ok()) << sa.status();
    ASSERT_TRUE(RunTraining(c, {.out_dir = b, .metrics = &first, .max_steps = 3}).ok());
    auto sb = RunTraining(c, {.out_dir = b,
                              .resume = ResumeMode::kResumeIfPresent,
                              .metrics = &second,
                              .prefetch = Prefetch::kOff});
    ASSERT_TRUE(sb.ok()) << sb.status();
    EXPECT_EQ(ReadFile(sa->checkpoint_path), ReadFile(sb->checkpoint_path))
        << "final checkpoint differs after a resume";
    EXPECT_DOUBLE_EQ(straight.lines.back()["epochs"].get<double>(), 32.0 / unique_windows);
  }
}

// The loader thread hands out exactly FillTraining's windows, in order and after a jump (resume).
TEST_F(DataTest, PrefetchingReadsTheSameWindows) {
  const fs::path ds = dir_ / "ds";
  WritePreparedDataset(
      ds, {.vocab_size = 1000,
           .train = {.name = "train", .tokens = Iota(20000, 997), .shard_tokens = 1234},
           .eval_sets = {{.name = "validation", .tokens = Iota(100, 1000)}}});
  absl::StatusOr<TokenCorpus> corpus =
      TokenCorpus::Open({.corpus_path = ds.string(), .unique_tokens = 16 * 300}, 16, 1000, 9);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  BatchLoader loader(*corpus, 4, Prefetch::kOn);
  std::vector<int32_t> in(64), tg(64), want_in(64), want_tg(64);
  for (int64_t cursor : {0, 4, 8, 12, 100, 104, 108, 0, 4, 1000, 1004}) {
    absl::StatusOr<int64_t> bytes = loader.Next({cursor, 4}, in, tg);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(corpus->FillTraining(cursor, 4, want_in.data(), want_tg.data()).ok());
    EXPECT_EQ(in, want_in) << "cursor " << cursor;
    EXPECT_EQ(tg, want_tg) << "cursor " << cursor;
    EXPECT_EQ(*bytes, 64);
  }
  // Uneven micro-batches (4 + 3 + 3 windows a step), each naming the next; then one whose
  // prepared successor is not the one asked for (a count that differs is not the same window).
  const std::vector<BatchLoader::Window> windows = {{0, 4},  {4, 3},  {7, 3},  {10, 4},
                                                    {14, 3}, {17, 3}, {17, 2}, {19, 4}};
  for (size_t i = 0; i < windows.size(); ++i) {
    const BatchLoader::Window w = windows[i];
    const BatchLoader::Window next =
        i + 1 < windows.size() ? BatchLoader::Window{w.cursor + w.count, 3} : w;
    absl::StatusOr<int64_t> bytes = loader.Next(w, in, tg, next);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(corpus->FillTraining(w.cursor, w.count, want_in.data(), want_tg.data()).ok());
    const auto n = static_cast<std::ptrdiff_t>(w.count * 16);
    EXPECT_TRUE(std::equal(want_in.begin(), want_in.begin() + n, in.begin()))
        << "windows [" << w.cursor << ", +" << w.count << ")";
    EXPECT_TRUE(std::equal(want_tg.begin(), want_tg.begin() + n, tg.begin()))
        << "windows [" << w.cursor << ", +" << w.count << ")";
    EXPECT_EQ(*bytes, w.count * 16);
  }
  EXPECT_EQ(loader.Next({0, 5}, in, tg).status().code(), absl::StatusCode::kInternal)
      << "more windows than the loader's buffers hold";
}

// BPC is bits per byte of text: with (near-)zero weights every token's loss is ln V, so a window
// of 4 targets over a vocabulary of 4 costs 4 · 2 bits, divided by the bytes those targets stand
// for, counted by hand from token_bytes = {1, 2, 3, 0}.
TEST_F(DataTest, BitsPerByteByHand) {
  const fs::path ds = dir_ / "ds";
  // Validation window 0: inputs 0 1 2 3, targets 1 2 3 1 → 2 + 3 + 0 + 2 = 7 bytes;
  // window 1: inputs 1 2 0 0, targets 2 0 0 2 → 3 + 1 + 1 + 3 = 8 bytes.
  const std::vector<int64_t> validation = {0, 1, 2, 3, 1, 2, 0, 0, 2};
  // "other": inputs 3 3 3 3, targets 3 3 3 0 → 0 + 0 + 0 + 1 = 1 byte.
  const std::vector<int64_t> other = {3, 3, 3, 3, 0};
  PreparedDatasetSpec spec{.vocab_size = 4, .token_bytes = {1, 2, 3, 0}};
  spec.train = {.name = "train", .tokens = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1}};
  spec.eval_sets = {{.name = "validation", .tokens = validation},
                    {.name = "other", .tokens = other}};
  WritePreparedDataset(ds, spec);
  RunConfig c = TinyDenseRun(ds.string());
  c.model.vocab_size = 4;
  c.model.seq_len = 4;
  c.model.init_std = 1e-30;  // logits 0 to float precision: each token's loss is ln 4 = 2 bits
  c.train.eval_tokens = 8;
  CollectingSink sink;
  absl::StatusOr<std::unique_ptr<Session>> s =
      OpenSession(c, {.out_dir = (dir_ / "o").string(), .metrics = &sink});
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<double>> bpc = Evaluate(**s);
  ASSERT_TRUE(bpc.ok()) << bpc.status();
  ASSERT_EQ(bpc->size(), 2u);
  EXPECT_NEAR((*bpc)[0], 8 * 2.0 / (7 + 8), 1e-6) << "validation: 8 targets × 2 bits / 15 bytes";
  // "other": inputs 3 3 3 3, targets 3 3 3 0 → 0 + 0 + 0 + 1 = 1 byte.
  EXPECT_NEAR((*bpc)[1], 4 * 2.0 / 1, 1e-6) << "other: 4 targets × 2 bits / 1 byte";
  // For bytes (tokens == bytes) the conversion is exactly today's mean / ln 2.
  for (double mean : {0.1, 1.2345678901234567, 5.5}) {
    EXPECT_EQ(BitsPerByte(mean, 4096, 4096), mean / kLn2);
  }
  EXPECT_DOUBLE_EQ(BitsPerByte(std::log(4.0), 4, 7), 8.0 / 7);
}

// The requested sets in the requested order, the first as val_bpc; every set by default.
TEST_F(DataTest, EvaluationSetsAreNamedAndReported) {
  const fs::path ds = dir_ / "ds";
  const std::string digest = WritePreparedDataset(
      ds, {.train = {.name = "train", .tokens = Iota(3000, 256), .shard_tokens = 500},
           .eval_sets = {{.name = "validation", .tokens = Iota(200, 251)},
                         {.name = "wiki", .tokens = Iota(200, 7)},
                         {.name = "code", .tokens = Iota(200, 13)}}});
  RunConfig c = TinyDenseRun(ds.string());
  c.train.steps = 3;
  CollectingSink all;
  ASSERT_TRUE(RunTraining(c, {.out_dir = (dir_ / "a").string(), .metrics = &all}).ok());
  const nlohmann::json& eval_line = all.lines[all.lines.size() - 2];
  ASSERT_TRUE(eval_line.contains("eval_bpc")) << eval_line.dump();
  EXPECT_EQ(eval_line["eval_bpc"].size(), 3u);
  EXPECT_EQ(eval_line["val_bpc"], eval_line["eval_bpc"]["validation"]);
  EXPECT_NE(eval_line["eval_bpc"]["wiki"], eval_line["eval_bpc"]["code"]);
  const nlohmann::json& summary = all.lines.back();
  EXPECT_EQ(summary["final_eval_bpc"], eval_line["eval_bpc"]);
  EXPECT_EQ(summary["final_val_bpc"], eval_line["val_bpc"]);
  EXPECT_EQ(summary["dataset_digest"], digest);
  EXPECT_FALSE(all.lines[0].contains("eval_bpc")) << "step 1 is no evaluation step";

  c.data.eval_sets = {"code", "validation"};
  CollectingSink chosen;
  ASSERT_TRUE(RunTraining(c, {.out_dir = (dir_ / "b").string(), .metrics = &chosen}).ok());
  const nlohmann::json& line = chosen.lines[chosen.lines.size() - 2];
  EXPECT_EQ(line["eval_bpc"].size(), 2u);
  EXPECT_EQ(line["val_bpc"], eval_line["eval_bpc"]["code"]) << "the first named is primary";
  EXPECT_EQ(line["eval_bpc"]["validation"], eval_line["eval_bpc"]["validation"]);

  c.data.eval_sets = {"validation", "news"};
  CollectingSink refused;
  auto r = RunTraining(c, {.out_dir = (dir_ / "c").string(), .metrics = &refused});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "data.eval_sets[1]: the dataset has no evaluation set 'news'; its sets are: "
            "validation, wiki, code");
}

TEST_F(DataTest, RefusalsNameTheFieldAndNoPath) {
  const fs::path ds = dir_ / "ds";
  WritePreparedDataset(
      ds, {.vocab_size = 1000,
           .train = {.name = "train", .tokens = Iota(3000, 1000), .shard_tokens = 1000},
           .eval_sets = {{.name = "validation", .tokens = Iota(200, 1000)}}});
  auto open = [&](int64_t vocab) {
    return TokenCorpus::Open({.corpus_path = ds.string()}, 16, vocab, 1).status();
  };
  ASSERT_TRUE(open(1000).ok()) << open(1000);
  EXPECT_EQ(open(256).message(),
            "model.vocab_size: the model has 256 but the dataset's tokenizer.vocab_size is 1000; "
            "set model.vocab_size to 1000 or name another dataset");
  // A raw file is the byte vocabulary.
  const std::string raw = (dir_ / "raw.txt").string();
  std::ofstream(raw) << std::string(1000, 'x');
  EXPECT_TRUE(absl::StrContains(
      TokenCorpus::Open({.corpus_path = raw}, 16, 1000, 1).status().message(),
      "model.vocab_size: the model has 1000 but the dataset's tokenizer.vocab_size is 256"));
  EXPECT_TRUE(absl::StrContains(
      TokenCorpus::Open({.corpus_path = raw, .eval_sets = {"wiki"}}, 16, 256, 1).status().message(),
      "its sets are: validation"));
  // A raw file given by hand through a link is read, and named by its content.
  fs::create_symlink(raw, dir_ / "link.txt");
  absl::StatusOr<TokenCorpus> linked =
      TokenCorpus::Open({.corpus_path = (dir_ / "link.txt").string()}, 16, 256, 1);
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(linked->Digest(), datasets::Sha256Hex(std::string(1000, 'x')));
  // A truncated shard (a partial copy) is refused before training, naming no path.
  fs::resize_file(ds / "train-00001.tok", 1998);
  const absl::Status truncated = open(1000);
  EXPECT_EQ(truncated.code(), absl::StatusCode::kInvalidArgument) << truncated;
  EXPECT_TRUE(absl::StrContains(truncated.message(), "shard 1 of split 'train'")) << truncated;
  EXPECT_FALSE(absl::StrContains(truncated.message(), dir_.string())) << truncated;
  // An id outside the vocabulary is refused when read, never indexed.
  WritePreparedDataset(ds, {.vocab_size = 1000,
                            .train = {.name = "train", .tokens = Iota(3000, 1000)},
                            .eval_sets = {{.name = "validation", .tokens = Iota(200, 1000)}}});
  std::fstream f((ds / "train-00000.tok").string(),
                 std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(2 * 17);
  f.put('\xff').put('\xff');  // id 65535 at token 17
  f.close();
  absl::StatusOr<TokenCorpus> corpus =
      TokenCorpus::Open({.corpus_path = ds.string(), .subset = SubsetMode::kPrefix}, 16, 1000, 1);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  std::vector<int32_t> in(16), tg(16);
  absl::Status bad = absl::OkStatus();
  for (int64_t g = 0; g < corpus->NumTrainWindows() && bad.ok(); ++g) {
    bad = corpus->FillTraining(g, 1, in.data(), tg.data()).status();
  }
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "outside the tokenizer's vocabulary of 1000"));
}

}  // namespace
}  // namespace parity::kernels
