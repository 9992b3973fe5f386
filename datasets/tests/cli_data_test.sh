#!/usr/bin/env bash
# `parity data` as a user runs it (ctest: cli_data_prepare): prepare → inspect --verify → digest
# with an evaluation set; the error exits (missing input, bad JSON Lines with its line number, a
# missing text field, an existing destination without --force, a vocabulary too small) leave
# nothing behind; and a preparation killed mid-way (SIGKILL, after its first shard is on disk)
# leaves no dataset at the destination, only a hidden staging directory that the next run removes.
set -euo pipefail
PARITY=${1:?usage: cli_data_test.sh PATH/TO/parity}
work=$(mktemp -d)
child=""
cleanup() {
  if [[ -n "$child" ]]; then kill -9 "$child" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE SUBSTRING -- COMMAND...: the command exits CODE and its stderr holds SUBSTRING.
expect() {
  local code=$1 needle=$2; shift 3
  local rc=0
  "$@" >"$work/cmd.out" 2>"$work/err" || rc=$?
  [[ $rc -eq $code ]] || fail "$* exited $rc, not $code: $(cat "$work/err")"
  grep -qF -- "$needle" "$work/err" || fail "$* said '$(cat "$work/err")', not '$needle'"
}

mkdir -p "$work/in" "$work/eval"
for i in $(seq 1 300); do
  printf 'Paragraph %d says the router sends tokens to experts.\nIt has two lines.\n\n' "$i"
done >"$work/in/a.txt"
printf '{"text": "an evaluation document"}\n{"text": "another one", "id": 2}\n' >"$work/eval/e.jsonl"

# 1. prepare → inspect --verify → digest.
"$PARITY" data prepare "$work/in" --out "$work/out" --name demo --documents paragraph \
  --eval "held=$work/eval/e.jsonl" --validation-fraction 0.1 --shard-tokens 4096 --threads 2 \
  --progress >"$work/prepare.out" 2>"$work/prepare.err" || fail "prepare: $(cat "$work/prepare.err")"
grep -q "MB/s" "$work/prepare.err" || fail "no progress line with --progress"
[[ -f "$work/out/demo/manifest.json" ]] || fail "no manifest"
"$PARITY" data inspect "$work/out/demo" --verify >"$work/inspect.out" || fail "inspect failed"
grep -q "verified" "$work/inspect.out" || fail "inspect --verify did not verify"
grep -qE "^held +33 +2 " "$work/inspect.out" || fail "no 'held' row: $(cat "$work/inspect.out")"
grep -qE "^validation " "$work/inspect.out" || fail "no validation row"
digest=$("$PARITY" data digest "$work/out/demo")
[[ "$digest" == "$(sha256sum "$work/out/demo/manifest.json" | cut -d' ' -f1)" ]] ||
  fail "digest $digest is not the manifest's SHA-256"
grep -qF "$digest" "$work/prepare.out" || fail "prepare did not print the digest"
# A shard that changed is found by --verify.
printf 'xx' | dd of="$work/out/demo/train-00000.tok" bs=1 seek=0 conv=notrunc status=none
expect 1 "SHA-256" -- "$PARITY" data inspect "$work/out/demo" --verify

# 2. Errors: a clear message naming the input, the right exit code, nothing written.
expect 2 "exists; give --force" -- "$PARITY" data prepare "$work/in" --out "$work/out" --name demo
expect 2 "missing.txt" -- "$PARITY" data prepare "$work/missing.txt" --out "$work/o2" --name x
printf '{"text": "fine"}\n{"text": broken\n' >"$work/bad.jsonl"
expect 2 "bad.jsonl' line 2: not valid JSON" -- \
  "$PARITY" data prepare "$work/bad.jsonl" --out "$work/o2" --name x --validation-fraction 0
expect 2 'no field "body"' -- "$PARITY" data prepare "$work/eval/e.jsonl" --out "$work/o2" \
  --name x --text-field body --validation-fraction 0
: >"$work/empty.txt"
expect 2 "empty.txt': empty" -- "$PARITY" data prepare "$work/empty.txt" --out "$work/o2" --name x
expect 2 "'validation' is taken" -- "$PARITY" data prepare "$work/in" --out "$work/o2" --name x \
  --eval "validation=$work/eval/e.jsonl"
expect 2 "--vocab-size: 100 is outside" -- "$PARITY" data tokenizer train "$work/in" \
  --out "$work/tok/t.model" --vocab-size 100
expect 3 "not a prepared dataset" -- "$PARITY" data digest "$work/in"
expect 64 "" -- "$PARITY" data prepare --out "$work/o2" --name x
if [[ -e "$work/o2" ]] && [[ -n "$(ls -A "$work/o2")" ]]; then
  fail "a failed preparation left $(ls -A "$work/o2")"
fi

# 3. A SentencePiece tokenizer trained and used through the CLI.
"$PARITY" data tokenizer train "$work/in" --out "$work/tok/t.model" --vocab-size 300 \
  --model-type bpe >/dev/null 2>"$work/err" || fail "tokenizer train: $(cat "$work/err")"
"$PARITY" data prepare "$work/in" --out "$work/out" --name sp --tokenizer "$work/tok/t.model" \
  --documents paragraph >/dev/null 2>"$work/err" || fail "prepare sp: $(cat "$work/err")"
"$PARITY" data inspect "$work/out/sp" --verify | grep -q "sentencepiece bpe (vocabulary 300" ||
  fail "inspect does not show the model"
cmp -s "$work/tok/t.model" "$work/out/sp/tokenizer.model" || fail "tokenizer.model not copied"

# 4. Killed mid-way: after its first shard is written, the hook pauses it; SIGKILL it there.
for i in $(seq 1 20); do cat "$work/in/a.txt"; done >"$work/big.txt"
PARITY_DATA_TEST_PAUSE_AFTER_SHARD=1 "$PARITY" data prepare "$work/big.txt" --out "$work/k" \
  --name killed --documents paragraph --shard-tokens 4096 --threads 2 2>"$work/kill.err" &
child=$!
for _ in $(seq 1 300); do
  grep -q "paused after" "$work/kill.err" 2>/dev/null && break
  sleep 0.1
done
grep -q "paused after" "$work/kill.err" || fail "the preparation never reached its pause"
kill -9 "$child"
wait "$child" 2>/dev/null || true
child=""
[[ ! -e "$work/k/killed" ]] || fail "a killed preparation left $work/k/killed"
staging=$(ls -d "$work"/k/.killed.partial-* 2>/dev/null || true)
[[ -n "$staging" ]] || fail "expected the killed run's staging directory"
ls "$staging"/train-00000.tok >/dev/null || fail "the pause came before any shard was written"
[[ ! -e "$staging/manifest.json" ]] || fail "the staging directory holds a manifest"
expect 3 "not a prepared dataset" -- "$PARITY" data digest "$work/k/killed"
# The next run of the same name clears the leftovers and publishes a complete dataset.
"$PARITY" data prepare "$work/big.txt" --out "$work/k" --name killed --documents paragraph \
  --shard-tokens 4096 >/dev/null 2>"$work/err" || fail "rerun: $(cat "$work/err")"
[[ "$(ls -A "$work/k")" == "killed" ]] || fail "leftovers after the rerun: $(ls -A "$work/k")"
"$PARITY" data inspect "$work/k/killed" --verify >/dev/null || fail "rerun does not verify"
echo "cli_data_test: all checks passed"
