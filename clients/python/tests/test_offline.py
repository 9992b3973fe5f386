"""What the notebook client decides on its own, without a scheduler: sweeps by name or short id,
NaN for missing numbers, plan rows, and errors that say what to do."""

import math
import unittest

import grpc

import parity_client
from parity.v1 import model_pb2, sweep_pb2, sweep_service_pb2 as api, training_pb2
from parity_client.errors import explain, from_rpc_error


class _Sweep:
    def __init__(self, sweep_id, name, state="succeeded"):
        self.sweep_id, self.name, self.state = sweep_id, name, state


SWEEPS = [_Sweep("3f2a9c1e-1111-4000-8000-000000000001", "study"),
          _Sweep("3f2b0000-2222-4000-8000-000000000002", "study"),
          _Sweep("beef0000-3333-4000-8000-000000000003", "kjv"),
          _Sweep("c0ffee00-4444-4000-8000-000000000004", "beef")]


class SweepInfoTest(unittest.TestCase):
    def _info(self, state, **counts):
        full = dict(pending=0, leased=0, running=0, succeeded=0, failed=0, cancelled=0, total=4)
        full.update(counts)
        return parity_client.SweepInfo("3f2a9c1e-1111-4000-8000-000000000001", "s", state, "o",
                                       full)

    def test_a_cancelled_sweep_with_running_runs_has_not_ended(self):
        running = self._info("cancelled", running=2, cancelled=2)
        self.assertFalse(running.finished, "its running runs stop only at their next heartbeat: "
                         "wait() must not return (nor delete() be told it may) before")
        self.assertTrue(self._info("cancelled", succeeded=2, cancelled=2).finished)
        self.assertFalse(self._info("active", succeeded=4).finished)
        self.assertTrue(self._info("succeeded", succeeded=4).finished)


class ResolveTest(unittest.TestCase):
    def test_a_uuid_is_taken_as_it_is(self):
        uuid = "AAAAAAAA-0000-4000-8000-000000000000"
        self.assertEqual(parity_client.resolve_sweep(uuid, []), uuid.lower())

    def test_a_unique_name_or_prefix(self):
        self.assertEqual(parity_client.resolve_sweep("kjv", SWEEPS), SWEEPS[2].sweep_id)
        self.assertEqual(parity_client.resolve_sweep("3f2a", SWEEPS), SWEEPS[0].sweep_id)
        self.assertEqual(parity_client.resolve_sweep("3F2A9C1E-11", SWEEPS), SWEEPS[0].sweep_id)

    def test_a_name_used_twice_is_ambiguous_and_lists_the_candidates(self):
        with self.assertRaises(parity_client.ParityAmbiguous) as caught:
            parity_client.resolve_sweep("study", SWEEPS)
        text = str(caught.exception)
        self.assertIn("3f2a9c1e", text)
        self.assertIn("3f2b0000", text)
        self.assertIn("short id", caught.exception.remedy)

    def test_a_name_and_another_sweeps_prefix_is_ambiguous(self):
        with self.assertRaises(parity_client.ParityAmbiguous) as caught:
            parity_client.resolve_sweep("beef", SWEEPS)
        self.assertIn("beef0000", str(caught.exception))
        self.assertIn("c0ffee00", str(caught.exception))

    def test_a_shared_prefix_is_ambiguous(self):
        with self.assertRaises(parity_client.ParityAmbiguous):
            parity_client.resolve_sweep("3f2a", SWEEPS + [
                _Sweep("3f2a0000-5555-4000-8000-000000000005", "other")])

    def test_too_short_or_unknown_is_not_found_with_a_hint(self):
        with self.assertRaises(parity_client.ParityNotFound) as caught:
            parity_client.resolve_sweep("3f2", SWEEPS)
        self.assertIn("at least 4 hex characters", str(caught.exception))
        with self.assertRaises(parity_client.ParityNotFound) as caught:
            parity_client.resolve_sweep("nope", SWEEPS)
        self.assertIn("list_sweeps", caught.exception.remedy)
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)


class _Run:
    def __init__(self, run_id, name, sweep_id, sweep_name, state="succeeded"):
        self.run_id, self.name, self.sweep_id, self.sweep_name, self.state = (
            run_id, name, sweep_id, sweep_name, state)


RUNS = [_Run("c0ffee00-0000-4000-8000-000000000001", "moe-ra25-C1-s0",
             "7f3a9c10-0000-4000-8000-000000000001", "micro"),
        _Run("c0ffee11-0000-4000-8000-000000000002", "dense-1C-C1-s0",
             "7f3a9c10-0000-4000-8000-000000000001", "micro"),
        _Run("d00d0000-0000-4000-8000-000000000003", "moe-ra25-C1-s0",
             "7f3b0000-0000-4000-8000-000000000002", "cpu-study")]


