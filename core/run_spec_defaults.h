// The values a RunSpec's unset fields take, written into the spec in one place. The planner calls
// these on every run it plans (so a planned RunSpec names every value) and the engine's adapter
// (kernels/spec/run_spec_adapter.cc) calls them again on whatever spec it is given, planned or
// written by hand, before reading a single field; neither restates a default. The constants are
// spec_defaults.h's, which `parity spec reference` prints.
//
// Each Fill* leaves a set field alone and is idempotent: filling a filled spec changes nothing, so
// the engine's second pass over a planned spec is a no-op. A separate library
// (parity_run_spec_defaults: protobuf messages only) so the engine links it without the planner.
#pragma once

#include <cstdint>

#include "parity/v1/model.pb.h"
#include "parity/v1/sweep.pb.h"
#include "parity/v1/training.pb.h"

namespace parity::core {

// Warmup when a spec gives neither warmup_steps nor warmup_fraction: round(1% of steps) (half
// away from zero) clipped to [200, 2000], then at most floor(10% of steps), so a micro run of a
// few hundred steps still spends most of them at its learning rate. 0 for a run under 10 steps.
uint64_t DefaultWarmupSteps(uint64_t steps);

// The warmup of `training` (whose `steps` is set): warmup_steps when positive, else
// round(warmup_fraction·steps) when warmup_fraction is positive, else DefaultWarmupSteps(steps).
uint64_t WarmupStepsOf(const parity::v1::TrainingSpec& training);

// Fills the training defaults, once `steps` is known: warmup_steps (WarmupStepsOf), schedule
// (cosine), decay_fraction, min_lr_ratio, the AdamW β1, β2, ε and weight decay, grad_clip,
// log/eval cadence, eval_tokens and both checkpoint intervals (1/20 of the steps; 10 minutes).
// The learning rate, batch, steps and rule are the planner's (hyperparameters.h), not defaults.
void FillTrainingDefaults(parity::v1::TrainingSpec& training);

// Fills the router's balance (aux_loss when unspecified) and, for that balance, the coefficients
// it uses: the aux-loss λ only with aux_loss (0 otherwise), the z-loss λ_z unless none (0 then),
// and the bias update rate u only with loss_free (any other balance ignores u).
void FillRouterDefaults(parity::v1::RouterSpec& router);

// Fills the model's own defaults: vocab_size (bytes), rope_theta, init_std, norm_eps,
// position_encoding (rotary), num_kv_heads (= num_heads) and, for an MoE, its router's.
// Shapes, the attention kind and the sweep-side param_tolerance are the shape solver's.
void FillModelDefaults(parity::v1::ModelSpec& model);

// Fills the data's validation_fraction.
void FillDataDefaults(parity::v1::DataSpec& data);

// Fills resources.ranks when unset (0): one rank per GPU of a run of several GPUs — the engine
// trains one GPU per process, so `gpus: 8` alone is an 8-rank data-parallel gang, never one
// process beside seven idle GPUs. A CPU run or a run of one GPU keeps 0 (one process).
void FillResourceDefaults(parity::v1::ResourceRequest& resources);

// The processes that train a run of these resources (its world size, W): ranks, else 1.
uint32_t RanksOf(const parity::v1::ResourceRequest& resources);

}  // namespace parity::core
