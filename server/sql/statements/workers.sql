-- The workers: registration, ownership, what they held, the listing (postgres_run_queue.cc).

-- name: register_worker
-- $1 id (NULL = new), $2 hostname, $3 devices json, $4 labels json, $5 version, $6 owner (NULL =
-- the scheduler's own process: claims nothing, may update any), $7 datasets json. An id owned
-- by another name is left as it is and returns no row.
INSERT INTO workers (worker_id, hostname, devices, labels, version, owner, datasets)
VALUES (coalesce($1::uuid, gen_random_uuid()), $2, $3::jsonb, $4::jsonb, $5, $6, $7::jsonb)
ON CONFLICT (worker_id) DO UPDATE SET hostname = excluded.hostname,
  devices = excluded.devices, labels = excluded.labels, version = excluded.version,
  datasets = excluded.datasets, owner = coalesce(workers.owner, excluded.owner),
  last_seen_at = now()
WHERE excluded.owner IS NULL OR workers.owner IS NULL OR workers.owner = excluded.owner
RETURNING worker_id::text, (extract(epoch FROM last_seen_at) * 1000000)::bigint

-- name: claim_worker
-- $1 id, $2 the claiming name (NULL = claim nothing): the owner after the claim, '' for none.
WITH claimed AS (UPDATE workers SET owner = $2
                 WHERE worker_id = $1 AND owner IS NULL AND $2::text IS NOT NULL
                 RETURNING owner)
SELECT coalesce((SELECT owner FROM claimed), w.owner, '') FROM workers w WHERE w.worker_id = $1

-- name: run_holdings
-- $1 worker (NULL = none), $2 run ids (uuid[]): each existing run, in order, and whether the
-- worker holds it now or an event names it (events_by_run: a run's few events).
SELECT r.run_id::text,
       coalesce(r.lease_owner = $1::uuid OR EXISTS (SELECT 1 FROM events e
                                                    WHERE e.run_id = r.run_id
                                                      AND e.worker_id = $1::uuid), false)
FROM unnest($2::uuid[]) WITH ORDINALITY AS q(run_id, i) JOIN runs r ON r.run_id = q.run_id
ORDER BY q.i

-- name: list_workers
-- $1 seen within (seconds), $2 last_seen_at text of the last row ('' = first page), $3 its id,
-- $4 limit. Most recently seen first; active runs are the LEASED/RUNNING ones it owns.
SELECT w.worker_id::text AS worker_id, w.hostname, w.devices::text AS devices,
       w.labels::text AS labels, w.version, w.datasets::text AS datasets,
       (extract(epoch FROM w.last_seen_at) * 1000000)::bigint AS last_seen_us,
       w.last_seen_at::text AS last_seen_text, coalesce(a.n, 0) AS active_runs
FROM workers w
LEFT JOIN (SELECT lease_owner, count(*) AS n FROM runs WHERE state IN ('LEASED', 'RUNNING')
           GROUP BY lease_owner) a ON a.lease_owner = w.worker_id
WHERE w.last_seen_at >= now() - make_interval(secs => $1)
  AND ($2 = '' OR (w.last_seen_at, w.worker_id) < ($2::timestamptz, $3::uuid))
ORDER BY w.last_seen_at DESC, w.worker_id DESC LIMIT $4