class ResolveRunTest(unittest.TestCase):
    """Runs as `parity watch` takes them (cli/sweep_reference_test.cc has the same cases)."""

    def test_prefix_name_and_sweep_slash_run(self):
        from parity_client.resolve import resolve_run
        self.assertEqual(resolve_run("c0ffee1", RUNS), RUNS[1].run_id)
        self.assertEqual(resolve_run("D00D", RUNS), RUNS[2].run_id)
        self.assertEqual(resolve_run("cpu-study/moe-ra25-C1-s0", RUNS), RUNS[2].run_id)
        self.assertEqual(resolve_run("7f3a/c0ffee0", RUNS), RUNS[0].run_id)

    def test_ambiguity_lists_candidates_and_nothing_is_not_found(self):
        from parity_client.resolve import resolve_run
        with self.assertRaises(parity_client.ParityAmbiguous) as caught:
            resolve_run("moe-ra25-C1-s0", RUNS)
        self.assertIn("micro/moe-ra25-C1-s0", str(caught.exception))
        self.assertIn("cpu-study/moe-ra25-C1-s0", str(caught.exception))
        with self.assertRaises(parity_client.ParityNotFound):
            resolve_run("micro/no-such-run", RUNS)
        with self.assertRaises(parity_client.ParityNotFound):
            resolve_run("c0f", RUNS)


class NanTest(unittest.TestCase):
    def test_a_failed_runs_numbers_are_nan(self):
        row = parity_client.ResultRow.from_proto(api.ResultRow(
            name="moe-x", role=sweep_pb2.RUN_ROLE_MOE, state=5, seed=7, tokens=10))
        self.assertEqual(row.state, "failed")
        for name in ("final_val_bpc", "delta_bpc_vs_dense", "measured_flops_per_token",
                     "wall_seconds"):
            self.assertTrue(math.isnan(getattr(row, name)), f"{name} should be NaN, not 0.0")
        self.assertIsInstance(row.seed, int)

    def test_a_measured_delta_and_the_baselines_own_zero_stay(self):
        moe = parity_client.ResultRow.from_proto(api.ResultRow(
            role=sweep_pb2.RUN_ROLE_MOE, final_val_bpc=2.0, delta_bpc_vs_dense=-0.1))
        self.assertAlmostEqual(moe.delta_bpc_vs_dense, -0.1)
        base = parity_client.ResultRow.from_proto(api.ResultRow(
            role=sweep_pb2.RUN_ROLE_DENSE_BASELINE, final_val_bpc=2.1, compute_multiple=1))
        self.assertEqual(base.delta_bpc_vs_dense, 0.0, "the 1C baseline's ΔBPC is a real 0")
        self.assertTrue(math.isnan(base.predicted_efficiency_leverage), "no EL for dense runs")
        orphan = parity_client.ResultRow.from_proto(api.ResultRow(
            role=sweep_pb2.RUN_ROLE_MOE, final_val_bpc=2.0))
        self.assertTrue(math.isnan(orphan.delta_bpc_vs_dense), "no baseline: NaN, not 0")

    def test_a_curve_points_missing_val_bpc_is_nan_in_a_frame(self):
        from parity_client.rows import flat_row
        from parity.v1 import run_pb2
        flat = flat_row(parity_client.MetricPoint.from_proto(run_pb2.MetricPoint(step=3)))
        self.assertTrue(math.isnan(flat["val_bpc"]))


def _run_spec():
    run = sweep_pb2.RunSpec(name="moe-ra25-C1-strict-s0", role=sweep_pb2.RUN_ROLE_MOE,
                            compute_budget="C1", data_variant="strict", compute_multiple=1)
    run.model.moe.layout = model_pb2.MOE_LAYOUT_ALL_MOE
    run.model.moe.num_experts, run.model.moe.top_k, run.model.moe.expert_hidden = 8, 2, 64
    run.training.learning_rate, run.training.steps, run.training.seed = 3e-3, 200, 4
    run.training.schedule = training_pb2.LR_SCHEDULE_WSD
    run.data.reuse = training_pb2.REUSE_MODE_STRICT
    run.accounting.params, run.accounting.tokens = 1000, 5000
    run.grid_point["activation_rate"] = "0.25"
    run.also_serves.add(compute_budget="C1", data_variant="unique")
    return run


