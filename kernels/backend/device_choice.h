// Which device a run trains on: parity-train's `--device cpu|cuda[:N]`, its default from the
// RunSpec's resources, and the device itself. Kept apart from device.h (the backend interface)
// because it is the caller's choice, not something a backend implements.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"

namespace parity::kernels {

enum class DeviceKind { kCpu, kCuda };

struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;  // CUDA device index; 0 for the CPU
};

// "cpu", "cuda" (= "cuda:0") or "cuda:N". InvalidArgument naming --device otherwise.
absl::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text);

// The device a spec asks for when --device is not given: cuda:0 when it requests GPUs.
DeviceChoice DefaultDeviceChoice(int gpus);

// "cpu" or "cuda:N", as --device spells it.
std::string DeviceChoiceName(const DeviceChoice& choice);

// Creates the device: the CPU backend with `threads` pool threads, or the CUDA backend.
// InvalidArgument naming --device when CUDA is unavailable (built without it, no GPU, no such
// ordinal), with the backend's reason.
absl::StatusOr<std::unique_ptr<Device>> MakeDevice(const DeviceChoice& choice, int threads);

}  // namespace parity::kernels
