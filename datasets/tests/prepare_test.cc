// PrepareDataset end to end with the byte tokenizer: manifest read back, shards and document
// index, the split rule, determinism over thread counts, and bad input leaving nothing behind.
#include "datasets/prepare/prepare.h"

#include <filesystem>

#include "datasets/tests/split_reader.h"
#include "datasets/tests/test_corpus.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::datasets {
namespace {

using ::testing::HasSubstr;
using testing::ReadSplit;
using testing::ScratchDir;
using testing::WriteFile;

// The out directory's entries (staging directories included: they start with a dot).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir)) return names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

PrepareOptions Options(const ScratchDir& dir, std::vector<std::string> inputs) {
  PrepareOptions o;
  o.out_dir = dir / "out";
  o.name = "tiny";
  o.inputs = std::move(inputs);
  o.shard_tokens = 1024;
  o.threads = 2;
  return o;
}

TEST(PrepareTest, BytesDatasetReadsBackWithDocumentsAcrossShards) {
  ScratchDir dir;
  std::string all;
  for (int i = 0; i < 40; ++i) {
    const std::string text = testing::EnglishLike(30 + 13 * i, i);
    WriteFile(dir / ("in/doc" + std::to_string(100 + i) + ".txt"), text);
    all += text;
  }
  PrepareOptions o = Options(dir, {dir / "in"});
  o.split_rule.validation_fraction = 0.2;
  o.eval_sets = {{.name = "other", .inputs = {dir / "in/doc100.txt", dir / "in/doc101.txt"}}};
  absl::StatusOr<PrepareResult> result = PrepareDataset(o);
  ASSERT_TRUE(result.ok()) << result.status();

  std::string digest;
  absl::StatusOr<Manifest> m = ReadManifest(dir / "out/tiny", &digest);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(digest, result->digest);
  EXPECT_EQ(m->token_width, 2);
  EXPECT_EQ(m->tokenizer.kind, TokenizerKind::kBytes);
  ASSERT_EQ(m->eval_sets.size(), 2u);
  EXPECT_EQ(m->eval_sets[0].name, "validation");
  EXPECT_EQ(m->eval_sets[1].name, "other");
  EXPECT_EQ(m->train.documents + m->eval_sets[0].documents, 40);
  EXPECT_EQ(m->train.tokens + m->eval_sets[0].tokens, static_cast<int64_t>(all.size()));
  EXPECT_GT(m->train.shards.size(), 3u) << "small shards: documents must run across them";
  EXPECT_EQ(m->train.token_bytes, m->train.tokens);
  EXPECT_EQ(m->train.text_bytes, m->train.tokens);

  // Documents in input order, each held out exactly when the rule says; every byte accounted.
  const testing::SplitContents train = ReadSplit(dir / "out/tiny", *m, m->train);
  const testing::SplitContents validation = ReadSplit(dir / "out/tiny", *m, m->eval_sets[0]);
  std::string train_text, validation_text;
  for (int i = 0; i < 40; ++i) {
    const std::string text = testing::EnglishLike(30 + 13 * i, i);
    (IsValidationDocument(m->split_rule, i) ? validation_text : train_text) += text;
  }
  EXPECT_EQ(std::string(train.tokens.begin(), train.tokens.end()), train_text);
  EXPECT_EQ(std::string(validation.tokens.begin(), validation.tokens.end()), validation_text);
  ASSERT_EQ(train.document_starts.size(), static_cast<size_t>(m->train.documents));
  uint64_t offset = 0;
  size_t k = 0;
  for (int i = 0; i < 40; ++i) {
    if (IsValidationDocument(m->split_rule, i)) continue;
    EXPECT_EQ(train.document_starts[k++], offset) << "document " << i;
    offset += testing::EnglishLike(30 + 13 * i, i).size();
  }
  for (const Shard& shard : m->train.shards) {
    EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(dir / ("out/tiny/" + shard.file))),
              shard.tokens * 2);
    EXPECT_EQ(*Sha256OfFile(dir / ("out/tiny/" + shard.file)), shard.sha256);
  }
  EXPECT_EQ(Entries(dir / "out"), std::vector<std::string>{"tiny"}) << "no staging left behind";
}

