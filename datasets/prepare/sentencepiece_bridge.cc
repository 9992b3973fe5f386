// The module libparity_spm_bridge.so (sentencepiece_bridge.h says why a module): SentencePiece
// behind a table of functions. Includes SentencePiece and nothing of Abseil.
#include "datasets/prepare/sentencepiece_bridge.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "sentencepiece_processor.h"
#include "sentencepiece_trainer.h"

namespace parity::datasets::spm {
namespace {

// UTF-8 bytes of a piece with each "▁" (U+2581, three bytes, SentencePiece's space) as one.
int32_t PieceTextBytes(const std::string& piece) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  int32_t bytes = 0;
  for (size_t i = 0; i < piece.size();) {
    if (std::string_view(piece).substr(i, kSpace.size()) == kSpace) {
      i += kSpace.size();
    } else {
      ++i;
    }
    ++bytes;
  }
  return bytes;
}

// Protocol-buffer wire reading, just enough for ModelProto.trainer_spec (field 2, a message) →
// TrainerSpec.model_type (field 3, an enum): Debian ships no sentencepiece_model.pb.h.
bool ReadVarint(std::string_view bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The field's payload (varint value, or the bytes of a length-delimited field) by number.
bool FindField(std::string_view message, uint64_t number, uint64_t* varint,
               std::string_view* bytes) {
  size_t at = 0;
  while (at < message.size()) {
    uint64_t key = 0, value = 0;
    if (!ReadVarint(message, &at, &key)) return false;
    switch (key & 7) {
      case 0:
        if (!ReadVarint(message, &at, &value)) return false;
        if ((key >> 3) == number) return *varint = value, true;
        break;
      case 1:
        at += 8;
        break;
      case 5:
        at += 4;
        break;
      case 2:
        if (!ReadVarint(message, &at, &value) || value > message.size() - at) return false;
        if ((key >> 3) == number) return *bytes = message.substr(at, value), true;
        at += value;
        break;
      default:
        return false;
    }
  }
  return false;
}

std::string ModelTypeOf(std::string_view serialized_model) {
  uint64_t unused = 0, type = 1;  // TrainerSpec's default: UNIGRAM
  std::string_view trainer_spec;
  if (FindField(serialized_model, 2, &unused, &trainer_spec)) {
    std::string_view none;
    FindField(trainer_spec, 3, &type, &none);
  }
  switch (type) {
    case 1:
      return "unigram";
    case 2:
      return "bpe";
    case 3:
      return "word";
    case 4:
      return "char";
    default:
      return "unknown";
  }
}

void* Load(const std::string& path, std::string* error) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status status = processor->Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return processor.release();
}

void Destroy(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

bool Encode(const void* processor, std::string_view text, std::vector<int>* ids,
            std::string* error) {
  std::vector<int> out;
  const sentencepiece::util::Status status =
      static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->Encode(text, &out);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  ids->insert(ids->end(), out.begin(), out.end());
  return true;
}

void Facts(const void* processor, ModelFacts* facts) {
  const auto& p = *static_cast<const sentencepiece::SentencePieceProcessor*>(processor);
  facts->vocab_size = p.GetPieceSize();
  facts->eos_id = p.eos_id() >= 0 ? p.eos_id() : -1;
  facts->model_type = ModelTypeOf(p.serialized_model_proto());
  facts->token_bytes.clear();
  facts->token_bytes.reserve(static_cast<size_t>(facts->vocab_size));
  for (int id = 0; id < facts->vocab_size; ++id) {
    if (p.IsControl(id) || p.IsUnknown(id)) {
      facts->token_bytes.push_back(0);
    } else if (p.IsByte(id)) {
      facts->token_bytes.push_back(1);
    } else {
      facts->token_bytes.push_back(std::min<int32_t>(PieceTextBytes(p.IdToPiece(id)), 4096));
    }
  }
}

bool Train(const std::vector<std::pair<std::string, std::string>>& flags, std::string* error) {
  const std::unordered_map<std::string, std::string> kwargs(flags.begin(), flags.end());
  const sentencepiece::util::Status status = sentencepiece::SentencePieceTrainer::Train(kwargs);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

constexpr SpmApi kApi = {&Load, &Destroy, &Encode, &Facts, &Train};

}  // namespace
}  // namespace parity::datasets::spm

extern "C" __attribute__((visibility("default"))) const parity::datasets::spm::SpmApi*
parity_spm_api_v1() {
  return &parity::datasets::spm::kApi;
}
