"""ParityError: a failed call's gRPC status code, message and field violations.

The scheduler never puts an error in a successful reply: every failure is a gRPC status, and an
INVALID_ARGUMENT carries a google.rpc.BadRequest in the status details (the
`grpc-status-details-bin` trailer) with one violation per bad field, e.g.
`grid.moe[0].top_k: 9 exceeds num_experts 8`.
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

    def __init__(self, code, message, violations=(), details=()):
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.details = list(details)
        lines = [f"{code.name}: {message}"] + [f"  {v}" for v in self.violations]
        super().__init__("\n".join(lines))


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


def from_rpc_error(error):
    """The ParityError of a grpc.RpcError (a failed unary call or stream)."""
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
    return ParityError(code or grpc.StatusCode.UNKNOWN, message or "", violations, details)