TEST(PrepareTest, TheBytesDoNotDependOnTheThreadCount) {
  ScratchDir dir;
  // Over two batches of paragraphs, so several workers really race.
  std::string text;
  for (int i = 0; i < 2000; ++i) text += testing::EnglishLike(500, i) + "\n\n";
  WriteFile(dir / "big.txt", text);
  std::vector<std::string> digests;
  for (const int threads : {1, 3}) {
    PrepareOptions o = Options(dir, {dir / "big.txt"});
    o.name = "t" + std::to_string(threads);
    o.threads = threads;
    o.shard_tokens = 1 << 20;
    o.input.documents = DocumentUnit::kParagraph;
    absl::StatusOr<PrepareResult> result = PrepareDataset(o);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->manifest.train.documents + result->manifest.eval_sets[0].documents, 2000);
    for (const Shard& s : result->manifest.train.shards) digests.push_back(s.sha256);
  }
  ASSERT_EQ(digests.size() % 2, 0u);
  const size_t half = digests.size() / 2;
  EXPECT_EQ(std::vector<std::string>(digests.begin(), digests.begin() + half),
            std::vector<std::string>(digests.begin() + half, digests.end()));
}

TEST(PrepareTest, JsonLinesSkipsEmptyTextAndNamesABadLine) {
  ScratchDir dir;
  WriteFile(dir / "a.jsonl",
            "{\"text\": \"alpha\", \"id\": 1}\n\n{\"text\": \"\"}\n{\"text\": \"beta\"}\n");
  PrepareOptions o = Options(dir, {dir / "a.jsonl"});
  o.split_rule.validation_fraction = 0;
  absl::StatusOr<PrepareResult> result = PrepareDataset(o);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest.train.documents, 2);
  EXPECT_EQ(result->manifest.train.tokens, 9);
  EXPECT_EQ(result->empty_documents, 1);
  EXPECT_TRUE(result->manifest.eval_sets.empty()) << "fraction 0: no validation set";

  WriteFile(dir / "bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"text\": oops}\n");
  o.name = "bad";
  o.inputs = {dir / "bad.jsonl"};
  absl::StatusOr<PrepareResult> bad = PrepareDataset(o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.jsonl' line 3: not valid JSON"));
  o.inputs = {dir / "a.jsonl"};
  o.input.text_field = "body";
  EXPECT_THAT(PrepareDataset(o).status().message(), HasSubstr("line 1: no field \"body\""));
  EXPECT_EQ(Entries(dir / "out"), std::vector<std::string>{"tiny"}) << "failures leave nothing";
}

TEST(PrepareTest, BadInputIsRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  WriteFile(dir / "ok.txt", "some text\n\nmore text\n");
  WriteFile(dir / "empty.txt", "");
  struct Case {
    std::string what;
    std::function<void(PrepareOptions&)> change;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing file", [&](PrepareOptions& o) { o.inputs.push_back(dir / "missing.txt"); },
       absl::StatusCode::kNotFound, "missing.txt': No such file"},
      {"empty file", [&](PrepareOptions& o) { o.inputs = {dir / "empty.txt"}; },
       absl::StatusCode::kInvalidArgument, "empty.txt': empty"},
      {"eval named train",
       [&](PrepareOptions& o) {
         o.eval_sets = {{"train", {dir / "ok.txt"}}};
       },
       absl::StatusCode::kInvalidArgument, "'train' is taken"},
      {"eval with a path name",
       [&](PrepareOptions& o) {
         o.eval_sets = {{"a/b", {dir / "ok.txt"}}};
       },
       absl::StatusCode::kInvalidArgument, "--eval: 'a/b'"},
      {"bad name", [&](PrepareOptions& o) { o.name = "../up"; }, absl::StatusCode::kInvalidArgument,
       "--name:"},
      {"missing tokenizer", [&](PrepareOptions& o) { o.tokenizer = dir / "none.model"; },
       absl::StatusCode::kInvalidArgument, "none.model' is not a file"},
      {"not a model", [&](PrepareOptions& o) { o.tokenizer = dir / "ok.txt"; },
       absl::StatusCode::kInvalidArgument, "is not a SentencePiece model"},
      {"one document, fraction 1%", [&](PrepareOptions&) {}, absl::StatusCode::kInvalidArgument,
       "none of the 1 training documents was held out"},
  };
  for (const Case& c : cases) {
    PrepareOptions o = Options(dir, {dir / "ok.txt"});
    c.change(o);
    absl::StatusOr<PrepareResult> result = PrepareDataset(o);
    EXPECT_EQ(result.status().code(), c.code) << c.what << ": " << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr(c.message)) << c.what;
    EXPECT_TRUE(Entries(dir / "out").empty()) << c.what << ": left something behind";
  }
}

