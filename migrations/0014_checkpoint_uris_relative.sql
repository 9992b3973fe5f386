-- 0014: checkpoint URIs are relative to the checkpoint store and inside their run's prefix
-- (core/checkpoint_uri.h): `<run_id>/<directory>/<file>`. Workers before it recorded absolute
-- paths (`/var/lib/parity/checkpoints/<run_id>/recorded-7/step-00000120.ckpt`), which a new
-- worker refuses to resume from; keep what lies under the run's own directory and forget the
-- rest, so that a run in flight at the upgrade resumes instead of spending its attempts.
UPDATE runs
SET checkpoint_uri = substring(checkpoint_uri FROM '/(' || run_id::text || '/.+)$')
WHERE checkpoint_uri LIKE '/%'
  AND substring(checkpoint_uri FROM '/(' || run_id::text || '/.+)$') IS NOT NULL;
-- An absolute path outside any run's directory was never a checkpoint a worker wrote: the run
-- starts again from step 0 rather than from someone's file.
UPDATE runs
SET checkpoint_uri = NULL, checkpoint_step = NULL, checkpoint_at = NULL
WHERE checkpoint_uri LIKE '/%';
