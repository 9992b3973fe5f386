#include "datasets/format/manifest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace parity::datasets {
namespace {

using nlohmann::json;

constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;

// A path into the JSON for messages: "train.shards[3].tokens".
class Path {
 public:
  explicit Path(std::string text) : text_(std::move(text)) {}
  Path operator/(absl::string_view key) const {
    return Path(text_.empty() ? std::string(key) : absl::StrCat(text_, ".", key));
  }
  Path operator[](size_t i) const { return Path(absl::StrCat(text_, "[", i, "]")); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

absl::Status Bad(const Path& at, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("manifest.json: ", at.text(), ": ", why));
}

// A file name the manifest may hold: plain, inside the dataset directory.
bool IsPlainFileName(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return name[0] != '.';
}

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

template <typename T>
absl::StatusOr<T> Get(const json& j, const Path& at, absl::string_view key) {
  const Path here = at / key;
  if (!j.is_object() || !j.contains(key)) return Bad(here, "missing");
  const json& v = j.at(std::string(key));
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return Bad(here, "not a string");
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) return Bad(here, "not a number");
  } else {
    if (!v.is_number_integer()) return Bad(here, "not an integer");
  }
  return v.get<T>();
}

#define PARITY_MANIFEST_GET(lhs, type, j, at, key)           \
  do {                                                       \
    absl::StatusOr<type> got_ = Get<type>((j), (at), (key)); \
    if (!got_.ok()) return got_.status();                    \
    lhs = *std::move(got_);                                  \
  } while (false)

json ShardJson(const Shard& s) {
  return {{"file", s.file},           {"doc_file", s.doc_file}, {"tokens", s.tokens},
          {"documents", s.documents}, {"sha256", s.sha256},     {"doc_sha256", s.doc_sha256}};
}

json SplitJson(const Split& s) {
  json shards = json::array();
  for (const Shard& shard : s.shards) shards.push_back(ShardJson(shard));
  return {{"name", s.name},
          {"tokens", s.tokens},
          {"documents", s.documents},
          {"text_bytes", s.text_bytes},
          {"token_bytes", s.token_bytes},
          {"sources", s.sources},
          {"shards", shards}};
}

absl::StatusOr<Shard> ParseShard(const json& j, const Path& at) {
  Shard s;
  PARITY_MANIFEST_GET(s.file, std::string, j, at, "file");
  PARITY_MANIFEST_GET(s.doc_file, std::string, j, at, "doc_file");
  PARITY_MANIFEST_GET(s.tokens, int64_t, j, at, "tokens");
  PARITY_MANIFEST_GET(s.documents, int64_t, j, at, "documents");
  PARITY_MANIFEST_GET(s.sha256, std::string, j, at, "sha256");
  PARITY_MANIFEST_GET(s.doc_sha256, std::string, j, at, "doc_sha256");
  if (!IsPlainFileName(s.file)) return Bad(at / "file", "not a plain file name");
  if (!IsPlainFileName(s.doc_file)) return Bad(at / "doc_file", "not a plain file name");
  if (s.file == kManifestFile || s.doc_file == kManifestFile) {
    return Bad(at / "file", "names the manifest");
  }
  if (s.tokens < 0) return Bad(at / "tokens", "negative");
  if (s.documents < 0) return Bad(at / "documents", "negative");
  if (!IsSha256Hex(s.sha256)) return Bad(at / "sha256", "not 64 lowercase hex digits");
  if (!IsSha256Hex(s.doc_sha256)) return Bad(at / "doc_sha256", "not 64 lowercase hex digits");
  return s;
}

