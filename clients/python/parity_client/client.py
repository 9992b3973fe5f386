"""Client: the SweepService calls a researcher needs, as plain Python.

    with parity_client.connect() as client:            # address or $PARITY_SCHEDULER; token
                                                       # $PARITY_TOKEN or $PARITY_TOKEN_FILE
        plan = client.plan("examples/micro.yaml")      # PlanResult: .frame, .warnings, nothing queued
        sweep = client.submit("examples/micro.yaml")   # plan on the scheduler, queue the runs
        client.wait("micro")                           # by name, short id or UUID
        df = client.results_frame("micro")             # pandas: NaN for missing, grid.* columns
        best = client.best_run("micro")                # the succeeded run with the lowest BPC
        analysis = client.analyze("micro")             # frontier and fixed-N EL, optima, ΔBPC
        client.delete("micro")                         # an ended sweep, its runs and results

Every method that takes a sweep takes its UUID, a unique id prefix (≥ 4 hex characters), its
name (unique among the sweeps the token sees) or a SweepInfo. Every call raises ParityError on
failure (code, message, field violations, remedy), as a subclass by cause (ParityUnavailable,
ParityUnauthenticated, ParityPermissionDenied, ParityNotFound, ParityAmbiguous). Thread-safety:
a Client can be shared between threads (gRPC channels are); close() it once.
"""

import collections
import math
import os
import sys
import time

import grpc

from parity.v1 import run_pb2, sweep_pb2, sweep_service_pb2 as api, sweep_service_pb2_grpc

from . import export
from .analysis import Analysis
from .errors import ParityError, ParityUnauthenticated, from_rpc_error
from .loopback import resolves_only_to_loopback
from .plan import PlanResult
from .resolve import is_uuid, resolve_run, resolve_sweep, sweep_key
from .rows import (GangInfo, MetricPoint, ResultRow, RunInfo, SweepInfo, WorkerInfo, dict_frame,
                   to_frame)
from .spec import load_spec
from .targets import CHANNEL_OPTIONS, scheduler_target

DEFAULT_ADDRESS = "127.0.0.1:50051"


def connect(address=None, timeout=30.0, token=None, tls_ca=None, tls_client_cert=None,
            tls_client_key=None, insecure_plaintext=None, token_file=None):
    """A Client of the scheduler at `address`, else $PARITY_SCHEDULER, else 127.0.0.1:50051."""
    return Client(address, timeout, token, tls_ca, tls_client_cert, tls_client_key,
                  insecure_plaintext, token_file)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _token_from(token_file):
    """The token: token_file's first line, else $PARITY_TOKEN, else $PARITY_TOKEN_FILE's."""
    if not token_file and os.environ.get("PARITY_TOKEN"):
        return os.environ["PARITY_TOKEN"]
    path = token_file or os.environ.get("PARITY_TOKEN_FILE")
    if not path:
        return ""
    source = "token_file" if token_file else "PARITY_TOKEN_FILE"
    try:
        lines = _read(path).decode().splitlines()
    except OSError as e:
        raise ParityUnauthenticated(
            grpc.StatusCode.UNAUTHENTICATED, f"{source}={path}: {e.strerror}",
            remedy="point it at a file holding a token (the local stack writes "
                   "<dir>/admin.token; `parity token create` makes more)") from None
    if not lines or not lines[0].strip():
        raise ParityUnauthenticated(grpc.StatusCode.UNAUTHENTICATED,
                                    f"{source}={path}: the file is empty",
                                    remedy="its first line should be the token")
    return lines[0].strip()


def _env_flag(name):
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ParityError(grpc.StatusCode.INVALID_ARGUMENT,
                      f"{name}='{os.environ[name]}': expected 1/true/yes/on or 0/false/no/off")


