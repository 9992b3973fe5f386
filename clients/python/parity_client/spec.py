"""Sweep spec files (YAML or JSON) to a parity.v1.SweepSpec, exactly as `parity submit` reads them.

This mirrors core/spec_loader.cc so a spec means the same thing from Python as from the CLI:
every scalar gets its field's type (`2.86e21` → double, `68B` → 68,000,000,000), enums take
their friendly names (`1dense+SE`, `strict`, `step_law`), `-` in keys reads as `_`, and unknown
keys are errors with their path. Malformed input raises ParityError(INVALID_ARGUMENT) with one
field violation per problem; the scheduler validates the rest (shapes, budgets, grid).
"""

import json
import math
import os

import grpc
from google.protobuf import descriptor, json_format

from parity.v1 import sweep_pb2

from .errors import FieldViolation, ParityError

_FD = descriptor.FieldDescriptor
_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
# Friendly spellings that are not a suffix of the proto name (core/spec_loader.cc kAliases).
_ALIASES = {
    ("MoeLayout", "1dense+se"): "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT",
    ("MoeLayout", "1dense_se"): "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT",
    ("MoeLayout", "one_dense_se"): "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT",
    ("AttentionKind", "mha"): "ATTENTION_KIND_MULTI_HEAD",
    ("AttentionKind", "gqa"): "ATTENTION_KIND_GROUPED_QUERY",
    ("PositionEncoding", "rope"): "POSITION_ENCODING_ROTARY",
    ("HyperparameterRule", "steplaw"): "HYPERPARAMETER_RULE_STEP_LAW",
    ("BalanceMethod", "aux"): "BALANCE_METHOD_AUX_LOSS",
}
_YAML_NULLS = ("", "~", "null", "Null", "NULL")


