-- 0019: the results view's baseline lookup is an index probe per row (issue #25, bench/load).
-- server/sql/results.view.sql finds each run's 1C dense baseline (same sweep, seed, budget and
-- data variant, the first that SUCCEEDED in grid order) in two branches; each has its partial
-- index here, so a page of results costs a probe per row instead of a scan of the sweep per row
-- (which made QueryResults quadratic: 16.6 s for 100 rows of a 100,000-run sweep).
CREATE INDEX runs_succeeded_dense_1c ON runs (sweep_id, seed, compute_budget, data_variant, ordinal)
  WHERE state = 'SUCCEEDED' AND role = 'DENSE_BASELINE' AND compute_multiple = 1;
-- Runs that also serve other groups as their baseline (RunSpec.also_serves): few per sweep.
CREATE INDEX runs_succeeded_serving ON runs (sweep_id, seed, ordinal)
  WHERE state = 'SUCCEEDED' AND spec_json ? 'also_serves';
