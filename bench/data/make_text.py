#!/usr/bin/env python3
"""Synthetic English-like text for the preparation benchmark: Zipf-distributed pseudo-words in
sentences and paragraphs, written as files of about 16 MB under OUT_DIR, SIZE_MB in all. Fixed
seed: the same bytes on every machine."""
import os
import random
import sys


def main() -> None:
    out_dir, size_mb = sys.argv[1], float(sys.argv[2])
    rng = random.Random(1)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12.7, 9.1, 8.2, 7.5, 7.0, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0,
               1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1]
    words = ["".join(rng.choices(letters, weights, k=rng.randint(1, 10))) for _ in range(20000)]
    zipf = [1.0 / (rank + 1) for rank in range(len(words))]
    cumulative, acc = [], 0.0
    for w in zipf:  # cumulative weights once: random.choices would redo them every call
        acc += w
        cumulative.append(acc)
    os.makedirs(out_dir, exist_ok=True)
    total, target, part = 0, int(size_mb * 1e6), 0
    while total < target:
        paragraphs = []
        size = 0
        while size < 16_000_000 and total + size < target:
            sentences = []
            for _ in range(rng.randint(2, 8)):
                sentence = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(6, 24)))
                sentences.append(sentence[0].upper() + sentence[1:] + ".")
            paragraph = " ".join(sentences) + "\n\n"
            paragraphs.append(paragraph)
            size += len(paragraph)
        with open(os.path.join(out_dir, f"part-{part:04d}.txt"), "w") as f:
            f.write("".join(paragraphs))
        total += size
        part += 1


if __name__ == "__main__":
    main()
