// libFuzzer target: the engine's checkpoint reader (kernels/train/checkpoint.h) on arbitrary
// file contents. The input is the file less its trailing FNV-1a checksum, which the target
// appends, so mutations reach the parser behind the checksum instead of dying at it. A file
// that reads is written back with WriteCheckpoint and must read back equal.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "kernels/train/checkpoint.h"

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

uint64_t Fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}

// One in-memory file for every input: ReadCheckpointFile takes a path.
int InputFd() {
  static const int fd = memfd_create("checkpoint-fuzz", MFD_CLOEXEC);
  Check(fd >= 0, "memfd_create");
  return fd;
}

// Round trips go to tmpfs where there is one: WriteCheckpoint fsyncs.
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    const std::filesystem::path base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    auto* path =
        new std::string((base / ("parity-checkpoint-fuzz-" + std::to_string(getpid()))).string());
    std::filesystem::remove_all(*path);
    std::atexit([] { std::filesystem::remove_all(*dir); });
    return path;
  }();
  return *dir;
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using parity::kernels::Checkpoint;
  const int fd = InputFd();
  const uint64_t sum = Fnv1a(data, size);
  Check(ftruncate(fd, 0) == 0, "ftruncate");
  Check(pwrite(fd, data, size, 0) == static_cast<ssize_t>(size), "pwrite");
  Check(pwrite(fd, &sum, sizeof(sum), size) == sizeof(sum), "pwrite");
  const std::string path = "/proc/self/fd/" + std::to_string(fd);

  absl::StatusOr<Checkpoint> read = parity::kernels::ReadCheckpointFile(path);
  if (!read.ok()) {
    Check(read.status().code() == absl::StatusCode::kDataLoss, "a bad file is not DATA_LOSS");
    return 0;
  }
  // Only files whose arrays are small are written back (the reader's own bound is the file).
  const Checkpoint& c = *read;
  Check(c.adam_m.size() == c.params.size() && c.adam_v.size() == c.params.size(), "array sizes");
  const std::string& dir = ScratchDir();
  auto reader = [&c](parity::kernels::CheckpointArray array, int64_t offset, int64_t count,
                     float* dst) {
    const std::vector<float>& src = array == parity::kernels::CheckpointArray::kParams  ? c.params
                                    : array == parity::kernels::CheckpointArray::kAdamM ? c.adam_m
                                                                                        : c.adam_v;
    std::memcpy(dst, src.data() + offset, count * sizeof(float));
  };
  absl::StatusOr<std::string> written =
      parity::kernels::WriteCheckpoint(dir, c, static_cast<int64_t>(c.params.size()), reader, 1);
  Check(written.ok(), "WriteCheckpoint of a checkpoint that read");
  absl::StatusOr<std::optional<Checkpoint>> back = parity::kernels::ReadLatestCheckpoint(dir);
  Check(back.ok() && back->has_value(), "ReadLatestCheckpoint of what was written");
  const Checkpoint& b = **back;
  Check(b.fingerprint == c.fingerprint && b.device == c.device && b.precision == c.precision &&
            b.step == c.step && b.cursor == c.cursor && b.rng.seed == c.rng.seed &&
            b.rng.counter == c.rng.counter,
        "header round trip");
  Check(b.balance_bias.size() == c.balance_bias.size(), "bias layers round trip");
  for (size_t i = 0; i < b.balance_bias.size(); ++i) {
    Check(SameFloats(b.balance_bias[i], c.balance_bias[i]), "bias round trip");
  }
  Check(SameFloats(b.params, c.params) && SameFloats(b.adam_m, c.adam_m) &&
            SameFloats(b.adam_v, c.adam_v),
        "arrays round trip");
  std::filesystem::remove_all(dir);
  return 0;
}