absl::StatusOr<Split> ParseSplit(const json& j, const Path& at) {
  Split s;
  PARITY_MANIFEST_GET(s.name, std::string, j, at, "name");
  PARITY_MANIFEST_GET(s.tokens, int64_t, j, at, "tokens");
  PARITY_MANIFEST_GET(s.documents, int64_t, j, at, "documents");
  PARITY_MANIFEST_GET(s.text_bytes, int64_t, j, at, "text_bytes");
  PARITY_MANIFEST_GET(s.token_bytes, int64_t, j, at, "token_bytes");
  if (s.tokens < 0 || s.documents < 0 || s.text_bytes < 0 || s.token_bytes < 0) {
    return Bad(at, "a count is negative");
  }
  if (j.contains("sources")) {
    const json& sources = j.at("sources");
    if (!sources.is_array()) return Bad(at / "sources", "not an array");
    for (const json& v : sources) {
      if (!v.is_string()) return Bad(at / "sources", "holds a non-string");
      s.sources.push_back(v.get<std::string>());
    }
  }
  if (!j.contains("shards") || !j.at("shards").is_array())
    return Bad(at / "shards", "not an array");
  int64_t tokens = 0, documents = 0;
  const json& shards = j.at("shards");
  for (size_t i = 0; i < shards.size(); ++i) {
    absl::StatusOr<Shard> shard = ParseShard(shards[i], (at / "shards")[i]);
    if (!shard.ok()) return shard.status();
    tokens += shard->tokens;
    documents += shard->documents;
    s.shards.push_back(*std::move(shard));
  }
  if (tokens != s.tokens) return Bad(at / "tokens", "is not the sum of its shards' tokens");
  if (documents != s.documents) {
    return Bad(at / "documents", "is not the sum of its shards' documents");
  }
  return s;
}

absl::StatusOr<Tokenizer> ParseTokenizer(const json& j, const Path& at) {
  Tokenizer t;
  std::string kind;
  PARITY_MANIFEST_GET(kind, std::string, j, at, "kind");
  if (kind == "bytes") {
    t.kind = TokenizerKind::kBytes;
  } else if (kind == "sentencepiece") {
    t.kind = TokenizerKind::kSentencePiece;
  } else {
    return Bad(at / "kind",
               absl::StrCat("'", kind, "' is neither \"bytes\" nor \"sentencepiece\""));
  }
  PARITY_MANIFEST_GET(t.vocab_size, int64_t, j, at, "vocab_size");
  PARITY_MANIFEST_GET(t.eos_id, int64_t, j, at, "eos_id");
  PARITY_MANIFEST_GET(t.model_sha256, std::string, j, at, "model_sha256");
  PARITY_MANIFEST_GET(t.model_type, std::string, j, at, "model_type");
  if (t.vocab_size < 2 || t.vocab_size > (int64_t{1} << 31)) {
    return Bad(at / "vocab_size", "outside [2, 2^31]");
  }
  if (t.eos_id < -1 || t.eos_id >= t.vocab_size) return Bad(at / "eos_id", "not −1 or an id");
  if (t.kind == TokenizerKind::kSentencePiece && !IsSha256Hex(t.model_sha256)) {
    return Bad(at / "model_sha256", "not 64 lowercase hex digits");
  }
  const Path tb = at / "token_bytes";
  if (!j.contains("token_bytes") || !j.at("token_bytes").is_array()) return Bad(tb, "not an array");
  const json& bytes = j.at("token_bytes");
  if (static_cast<int64_t>(bytes.size()) != t.vocab_size) {
    return Bad(tb,
               absl::StrCat("holds ", bytes.size(), " entries for a vocabulary of ", t.vocab_size));
  }
  t.token_bytes.reserve(bytes.size());
  for (const json& v : bytes) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 4096) {
      return Bad(tb, "holds an entry that is not an integer in [0, 4096]");
    }
    t.token_bytes.push_back(v.get<int32_t>());
  }
  return t;
}

}  // namespace

