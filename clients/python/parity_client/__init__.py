"""parity_client: submit, follow and read Parity sweeps from Python (see clients/python/README.md).

    import parity_client
    with parity_client.connect("127.0.0.1:50051") as client:
        sweep = client.submit("examples/micro.yaml")
        client.wait(sweep.name)                      # a name, a short id or the UUID
        for row in client.results(sweep.name):
            print(row.name, row.activation_rate, row.final_val_bpc)
"""

from .analysis import (Analysis, BaselineDelta, DenseFrontier, DenseLaw, GridPoint,
                       GroupOptimum, Leverage, RunLeverage)
from .client import DEFAULT_ADDRESS, Client, connect
from .errors import (FieldViolation, ParityAmbiguous, ParityError, ParityNotFound,
                     ParityPermissionDenied, ParityUnauthenticated, ParityUnavailable)
from .plan import PlannedRun, PlanResult, PlanWarning
from .resolve import resolve_sweep
from .rows import (GangInfo, GangRank, MetricPoint, ResultRow, RunInfo, SweepInfo, WorkerInfo,
                   to_frame)
from .spec import load_spec, parse_spec, parse_quantity

__all__ = [
    "DEFAULT_ADDRESS", "Client", "connect", "FieldViolation", "ParityError", "MetricPoint",
    "ResultRow", "RunInfo", "SweepInfo", "to_frame", "load_spec", "parse_spec", "parse_quantity",
    "Analysis", "BaselineDelta", "DenseFrontier", "DenseLaw", "GridPoint", "GroupOptimum",
    "Leverage", "RunLeverage", "ParityAmbiguous", "ParityNotFound", "ParityPermissionDenied",
    "ParityUnauthenticated", "ParityUnavailable", "PlannedRun", "PlanResult", "PlanWarning",
    "resolve_sweep", "WorkerInfo", "GangInfo", "GangRank",
]
