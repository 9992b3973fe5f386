#!/usr/bin/env bash
# Regenerates server/sql/schema.snapshot.sql: builds migrations_test and runs its snapshot test in
# write mode, which migrates a fresh database in a throwaway PostgreSQL cluster (tests/support),
# dumps its schema (pg_dump --schema-only, normalized by tests/scheduler/schema_dump.cc) and
# writes the file. Review the diff and commit it with the change that caused it.
#   server/sql/update_schema_snapshot.sh            # build directory ./build
#   BUILD_DIR=out server/sql/update_schema_snapshot.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
cmake --build "$build" --target migrations_test
PARITY_WRITE_SCHEMA_SNAPSHOT=1 "$build/tests/scheduler/migrations_test" \
  --gtest_filter='SchemaSnapshotTest.FreshlyMigratedSchemaMatchesTheCommittedSnapshot'
git -C "$root" diff --stat -- server/sql/schema.snapshot.sql
