#include "datasets/prepare/tokenizer.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "datasets/prepare/sentencepiece_bridge.h"

namespace parity::datasets {
namespace {

class BytesTokenizer final : public TextTokenizer {
 public:
  BytesTokenizer() {
    description_.kind = TokenizerKind::kBytes;
    description_.vocab_size = 256;
    description_.eos_id = -1;
    description_.token_bytes.assign(256, 1);
  }
  absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) const override {
    ids.reserve(ids.size() + text.size());
    for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
    return absl::OkStatus();
  }
  const Tokenizer& description() const override { return description_; }
  const std::string& model_path() const override { return model_path_; }

 private:
  Tokenizer description_;
  std::string model_path_;
};

class SentencePieceTokenizer final : public TextTokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<spm::Processor> processor, Tokenizer description,
                         std::string model_path)
      : processor_(std::move(processor)),
        description_(std::move(description)),
        model_path_(std::move(model_path)) {}

  absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) const override {
    std::vector<int> out;
    std::string error;
    if (!processor_->Encode(std::string_view(text.data(), text.size()), &out, &error)) {
      return absl::InternalError(absl::StrCat("sentencepiece: cannot encode: ", error));
    }
    ids.reserve(ids.size() + out.size());
    for (const int id : out) ids.push_back(static_cast<uint32_t>(id));
    return absl::OkStatus();
  }
  const Tokenizer& description() const override { return description_; }
  const std::string& model_path() const override { return model_path_; }

 private:
  const std::unique_ptr<spm::Processor> processor_;
  const Tokenizer description_;
  const std::string model_path_;
};

}  // namespace

std::unique_ptr<TextTokenizer> MakeBytesTokenizer() { return std::make_unique<BytesTokenizer>(); }

absl::StatusOr<std::unique_ptr<TextTokenizer>> LoadSentencePieceTokenizer(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer: '", path,
        "' is not a file; give \"bytes\" or the path of a SentencePiece .model (train one with "
        "`parity data tokenizer train`)"));
  }
  std::string error;
  if (spm::LoadSpmApi(&error) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("--tokenizer: ", error));
  }
  std::unique_ptr<spm::Processor> processor = spm::Processor::Load(path, &error);
  if (processor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer: '", path, "' is not a SentencePiece model (", error, ")"));
  }
  absl::StatusOr<std::string> sha256 = Sha256OfFile(path);
  if (!sha256.ok()) return sha256.status();
  const spm::ModelFacts facts = processor->Facts();
  Tokenizer description;
  description.kind = TokenizerKind::kSentencePiece;
  description.vocab_size = facts.vocab_size;
  description.eos_id = facts.eos_id;
  description.model_sha256 = *sha256;
  description.model_type = facts.model_type;
  description.token_bytes = facts.token_bytes;
  return std::make_unique<SentencePieceTokenizer>(std::move(processor), std::move(description),
                                                  path);
}

absl::StatusOr<std::unique_ptr<TextTokenizer>> LoadTokenizer(const std::string& spec) {
  if (spec.empty() || spec == "bytes") return MakeBytesTokenizer();
  return LoadSentencePieceTokenizer(spec);
}

}  // namespace parity::datasets
