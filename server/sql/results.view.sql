-- results: one row per run, read by QueryResults (AnalyzeSweep reads the runs themselves): the
-- accounting, planned vs measured FLOPs/token, final BPC and ΔBPC against the 1C dense baseline
-- of the same sweep, compute budget, data variant and seed (the first such baseline in grid order
-- that SUCCEEDED, its own group or one it also serves; NULL when there is none). Per evaluation
-- set (migration 0015): the final BPC of every set (final_eval_bpc) and each set's ΔBPC against
-- the same baseline's value on that set (delta_eval_bpc_vs_dense, only sets both report). Last,
-- when the run and its baseline ended (QueryResults orders ΔBPC as of a walk's start). CREATE OR
-- REPLACE VIEW can only add columns at the end: to drop, rename or retype one, see README.md.
CREATE OR REPLACE VIEW results AS
SELECT r.run_id, r.sweep_id, r.ordinal, r.name, r.role, r.layout, r.state,
       r.d_model, r.num_layers, r.num_experts, r.top_k, r.expert_hidden,
       r.params, r.active_params, r.activation_rate,
       r.flops_per_token AS planned_flops_per_token,
       r.measured_flops_per_token,
       r.measured_flops_per_token / NULLIF(r.flops_per_token, 0) AS measured_over_planned_flops,
       r.compute_flops, r.tokens, r.unique_tokens, r.epochs,
       r.compute_budget, r.compute_multiple, r.data_variant, r.seed,
       r.predicted_efficiency_leverage,
       r.final_train_bpc, r.final_val_bpc, r.wall_seconds, r.attempt,
       r.final_val_bpc - b.final_val_bpc AS delta_bpc_vs_dense,
       r.final_eval_bpc,
       (SELECT jsonb_object_agg(k, (r.final_eval_bpc ->> k)::float8
                                   - (b.final_eval_bpc ->> k)::float8)
        FROM jsonb_object_keys(r.final_eval_bpc) AS k
        WHERE b.final_eval_bpc ? k) AS delta_eval_bpc_vs_dense,
       r.dataset_digest,
       r.ended_at, b.ended_at AS baseline_ended_at
FROM runs r
-- The baseline is looked up per row, so each branch below must be one index probe (migration
-- 0019's partial indexes), not a walk over the sweep: an OR of the two conditions, or the jsonb
-- containment alone, kept every index out and made the view quadratic in the sweep's size
-- (166 ms a row at 100,000 runs; bench/load).
LEFT JOIN LATERAL (
  SELECT c.final_val_bpc, c.final_eval_bpc, c.ended_at
  FROM ((SELECT d.ordinal, d.final_val_bpc, d.final_eval_bpc, d.ended_at
         FROM runs d
         WHERE d.sweep_id = r.sweep_id AND d.seed = r.seed AND d.state = 'SUCCEEDED'
           AND d.role = 'DENSE_BASELINE' AND d.compute_multiple = 1
           AND d.compute_budget = r.compute_budget AND d.data_variant = r.data_variant
         ORDER BY d.ordinal
         LIMIT 1)
        UNION ALL
        -- a run planned once for several groups (RunSpec.also_serves) is the 1C baseline of
        -- every group it serves as one, e.g. dense 2C of C1 = dense 1C of C2
        (SELECT d.ordinal, d.final_val_bpc, d.final_eval_bpc, d.ended_at
         FROM runs d
         WHERE d.sweep_id = r.sweep_id AND d.seed = r.seed AND d.state = 'SUCCEEDED'
           AND d.spec_json ? 'also_serves'
           AND d.spec_json -> 'also_serves' @> jsonb_build_array(jsonb_build_object(
                 'compute_budget', r.compute_budget, 'data_variant', r.data_variant,
                 'role', 'RUN_ROLE_DENSE_BASELINE', 'compute_multiple', 1))
         ORDER BY d.ordinal
         LIMIT 1)) c
  ORDER BY c.ordinal
  LIMIT 1
) b ON true;
