"""Sweeps by UUID, short id or name: what a notebook types instead of a 36-character id.

    resolve_sweep("3f2a", sweeps)            # a unique id prefix, ≥ 4 hex characters
    resolve_sweep("kjv-moe-study", sweeps)   # a name, unique among the sweeps the caller sees
    resolve_sweep("3f2a9c1e-...", sweeps)    # a full UUID is taken as it is (no listing)

A text that matches several sweeps (a name submitted twice, a prefix too short) raises
ParityAmbiguous listing the candidates with their short ids; one that matches none raises
ParityNotFound. A text that is both a name and an id prefix is ambiguous only when the two
matches are different sweeps.
"""

import re

import grpc

from .errors import ParityAmbiguous, ParityError, ParityNotFound

MIN_PREFIX = 4  # hex characters: shorter prefixes match too much to be worth guessing
SHORT_ID = 8  # characters of an id shown in messages and frames (like git's short hashes)

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_PREFIX = re.compile(r"^[0-9a-fA-F-]+$")


def is_uuid(text):
    return bool(_UUID.match(text))


def sweep_key(sweep):
    """The text of a sweep argument: a SweepInfo (its id) or a str, stripped."""
    if hasattr(sweep, "sweep_id"):
        return sweep.sweep_id
    if not isinstance(sweep, str) or not sweep.strip():
        raise ParityError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"sweep {sweep!r}: expected a sweep's UUID, a short id (≥ {MIN_PREFIX} "
                          "hex characters) or its name",
                          remedy="list them with client.list_sweeps() or client.sweeps_frame()")
    return sweep.strip()


def _describe(s):
    return f"{s.sweep_id[:SHORT_ID]}  {s.name or '(unnamed)'}  {s.state}"


def resolve_sweep(text, sweeps):
    """The sweep id `text` names among `sweeps` (SweepInfo-like: .sweep_id, .name, .state)."""
    if is_uuid(text):
        return text.lower()
    matches = {}
    for s in sweeps:
        if s.name == text:
            matches[s.sweep_id] = s
    digits = text.lower()
    if len(digits.replace("-", "")) >= MIN_PREFIX and _PREFIX.match(digits):
        for s in sweeps:
            if s.sweep_id.lower().startswith(digits):
                matches[s.sweep_id] = s
    if len(matches) == 1:
        return next(iter(matches))
    if not matches:
        hint = (f" (an id prefix needs at least {MIN_PREFIX} hex characters)"
                if _PREFIX.match(digits) and len(digits) < MIN_PREFIX else "")
        raise ParityNotFound(grpc.StatusCode.NOT_FOUND,
                             f"no sweep named '{text}' or with an id starting '{text}' among the "
                             f"{len(sweeps)} sweeps this token sees{hint}",
                             remedy="list them with client.list_sweeps() or client.sweeps_frame()")
    listed = "\n".join("  " + _describe(s) for s in matches.values())
    raise ParityAmbiguous(grpc.StatusCode.INVALID_ARGUMENT,
                          f"'{text}' matches {len(matches)} sweeps:\n{listed}",
                          remedy="name one by its short id (the first column) or its full UUID")


def _named_by(text, name, ident):
    digits = text.lower()
    return name == text or (len(digits.replace("-", "")) >= MIN_PREFIX and bool(_PREFIX.match(digits))
                            and ident.lower().startswith(digits))


def resolve_run(text, runs):
    """The run id `text` names among `runs` (each .run_id, .name, .sweep_id, .sweep_name,
    .state): a full UUID as it is, "SWEEP/RUN" (a sweep's name or id prefix, then a run's name or
    id prefix in it), a run's name, or a unique run id prefix of ≥ 4 hex characters — the rule of
    `parity watch` (cli/sweep_reference.cc RunsNamedBy)."""
    if is_uuid(text):
        return text.lower()
    sweep, _, run = text.rpartition("/") if "/" in text else ("", "", text)
    matches = [r for r in runs if _named_by(run, r.name, r.run_id)
               and (not sweep or _named_by(sweep, r.sweep_name, r.sweep_id))]
    if len(matches) == 1:
        return matches[0].run_id
    if not matches:
        raise ParityNotFound(grpc.StatusCode.NOT_FOUND,
                             f"no run named '{text}' or with an id starting '{text}' among the "
                             f"{len(runs)} runs this token sees",
                             remedy="name it as SWEEP/RUN (client.runs(sweep) lists a sweep's "
                                    f"runs) or by ≥ {MIN_PREFIX} hex characters of its id")
    listed = "\n".join(f"  {r.run_id[:SHORT_ID]}  {r.sweep_name}/{r.name}  {r.state}"
                       for r in matches)
    raise ParityAmbiguous(grpc.StatusCode.INVALID_ARGUMENT,
                          f"'{text}' matches {len(matches)} runs:\n{listed}",
                          remedy="name one by its short id (the first column) or as SWEEP/RUN")
