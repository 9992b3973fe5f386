#!/usr/bin/env python3
"""Assembles the offline multi-domain corpus (README.md) as JSON Lines, one document a line:

  prose   the King James Bible (data/kjv.txt, from Debian's bible-kjv), one chapter a document
  manual  manual pages under /usr/share/man/man{1,5,8}, roff with its markup stripped, one page a
          document
  code    C and C++ headers under /usr/include, one file a document

Every 20th document of each domain (by its sorted position) goes to OUT/eval/<domain>.jsonl, the
rest to OUT/train/<domain>.jsonl. Deterministic: the same machine contents give the same bytes.

usage: assemble.py KJV_TXT OUT_DIR [--manual-pages N] [--code-bytes B]
"""
import argparse
import gzip
import json
import os
import re


def prose(kjv_path):
    with open(kjv_path, encoding="utf-8") as f:
        parts = f.read().strip("\n").split("\n\n")
    # The text alternates a chapter heading ("Genesis 1") and the chapter's verses.
    for i in range(0, len(parts) - 1, 2):
        yield parts[i] + "\n\n" + parts[i + 1] + "\n"


ROFF_COMMENT = re.compile(r'^\.\s*\\"|^\'\\"')
ROFF_REQUEST = re.compile(r"^[.'][A-Za-z]{1,3}\s?")
ROFF_ESCAPE = re.compile(r"\\f[BIRPC]|\\f\(..|\\\(..|\\&|\\s[-+]?\d")


def manual(limit):
    pages = []
    for section in ("man1", "man5", "man8"):
        directory = os.path.join("/usr/share/man", section)
        if os.path.isdir(directory):
            pages += sorted(os.path.join(directory, p) for p in os.listdir(directory)
                            if p.endswith(".gz"))
    for path in pages[:limit]:
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        text = []
        for line in lines:
            if ROFF_COMMENT.match(line):
                continue
            line = ROFF_REQUEST.sub("", line)
            line = ROFF_ESCAPE.sub("", line).replace("\\-", "-").replace("\\e", "\\")
            text.append(line)
        body = "\n".join(text).strip()
        if len(body) > 200 and not body.startswith("so "):  # skip ".so" redirections
            yield body + "\n"


def code(budget):
    taken = 0
    for root, dirs, files in os.walk("/usr/include"):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".h", ".hpp")):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            if not text.strip() or len(text) > 200_000:
                continue
            yield text
            taken += len(text)
            if taken >= budget:
                return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kjv")
    parser.add_argument("out")
    parser.add_argument("--manual-pages", type=int, default=600)
    parser.add_argument("--code-bytes", type=int, default=3_000_000)
    args = parser.parse_args()
    sources = {
        "prose": prose(args.kjv),
        "manual": manual(args.manual_pages),
        "code": code(args.code_bytes),
    }
    for split in ("train", "eval"):
        os.makedirs(os.path.join(args.out, split), exist_ok=True)
    for domain, documents in sources.items():
        counts = {"train": 0, "eval": 0}
        with open(os.path.join(args.out, "train", domain + ".jsonl"), "w") as train, \
                open(os.path.join(args.out, "eval", domain + ".jsonl"), "w") as held:
            for i, text in enumerate(documents):
                split = "eval" if i % 20 == 19 else "train"
                (held if split == "eval" else train).write(
                    json.dumps({"text": text, "domain": domain}, ensure_ascii=False) + "\n")
                counts[split] += 1
        print(f"{domain}: {counts['train']} training and {counts['eval']} evaluation documents")


if __name__ == "__main__":
    main()
