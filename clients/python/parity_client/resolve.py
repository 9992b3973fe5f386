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
