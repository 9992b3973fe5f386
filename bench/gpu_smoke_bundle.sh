# Sourced by the GPU check's CPU smoke tests (gpu_nccl_check_smoke.sh, gpu_engine_check_smoke.sh):
# a bundle as bench/gpu_bundle.sh lays it out, holding only parity-train and a synthetic corpus.
#   cpu_smoke_bundle PARITY_TRAIN DIR VERSES   → DIR/bundle/{bin/parity-train,data/kjv.txt}, DIR/out
cpu_smoke_bundle() {
  local train="$1" dir="$2" verses="$3"
  mkdir -p "$dir/bundle/bin" "$dir/bundle/data" "$dir/out"
  ln -s "$(realpath "$train")" "$dir/bundle/bin/parity-train"
  # Repetitive text of its own (data/ is git-ignored): ~70 bytes a verse.
  python3 -c 'import sys
sys.stdout.write("".join(f"Verse {i}: In the beginning God created the heaven and the earth. "
                         for i in range(int(sys.argv[1]))))' "$verses" >"$dir/bundle/data/kjv.txt"
}
