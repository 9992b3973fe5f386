"""parity_client.rows without a scheduler: evaluation sets (several named validation sets per
run) as the scheduler sends them — ResultRow.final_eval_bpc / delta_eval_bpc_vs_dense, a run's
summary, a curve point's eval_bpc — become dict fields, and frames spread them into one column
per set ("final_bpc.<set>", "delta_bpc.<set>", "val_bpc.<set>"). The analysis on another set
names it. ctest: python_client_rows (PYTHONPATH = the build's clients/python)."""

import importlib.util
import math
import unittest

from parity.v1 import run_pb2, sweep_service_pb2 as api

from parity_client.analysis import Analysis
from parity_client.rows import GangInfo, MetricPoint, ResultRow, RunInfo, flat_row, to_frame


def result_row(name, sets, deltas):
    row = api.ResultRow(run_id="r-" + name, name=name, final_val_bpc=sets.get("validation", 0.0))
    row.final_eval_bpc.update(sets)
    row.delta_eval_bpc_vs_dense.update(deltas)
    row.dataset_digest = "ab" * 32
    return row


class EvalSetRowsTest(unittest.TestCase):
    def test_results_carry_per_set_finals_and_deltas(self):
        row = ResultRow.from_proto(result_row("moe", {"validation": 1.9, "code": 2.4},
                                              {"validation": -0.05, "code": 0.1}))
        self.assertEqual(row.final_eval_bpc, {"validation": 1.9, "code": 2.4})
        self.assertAlmostEqual(row.delta_eval_bpc_vs_dense["code"], 0.1)
        self.assertEqual(row.dataset_digest, "ab" * 32)
        flat = flat_row(row)
        self.assertAlmostEqual(flat["final_bpc.code"], 2.4)
        self.assertAlmostEqual(flat["final_bpc.validation"], 1.9)
        self.assertAlmostEqual(flat["delta_bpc.code"], 0.1)
        self.assertNotIn("final_eval_bpc", flat, "the dict is spread into columns")

    def test_an_engine_of_one_set_gives_empty_dicts(self):
        row = ResultRow.from_proto(api.ResultRow(name="old", final_val_bpc=2.0))
        self.assertEqual(row.final_eval_bpc, {})
        self.assertNotIn("final_bpc.validation", flat_row(row))

    def test_a_failed_run_says_why_in_the_specs_spelling(self):
        run = run_pb2.Run(run_id="r2", state=run_pb2.RUN_STATE_FAILED,
                          failure_class=run_pb2.FAILURE_CLASS_DATA_MISMATCH)
        run.failure.message = "dataset 'mix' on worker w is not the copy the sweep pinned"
        info = RunInfo.from_proto(run)
        self.assertEqual(info.state, "failed")
        self.assertEqual(info.failure_class, "data_mismatch")
        self.assertIn("not the copy the sweep pinned", info.failure)
        self.assertEqual(RunInfo.from_proto(run_pb2.Run(run_id="r3")).failure_class, "",
                         "a run that never failed has no class")

    def test_runs_and_curve_points_carry_per_set_values(self):
        run = run_pb2.Run(run_id="r1")
        run.summary.final_val_bpc = 1.9
        run.summary.final_eval_bpc.update({"validation": 1.9, "code": 2.4})
        self.assertEqual(RunInfo.from_proto(run).final_eval_bpc["code"], 2.4)
        point = run_pb2.MetricPoint(step=10, val_bpc=1.95)
        point.eval_bpc.update({"validation": 1.95, "code": 2.5})
        parsed = MetricPoint.from_proto(point)
        self.assertEqual(parsed.eval_bpc, {"validation": 1.95, "code": 2.5})
        self.assertEqual(flat_row(parsed)["val_bpc.code"], 2.5)
        training = MetricPoint.from_proto(run_pb2.MetricPoint(step=11))
        self.assertIsNone(training.val_bpc)
        self.assertEqual(training.eval_bpc, {})

    @unittest.skipUnless(importlib.util.find_spec("pandas"), "pandas is optional")
    def test_frames_have_one_column_per_set(self):
        rows = [ResultRow.from_proto(result_row("a", {"validation": 1.9, "code": 2.4}, {})),
                ResultRow.from_proto(result_row("b", {"validation": 2.0}, {}))]
        frame = to_frame(rows)
        self.assertIn("final_bpc.code", frame.columns)
        self.assertIn("final_bpc.validation", frame.columns)
        self.assertTrue(math.isnan(frame.loc[1, "final_bpc.code"]), "b lacks code: NaN")

    def test_the_analysis_names_its_set(self):
        response = api.AnalyzeSweepResponse(eval_set="code", eval_sets=["validation", "code"])
        analysis = Analysis.from_proto(response)
        self.assertEqual(analysis.eval_set, "code")
        self.assertEqual(analysis.eval_sets, ["validation", "code"])


class GangRowsTest(unittest.TestCase):
    """Client.gang(): GetRunResponse.gang as GangInfo, what `parity status RUN` prints."""

    def gang(self, released):
        response = api.GetRunResponse()
        gang = response.gang
        gang.world_size = 2
        gang.lease_epoch = 7
        gang.placed_time.FromSeconds(1_800_000_000)
        gang.rendezvous_deadline.FromSeconds(1_800_000_300)
        for i, host in enumerate(["node-a", "node-b"]):
            rank = gang.ranks.add(rank=i, worker_id=f"w{i}", hostname=host, device_indices=[i])
            if i == 1 or released:
                rank.checked_in = True
                rank.check_in_time.FromMilliseconds(1_800_000_001_500)
        if released:
            gang.released = True
            gang.released_time.FromMilliseconds(1_800_000_003_200)
        return GangInfo.from_proto(response.gang)

    def test_a_waiting_gang(self):
        gang = self.gang(released=False)
        self.assertEqual(gang.world_size, 2)
        self.assertEqual(gang.lease_epoch, 7)
        self.assertEqual(gang.hosts, ["node-a", "node-b"])
        self.assertEqual(gang.checked_in, 1)
        self.assertFalse(gang.released)
        self.assertIsNone(gang.released_time)
        self.assertTrue(math.isnan(gang.rendezvous_seconds), "not released: NaN")
        self.assertIsNone(gang.ranks[0].check_in_time, "rank 0 has not checked in")
        self.assertEqual(gang.ranks[1].device_indices, [1])
        self.assertEqual(gang.rendezvous_deadline.timestamp(), 1_800_000_300)

    def test_a_released_gang_says_how_long_its_rendezvous_took(self):
        gang = self.gang(released=True)
        self.assertEqual(gang.checked_in, 2)
        self.assertAlmostEqual(gang.rendezvous_seconds, 3.2)
        self.assertEqual(gang.ranks[0].check_in_time.tzinfo.utcoffset(None).total_seconds(), 0)


if __name__ == "__main__":
    unittest.main()
