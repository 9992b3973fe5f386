"""parity_client.analysis without a scheduler: AnalyzeSweepResponse messages as the scheduler
sets them (server/scheduling/scheduler_analysis.cc) become the Analysis a researcher reads —
frontier and fixed-N EL never confused, a missing figure None beside its reason, a point optimum
only when the analysis gives one. ctest: python_client_analysis (PYTHONPATH = the build's
clients/python)."""

import unittest

from parity.v1 import analysis_pb2 as parts, sweep_pb2, sweep_service_pb2 as api

from parity_client.analysis import Analysis


def response():
    r = api.AnalyzeSweepResponse()
    r.dense_fit.a, r.dense_fit.b, r.dense_fit.c, r.dense_fit.points = 10.0, 0.1, 1.2, 6
    r.dense_fit.b_interval.low, r.dense_fit.b_interval.high = 0.09, 0.11
    r.dense_fit.b_interval.level = 0.9
    r.dense_fit_params = 412000
    f = r.dense_frontier
    for compute, params, bpc in ((2e10, 200000, 1.80), (4e10, 412000, 1.70), (8e10, 820000, 1.62)):
        f.points.add(compute=compute, params=params, bpc=bpc, seeds=2, sizes=3)
    f.law_refusal = "fewer than three budgets"  # law unset: None beside the reason
    f.runs = 18
    moe = r.grid_points.add(name="moe-ra25-C1-unique", group="C1/unique",
                            role=sweep_pb2.RUN_ROLE_MOE, activation_rate=0.25, seeds=2,
                            bpc_mean=1.7)
    moe.frontier_leverage.value = 1.6
    moe.frontier_leverage.extrapolated = True
    moe.frontier_leverage.extrapolation_factor = 1.9
    moe.frontier_leverage.interval.low, moe.frontier_leverage.interval.high = 1.3, 2.0
    moe.fixed_n_leverage.missing_reason = "the loss is below the law's floor c"
    moe.baselines.add(baseline="dense-1C-C1-unique", compute_multiple=1, delta_bpc=-0.05,
                      verdict=parts.DELTA_VERDICT_EXCEEDS_SPREAD, welch_p=0.01)
    moe.baselines.add(baseline="dense-2C-C1-unique", compute_multiple=2, delta_bpc=0.01,
                      verdict=parts.DELTA_VERDICT_NO_SPREAD)
    r.grid_points.add(name="dense-1C-C1-unique", group="C1/unique",
                      role=sweep_pb2.RUN_ROLE_DENSE_BASELINE, verdict=parts.DELTA_VERDICT_IS_BASELINE)
    o = r.optimal_activation.add(group="C1/unique", compute_budget="C1", data_variant="unique",
                                 status=parts.OPTIMUM_STATUS_FIT_UNCHECKED,
                                 reason="no lack-of-fit test", activation_rate=0.0,
                                 best_grid_activation_rate=0.25, probability_resamples=2000)
    o.grid.add(activation_rate=0.15, probability_best=0.1, region=parts.REGION_STATUS_OUTSIDE,
               p_value_above_best=0.03)
    o.grid.add(activation_rate=0.25, probability_best=0.9, region=parts.REGION_STATUS_BEST)
    o.region.low, o.region.high, o.region.contiguous = 0.25, 0.25, True
    o.lack_of_fit.verdict = parts.LACK_OF_FIT_VERDICT_UNTESTED
    o.lack_of_fit.note = "one spare rate"
    b = r.optimal_activation.add(group="C2/unique", status=parts.OPTIMUM_STATUS_BRACKETED,
                                 activation_rate=0.22, bpc=1.6)
    b.activation_rate_interval.low, b.activation_rate_interval.high = 0.15, 0.4
    r.efficiency_leverage_law_refusal = "too few granularities"
    r.leverage.add(run_id="r1", name="moe-ra25-C1-unique-s0", efficiency_leverage=0,
                   efficiency_leverage_missing="no dense law", predicted_efficiency_leverage=2.4)
    return r


