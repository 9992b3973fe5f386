-- 0024: a run pinned to a dataset's digest (RunSpec data.dataset_digest, issue #24) is leased only
-- to workers that hold that copy (workers.datasets, as each verified it at start): in a fleet with
-- two copies a worker with the other one would fail the run as DATA_MISMATCH, which is never
-- retried. The pin as a column, so that the lease reads no spec; NULL = not pinned. insert_run
-- (server/sql/statements/sweeps.sql) fills it from the spec; runs submitted before are filled here.
ALTER TABLE runs ADD COLUMN dataset_pin text;
UPDATE runs SET dataset_pin = spec_json #>> '{data,dataset_digest}'
  WHERE coalesce(spec_json #>> '{data,dataset_digest}', '') <> '';
