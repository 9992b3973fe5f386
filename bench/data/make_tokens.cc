// make_tokens: writes a synthetic prepared dataset (datasets/format/manifest.h) of N random token
// ids straight to shards — no text, no tokenizer — for the data-path benchmarks (RESULTS.md in
// this folder): training RSS against corpus size, and the loader's share of step time.
//
//   make_tokens --out DIR --tokens N [--vocab V] [--shard-tokens M] [--seed S] [--evict]
//
// Ids are uniform in [0, V) from SplitMix64 (kernels/model/rng.h); token_bytes[id] = 1 + id % 7,
// so BPC has a non-trivial divisor. "validation" holds 1 MiTok. Shard SHA-256s are real (the
// worker checks them; the engine does not). --evict drops the written shards from the page cache
// (fsync + POSIX_FADV_DONTNEED), so the run that follows reads them cold from disk.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <vector>

#include "absl/strings/str_format.h"
#include "datasets/format/manifest.h"
#include "kernels/model/rng.h"

namespace {

using parity::datasets::Shard;
using parity::datasets::Split;

// Writes `tokens` ids as shards of `per_shard` into dir; returns the split (with digests).
Split WriteSplit(const std::string& dir, const std::string& name, int64_t tokens, int64_t per_shard,
                 int64_t vocab, int width, uint64_t seed, bool evict) {
  Split split;
  split.name = name;
  split.sources = {"synthetic"};
  parity::kernels::Rng rng{.seed = seed};
  std::vector<unsigned char> buffer;
  for (int64_t start = 0, index = 0; start < tokens; start += per_shard, ++index) {
    const int64_t n = std::min(per_shard, tokens - start);
    Shard shard;
    shard.file = absl::StrFormat("%s-%05d.tok", name, index);
    shard.doc_file = absl::StrFormat("%s-%05d.doc", name, index);
    shard.tokens = n;
    shard.documents = 1;
    const std::string path = dir + "/" + shard.file;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::perror(path.c_str());
      std::exit(1);
    }
    constexpr int64_t kChunk = int64_t{1} << 20;
    for (int64_t done = 0; done < n; done += kChunk) {
      const int64_t m = std::min(kChunk, n - done);
      buffer.resize(static_cast<size_t>(m * width));
      for (int64_t i = 0; i < m; ++i) {
        const uint64_t id = rng.Below(static_cast<uint64_t>(vocab));
        for (int b = 0; b < width; ++b)
          buffer[i * width + b] = static_cast<unsigned char>(id >> 8 * b);
        split.token_bytes += 1 + static_cast<int64_t>(id % 7);
      }
      if (::write(fd, buffer.data(), buffer.size()) != static_cast<ssize_t>(buffer.size())) {
        std::perror("write");
        std::exit(1);
      }
    }
    ::fsync(fd);
    ::close(fd);
    shard.sha256 = *parity::datasets::Sha256OfFile(path);
    if (evict) {
      const int rfd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      ::posix_fadvise(rfd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(rfd);
    }
    const std::string doc(8, '\0');
    std::FILE* f = std::fopen((dir + "/" + shard.doc_file).c_str(), "wb");
    std::fwrite(doc.data(), 1, doc.size(), f);
    std::fclose(f);
    shard.doc_sha256 = parity::datasets::Sha256Hex(doc);
    split.tokens += n;
    split.documents += 1;
    split.shards.push_back(shard);
  }
  split.text_bytes = split.token_bytes;
  return split;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"make_tokens: a synthetic prepared dataset of random token ids"};
  std::string out;
  int64_t tokens = 0, vocab = 4096, shard_tokens = int64_t{256} << 20;
  uint64_t seed = 1;
  bool evict = false;
  app.add_option("--out", out, "dataset directory (created)")->required();
  app.add_option("--tokens", tokens, "training tokens")->required();
  app.add_option("--vocab", vocab, "vocabulary size");
  app.add_option("--shard-tokens", shard_tokens, "tokens per shard");
  app.add_option("--seed", seed, "generator seed");
  app.add_flag("--evict", evict, "drop the shards from the page cache after writing");
  CLI11_PARSE(app, argc, argv);
  std::filesystem::create_directories(out);
  parity::datasets::Manifest m;
  m.name = std::filesystem::path(out).filename().string();
  m.token_width = parity::datasets::TokenWidthFor(vocab);
  m.tokenizer.kind = parity::datasets::TokenizerKind::kSentencePiece;
  m.tokenizer.vocab_size = vocab;
  m.tokenizer.model_type = "bpe";
  m.tokenizer.model_sha256 = parity::datasets::Sha256Hex("synthetic");
  for (int64_t id = 0; id < vocab; ++id) m.tokenizer.token_bytes.push_back(1 + id % 7);
  m.train = WriteSplit(out, "train", tokens, shard_tokens, vocab, m.token_width, seed, evict);
  m.eval_sets.push_back(WriteSplit(out, "validation", int64_t{1} << 20, shard_tokens, vocab,
                                   m.token_width, seed + 1, evict));
  m.created_by = "bench/data/make_tokens";
  const std::string manifest = parity::datasets::SerializeManifest(m);
  std::FILE* f = std::fopen((out + "/manifest.json").c_str(), "wb");
  std::fwrite(manifest.data(), 1, manifest.size(), f);
  std::fclose(f);
  std::cout << out << ": " << tokens << " training tokens in " << m.train.shards.size()
            << " shards\n";
  return 0;
}