def load_spec(path):
    """Reads a spec file: JSON for .json (or text starting with '{'), YAML otherwise."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise ParityError(grpc.StatusCode.NOT_FOUND, f"cannot read spec file {path}: {e}") from e
    ext = os.path.splitext(str(path))[1].lower()
    as_json = ext == ".json" or (ext not in (".yaml", ".yml") and text.lstrip().startswith("{"))
    return parse_spec(text, "json" if as_json else "yaml")


def parse_spec(text, fmt="yaml"):
    """Parses spec text ("yaml" or "json") into a SweepSpec."""
    if fmt == "json":
        try:
            tree = json.loads(text)
        except ValueError as e:
            _fail("spec is not valid JSON", [FieldViolation("spec", f"JSON syntax error: {e}")])
    else:
        import yaml  # python3-yaml; only YAML specs need it

        try:
            # BaseLoader keeps every scalar as text, as yaml-cpp does: the field decides its type.
            tree = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as e:
            _fail("spec is not valid YAML", [FieldViolation("spec", f"YAML syntax error: {e}")])
    normalizer = _Normalizer(yaml_nulls=fmt != "json")
    normalized = normalizer.message(tree, sweep_pb2.SweepSpec.DESCRIPTOR, "")
    if normalizer.violations:
        _fail(f"spec has {len(normalizer.violations)} malformed field(s)", normalizer.violations)
    spec = sweep_pb2.SweepSpec()
    try:
        json_format.ParseDict(normalized, spec)
    except json_format.ParseError as e:  # not expected after normalisation; reported whole
        _fail("spec does not match the schema", [FieldViolation("spec", str(e))])
    return spec


_BYTE_UNITS = (("KiB", 2.0**10), ("MiB", 2.0**20), ("GiB", 2.0**30), ("TiB", 2.0**40),
               ("kB", 1e3), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12), ("PB", 1e15))


def parse_quantity(raw):
    """A number with an optional k/M/B/G/T/P suffix ("68B", "2.86e21", "1_000"); None if not."""
    text = str(raw).strip().replace("_", "")
    scale = 1.0
    # Byte sizes as core/spec_loader.cc reads them: "141GB" decimal, "80GiB" binary; a bare "B"
    # stays billions ("68B").
    for unit, size in _BYTE_UNITS:
        if text.endswith(unit) and len(text) > len(unit):
            value = parse_quantity(text[: -len(unit)])
            return None if value is None else value * size
    if text and text[-1] in _SCALE:
        scale = _SCALE[text[-1]]
        text = text[:-1]
    try:
        value = float(text)
    except ValueError:
        return None
    return value * scale if math.isfinite(value) else None


def _fail(message, violations):
    raise ParityError(grpc.StatusCode.INVALID_ARGUMENT, message, violations)


def _canonical(text):
    return str(text).strip().lower().replace("-", "_").replace(" ", "_")


def _shown(value):
    return value if isinstance(value, str) else json.dumps(value)


class _Normalizer:
    """Walks a parsed tree against a message descriptor, producing proto JSON."""

    def __init__(self, yaml_nulls):
        self.violations = []
        self._yaml_nulls = yaml_nulls

    def _add(self, field, description):
        self.violations.append(FieldViolation(field, description))

    def _is_null(self, value):
        return value is None or (
            self._yaml_nulls and isinstance(value, str) and value in _YAML_NULLS)

    def message(self, value, desc, path):
        if not isinstance(value, dict):
            self._add(path or "spec", f"expected a mapping for {desc.name}, got '{_shown(value)}'")
            return None
        out = {}
        for key, item in value.items():
            key = str(key)
            field_path = f"{path}.{key}" if path else key
            field = self._find_field(desc, key)
            if field is None:
                self._add(field_path, f"unknown field of {desc.name}")
                continue
            if self._is_null(item):
                continue
            ok, converted = True, None
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                ok, converted = self._map(item, field, field_path)
            elif field.label == _FD.LABEL_REPEATED:
                if not isinstance(item, list):
                    self._add(field_path, f"expected a list, got '{_shown(item)}'")
                    continue
                converted = []
                for i, element in enumerate(item):
                    good, c = self._single(element, field, f"{field_path}[{i}]")
                    if good:
                        converted.append(c)
            else:
                ok, converted = self._single(item, field, field_path)
            if ok:
                out[field.name] = converted
        return out

    @staticmethod
    def _find_field(desc, key):
        for name in (key, key.replace("-", "_")):
            if name in desc.fields_by_name:
                return desc.fields_by_name[name]
        for field in desc.fields:
            if field.json_name == key:
                return field
        return None

    def _map(self, value, field, path):
        if not isinstance(value, dict):
            self._add(path, f"expected a mapping, got '{_shown(value)}'")
            return False, None
        value_field = field.message_type.fields_by_name["value"]
        out = {}
        for key, item in value.items():
            ok, converted = self._single(item, value_field, f"{path}.{key}")
            if ok:
                out[str(key)] = converted
        return True, out

    def _single(self, value, field, path):
        t = field.cpp_type
        if t == _FD.CPPTYPE_MESSAGE:
            before = len(self.violations)
            out = self.message(value, field.message_type, path)
            return len(self.violations) == before, out
        if t == _FD.CPPTYPE_STRING:
            if isinstance(value, (dict, list)):
                self._add(path, "expected text, got a structure")
                return False, None
            return True, _shown(value)
        if t == _FD.CPPTYPE_BOOL:
            return self._bool(value, path)
        if t == _FD.CPPTYPE_ENUM:
            return self._enum(value, field.enum_type, path)
        if t in (_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT):
            number = self._number(value)
            if number is None:
                self._add(path, f"expected a number, got '{_shown(value)}'")
                return False, None
            return True, number
        return self._integer(value, field, path)

    @staticmethod
    def _number(value):
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return parse_quantity(value)
        return None

    def _integer(self, value, field, path):
        signed = field.cpp_type in (_FD.CPPTYPE_INT32, _FD.CPPTYPE_INT64)
        wide = field.cpp_type in (_FD.CPPTYPE_INT64, _FD.CPPTYPE_UINT64)
        hi = (2**63 - 1 if signed else 2**64 - 1) if wide else (2**31 - 1 if signed else 2**32 - 1)
        lo = -hi - 1 if signed else 0
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return True, value
        if isinstance(value, str):
            text = value.strip().replace("_", "")
            if text.lstrip("-").isdigit() and lo <= int(text) <= hi:  # exact above 2^53
                return True, int(text)
        number = self._number(value)
        if number is None:
            self._add(path, f"expected an integer, got '{_shown(value)}'")
            return False, None
        if number != math.floor(number) or not lo <= number <= hi:
            self._add(path, f"expected an integer in [{lo}, {hi}], got '{_shown(value)}'")
            return False, None
        return True, int(number)

    def _bool(self, value, path):
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str):
            t = value.strip().lower()
            if t in ("true", "yes", "on"):
                return True, True
            if t in ("false", "no", "off"):
                return True, False
        self._add(path, f"expected true or false, got '{_shown(value)}'")
        return False, None

    def _enum(self, value, enum, path):
        found = None
        if isinstance(value, int) and not isinstance(value, bool):
            found = enum.values_by_number.get(value)
        elif isinstance(value, str):
            found = _enum_value(enum, value)
        if found is None:
            accepted = ", ".join(v.name for v in enum.values[1:])
            self._add(path, f"'{_shown(value)}' is not a {enum.name} (one of {accepted})")
            return False, None
        return True, found.name


def _enum_value(enum, text):
    want = _canonical(text)
    if not want:
        return None
    first = _canonical(enum.values[0].name)
    prefix = first[: first.rfind("_unspecified") + 1]
    for v in enum.values:
        full = _canonical(v.name)
        if want == full or (full.startswith(prefix) and want == full[len(prefix):]):
            return v
    alias = _ALIASES.get((enum.name, want))
    return enum.values_by_name[alias] if alias else None
