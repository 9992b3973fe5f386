-- 0013: idempotency keys are each owner's, and a worker id belongs to the token name that
-- registered it (docs/access.md).
-- A key was unique across all owners: another identity could take a key first and be handed
-- back in place of the real owner's sweep. (owner, key) is unique now; NULL keys never collide.
ALTER TABLE sweeps DROP CONSTRAINT sweeps_idempotency_key_key;
ALTER TABLE sweeps ADD CONSTRAINT sweeps_owner_idempotency_key_key UNIQUE (owner, idempotency_key);
-- The token name that registered the worker; NULL for workers registered before this migration
-- or by the scheduler's own process: the next token to register the id claims it.
ALTER TABLE workers ADD COLUMN owner text;
