#!/usr/bin/env bash
# The offline multi-domain example (README.md): prose (the KJV), technical English (manual pages)
# and code (C/C++ headers), all from Debian packages already on the machine, assembled into JSON
# Lines, a SentencePiece BPE tokenizer trained on a sample, and a prepared dataset with the
# evaluation sets prose, manual and code beside the held-out "validation".
#
#   examples/multidomain/prepare.sh [CORPUS_DIR=data] [bpe|bytes]
#
# The dataset lands in CORPUS_DIR/multidomain/, where the local stack's workers (--corpus-dir
# data) find it as `data.corpus: multidomain` (examples/multidomain/sweep.yaml); the text and the
# tokenizer it was made from stay in WORK (default build/multidomain-work). Run from the
# repository root after the build (build/cli/parity). About 10 MB of text; well under a minute on
# two idle cores.
set -euo pipefail
out=${1:-data}
work=${WORK:-build/multidomain-work}
tokenizer_mode=${2:-bpe}
parity=${PARITY:-build/cli/parity}
here=$(cd "$(dirname "$0")" && pwd)
threads=$(nproc)

if [[ ! -s data/kjv.txt ]]; then
  kernels/tools/make_corpus.sh data/kjv.txt  # needs Debian's bible-kjv (deploy/setup.sh)
fi
python3 "$here/assemble.py" data/kjv.txt "$work/text"

tokenizer=bytes
if [[ "$tokenizer_mode" != bytes ]]; then
  tokenizer="$work/tokenizer/multidomain-bpe-4k.model"
  "$parity" data tokenizer train "$work/text/train" --out "$tokenizer" --vocab-size 4096 \
    --model-type bpe --sample-bytes 4000000 --threads "$threads" --force
fi
"$parity" data prepare "$work/text/train" --out "$out" --name multidomain --force \
  --tokenizer "$tokenizer" --validation-fraction 0.02 --threads "$threads" \
  --eval "prose=$work/text/eval/prose.jsonl" \
  --eval "manual=$work/text/eval/manual.jsonl" \
  --eval "code=$work/text/eval/code.jsonl"
echo "digest (pin it as data.dataset_digest): $("$parity" data digest "$out/multidomain")"
