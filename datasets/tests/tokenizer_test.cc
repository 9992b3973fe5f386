// A real SentencePiece model: trained on a tiny corpus, loaded, and used by a preparation.
#include "datasets/prepare/tokenizer.h"

#include "datasets/prepare/prepare.h"
#include "datasets/prepare/tokenizer_train.h"
#include "datasets/tests/split_reader.h"
#include "datasets/tests/test_corpus.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::datasets {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteFile;

TokenizerTrainOptions TrainOptions(const ScratchDir& dir, const std::string& type) {
  TokenizerTrainOptions o;
  o.inputs = {dir / "corpus"};
  o.vocab_size = 400;
  o.model_type = type;
  o.sample_bytes = 1 << 20;
  o.threads = 2;
  o.out = dir / ("tok/" + type + ".model");
  return o;
}

void WriteCorpus(const ScratchDir& dir) {
  for (int i = 0; i < 20; ++i) {
    WriteFile(dir / ("corpus/" + std::to_string(i) + ".txt"), testing::EnglishLike(2000, i));
  }
}

TEST(TokenizerTest, BytesAreTheirOwnIds) {
  std::unique_ptr<TextTokenizer> bytes = MakeBytesTokenizer();
  std::vector<uint32_t> ids;
  ASSERT_TRUE(bytes->Encode("a\xC3\xA9", ids).ok());
  EXPECT_EQ(ids, (std::vector<uint32_t>{97, 0xC3, 0xA9}));
  EXPECT_EQ(bytes->description().vocab_size, 256);
  EXPECT_EQ(bytes->description().eos_id, -1);
}

TEST(TokenizerTest, TrainedModelsEncodeEveryByteAndCountTextBytesExactly) {
  ScratchDir dir;
  WriteCorpus(dir);
  for (const std::string type : {"bpe", "unigram"}) {
    absl::StatusOr<TrainedTokenizer> trained = TrainTokenizer(TrainOptions(dir, type));
    ASSERT_TRUE(trained.ok()) << type << ": " << trained.status();
    EXPECT_EQ(trained->vocab_size, 400);
    absl::StatusOr<std::unique_ptr<TextTokenizer>> tokenizer = LoadTokenizer(trained->model_path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const Tokenizer& d = (*tokenizer)->description();
    EXPECT_EQ(d.kind, TokenizerKind::kSentencePiece);
    EXPECT_EQ(d.model_type, type);
    EXPECT_EQ(d.eos_id, 1);
    EXPECT_EQ(d.token_bytes[0], 0) << "<unk>";
    EXPECT_EQ(d.token_bytes[1], 0) << "</s>";
    EXPECT_EQ(d.token_bytes[2], 1) << "<0x00>";
    EXPECT_EQ(d.model_sha256, *Sha256OfFile(trained->model_path));
    // Text it never saw (a tab, Greek, an emoji) still encodes, byte by byte where it must, and
    // the ids' bytes add up to the text's.
    const std::string text = "the model\twas naïve: λόγος 🙂 2024\n";
    std::vector<uint32_t> ids;
    ASSERT_TRUE((*tokenizer)->Encode(text, ids).ok());
    int64_t bytes = 0;
    for (const uint32_t id : ids) {
      EXPECT_NE(id, 0u) << "no <unk> with byte fallback";
      bytes += d.token_bytes[id];
    }
    EXPECT_EQ(bytes, static_cast<int64_t>(text.size())) << type;
    EXPECT_LT(ids.size(), text.size()) << "pieces longer than a byte were learned";
  }
}

TEST(TokenizerTest, TrainingIsDeterministic) {
  ScratchDir dir;
  WriteCorpus(dir);
  TokenizerTrainOptions o = TrainOptions(dir, "bpe");
  ASSERT_TRUE(TrainTokenizer(o).ok());
  const std::string first = *Sha256OfFile(o.out);
  o.force = true;
  ASSERT_TRUE(TrainTokenizer(o).ok());
  EXPECT_EQ(*Sha256OfFile(o.out), first);
}

TEST(TokenizerTest, AVocabularyTooSmallIsSaidInTheFlagsTerms) {
  ScratchDir dir;
  WriteCorpus(dir);
  WriteFile(dir / "corpus/greek.txt", "αβγδεζηθικλμνξοπρστυφχψω ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ\n");
  TokenizerTrainOptions o = TrainOptions(dir, "bpe");
  o.vocab_size = 200;
  absl::StatusOr<TrainedTokenizer> tiny = TrainTokenizer(o);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tiny.status().message(), HasSubstr("--vocab-size: 200 is outside [259"));
  o.vocab_size = 280;  // above the floor, below 256 bytes + the sample's ~90 characters
  o.character_coverage = 1.0;
  absl::StatusOr<TrainedTokenizer> small = TrainTokenizer(o);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.status().message(),
              HasSubstr("--vocab-size: 280 is too small for the sample's characters"));
  EXPECT_FALSE(std::filesystem::exists(o.out));
  EXPECT_TRUE(std::filesystem::is_empty(dir / "tok")) << "no sample or partial model left";
}

TEST(TokenizerTest, APreparationWithAModelEndsEachDocumentWithEos) {
  ScratchDir dir;
  WriteCorpus(dir);
  absl::StatusOr<TrainedTokenizer> trained = TrainTokenizer(TrainOptions(dir, "unigram"));
  ASSERT_TRUE(trained.ok()) << trained.status();
  PrepareOptions o;
  o.out_dir = dir / "out";
  o.name = "sp";
  o.inputs = {dir / "corpus"};
  o.tokenizer = trained->model_path;
  o.shard_tokens = 4096;
  o.threads = 2;
  o.input.documents = DocumentUnit::kLine;
  o.eval_sets = {{.name = "held", .inputs = {dir / "corpus/3.txt"}}};
  absl::StatusOr<PrepareResult> result = PrepareDataset(o);
  ASSERT_TRUE(result.ok()) << result.status();
  std::string digest;
  absl::StatusOr<Manifest> m = ReadManifest(dir / "out/sp", &digest);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->tokenizer.kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(m->tokenizer.vocab_size, 400);
  EXPECT_EQ(m->token_width, 2);
  EXPECT_EQ(*Sha256OfFile(dir / "out/sp/tokenizer.model"), m->tokenizer.model_sha256);
  EXPECT_GT(m->train.shards.size(), 1u);
  for (const Split* split : {&m->train, &m->eval_sets[0], &m->eval_sets[1]}) {
    EXPECT_EQ(split->token_bytes, split->text_bytes) << split->name << ": identity normalization";
    const testing::SplitContents contents = testing::ReadSplit(dir / "out/sp", *m, *split);
    ASSERT_EQ(static_cast<int64_t>(contents.tokens.size()), split->tokens);
    ASSERT_EQ(static_cast<int64_t>(contents.document_starts.size()), split->documents);
    // Each document ends with </s> right before the next one starts, and the stream with one.
    EXPECT_EQ(contents.tokens.back(), 1u);
    for (size_t i = 1; i < contents.document_starts.size(); ++i) {
      EXPECT_EQ(contents.tokens[contents.document_starts[i] - 1], 1u) << split->name << " " << i;
    }
    EXPECT_EQ(std::count(contents.tokens.begin(), contents.tokens.end(), 1u), split->documents);
  }
}

}  // namespace
}  // namespace parity::datasets
