-- Session and transaction settings of the store's connections (postgres_run_store.cc,
-- postgres_leader_leases.cc, postgres_run_counts.cc, postgres_run_queue.cc). SET takes no
-- parameters; set_config() does, so the values come in as text parameters.

-- name: set_session_statement_timeout
-- unprepared: runs once per connection, before the statements are prepared. $1 every
-- statement's timeout in milliseconds (text). JIT off: the store's statements are short and
-- index-bound, and LLVM compilation, triggered by the planner's cost estimates, took 0.4-2 s of
-- dashboard queries that run in 0.2-0.4 s at 100,000 runs (bench/RESULTS.md).
SELECT set_config('statement_timeout', $1, false), set_config('jit', 'off', false)

-- name: set_session_lock_timeout
-- unprepared: $1 how long a statement waits for a lock, in milliseconds (text).
SELECT set_config('lock_timeout', $1, false)

-- name: set_transaction_statement_timeout
-- unprepared: $1 the statement timeout of the current transaction only (text: '5000' in
-- milliseconds, or with a unit, '10min').
SELECT set_config('statement_timeout', $1, true)

-- name: set_session_asynchronous_commit
-- unprepared: the notifier's own connection. A NOTIFY takes a transaction id, so each batch
-- commits with a WAL record; waiting for its flush buys nothing (a notification does not survive
-- a crash either way, and listeners see it once the commit is in the clog), and 50 extra flushing
-- commits a second queued behind the leases' group commits (bench/scheduler/RESULTS.md).
SELECT set_config('synchronous_commit', 'off', false)

-- name: notify_batch
-- unprepared: the notifier's own connection (pg_notifier.h). $1 channel, $2 payloads text[]: one
-- NOTIFY each, in one statement and one commit.
SELECT count(pg_notify($1, payload)) FROM unnest($2::text[]) AS payload
