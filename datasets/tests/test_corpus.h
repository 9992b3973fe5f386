// Helpers for the datasets/ tests: a scratch directory and deterministic English-like text.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace parity::datasets::testing {

// A fresh directory under TMPDIR, removed with everything in it when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "parity-datasets-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `words` words of sentence-like text from a fixed word list and a fixed LCG (the same on every
// machine), with a newline every dozen words.
inline std::string EnglishLike(int64_t words, uint64_t seed) {
  static const std::vector<std::string> kWords = {
      "the",   "of",     "and",   "to",     "in",    "a",      "is",    "that", "for",
      "it",    "as",     "was",   "with",   "be",    "by",     "on",    "not",  "he",
      "this",  "are",    "or",    "his",    "from",  "at",     "which", "but",  "have",
      "an",    "had",    "they",  "you",    "were",  "their",  "one",   "all",  "we",
      "can",   "her",    "has",   "there",  "been",  "if",     "more",  "when", "will",
      "would", "who",    "so",    "no",     "model", "expert", "token", "data", "train",
      "loss",  "router", "layer", "weight", "dense", "sparse", "42",    "2024", "naïve"};
  std::string text;
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < words; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += kWords[(state >> 33) % kWords.size()];
    text += (i % 12 == 11) ? ".\n" : " ";
  }
  return text;
}

}  // namespace parity::datasets::testing
