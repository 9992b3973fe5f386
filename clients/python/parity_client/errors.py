"""ParityError: a failed call's gRPC status code, message and field violations.

The scheduler never puts an error in a successful reply: every failure is a gRPC status, and an
INVALID_ARGUMENT carries a google.rpc.BadRequest in the status details (the
`grpc-status-details-bin` trailer) with one violation per bad field, e.g.
`grid.moe[0].top_k: 9 exceeds num_experts 8`.

The client adds a remedy where it knows one (ParityError.remedy, also the exception's last line)
and raises a subclass a notebook can catch by cause: ParityUnavailable (the scheduler cannot be
reached), ParityUnauthenticated (no or a bad token), ParityPermissionDenied (the token's role may
not make the call; the message names the role needed), ParityNotFound, and ParityAmbiguous (a
sweep name or short id that matches several sweeps).
"""

from dataclasses import dataclass

import grpc


@dataclass(frozen=True)
class FieldViolation:
    """One bad field: its path in the request (e.g. "spec.grid.moe[0].top_k") and the reason."""

    field: str
    description: str

    def __str__(self):
        return f"{self.field}: {self.description}"


class ParityError(Exception):
    """A failed Parity call.

    code: a grpc.StatusCode (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE, ...);
    message: the status message; violations: list of FieldViolation (empty unless the request
    was invalid); details: every google.rpc detail message of the status, unpacked.
    """

    def __init__(self, code, message, violations=(), details=(), remedy=""):
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.details = list(details)
        self.remedy = remedy
        # The scheduler's message already lists its violations, one "  field: reason" a line
        # (core/field_violation.cc); only those it does not are added, so each reads once.
        listed = set(message.splitlines())
        lines = [f"{code.name}: {message}"] + [f"  {v}" for v in self.violations
                                               if f"  {v}" not in listed]
        if remedy:
            lines.append(remedy)
        super().__init__("\n".join(lines))


class ParityUnavailable(ParityError):
    """The scheduler could not be reached (or is shutting down); the message says how to start
    it or point the client elsewhere."""


class ParityUnauthenticated(ParityError):
    """No bearer token, or one the scheduler does not accept; the message says where a token
    comes from."""


class ParityPermissionDenied(ParityError):
    """The token's role may not make this call; the message names the role needed."""


class ParityNotFound(ParityError):
    """No such sweep or run (or none the caller may see)."""


class ParityAmbiguous(ParityError):
    """A sweep name or short id that matches more than one sweep; the message lists them."""


_CLASSES = {
    grpc.StatusCode.UNAVAILABLE: ParityUnavailable,
    grpc.StatusCode.UNAUTHENTICATED: ParityUnauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: ParityPermissionDenied,
    grpc.StatusCode.NOT_FOUND: ParityNotFound,
}


def make_error(code, message, violations=(), details=(), remedy=""):
    """The ParityError subclass for `code` (ParityError itself for codes without one)."""
    return _CLASSES.get(code, ParityError)(code, message, violations, details, remedy)


# What each SweepService method needs, as server/api/access_control.cc grants it: the roles a
# PERMISSION_DENIED names. Reads: any role but worker; writes: researcher or admin.
_SUBMIT_METHODS = ("PlanSweep", "SubmitSweep", "CancelSweep", "DeleteSweep")
# The methods that name a sweep, and those that name a run: what a NOT_FOUND lists instead.
_SWEEP_METHODS = ("GetSweep", "CancelSweep", "DeleteSweep", "ListRuns", "WatchSweep",
                  "QueryResults", "AnalyzeSweep")
_RUN_METHODS = ("GetRun", "WatchRun")


def roles_needed(method):
    """The token roles that may call a SweepService `method` (text for a message)."""
    if method in _SUBMIT_METHODS:
        return "researcher or admin"
    return "viewer, researcher or admin"


def _is_connect_failure(message):
    """True when an UNAVAILABLE came from the channel (nothing listening, a name that does not
    resolve) rather than from the scheduler (e.g. its database is down)."""
    text = message.lower()
    return any(s in text for s in ("failed to connect", "connection refused", "connect failed",
                                   "dns resolution", "name resolution", "socket closed",
                                   "no address", "connection reset"))


def explain(code, message, address="", method="", had_token=True):
    """(message, remedy) of a failed call, in the client's words where gRPC's or the server's
    would mislead a notebook user (raw channel text, CLI flags); remedy "" when none is known."""
    if code == grpc.StatusCode.UNAVAILABLE and _is_connect_failure(message):
        return (f"the scheduler at {address} is unreachable ({message})",
                "start it (deploy/local/up.sh) or set PARITY_SCHEDULER (or "
                "connect(address=...)) to where it runs")
    if code == grpc.StatusCode.UNAUTHENTICATED and not had_token:
        return ("no token: this client sent none and the scheduler requires one",
                "set PARITY_TOKEN_FILE to a file holding one (the local stack writes "
                "<dir>/admin.token; `parity token create` makes more) or PARITY_TOKEN, or pass "
                "connect(token_file=...) or connect(token=...)")
    return message, remedy_for(code, message, method)


def remedy_for(code, message, method=""):
    """The remedy sentence for a failed call, or "" when the status says enough."""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return ("the scheduler refused the token: ask its admin for a new one "
                "(`parity token create`) and pass it with connect(token_file=...)")
    if code == grpc.StatusCode.PERMISSION_DENIED and method:
        return (f"{method} needs a token of role {roles_needed(method)}; ask the scheduler's "
                "admin for one (`parity token create --role researcher`)")
    if code == grpc.StatusCode.NOT_FOUND and method in _RUN_METHODS:
        return "list a sweep's runs with client.runs(sweep) or client.results_frame(sweep)"
    if code == grpc.StatusCode.NOT_FOUND and method in _SWEEP_METHODS:
        return "list them with client.list_sweeps() or client.sweeps_frame()"
    if code == grpc.StatusCode.FAILED_PRECONDITION and method == "DeleteSweep":
        return ("only an ended sweep can be deleted: cancel it first (client.cancel(sweep)) "
                "and wait for its runs to stop (client.wait(sweep))")
    return ""


_DETAIL_TYPES = None


def _detail_types():
    global _DETAIL_TYPES
    if _DETAIL_TYPES is None:
        from google.rpc import error_details_pb2

        names = ("BadRequest", "ResourceInfo", "RetryInfo", "ErrorInfo", "PreconditionFailure",
                 "QuotaFailure")
        _DETAIL_TYPES = {
            cls.DESCRIPTOR.full_name: cls
            for cls in (getattr(error_details_pb2, n) for n in names
                        if hasattr(error_details_pb2, n))
        }
    return _DETAIL_TYPES


def from_rpc_error(error, address="", method="", had_token=True):
    """The ParityError (subclass) of a grpc.RpcError (a failed unary call or stream), with a
    remedy when one is known: address is the scheduler's, method the SweepService method
    called, had_token whether the call carried a token."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    details, violations = [], []
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        from google.rpc import status_pb2

        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # a malformed trailer must not hide the status itself
            break
        for any_detail in status.details:
            cls = _detail_types().get(any_detail.TypeName())
            if cls is None:
                details.append(any_detail)
                continue
            detail = cls()
            any_detail.Unpack(detail)
            details.append(detail)
            if cls.DESCRIPTOR.name == "BadRequest":
                violations += [FieldViolation(v.field, v.description)
                               for v in detail.field_violations]
    code = code or grpc.StatusCode.UNKNOWN
    message, remedy = explain(code, message or "", address, method, had_token)
    return make_error(code, message, violations, details, remedy)
