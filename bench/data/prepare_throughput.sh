#!/usr/bin/env bash
# Throughput of `parity data prepare`: MB of text per second (wall) and per core (MB per CPU
# second, user + system: robust on a shared machine where wall time depends on the neighbours),
# for the byte tokenizer and a SentencePiece BPE model, at 1 and 2 threads. Synthetic text (bench/data/make_text.py,
# fixed seed) cut into paragraphs; the model is trained first on a 20 MB sample (timed apart).
#
#   bench/data/prepare_throughput.sh [SIZE_MB=200] [VOCAB=8000] [PARITY=build/cli/parity]
#
# Results go in bench/RESULTS.md ("Data preparation"). Needs the tree built (target parity).
set -euo pipefail
size_mb=${1:-200}
vocab=${2:-8000}
parity=${3:-build/cli/parity}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/parity-prepare-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }

echo "generating ${size_mb} MB of text in $work/text ..." >&2
python3 "$here/make_text.py" "$work/text" "$size_mb"
bytes=$(du -sb "$work/text" | cut -f1)
load=$(cut -d' ' -f1-3 /proc/loadavg)

start=$(now)
"$parity" data tokenizer train "$work/text" --out "$work/tok/bpe.model" --vocab-size "$vocab" \
  --model-type bpe --sample-bytes 20000000 --threads 2 >&2
train_s=$(echo "$(now) - $start" | bc -l)

printf '%-16s %7s %9s %9s %9s %11s %12s\n' tokenizer threads "wall s" "CPU s" "MB/s" \
  "MB/s/core" "bytes/token"
for tokenizer in bytes "$work/tok/bpe.model"; do
  label=$([[ "$tokenizer" == bytes ]] && echo bytes || echo "spm-bpe-$vocab")
  for threads in 1 2; do
    rm -rf "$work/out"
    /usr/bin/time -o "$work/time" -f "%e %U %S" \
      "$parity" data prepare "$work/text" --out "$work/out" --name bench --documents paragraph \
      --tokenizer "$tokenizer" --threads "$threads" --validation-fraction 0.001 >"$work/inspect"
    read -r seconds user sys <"$work/time"
    cpu=$(echo "$user + $sys" | bc -l)
    tokens=$(awk '$1 == "train" || $1 == "validation" { t += $2 } END { print t }' "$work/inspect")
    printf '%-16s %7d %9.2f %9.2f %9.1f %11.1f %12.2f\n' "$label" "$threads" "$seconds" "$cpu" \
      "$(echo "$bytes / 1000000 / $seconds" | bc -l)" \
      "$(echo "$bytes / 1000000 / $cpu" | bc -l)" \
      "$(echo "$bytes / $tokens" | bc -l)"
  done
done
printf 'load average before: %s\n' "$load"
printf 'text %.1f MB; tokenizer training (%s pieces, 20 MB sample, 2 threads): %.1f s\n' \
  "$(echo "$bytes / 1000000" | bc -l)" "$vocab" "$train_s"