int TokenWidthFor(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

std::string SerializeManifest(const Manifest& m) {
  json eval_sets = json::array();
  for (const Split& s : m.eval_sets) eval_sets.push_back(SplitJson(s));
  const Tokenizer& t = m.tokenizer;
  json j = {
      {"format", m.format},
      {"name", m.name},
      {"token_width", m.token_width},
      {"tokenizer",
       {{"kind", t.kind == TokenizerKind::kBytes ? "bytes" : "sentencepiece"},
        {"vocab_size", t.vocab_size},
        {"eos_id", t.eos_id},
        {"model_sha256", t.model_sha256},
        {"model_type", t.model_type},
        {"token_bytes", t.token_bytes}}},
      {"split_rule",
       {{"seed", m.split_rule.seed}, {"validation_fraction", m.split_rule.validation_fraction}}},
      {"train", SplitJson(m.train)},
      {"eval_sets", eval_sets},
      {"created_by", m.created_by},
  };
  // nlohmann's json object is a std::map: keys come out sorted, so the bytes are canonical.
  return j.dump(2) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("manifest.json: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("manifest.json: not a JSON object");
  const Path root("");
  Manifest m;
  PARITY_MANIFEST_GET(m.format, std::string, j, root, "format");
  if (m.format != kFormat) {
    return Bad(root / "format", absl::StrCat("'", m.format, "' is not ", kFormat,
                                             "; prepare the dataset again with this version"));
  }
  PARITY_MANIFEST_GET(m.name, std::string, j, root, "name");
  PARITY_MANIFEST_GET(m.token_width, int, j, root, "token_width");
  if (j.contains("created_by") && j.at("created_by").is_string()) {
    m.created_by = j.at("created_by").get<std::string>();
  }
  if (!j.contains("tokenizer")) return Bad(root / "tokenizer", "missing");
  absl::StatusOr<Tokenizer> tokenizer = ParseTokenizer(j.at("tokenizer"), root / "tokenizer");
  if (!tokenizer.ok()) return tokenizer.status();
  m.tokenizer = *std::move(tokenizer);
  if (m.token_width != TokenWidthFor(m.tokenizer.vocab_size)) {
    return Bad(root / "token_width",
               absl::StrCat(m.token_width, " is not ", TokenWidthFor(m.tokenizer.vocab_size),
                            " for a vocabulary of ", m.tokenizer.vocab_size));
  }
  if (!j.contains("split_rule")) return Bad(root / "split_rule", "missing");
  PARITY_MANIFEST_GET(m.split_rule.seed, uint64_t, j.at("split_rule"), root / "split_rule", "seed");
  PARITY_MANIFEST_GET(m.split_rule.validation_fraction, double, j.at("split_rule"),
                      root / "split_rule", "validation_fraction");
  if (!(m.split_rule.validation_fraction >= 0 && m.split_rule.validation_fraction < 1)) {
    return Bad(root / "split_rule" / "validation_fraction", "outside [0, 1)");
  }
  if (!j.contains("train")) return Bad(root / "train", "missing");
  absl::StatusOr<Split> train = ParseSplit(j.at("train"), root / "train");
  if (!train.ok()) return train.status();
  m.train = *std::move(train);
  if (m.train.name != kTrainSplit) return Bad(root / "train" / "name", "is not \"train\"");
  if (!j.contains("eval_sets") || !j.at("eval_sets").is_array()) {
    return Bad(root / "eval_sets", "not an array");
  }
  const json& sets = j.at("eval_sets");
  for (size_t i = 0; i < sets.size(); ++i) {
    absl::StatusOr<Split> set = ParseSplit(sets[i], (root / "eval_sets")[i]);
    if (!set.ok()) return set.status();
    if (set->name == kTrainSplit || FindEvalSet(m, set->name) != nullptr) {
      return Bad((root / "eval_sets")[i] / "name", absl::StrCat("'", set->name, "' is taken"));
    }
    m.eval_sets.push_back(*std::move(set));
  }
  return m;
}

absl::StatusOr<Manifest> ReadManifest(const std::string& dir, std::string* digest_out) {
  const std::string path = absl::StrCat(dir, "/", kManifestFile);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError("manifest.json: cannot be opened");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxManifestBytes) {
    ::close(fd);
    return absl::InvalidArgumentError("manifest.json: not a regular file of at most 64 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(done);
  if (digest_out != nullptr) *digest_out = Sha256Hex(text);
  return ParseManifest(text);
}

namespace {

struct DigestContext {
  DigestContext() : ctx(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  DigestContext(const DigestContext&) = delete;
  DigestContext& operator=(const DigestContext&) = delete;
  void Update(const void* data, size_t n) { EVP_DigestUpdate(ctx, data, n); }
  std::string HexFinal() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md.data(), &len);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * len);
    for (unsigned int i = 0; i < len; ++i) {
      out.push_back(kHex[md[i] >> 4]);
      out.push_back(kHex[md[i] & 15]);
    }
    return out;
  }
  EVP_MD_CTX* ctx;
};

}  // namespace

std::string Sha256Hex(absl::string_view bytes) {
  DigestContext d;
  d.Update(bytes.data(), bytes.size());
  return d.HexFinal();
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  DigestContext d;
  std::unique_ptr<char[]> buffer(new char[1 << 20]);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.get(), 1 << 20);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed"));
    }
    if (n == 0) break;
    d.Update(buffer.get(), static_cast<size_t>(n));
  }
  ::close(fd);
  return d.HexFinal();
}

const Split* FindEvalSet(const Manifest& manifest, absl::string_view name) {
  for (const Split& s : manifest.eval_sets) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace parity::datasets