TEST(PrepareTest, AnExistingDatasetIsKeptUnlessForced) {
  ScratchDir dir;
  WriteFile(dir / "a.txt", "first version\n\nof the text\n\nthree\n");
  PrepareOptions o = Options(dir, {dir / "a.txt"});
  o.input.documents = DocumentUnit::kParagraph;
  o.split_rule.validation_fraction = 0;
  absl::StatusOr<PrepareResult> first = PrepareDataset(o);
  ASSERT_TRUE(first.ok()) << first.status();
  WriteFile(dir / "a.txt", "second version\n");
  absl::StatusOr<PrepareResult> again = PrepareDataset(o);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("exists; give --force"));
  std::string digest;
  ASSERT_TRUE(ReadManifest(dir / "out/tiny", &digest).ok());
  EXPECT_EQ(digest, first->digest);

  o.force = true;
  absl::StatusOr<PrepareResult> forced = PrepareDataset(o);
  ASSERT_TRUE(forced.ok()) << forced.status();
  ASSERT_TRUE(ReadManifest(dir / "out/tiny", &digest).ok());
  EXPECT_EQ(digest, forced->digest);
  EXPECT_NE(digest, first->digest);
  EXPECT_EQ(Entries(dir / "out"), std::vector<std::string>{"tiny"}) << "the old one is gone";
}

TEST(PrepareTest, AnAbandonedStagingDirectoryIsRemovedNextTime) {
  ScratchDir dir;
  WriteFile(dir / "a.txt", "text\n");
  // A pid far above pid_max: no process has it, so its staging directory is abandoned.
  WriteFile(dir / "out/.tiny.partial-999999999/train-00000.tok", "xx");
  PrepareOptions o = Options(dir, {dir / "a.txt"});
  o.split_rule.validation_fraction = 0;
  ASSERT_TRUE(PrepareDataset(o).ok());
  EXPECT_EQ(Entries(dir / "out"), std::vector<std::string>{"tiny"});
}

TEST(PrepareTest, TheSplitRuleIsAFixedFunctionOfSeedAndIndex) {
  // Pinned values: a change here changes every prepared dataset's split.
  EXPECT_EQ(SplitHash(1, 0), 0x910a2dec89025cc1ull);
  const SplitRule rule{.seed = 1, .validation_fraction = 0.1};
  int held_out = 0;
  for (int64_t i = 0; i < 100000; ++i) held_out += IsValidationDocument(rule, i) ? 1 : 0;
  EXPECT_NEAR(held_out, 10000, 400);
  const SplitRule other{.seed = 2, .validation_fraction = 0.1};
  int same = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += IsValidationDocument(rule, i) == IsValidationDocument(other, i) ? 1 : 0;
  }
  EXPECT_LT(same, 900) << "another seed holds out other documents";
}

}  // namespace
}  // namespace parity::datasets