class PlanTest(unittest.TestCase):
    def test_plan_rows_have_yaml_spellings_grid_and_hyperparameters(self):
        response = api.PlanSweepResponse(runs=[_run_spec()])
        response.warnings.add(field="grid.moe[0].top_k", description="K = 1")
        plan = parity_client.PlanResult(response)
        self.assertEqual(len(plan), 1)
        run = plan[0]
        self.assertEqual((run.role, run.layout, run.schedule), ("moe", "all-moe", "wsd"))
        self.assertEqual((run.num_experts, run.top_k, run.seed, run.steps), (8, 2, 4, 200))
        self.assertEqual(run.columns["reuse"], "strict")
        self.assertEqual(run.columns["grid.activation_rate"], "0.25")
        self.assertEqual(run.columns["also_serves"], ["C1/unique"])
        self.assertTrue(math.isnan(run.columns["weight_decay"]), "unset optional: NaN")
        self.assertEqual(str(plan.warnings[0]), "grid.moe[0].top_k: K = 1")
        self.assertIs(plan.specs[0], plan.specs[0])

    @unittest.skipUnless(__import__("importlib").util.find_spec("pandas"), "pandas optional")
    def test_plan_frame_keeps_ints(self):
        frame = parity_client.PlanResult(api.PlanSweepResponse(runs=[_run_spec()])).frame
        self.assertEqual(str(frame["params"].dtype), "int64")
        self.assertEqual(frame.loc[0, "grid.activation_rate"], "0.25")


class _RpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return ()


class ErrorTest(unittest.TestCase):
    def test_an_unreachable_scheduler_says_how_to_start_it(self):
        error = from_rpc_error(_RpcError(
            grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: "
            "UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"),
            address="127.0.0.1:1", method="ListSweeps")
        self.assertIsInstance(error, parity_client.ParityUnavailable)
        self.assertIn("scheduler at 127.0.0.1:1 is unreachable", str(error))
        self.assertIn("deploy/local/up.sh", str(error))
        self.assertIn("PARITY_SCHEDULER", str(error))

    def test_a_server_side_unavailable_keeps_its_message(self):
        message, remedy = explain(grpc.StatusCode.UNAVAILABLE, "the store is down: retry")
        self.assertEqual((message, remedy), ("the store is down: retry", ""))

    def test_no_token_names_the_python_ways_not_cli_flags(self):
        error = from_rpc_error(_RpcError(grpc.StatusCode.UNAUTHENTICATED,
                                         "no bearer token: ... take --token"),
                               method="ListSweeps", had_token=False)
        self.assertIsInstance(error, parity_client.ParityUnauthenticated)
        self.assertIn("PARITY_TOKEN_FILE", str(error))
        self.assertIn("connect(token_file=...)", str(error))
        self.assertNotIn("--token", str(error))

    def test_permission_denied_names_the_role_needed(self):
        error = from_rpc_error(_RpcError(grpc.StatusCode.PERMISSION_DENIED, "may not call"),
                               method="DeleteSweep")
        self.assertIsInstance(error, parity_client.ParityPermissionDenied)
        self.assertIn("researcher or admin", str(error))

    def test_an_unknown_sweep_or_run_says_how_to_list_them(self):
        for method, listing in (("GetSweep", "client.list_sweeps()"),
                                ("QueryResults", "client.list_sweeps()"),
                                ("GetRun", "client.runs(sweep)")):
            error = from_rpc_error(_RpcError(grpc.StatusCode.NOT_FOUND, "no such thing"),
                                   method=method)
            self.assertIsInstance(error, parity_client.ParityNotFound)
            self.assertIn(listing, error.remedy, f"{method}: the remedy should name {listing}")

    def test_each_violation_reads_once(self):
        violation = parity_client.FieldViolation("grid.moe[0].top_k", "9 exceeds num_experts 8")
        listed = parity_client.ParityError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "sweep 'micro' is invalid: 1 problem(s)\n  grid.moe[0].top_k: 9 exceeds num_experts 8",
            [violation])
        self.assertEqual(str(listed).count("9 exceeds num_experts 8"), 1,
                         f"a violation the server's message lists should not be added again:\n"
                         f"{listed}")
        bare = parity_client.ParityError(grpc.StatusCode.INVALID_ARGUMENT, "invalid", [violation])
        self.assertIn("\n  grid.moe[0].top_k: 9 exceeds num_experts 8", str(bare),
                      "a violation the message does not list should be added")
        self.assertEqual(listed.violations, [violation])

    def test_a_missing_token_file_is_named(self):
        with self.assertRaises(parity_client.ParityUnauthenticated) as caught:
            parity_client.connect("127.0.0.1:1", token_file="/nonexistent/token")
        self.assertIn("token_file=/nonexistent/token", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
