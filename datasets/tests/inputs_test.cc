// Input expansion (files, directories, globs) and what a document is in each mode.
#include "datasets/prepare/inputs.h"

#include "datasets/tests/test_corpus.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::datasets {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteFile;

std::vector<TextPiece> ReadAll(const std::vector<InputFile>& files, const InputOptions& options) {
  DocumentReader reader(files, options);
  std::vector<TextPiece> pieces;
  TextPiece piece;
  while (*reader.Next(piece)) pieces.push_back(piece);
  return pieces;
}

TEST(InputsTest, DirectoriesAreWalkedInSortedOrderSkippingHiddenEntries) {
  ScratchDir dir;
  WriteFile(dir / "corpus/b/2.txt", "two");
  WriteFile(dir / "corpus/a.jsonl", "{\"text\":\"one\"}\n");
  WriteFile(dir / "corpus/b/10.txt", "ten");
  WriteFile(dir / "corpus/.hidden/x.txt", "hidden");
  WriteFile(dir / "corpus/.dotfile", "hidden");
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({dir / "corpus"}, {}, "--input");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, dir / "corpus/a.jsonl");
  EXPECT_TRUE((*files)[0].jsonl);
  EXPECT_EQ((*files)[1].path, dir / "corpus/b/10.txt");
  EXPECT_EQ((*files)[2].path, dir / "corpus/b/2.txt");
  EXPECT_FALSE((*files)[2].jsonl);
}

TEST(InputsTest, GlobsMatchSortedAndAMissingInputIsNamed) {
  ScratchDir dir;
  WriteFile(dir / "s2.txt", "x");
  WriteFile(dir / "s1.txt", "y");
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({dir / "s*.txt"}, {}, "--input");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].path, dir / "s1.txt");

  absl::StatusOr<std::vector<InputFile>> missing = ExpandInputs({dir / "nope.txt"}, {}, "--input");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir / "nope.txt"));
  absl::StatusOr<std::vector<InputFile>> none = ExpandInputs({dir / "q*.txt"}, {}, "--eval x");
  EXPECT_THAT(none.status().message(), HasSubstr("--eval x: input"));
  EXPECT_THAT(none.status().message(), HasSubstr("matches no file"));
}

TEST(InputsTest, AnEmptyFileIsRefusedByName) {
  ScratchDir dir;
  WriteFile(dir / "empty.txt", "");
  absl::StatusOr<std::vector<InputFile>> files = ExpandInputs({dir / "empty.txt"}, {}, "--input");
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("empty.txt': empty"));
}

TEST(InputsTest, ParagraphsKeepEveryByteAndDropNothingButBlankDocuments) {
  ScratchDir dir;
  const std::string text = "\nfirst line\nstill first\n\n\nsecond\n  \nthird\n";
  WriteFile(dir / "p.txt", text);
  const std::vector<InputFile> files = *ExpandInputs({dir / "p.txt"}, {}, "--input");
  InputOptions paragraphs{.documents = DocumentUnit::kParagraph};
  const std::vector<TextPiece> docs = ReadAll(files, paragraphs);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, "\nfirst line\nstill first\n\n\n");
  EXPECT_EQ(docs[1].text, "second\n  \n");
  EXPECT_EQ(docs[2].text, "third\n");
  EXPECT_EQ(docs[1].document, 1);
  EXPECT_EQ(docs[1].line, 6);
  EXPECT_EQ(docs[0].text + docs[1].text + docs[2].text, text);

  InputOptions lines{.documents = DocumentUnit::kLine};
  const std::vector<TextPiece> line_docs = ReadAll(files, lines);
  ASSERT_EQ(line_docs.size(), 4u);  // the blank and whitespace-only lines are dropped
  EXPECT_EQ(line_docs[0].text, "first line\n");
  EXPECT_EQ(line_docs[3].text, "third\n");

  const std::vector<TextPiece> whole = ReadAll(files, {});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].text, text);
}

TEST(InputsTest, LongDocumentsComeInPiecesCutAfterALineEnd) {
  ScratchDir dir;
  const std::string text = testing::EnglishLike(600000, 7);  // ~3 MB
  WriteFile(dir / "long.txt", text);
  const std::vector<TextPiece> pieces =
      ReadAll(*ExpandInputs({dir / "long.txt"}, {}, "--input"), {});
  ASSERT_GE(pieces.size(), 2u);
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].starts_document, i == 0);
    EXPECT_EQ(pieces[i].ends_document, i + 1 == pieces.size());
    EXPECT_EQ(pieces[i].document, 0);
    if (i + 1 < pieces.size()) {
      EXPECT_EQ(pieces[i].text.back(), '\n');
    }
    joined += pieces[i].text;
  }
  EXPECT_EQ(joined, text);
}

TEST(InputsTest, JsonLinesErrorsNameTheFileAndLine) {
  const std::string path = "corpus.jsonl";
  TextPiece good{.text = R"({"id": 1, "text": "hello"})", .jsonl = true, .line = 1};
  EXPECT_EQ(*ExtractJsonlText(good, path, "text"), "hello");
  TextPiece broken{.text = R"({"text": "unterminated)", .jsonl = true, .line = 7};
  EXPECT_THAT(ExtractJsonlText(broken, path, "text").status().message(),
              HasSubstr("input 'corpus.jsonl' line 7: not valid JSON"));
  EXPECT_THAT(ExtractJsonlText(good, path, "content").status().message(),
              HasSubstr("line 1: no field \"content\"; name the text field with --text-field"));
  TextPiece number{.text = R"({"text": 5})", .jsonl = true, .line = 2};
  EXPECT_THAT(ExtractJsonlText(number, path, "text").status().message(),
              HasSubstr("\"text\" is not a string"));
}

}  // namespace
}  // namespace parity::datasets
