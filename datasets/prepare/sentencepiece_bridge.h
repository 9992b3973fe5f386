// The one door to SentencePiece, kept at arm's length for two reasons found on Debian 12:
//  - its headers declare `namespace absl { using std::string_view; }`, which collides with
//    Debian's Abseil (built with its own absl::string_view class), so no file that includes an
//    Abseil header may include a SentencePiece header;
//  - libsentencepiece.so.0 carries its own copy of protobuf-lite and exports its symbols, so in a
//    process that also loads libprotobuf.so.32 (the `parity` CLI, through gRPC) the two bind to
//    each other's functions and the process crashes before main.
// So sentencepiece_bridge.cc (which sees SentencePiece and no Abseil) is built into a module of its
// own, libparity_spm_bridge.so, that the preparation dlopens with RTLD_LOCAL | RTLD_DEEPBIND: its
// copy of protobuf stays private to it. sentencepiece_loader.cc finds the module (beside the
// build's datasets/ target, or $PARITY_SENTENCEPIECE_BRIDGE) and implements the classes below on
// the function table it exports. This header is plain C++; errors come back as text for the
// caller to wrap into an absl::Status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parity::datasets::spm {

// What the manifest records of a model (datasets/format/manifest.h, Tokenizer).
struct ModelFacts {
  int64_t vocab_size = 0;
  int64_t eos_id = -1;               // −1 when the model has none
  std::string model_type;            // "bpe", "unigram", "word" or "char"
  std::vector<int32_t> token_bytes;  // bytes of text each id stands for (manifest.h)
};

// The module's entry points (extern "C" parity_spm_api_v1 returns them).
struct SpmApi {
  void* (*load)(const std::string& path, std::string* error);  // a processor, or null
  void (*destroy)(void* processor);
  bool (*encode)(const void* processor, std::string_view text, std::vector<int>* ids,
                 std::string* error);
  void (*facts)(const void* processor, ModelFacts* facts);
  bool (*train)(const std::vector<std::pair<std::string, std::string>>& flags, std::string* error);
};

// The module's table, loaded once; null and `error` set when the module cannot be loaded.
const SpmApi* LoadSpmApi(std::string* error);

// A loaded model. Encode is const and may be called from many threads at once (SentencePiece's
// processor keeps no per-call state).
class Processor {
 public:
  ~Processor();
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;

  // Null and `error` set when the file is not a model SentencePiece can load.
  static std::unique_ptr<Processor> Load(const std::string& path, std::string* error);

  // Appends the ids of `text` (no end-of-document id). False and `error` set on failure.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;

  ModelFacts Facts() const;

 private:
  Processor(const SpmApi* api, void* handle) : api_(api), handle_(handle) {}
  const SpmApi* const api_;
  void* const handle_;  // owned: api_->destroy frees it
};

// SentencePieceTrainer::Train with these flags (name → value, without "--"). False and `error`
// set (SentencePiece's own message) on failure.
bool Train(const std::vector<std::pair<std::string, std::string>>& flags, std::string* error);

}  // namespace parity::datasets::spm