def _check_plaintext_target(address):
    """Refuses, before any connection, to send a token in plaintext off this machine."""
    try:
        if resolves_only_to_loopback(address):
            return
        why = "it is not a loopback address"
    except ValueError as e:
        why = str(e)
    raise ParityError(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"refusing to send the bearer token in plaintext to '{address}' ({why}): anyone on the "
        "path could read it; connect over TLS with tls_ca=FILE (PARITY_TLS_CA), or pass "
        "insecure_plaintext=True (PARITY_INSECURE_PLAINTEXT=1) only when a TLS-terminating "
        "proxy or a private network carries the connection")


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call. An interceptor, not call
    credentials: gRPC sends those only over TLS, and the local stack is plaintext on loopback."""

    def __init__(self, token):
        self._header = ("authorization", "Bearer " + token)

    def _with_token(self, details):
        metadata = list(details.metadata or []) + [self._header]
        return _Details(details.method, details.timeout, metadata, details.credentials,
                        getattr(details, "wait_for_ready", None),
                        getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)


class _Details(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = \
            credentials, wait_for_ready, compression


class Client:
    def __init__(self, address=None, timeout=30.0, token=None, tls_ca=None, tls_client_cert=None,
                 tls_client_key=None, insecure_plaintext=None, token_file=None):
        """timeout: seconds for each unary call (waits and curves have their own).
        token: the bearer token, else token_file's first line, else $PARITY_TOKEN, else the
        first line of the file $PARITY_TOKEN_FILE.
        tls_ca: PEM CA of the scheduler's certificate (else $PARITY_TLS_CA): TLS when given;
        tls_client_cert/key (else $PARITY_TLS_CLIENT_CERT/KEY): a client certificate.
        insecure_plaintext (else $PARITY_INSECURE_PLAINTEXT): without TLS a token goes only to
        an address that resolves to loopback; True allows any (behind a TLS-terminating proxy).
        Raises ParityError(INVALID_ARGUMENT) when a token would go in plaintext off this
        machine, before connecting."""
        self.address = address or os.environ.get("PARITY_SCHEDULER") or DEFAULT_ADDRESS
        self.timeout = timeout
        if insecure_plaintext is None:
            insecure_plaintext = _env_flag("PARITY_INSECURE_PLAINTEXT")
        token = token or _token_from(token_file)
        self._has_token = bool(token)
        tls_ca = tls_ca or os.environ.get("PARITY_TLS_CA")
        # Several replicas: "a:p,b:p" or gRPC's own target syntax (targets.py).
        try:
            target, server_name = scheduler_target(self.address)
        except ValueError as e:
            raise ParityError(grpc.StatusCode.INVALID_ARGUMENT, str(e),
                              remedy="give host:port, host:port,host:port or "
                                     "dns:///name:port") from None
        if token and not tls_ca and not insecure_plaintext:
            _check_plaintext_target(target)
        tls_client_cert = tls_client_cert or os.environ.get("PARITY_TLS_CLIENT_CERT")
        tls_client_key = tls_client_key or os.environ.get("PARITY_TLS_CLIENT_KEY")
        if tls_ca:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca),
                private_key=_read(tls_client_key) if tls_client_key else None,
                certificate_chain=_read(tls_client_cert) if tls_client_cert else None)
            options = list(CHANNEL_OPTIONS)
            server_name = os.environ.get("PARITY_TLS_SERVER_NAME") or server_name
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            channel = grpc.secure_channel(target, credentials, options)
        else:
            channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._channel = grpc.intercept_channel(channel, _BearerToken(token)) if token else channel
        self._raw_channel = channel
        self._stub = sweep_service_pb2_grpc.SweepServiceStub(self._channel)

    def close(self):
        self._raw_channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout=None):
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            raise self._error(e, method) from None

    def _error(self, rpc_error, method):
        return from_rpc_error(rpc_error, self.address, method, self._has_token)

    def resolve(self, sweep):
        """The UUID of `sweep`: a UUID (taken as it is), a unique id prefix of ≥ 4 hex
        characters, a name unique among the sweeps this token sees, or a SweepInfo. Raises
        ParityNotFound, or ParityAmbiguous listing the candidates."""
        text = sweep_key(sweep)
        if is_uuid(text):
            return text.lower()
        return resolve_sweep(text, self.list_sweeps())

    # Sweeps -------------------------------------------------------------------------------

    def submit(self, spec, idempotency_key="", owner=""):
        """Queues a sweep. spec: a file path (YAML or JSON, read like `parity submit` does) or a
        parity.v1.SweepSpec. Returns the SweepInfo, with .run_ids in grid order. An invalid spec
        raises ParityError(INVALID_ARGUMENT) with one FieldViolation per problem."""
        if not isinstance(spec, sweep_pb2.SweepSpec):
            spec = load_spec(spec)
        response = self._call("SubmitSweep", api.SubmitSweepRequest(
            spec=spec, idempotency_key=idempotency_key, owner=owner))
        info = SweepInfo.from_proto(response.sweep)
        info.run_ids = list(response.run_ids)
        return info

    def plan(self, spec):
        """Plans a spec without queueing it: a PlanResult with .frame (a DataFrame, one row per
        planned run: name, role, budget, data variant, seed, layout, E/K/D_e, N, N_a, r_a, M, C,
        D, D̂, epochs, steps, learning rate, grid.* columns ...), .warnings (PlanWarning: an
        undertrained baseline, K = 1 ...), .runs (PlannedRun) and .specs (parity.v1.RunSpec)."""
        if not isinstance(spec, sweep_pb2.SweepSpec):
            spec = load_spec(spec)
        return PlanResult(self._call("PlanSweep", api.PlanSweepRequest(spec=spec)))

    def sweep(self, sweep):
        """One sweep's SweepInfo (ParityNotFound if there is none)."""
        response = self._call("GetSweep", api.GetSweepRequest(sweep_id=self.resolve(sweep)))
        return SweepInfo.from_proto(response.sweep)

    def sweeps_frame(self, state=None):
        """list_sweeps() as a DataFrame: id, short id, name, state, owner and run counts."""
        return dict_frame([{"sweep_id": s.sweep_id, "short_id": s.sweep_id[:8], "name": s.name,
                            "state": s.state, "owner": s.owner, **s.counts}
                           for s in self.list_sweeps(state)])

    def list_sweeps(self, state=None):
        """Every sweep, newest first; state: "active", "succeeded", "failed" or "cancelled"."""
        request = api.ListSweepsRequest(page_size=1000)
        if state:
            request.state = run_pb2.SweepState.Value("SWEEP_STATE_" + state.upper())
        sweeps = []
        while True:
            response = self._call("ListSweeps", request)
            sweeps += [SweepInfo.from_proto(s) for s in response.sweeps]
            if not response.next_page_token:
                return sweeps
            request.page_token = response.next_page_token

    def cancel(self, sweep, reason="cancelled from parity_client"):
        """Cancels a sweep's pending and running runs. Returns (SweepInfo, runs cancelled)."""
        request = api.CancelSweepRequest(sweep_id=self.resolve(sweep), reason=reason)
        response = self._call("CancelSweep", request)
        return SweepInfo.from_proto(response.sweep), response.cancelled_runs

    def delete(self, sweep):
        """Deletes an ended sweep with its runs, metrics and results (workers drop the runs'
        checkpoints later). Returns the number of runs deleted. A sweep still running raises
        ParityError(FAILED_PRECONDITION): cancel() it and wait() first."""
        response = self._call("DeleteSweep", api.DeleteSweepRequest(sweep_id=self.resolve(sweep)))
        return response.deleted_runs

    def workers(self, seen_within_seconds=0):
        """Workers seen within that many seconds (0 = the scheduler's 300), most recent first,
        as WorkerInfo."""
        request = api.ListWorkersRequest(seen_within_seconds=seen_within_seconds, page_size=1000)
        out = []
        while True:
            response = self._call("ListWorkers", request)
            out += [WorkerInfo.from_proto(w) for w in response.workers]
            if not response.next_page_token:
                return out
            request.page_token = response.next_page_token

    def workers_frame(self, seen_within_seconds=0):
        """workers() as a DataFrame (needs pandas)."""
        return to_frame(self.workers(seen_within_seconds))

    def wait(self, sweep, progress=True, timeout=None):
        """Follows a sweep (WatchSweep) until it ends — its state final and no run still pending,
        leased or running (a cancelled sweep's running runs stop at their next heartbeat) — and
        returns its final SweepInfo, whatever the state (check .state: "succeeded", "failed" or
        "cancelled"); an ended sweep can be deleted at once.

        progress: True prints a progress line to stderr; a callable gets each SweepInfo as the
        counts change; False/None stays quiet. timeout: seconds in all (None = no limit);
        raises ParityError(DEADLINE_EXCEEDED) when it passes."""
        report = _print_progress if progress is True else (progress or None)
        sweep_id = self.resolve(sweep)
        info = self.sweep(sweep_id)
        if report:
            report(info)
        if info.finished:
            return _end_progress(report, info)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            # Pages: the opening snapshot as one message per 1,000 runs (only the counts are read).
            request = api.WatchSweepRequest(sweep_id=sweep_id, snapshot_pages=True)
            stream = self._stub.WatchSweep(request, timeout=left)
            try:
                for event in stream:
                    if event.HasField("sweep"):
                        info = SweepInfo.from_proto(event.sweep)
                        if report:
                            report(info)
            except grpc.RpcError as e:
                # UNAVAILABLE: the stream's lifetime on the server passed, or it restarted.
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise self._error(e, "WatchSweep") from None
                time.sleep(0.5)
            info = self.sweep(sweep_id)
            if info.finished:
                return _end_progress(report, info)

    # Runs and results ---------------------------------------------------------------------

    def runs(self, sweep):
        """A sweep's runs in grid order, as RunInfo."""
        return [RunInfo.from_proto(r) for r in self._runs(self.resolve(sweep))]

    def _runs(self, sweep_id):
        """A sweep's parity.v1.Run messages (with their RunSpecs), in grid order."""
        request = api.ListRunsRequest(sweep_id=sweep_id, page_size=1000)
        out = []
        while True:
            response = self._call("ListRuns", request)
            out += list(response.runs)
            if not response.next_page_token:
                return out
            request.page_token = response.next_page_token

    def results(self, sweep="", order_by=""):
        """The results view as ResultRow dataclasses (all sweeps when sweep is empty).
        order_by: a ResultRow field, optionally followed by " desc"; empty = grid order."""
        sweep_id = self.resolve(sweep) if sweep else ""
        return [ResultRow.from_proto(r) for r in self._result_messages(sweep_id, order_by)]

    def _result_messages(self, sweep_id, order_by=""):
        """parity.v1.ResultRow messages of one sweep (all when empty), in grid order."""
        request = api.QueryResultsRequest(filter=api.ResultsFilter(sweep_id=sweep_id),
                                          order_by=order_by, page_size=10000)
        rows = []
        while True:
            response = self._call("QueryResults", request)
            rows += list(response.rows)
            if not response.next_page_token:
                return rows
            request.page_token = response.next_page_token

    def export_table(self, sweep):
        """The export table (docs/export.md) of a sweep as (columns, cells): [(name, type)] and
        one list of values per run in grid order, None for missing. Read from ListRuns, as
        `parity results` reads it."""
        runs = self._runs(self.resolve(sweep))
        return export.export_table([export.result_row_of_run(r) for r in runs],
                                   {r.run_id: r for r in runs})

    def results_frame(self, sweep):
        """The results as a pandas DataFrame (needs pandas) with exactly the columns of
        `parity results --format csv` (docs/export.md): ids, budget, seed, one "grid.<axis>"
        column per grid axis, hyperparameters, accounting, final BPCs, ΔBPC against each dense
        baseline multiple, failure class and message. Missing numbers (a failed run's BPC, ΔBPC
        without a baseline) are NaN, missing strings None."""
        return export.frame(*self.export_table(sweep))

    def export(self, sweep, path, format="csv"):
        """Writes a sweep's results to `path` as "csv", "json" or "parquet", the same columns
        and values as `parity results --format ...`. Parquet needs pyarrow (pip install
        pyarrow); without it the ImportError names the CLI command that writes the same file."""
        export.write(*self.export_table(sweep), path, format)
        return path

    def to_parquet(self, sweep, path):
        """export(sweep, path, format="parquet")."""
        return self.export(sweep, path, format="parquet")

    def best_run(self, sweep, eval_set=None, per_budget=False, role=None):
        """The succeeded run with the lowest final BPC (on `eval_set`, else the primary set), as
        a ResultRow; None when no run has one. per_budget=True: a dict compute budget → best
        ResultRow. role: only "moe" or "dense_baseline" runs ... (None = any)."""
        best = {}
        for row in self.results(sweep):
            bpc = row.final_eval_bpc.get(eval_set, math.nan) if eval_set else row.final_val_bpc
            if row.state != "succeeded" or math.isnan(bpc) or (role and row.role != role):
                continue
            key = row.compute_budget if per_budget else None
            if key not in best or bpc < best[key][0]:
                best[key] = (bpc, row)
        if per_budget:
            return {k: v[1] for k, v in best.items()}
        return best[None][1] if best else None

    def analyze(self, sweep, eval_set=""):
        """The sweep's analysis (AnalyzeSweep) as an Analysis: per MoE grid point the frontier
        EL (the papers') and the fixed-N EL, per group the best grid point, region, lack of fit
        and point optimum (or why none), ΔBPC against every dense baseline, the dense frontier
        and the fixed-N law. FAILED_PRECONDITION until a run of the sweep has finished.
        eval_set: analyse that evaluation set's final BPC instead of the primary set's
        (Analysis.eval_sets lists the sets; INVALID_ARGUMENT for a set no run reports)."""
        request = api.AnalyzeSweepRequest(sweep_id=self.resolve(sweep), eval_set=eval_set)
        response = self._call("AnalyzeSweep", request)
        return Analysis.from_proto(response)

    def resolve_run(self, run):
        """The UUID of `run`: a UUID (taken as it is), "SWEEP/RUN" (names or id prefixes), a
        run's name, or a unique run id prefix of ≥ 4 hex characters, as `parity watch` takes
        them. Raises ParityNotFound, or ParityAmbiguous listing the candidates."""
        text = run.run_id if hasattr(run, "run_id") else str(run).strip()
        if is_uuid(text):
            return text.lower()
        candidates = []
        for sweep in self.list_sweeps():
            for r in self._runs(sweep.sweep_id):
                candidates.append(_RunCandidate(r.run_id, r.spec.name, sweep.sweep_id, sweep.name,
                                                RunInfo.from_proto(r).state))
        return resolve_run(text, candidates)

    def gang(self, run):
        """Where a gang run (resources.ranks > 1) is placed now: GangInfo with its world size,
        epoch, placement and rendezvous times and its ranks (worker, hostname, devices, check-in),
        as `parity status RUN` prints it; None for a run of one rank or a gang not placed (PENDING,
        or restarted after a failure). `run`: as resolve_run takes it."""
        response = self._call("GetRun", api.GetRunRequest(run_id=self.resolve_run(run)))
        return GangInfo.from_proto(response.gang) if response.HasField("gang") else None

    def curve(self, run_id, from_step=0, timeout=None):
        """A run's metric points (training and validation BPC, learning rate, throughput ...)
        from `from_step` on, as MetricPoint. `run_id`: a UUID, a unique id prefix, a name or
        SWEEP/RUN (resolve_run). For a running run this waits until it ends (the stream is
        WatchRun's); pass a timeout (seconds) to bound that."""
        run_id = self.resolve_run(run_id)
        stream = self._stub.WatchRun(api.WatchRunRequest(run_id=run_id, from_step=from_step),
                                     timeout=timeout)
        try:
            return [MetricPoint.from_proto(e.metric) for e in stream if e.HasField("metric")]
        except grpc.RpcError as e:
            raise self._error(e, "WatchRun") from None

    def curve_frame(self, run_id, from_step=0, timeout=None):
        """curve() as a pandas DataFrame (needs pandas)."""
        return to_frame(self.curve(run_id, from_step, timeout))


_RunCandidate = collections.namedtuple("_RunCandidate", "run_id name sweep_id sweep_name state")


def _print_progress(info):
    c = info.counts
    line = (f"\rsweep {info.name or info.sweep_id}: {info.done}/{c['total']} done "
            f"({c['succeeded']} succeeded, {c['running'] + c['leased']} running, "
            f"{c['pending']} pending, {c['failed']} failed, {c['cancelled']} cancelled) "
            f"{info.state}")
    sys.stderr.write(line)
    sys.stderr.flush()


def _end_progress(report, info):
    if report is _print_progress:
        _print_progress(info)
        sys.stderr.write("\n")
    return info


__all__ = ["Client", "connect", "ParityError", "DEFAULT_ADDRESS"]
