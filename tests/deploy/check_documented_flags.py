#!/usr/bin/env python3
"""Every command shown in README.md, docs/ and the room READMEs uses only flags its program has.

A researcher copies commands from the docs; a flag that does not exist (say `parity-worker
--log-format` before the worker had one) fails with "unknown option" at the worst moment. This
check finds every command line in fenced code blocks and inline code spans that starts with one of
Parity's programs, runs that program (and subcommand) with --help, and checks each --flag shown is
in the help text. The Slurm scripts (deploy/slurm/*.sbatch) start the worker through a variable
(`"$worker_bin"`, `"${PARITY_WORKER_BIN:-parity-worker}"`): each of their command lines that
starts parity-worker so is checked the same way. Exits 1 listing every unknown flag with its file
and line, and 2 when a program is missing (build first).

    check_documented_flags.py --root REPO --build BUILD_DIR
"""

import argparse
import pathlib
import re
import shlex
import subprocess
import sys

# The programs and where the build puts them; a doc may name them bare or by their build path.
PROGRAMS = {
    "parity": "cli/parity",
    "parity-worker": "worker/parity-worker",
    "parity-scheduler": "server/parity-scheduler",
    "parity-train": "kernels/parity-train",
}
# Scripts in the tree that take --help (their usage text lists their flags).
SCRIPTS = ("deploy/local/up.sh", "deploy/local/down.sh", "deploy/local/status.sh",
           "deploy/setup.sh")

FENCE = re.compile(r"^\s*```")
INLINE = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"^--[a-z][a-z0-9-]*")


def doc_files(root):
    files = [root / "README.md"]
    files += sorted((root / "docs").rglob("*.md"))
    for readme in sorted(root.glob("*/README.md")) + sorted(root.glob("*/*/README.md")):
        if "build" not in readme.parts and "node_modules" not in readme.parts:
            files.append(readme)
    return [f for f in files if f.is_file()]


def snippets(path):
    """(line number, text) of every code line and inline code span of a markdown file."""
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            yield number, line
        else:
            for match in INLINE.finditer(line):
                yield number, match.group(1)


def split_commands(text):
    """Shell words of each simple command in a line ('a && b | c' is three)."""
    text = text.split(" #", 1)[0]
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError:
        return []
    commands, current = [], []
    for word in words:
        if word in ("&&", "||", "|", ";", "&"):
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    return [c for c in commands if c]


def program_of(word, root, build):
    """The executable a command's first word names, or None if it is not one of ours."""
    name = word.rsplit("/", 1)[-1]
    if name in PROGRAMS and (word == name or word.endswith(PROGRAMS[name])):
        return build / PROGRAMS[name]
    for script in SCRIPTS:
        if word == script or word.endswith("/" + script):
            return root / script
    return None


def script_lines(path):
    """(line number, logical line) of a shell script, backslash continuations joined."""
    pending, start = "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def worker_variables(path):
    """The script's variables that hold the worker binary (worker_bin="${X:-parity-worker}")."""
    names = set()
    for _, line in script_lines(path):
        match = re.match(r"^\s*(?:local\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if match and "parity-worker" in match.group(2):
            names.add(match.group(1))
    return names


def sbatch_worker_commands(root):
    """(path, line number, words) of every worker command line in deploy/slurm/*.sbatch."""
    for path in sorted((root / "deploy" / "slurm").glob("*.sbatch")):
        variables = worker_variables(path)
        for number, line in script_lines(path):
            if line.lstrip().startswith("#"):
                continue
            for words in split_commands(line):
                first = words[0]
                if re.fullmatch(r"[A-Za-z_]\w*=.*", first):
                    continue  # an assignment (worker_bin=...), not a command
                names = {m.group(1) for m in re.finditer(r"\$\{?([A-Za-z_]\w*)", first)}
                if re.search(r"(^|[/:-])parity-worker\}?$", first) or names & variables:
                    yield path, number, ["parity-worker"] + words[1:]


class HelpCache:
    def __init__(self):
        self.cache = {}

    def help(self, argv):
        key = tuple(str(a) for a in argv)
        if key not in self.cache:
            try:
                done = subprocess.run(list(key) + ["--help"], capture_output=True, text=True,
                                      timeout=30)
                ok = done.returncode == 0
                self.cache[key] = (ok, done.stdout + done.stderr)
            except (OSError, subprocess.TimeoutExpired) as err:
                self.cache[key] = (False, str(err))
        return self.cache[key]


def command_help(exe, words, helps):
    """The help texts of the program and of each subcommand the words name, joined: a flag of
    the program itself may follow a subcommand (CLI11's fallthrough), so either level counts."""
    argv = [exe]
    ok, text = helps.help(argv)
    if not ok:
        return None
    texts = [text]
    for word in words:
        if word.startswith("-") or not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break
        if not re.search(r"^\s+" + re.escape(word) + r"\b", text, re.M):
            break  # not one of this level's subcommands: a positional argument
        sub_ok, sub_text = helps.help(argv + [word])
        if not sub_ok or sub_text == text:
            break
        argv.append(word)
        text = sub_text
        texts.append(text)
    return "\n".join(texts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=pathlib.Path)
    parser.add_argument("--build", required=True, type=pathlib.Path)
    args = parser.parse_args()
    root, build = args.root.resolve(), args.build.resolve()
    for rel in PROGRAMS.values():
        if not (build / rel).exists():
            print(f"{build / rel} is missing: build first", file=sys.stderr)
            return 2

    helps = HelpCache()
    unknown, checked = [], 0
    for path in doc_files(root):
        for number, text in snippets(path):
            for words in split_commands(text):
                # `sudo`, `env X=1`, `PARITY_X=1 cmd`: look past them.
                while words and (words[0] in ("sudo", "env", "exec") or
                                 re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0])):
                    words = words[1:]
                if not words:
                    continue
                exe = program_of(words[0], root, build)
                if exe is None:
                    continue
                help_text = command_help(exe, words[1:], helps)
                if help_text is None:
                    unknown.append(f"{path.relative_to(root)}:{number}: `{words[0]} --help` fails")
                    continue
                for word in words[1:]:
                    flag = FLAG.match(word)
                    if not flag:
                        continue
                    checked += 1
                    if not re.search(re.escape(flag.group(0)) + r"(?![a-z0-9-])", help_text):
                        unknown.append(f"{path.relative_to(root)}:{number}: {flag.group(0)} is "
                                       f"not a flag of `{' '.join([words[0]] + [w for w in words[1:3] if not w.startswith('-')])}`"
                                       f" (its --help does not list it)")
    for path, number, words in sbatch_worker_commands(root):
        help_text = command_help(build / PROGRAMS["parity-worker"], [], helps)
        for word in words[1:]:
            flag = FLAG.match(word)
            if not flag:
                continue
            checked += 1
            if help_text is None or not re.search(re.escape(flag.group(0)) + r"(?![a-z0-9-])", help_text):
                unknown.append(f"{path.relative_to(root)}:{number}: {flag.group(0)} is not a flag "
                               "of `parity-worker` (its --help does not list it)")
    if unknown:
        print(f"{len(unknown)} documented flag(s) that the programs do not have "
              "(fix the doc, or add the flag):")
        for line in unknown:
            print("  " + line)
        return 1
    print(f"documented flags: {checked} checked, all exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