class AnalysisTest(unittest.TestCase):
    def setUp(self):
        self.analysis = Analysis.from_proto(response())

    def test_frontier_and_fixed_n_el_are_separate_and_missing_ones_say_why(self):
        moe = self.analysis.grid_points[0]
        self.assertEqual(moe.frontier_leverage.value, 1.6)
        self.assertTrue(moe.frontier_leverage.extrapolated)
        self.assertEqual(moe.frontier_leverage.extrapolation_factor, 1.9)
        self.assertEqual((moe.frontier_leverage.interval.low, moe.frontier_leverage.interval.high),
                         (1.3, 2.0))
        self.assertIsNone(moe.fixed_n_leverage.value, "a fixed-N EL of 0 is missing, not 0×")
        self.assertIn("floor", moe.fixed_n_leverage.missing_reason)
        self.assertIsNone(self.analysis.grid_points[1].frontier_leverage,
                          "a dense point has no EL at all")
        row = self.analysis.leverage_rows()[0]
        self.assertEqual((row["frontier_el"], row["frontier_el_extrapolation_factor"]), (1.6, 1.9))
        self.assertIsNone(row["fixed_n_el"])

    def test_baselines_keep_their_welch_p_only_when_tested(self):
        deltas = self.analysis.grid_points[0].baselines
        self.assertEqual([d.baseline for d in deltas], ["dense-1C-C1-unique", "dense-2C-C1-unique"])
        self.assertEqual((deltas[0].verdict, deltas[0].welch_p), ("exceeds_spread", 0.01))
        self.assertIsNone(deltas[1].welch_p, "one seed: no Welch test, not p = 0")
        self.assertEqual(len(self.analysis.baseline_rows()), 2)

    def test_optimum_region_and_point_optimum(self):
        o = self.analysis.optimum("C1/unique")
        self.assertEqual(o.status, "fit_unchecked")
        self.assertIsNone(o.point_optimum, "no point optimum unless the analysis gives one")
        self.assertEqual([(p.region, p.probability_best) for p in o.grid],
                         [("outside", 0.1), ("best", 0.9)])
        self.assertEqual(o.grid[0].p_value_above_best, 0.03)
        self.assertIsNone(o.grid[1].p_value_above_best)
        self.assertEqual((o.region_low, o.region_high), (0.25, 0.25))
        self.assertEqual(o.lack_of_fit.verdict, "untested")
        bracketed = self.analysis.optimum("C2/unique")
        self.assertEqual(bracketed.point_optimum, 0.22)
        bracket = bracketed.point_optimum_bracket
        self.assertEqual((bracket.low, bracket.high), (0.15, 0.4))
        self.assertIsNone(bracketed.region_low, "no region set: None, not 0%")
        with self.assertRaisesRegex(KeyError, "C1/unique"):
            self.analysis.optimum("C9/none")

    def test_laws_and_runs(self):
        a = self.analysis
        self.assertEqual(a.fixed_n_law.b_interval.low, 0.09)
        self.assertIsNone(a.fixed_n_law.a_interval)
        self.assertEqual(a.fixed_n_law_params, 412000)
        self.assertIsNone(a.dense_frontier.law)
        self.assertEqual(a.dense_frontier.law_refusal, "fewer than three budgets")
        self.assertEqual([p.params for p in a.dense_frontier.points], [200000, 412000, 820000])
        self.assertIsNone(a.el_law)
        self.assertEqual(a.runs[0].fixed_n_efficiency_leverage, None)
        self.assertEqual(a.runs[0].predicted_efficiency_leverage_published_law, 2.4)

    def test_frames_when_pandas_is_there(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            with self.assertRaisesRegex(ImportError, "pandas"):
                self.analysis.leverage_frame()
            return
        frame = self.analysis.leverage_frame()
        self.assertEqual(list(frame["name"]), ["moe-ra25-C1-unique"])
        self.assertEqual(list(self.analysis.region_frame()["region"]), ["outside", "best"])


if __name__ == "__main__":
    unittest.main()
