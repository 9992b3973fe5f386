// What `parity data prepare` reads: input specs (files, directories, globs) expanded into a sorted
// file list, and those files cut into documents.
//
// A directory is walked recursively in byte order of its paths, skipping hidden entries; a glob
// follows glob(3) and sorts its matches; a plain file is taken as given. A file is JSON Lines when
// its name ends in .jsonl or .ndjson (or --format jsonl): one JSON object a line, its text field
// (--text-field, default "text") a document. Otherwise it is plain UTF-8 text, where --documents
// says what a document is: `file` (the whole file; the default), `paragraph` (runs of lines ended
// by blank lines, which stay with the paragraph before them) or `line` (each line). In text mode
// documents keep every byte of the file (concatenated, they are the file again) except
// whitespace-only ones in paragraph and line mode, which are dropped.
//
// Documents longer than kChunkBytes are handed on in pieces cut after a line end, so memory stays
// bounded whatever a file holds; the cut points depend on the text alone (never on thread
// counts), so the token stream is the same for any --threads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace parity::datasets {

inline constexpr int64_t kChunkBytes = int64_t{1} << 20;

enum class InputFormat { kAuto, kText, kJsonl };
enum class DocumentUnit { kFile, kParagraph, kLine };

struct InputOptions {
  InputFormat format = InputFormat::kAuto;
  DocumentUnit documents = DocumentUnit::kFile;
  std::string text_field = "text";
};

struct InputFile {
  std::string path;
  int64_t bytes = 0;
  bool jsonl = false;
};

// The files the specs name, in order (each spec's files sorted). NotFound / InvalidArgument
// naming the spec when one matches nothing, is not a regular file or directory, or a file is
// empty. `flag` names the option in messages ("--input", "--eval prose").
absl::StatusOr<std::vector<InputFile>> ExpandInputs(const std::vector<std::string>& specs,
                                                    const InputOptions& options,
                                                    absl::string_view flag);

// A document, or a piece of one.
struct TextPiece {
  std::string text;  // the text, or in JSON Lines the raw line (parsed by ExtractJsonlText)
  bool jsonl = false;
  bool starts_document = true;
  bool ends_document = true;
  int64_t document = 0;  // the document's ordinal among all documents of the reader
  int32_t file = 0;      // index into the reader's files
  int64_t line = 0;      // 1-based line where the piece starts
};

// Reads the files in order and cuts them into pieces. Not thread-safe: one reader thread.
class DocumentReader {
 public:
  DocumentReader(std::vector<InputFile> files, InputOptions options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next piece into `piece`; false at the end of the last file.
  absl::StatusOr<bool> Next(TextPiece& piece);
  const std::vector<InputFile>& files() const { return files_; }
  int64_t bytes_read() const { return bytes_read_; }

 private:
  absl::Status OpenNext();
  void TakeLine(absl::string_view line);
  void Emit(bool ends_document);
  void EndOfFile();

  const std::vector<InputFile> files_;
  const InputOptions options_;
  size_t next_file_ = 0;
  int32_t file_ = -1;
  std::FILE* stream_ = nullptr;
  char* line_buffer_ = nullptr;
  size_t line_capacity_ = 0;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
  int64_t documents_ = 0;
  std::string current_;             // the document (piece) being gathered
  int64_t current_line_ = 0;        // where current_ starts
  bool current_continues_ = false;  // an earlier piece of this document was handed on
  bool current_has_text_ = false;   // current_ holds a non-blank line
  bool after_blank_ = false;        // paragraph mode: the last line was blank
  std::deque<TextPiece> ready_;
};

// The text field of a JSON Lines piece; InvalidArgument "input 'F' line N: ..." naming what is
// wrong (not JSON, not an object, the field missing or not a string) and the remedy.
absl::StatusOr<std::string> ExtractJsonlText(const TextPiece& piece, const std::string& path,
                                             const std::string& text_field);

}  // namespace parity::datasets
