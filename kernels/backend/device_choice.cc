#include "kernels/backend/device_choice.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace parity::kernels {

absl::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text) {
  if (text == "cpu") return DeviceChoice{};
  if (text == "cuda") return DeviceChoice{.kind = DeviceKind::kCuda, .ordinal = 0};
  int ordinal = 0;
  if (text.starts_with("cuda:") && absl::SimpleAtoi(std::string(text.substr(5)), &ordinal) &&
      ordinal >= 0) {
    return DeviceChoice{.kind = DeviceKind::kCuda, .ordinal = ordinal};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device: expected cpu, cuda or cuda:N, got '", std::string(text), "'"));
}

DeviceChoice DefaultDeviceChoice(int gpus) {
  return gpus > 0 ? DeviceChoice{.kind = DeviceKind::kCuda, .ordinal = 0} : DeviceChoice{};
}

std::string DeviceChoiceName(const DeviceChoice& choice) {
  return choice.kind == DeviceKind::kCpu ? "cpu" : absl::StrCat("cuda:", choice.ordinal);
}

absl::StatusOr<std::unique_ptr<Device>> MakeDevice(const DeviceChoice& choice, int threads) {
  if (choice.kind == DeviceKind::kCpu) return MakeCpuDevice({.threads = std::max(1, threads)});
  auto device = MakeCudaDevice({.ordinal = choice.ordinal});
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", DeviceChoiceName(choice),
                     ": CUDA is unavailable: ", device.status().message()));
  }
  return device;
}

}  // namespace parity::kernels
