#include "datasets/prepare/inputs.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace parity::datasets {
namespace {

namespace fs = std::filesystem;

bool IsJsonlName(absl::string_view path) {
  return absl::EndsWith(path, ".jsonl") || absl::EndsWith(path, ".ndjson");
}

bool HasGlobCharacters(absl::string_view spec) {
  return spec.find_first_of("*?[") != absl::string_view::npos;
}

bool IsBlank(absl::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

absl::Status AddFile(const std::string& path, const InputOptions& options, absl::string_view flag,
                     std::vector<InputFile>& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(flag, ": input '", path, "': ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": input '", path, "': not a regular file or directory"));
  }
  if (st.st_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": input '", path, "': empty (no text); remove it from the inputs"));
  }
  const bool jsonl = options.format == InputFormat::kJsonl ||
                     (options.format == InputFormat::kAuto && IsJsonlName(path));
  out.push_back(InputFile{.path = path, .bytes = st.st_size, .jsonl = jsonl});
  return absl::OkStatus();
}

// Regular files under `dir`, recursively, hidden entries skipped, sorted by path.
absl::StatusOr<std::vector<std::string>> WalkDirectory(const std::string& dir,
                                                       absl::string_view flag) {
  std::vector<std::string> paths;
  std::error_code error;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, error);
  // The error_code overloads throughout: the library lets no exception out.
  for (; !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code type_error;
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(type_error)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(type_error)) paths.push_back(it->path().string());
  }
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": directory '", dir, "': ", error.message()));
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": directory '", dir, "' holds no files"));
  }
  return paths;
}

absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern, absl::string_view flag) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
  std::vector<std::string> paths;
  for (size_t i = 0; rc == 0 && i < matches.gl_pathc; ++i) paths.push_back(matches.gl_pathv[i]);
  ::globfree(&matches);
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(flag, ": input '", pattern, "' matches no file"));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

absl::StatusOr<std::vector<InputFile>> ExpandInputs(const std::vector<std::string>& specs,
                                                    const InputOptions& options,
                                                    absl::string_view flag) {
  if (specs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no input given"));
  }
  std::vector<InputFile> files;
  for (const std::string& spec : specs) {
    std::vector<std::string> paths;
    struct stat st {};
    if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      absl::StatusOr<std::vector<std::string>> walked = WalkDirectory(spec, flag);
      if (!walked.ok()) return walked.status();
      paths = *std::move(walked);
    } else if (::stat(spec.c_str(), &st) != 0 && HasGlobCharacters(spec)) {
      absl::StatusOr<std::vector<std::string>> matched = Glob(spec, flag);
      if (!matched.ok()) return matched.status();
      paths = *std::move(matched);
    } else {
      paths.push_back(spec);
    }
    for (const std::string& path : paths) {
      absl::Status added = AddFile(path, options, flag, files);
      if (!added.ok()) return added;
    }
  }
  return files;
}

DocumentReader::DocumentReader(std::vector<InputFile> files, InputOptions options)
    : files_(std::move(files)), options_(std::move(options)) {}

DocumentReader::~DocumentReader() {
  if (stream_ != nullptr) std::fclose(stream_);
  std::free(line_buffer_);
}

absl::Status DocumentReader::OpenNext() {
  const InputFile& input = files_[next_file_];
  stream_ = std::fopen(input.path.c_str(), "rb");
  if (stream_ == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("input '", input.path, "': cannot be opened: ", std::strerror(errno)));
  }
  file_ = static_cast<int32_t>(next_file_++);
  line_number_ = 0;
  return absl::OkStatus();
}

void DocumentReader::Emit(bool ends_document) {
  TextPiece piece;
  piece.text = std::move(current_);
  piece.jsonl = false;
  piece.starts_document = !current_continues_;
  piece.ends_document = ends_document;
  piece.document = documents_;
  piece.file = file_;
  piece.line = current_line_;
  if (ends_document) ++documents_;
  current_.clear();
  current_continues_ = !ends_document;
  current_has_text_ = false;
  ready_.push_back(std::move(piece));
}

void DocumentReader::TakeLine(absl::string_view line) {
  const bool blank = IsBlank(line);
  if (files_[static_cast<size_t>(file_)].jsonl) {
    if (blank) return;
    ready_.push_back(TextPiece{.text = std::string(line),
                               .jsonl = true,
                               .document = documents_++,
                               .file = file_,
                               .line = line_number_});
    return;
  }
  if (options_.documents == DocumentUnit::kParagraph && !blank && after_blank_ &&
      (current_has_text_ || current_continues_)) {
    Emit(/*ends_document=*/true);
  }
  if (options_.documents == DocumentUnit::kParagraph) after_blank_ = blank;
  if (current_.empty()) current_line_ = line_number_;
  current_.append(line.data(), line.size());
  current_has_text_ = current_has_text_ || !blank;
  if (options_.documents == DocumentUnit::kLine) {
    if (current_has_text_) {
      Emit(/*ends_document=*/true);
    } else {
      current_.clear();
    }
  } else if (static_cast<int64_t>(current_.size()) >= kChunkBytes) {
    Emit(/*ends_document=*/false);
  }
}

void DocumentReader::EndOfFile() {
  // A file-mode document is the whole file (never empty: ExpandInputs refuses empty files); a
  // trailing run of blank lines in paragraph mode stays with the last paragraph.
  const bool keep = options_.documents == DocumentUnit::kFile
                        ? !current_.empty() || current_continues_
                        : current_has_text_ || current_continues_;
  if (keep) {
    Emit(/*ends_document=*/true);
  } else {
    current_.clear();
  }
  current_continues_ = false;
  current_has_text_ = false;
  after_blank_ = false;
  std::fclose(stream_);
  stream_ = nullptr;
}

absl::StatusOr<bool> DocumentReader::Next(TextPiece& piece) {
  while (ready_.empty()) {
    if (stream_ == nullptr) {
      if (next_file_ == files_.size()) return false;
      absl::Status opened = OpenNext();
      if (!opened.ok()) return opened;
    }
    errno = 0;
    const ssize_t n = ::getline(&line_buffer_, &line_capacity_, stream_);
    if (n < 0) {
      if (std::ferror(stream_)) {
        return absl::DataLossError(absl::StrCat("input '", files_[static_cast<size_t>(file_)].path,
                                                "': read failed: ", std::strerror(errno)));
      }
      EndOfFile();
      continue;
    }
    ++line_number_;
    bytes_read_ += n;
    TakeLine(absl::string_view(line_buffer_, static_cast<size_t>(n)));
  }
  piece = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

absl::StatusOr<std::string> ExtractJsonlText(const TextPiece& piece, const std::string& path,
                                             const std::string& text_field) {
  const std::string where = absl::StrCat("input '", path, "' line ", piece.line, ": ");
  const nlohmann::json j = nlohmann::json::parse(piece.text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     "not valid JSON (JSON Lines holds one JSON object a line; plain text wants "
                     "--format text)"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "not a JSON object"));
  }
  const auto it = j.find(text_field);
  if (it == j.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "no field \"", text_field,
                                                   "\"; name the text field with --text-field"));
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "field \"", text_field, "\" is not a string"));
  }
  return it->get<std::string>();
}

}  // namespace parity::datasets
