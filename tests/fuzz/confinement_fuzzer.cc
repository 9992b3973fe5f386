// libFuzzer target: the two rules that keep names from becoming paths on a worker
// (core/dataset_name.h, core/checkpoint_uri.h). The input's first byte picks the rule, the rest
// is the text: for a dataset name, the name; for a checkpoint URI, "RUN_ID\nURI". Besides the
// sanitizers, the target checks what each rule promises:
//   * an accepted dataset name, joined to a data directory, names a file directly in it (no
//     separator, no "..", no hidden file, nothing but [A-Za-z0-9._-], at most 128 bytes);
//   * an accepted checkpoint URI, joined to the store, lies below the run's own directory and
//     stays there when normalized (no absolute path, no "." or ".." part, no empty part);
//   * a refusal is INVALID_ARGUMENT; a refused dataset name says what to do instead.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/string_view.h"
#include "core/checkpoint_uri.h"
#include "core/dataset_name.h"

namespace {

void Check(bool condition, const char* what, absl::string_view input) {
  if (condition) return;
  fprintf(stderr, "fuzz check failed: %s (input '%.*s')\n", what, static_cast<int>(input.size()),
          input.data());
  std::abort();
}

bool Plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

void DatasetName(absl::string_view name) {
  const absl::Status s = parity::core::CheckDatasetName(name);
  if (!s.ok()) {
    Check(s.code() == absl::StatusCode::kInvalidArgument, "a refusal is INVALID_ARGUMENT", name);
    Check(s.message().find("--corpus-dir") != absl::string_view::npos, "refusal names the remedy",
          name);
    return;
  }
  Check(!name.empty() && name.size() <= parity::core::kMaxDatasetNameBytes, "size", name);
  Check(name.front() != '.', "no hidden file", name);
  Check(name.find("..") == absl::string_view::npos, "no ..", name);
  for (const char c : name) Check(Plain(c), "plain characters only", name);
  const std::filesystem::path joined =
      (std::filesystem::path("/data") / std::string(name)).lexically_normal();
  Check(joined.parent_path() == "/data", "a name is a file directly in the data directory", name);
}

void CheckpointUri(absl::string_view input) {
  const size_t cut = input.find('\n');
  const absl::string_view run_id = input.substr(0, cut);
  const absl::string_view uri =
      cut == absl::string_view::npos ? absl::string_view() : input.substr(cut + 1);
  const absl::Status s = parity::core::CheckCheckpointUri(run_id, uri);
  if (!s.ok()) {
    Check(s.code() == absl::StatusCode::kInvalidArgument, "a refusal is INVALID_ARGUMENT", input);
    return;
  }
  if (uri.empty()) return;
  Check(uri.front() != '/', "not absolute", input);
  const std::filesystem::path store("/store");
  const std::filesystem::path joined = store / std::string(uri);
  Check(joined.lexically_normal() == joined, "normal as written: no '.', '..' or empty part",
        input);
  const std::string run_dir = (store / std::string(run_id)).string() + "/";
  Check(joined.string().starts_with(run_dir), "below the run's own directory", input);
  Check(joined.string().size() > run_dir.size(), "a file, not the run's directory", input);
  for (const char c : uri) Check(c == '/' || Plain(c), "plain characters only", input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    DatasetName(text);
  } else {
    CheckpointUri(text);
  }
  return 0;
}
