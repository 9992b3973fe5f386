-- 0009: functions, triggers and views now live in server/sql/, one file each, re-applied by
-- the migration run whenever a file's text changes (server/sql/README.md); numbered migrations
-- hold DDL only from here on. The functions 0001-0008 installed that nothing calls any more
-- are dropped: lease_next_run (0003, 0004; replaced by lease_runs in 0006) and
-- complete_run_success (0004; replaced by complete_runs_success in 0006).
DROP FUNCTION lease_next_run(uuid, integer, bigint, bigint[], double precision, integer[],
                             integer);
DROP FUNCTION complete_run_success(uuid, bigint, double precision, double precision, bigint,
                                   bigint, double precision, double precision, bigint,
                                   double precision, bigint, text);
