// How long a planned sweep will take: each run's training compute C (its accounting) at an
// assumed rate per worker, the runs list-scheduled longest first onto the workers (a run occupies
// one worker; the scheduler hands the next run to whichever worker frees first), plus a fixed
// overhead per run. An estimate for `parity plan`, not a promise: the rate is an assumption the
// caller states, and queueing behind other sweeps is left out.
#pragma once

#include <string>
#include <vector>

#include "parity/v1/sweep.pb.h"

namespace parity::core {

// A CPU worker thread's rate (FLOP/s): the CPU engine's measured 3.0–3.9e10 (MoE) and 5.3e10
// (dense) FLOP/s on one thread in the CPU study (docs/study/runs.csv, examples/cpu_study.yaml).
inline constexpr double kCpuThreadFlopsPerSecond = 3.5e10;
// What a run costs beyond its training FLOPs (seconds): start-up, evaluation and the final
// checkpoint. With it the estimate matches both measured sweeps: examples/micro.yaml (22 runs,
// ≈ 2 minutes on one thread, overhead-bound) and examples/cpu_study.yaml (51 runs, 72 minutes on
// two one-thread workers).
inline constexpr double kRunOverheadSeconds = 5;
// One GPU's rate (FLOP/s): an H200 at 40% of its 989 TFLOP/s bf16 peak, the MFU target of
// bench/RESULTS.md; a hint until the engine measures its own.
inline constexpr double kGpuFlopsPerSecond = 4e14;

// The rate `parity plan` assumes per worker when none is given: the largest per-run request of
// the plan, gpus × kGpuFlopsPerSecond when runs need GPUs, else cpu_threads ×
// kCpuThreadFlopsPerSecond (0 threads = 1).
double DefaultWorkerFlops(const std::vector<parity::v1::RunSpec>& runs);

// Σ C of the runs (FLOPs).
double TotalComputeFlops(const std::vector<parity::v1::RunSpec>& runs);

// Wall seconds to train `runs` on `workers` workers of `flops_per_worker` FLOP/s each, each run
// taking C/rate + `overhead_seconds`, longest first onto the worker that frees first. 0 for no
// runs; workers and rate must be > 0.
double EstimateWallSeconds(const std::vector<parity::v1::RunSpec>& runs, int workers,
                           double flops_per_worker, double overhead_seconds = kRunOverheadSeconds);

// "~45 s", "~12 min", "~3 h 10 min", "~4.2 days".
std::string FormatDuration(double seconds);

// "4.0 GFLOP/s", "400 TFLOP/s".
std::string FormatFlopRate(double flops_per_second);

// The line `parity plan` prints: "estimated wall time: ~3 h 10 min for Σ C = 4.5e+13 FLOPs on 4
// workers at 2.0 GFLOP/s each (assumed; --workers, --worker-flops)".
std::string WallTimeLine(const std::vector<parity::v1::RunSpec>& runs, int workers,
                         double flops_per_worker);

}  // namespace parity::core
