"""The export schema in Python without a scheduler: the same columns as the CLI's CSV
(export_columns.json, kept equal to `parity results --columns --format json` by
cli_export_columns_in_sync), a cell rule for every fixed column, NaN/None for missing, ΔBPC
against every dense baseline multiple, numbers spelled as the CLI spells them, and Parquet's
remedy without pyarrow. The same table against a real stack, CSV byte for byte against the CLI:
test_client.py. ctest: python_client_export (PYTHONPATH = the build's clients/python)."""

import csv
import importlib.util
import io
import json
import math
import os
import sys
import tempfile
import unittest

from parity.v1 import model_pb2, run_pb2, sweep_pb2, sweep_service_pb2 as api, training_pb2

from parity_client import export


def row(run_id, role, multiple, bpc, **extra):
    r = api.ResultRow(run_id=run_id, sweep_id="sweep-1", name=run_id, role=role,
                      state=run_pb2.RUN_STATE_SUCCEEDED if bpc else run_pb2.RUN_STATE_FAILED,
                      compute_budget="C1", data_variant="strict", compute_multiple=multiple,
                      final_val_bpc=bpc, activation_rate=0.19999999999999998,
                      compute_flops=1.2345678901234567e20, params=1 << 60, **extra)
    return r


def sweep():
    rows = [row("dense1", sweep_pb2.RUN_ROLE_DENSE_BASELINE, 1, 2.0),
            row("dense2", sweep_pb2.RUN_ROLE_DENSE_BASELINE, 2, 1.875),
            row("moe", sweep_pb2.RUN_ROLE_MOE, 1, 1.9, predicted_efficiency_leverage=1.5),
            row("failed", sweep_pb2.RUN_ROLE_MOE, 1, 0.0)]
    rows[0].final_eval_bpc["code"] = 2.5
    rows[2].final_eval_bpc["code"] = 2.25
    moe = run_pb2.Run(run_id="moe")
    moe.spec.grid_point.update({"r_a": "0.2", "granularity": "4"})
    moe.spec.training.learning_rate = 3e-4
    moe.spec.training.schedule = training_pb2.LR_SCHEDULE_WSD
    moe.spec.training.weight_decay = 0.0  # set: 0 is a value
    failed = run_pb2.Run(run_id="failed", failure_class=run_pb2.FAILURE_CLASS_USER_ERROR)
    failed.failure.message = "data.corpus_path: cannot open 'kjv'"
    return rows, {"moe": moe, "failed": failed}


class ExportSchemaTest(unittest.TestCase):
    def test_every_documented_column_has_a_rule(self):
        fixed = {c["name"] for c in export.documented_columns() if "<" not in c["name"]}
        self.assertEqual(fixed, set(export.FIXED_RULES),
                         "export_columns.json and parity_client/export.py's _FIXED differ: a "
                         "column was added or renamed on one side only")

    def test_columns_in_the_documented_order_with_families_in_place(self):
        columns, cells = export.export_table(*sweep())
        names = [n for n, _ in columns]
        self.assertEqual(names[:10], ["sweep_id", "run_id", "run_name", "role", "layout", "state",
                                      "compute_budget", "compute_multiple", "data_variant",
                                      "seed"])
        self.assertEqual(names[10:12], ["grid.granularity", "grid.r_a"])
        i = names.index("delta_bpc_vs_dense_1c")
        self.assertEqual(names[i:i + 3], ["delta_bpc_vs_dense_1c", "delta_bpc_vs_dense_2c",
                                          "delta_bpc_vs_dense_1c.code"])
        self.assertEqual(names[-3:], ["failure_class", "failure_message", "dataset_digest"])
        self.assertTrue(all(len(c) == len(columns) for c in cells))

    def test_deltas_nulls_and_spellings(self):
        columns, cells = export.export_table(*sweep())
        at = {n: i for i, (n, _) in enumerate(columns)}
        dense, _, moe, failed = cells
        self.assertAlmostEqual(moe[at["delta_bpc_vs_dense_1c"]], 1.9 - 2.0)
        self.assertAlmostEqual(moe[at["delta_bpc_vs_dense_2c"]], 1.9 - 1.875)
        self.assertAlmostEqual(moe[at["delta_bpc_vs_dense_1c.code"]], 2.25 - 2.5)
        self.assertIsNone(moe[at["delta_bpc_vs_dense_2c.code"]])
        self.assertEqual(dense[at["delta_bpc_vs_dense_1c"]], 0.0, "the baseline vs itself")
        for name in ("final_val_bpc", "delta_bpc_vs_dense_1c", "wall_seconds", "grid.r_a",
                     "predicted_efficiency_leverage", "learning_rate"):
            self.assertIsNone(failed[at[name]], f"{name} of a failed run is missing, not 0")
        self.assertEqual(failed[at["seed"]], 0)
        self.assertEqual(moe[at["weight_decay"]], 0.0)
        self.assertIsNone(dense[at["weight_decay"]])
        self.assertEqual((dense[at["role"]], moe[at["role"]]), ("dense_baseline", "moe"))
        self.assertEqual((moe[at["state"]], failed[at["state"]]), ("succeeded", "failed"))
        self.assertEqual(moe[at["lr_schedule"]], "wsd")
        self.assertEqual(failed[at["failure_class"]], "user_error")

    def test_a_result_row_from_the_run_alone(self):
        run = run_pb2.Run(run_id="r1", sweep_id="s1", state=run_pb2.RUN_STATE_SUCCEEDED)
        run.spec.name = "moe-ra25-C1-s3"
        run.spec.model.architecture = model_pb2.ARCHITECTURE_MOE
        run.spec.model.moe.layout = model_pb2.MOE_LAYOUT_ALL_MOE
        run.spec.accounting.params = 425984
        run.spec.training.seed = 3
        run.summary.final_val_bpc = 1.95
        run.summary.wall_time.seconds, run.summary.wall_time.nanos = 12, 500000000
        row = export.result_row_of_run(run)
        self.assertEqual((row.layout, row.params, row.seed, row.final_val_bpc, row.wall_seconds),
                         ("all-moe", 425984, 3, 1.95, 12.5))
        failed = run_pb2.Run(state=run_pb2.RUN_STATE_FAILED)
        failed.summary.final_val_bpc = 9.0
        self.assertEqual(export.result_row_of_run(failed).layout, "dense")
        self.assertEqual(export.result_row_of_run(failed).final_val_bpc, 0.0)

    def test_numbers_spelled_as_the_cli_spells_them(self):
        # The same table as export/export_schema_test.cc's DoublesRoundTripAtFullPrecision.
        for value, text in [(0.1, "0.1"), (2e10, "2e+10"), (1e15, "1e+15"),
                            (123456789.0, "123456789"),
                            (1.2345678901234567e20, "123456789012345667584"), (1e-5, "1e-05"),
                            (100.0, "100"), (-0.0, "-0"), (1.5e16, "1.5e+16"),
                            (1 / 3, "0.3333333333333333"), (5e-324, "5e-324"),
                            (0.19999999999999998, "0.19999999999999998")]:
            self.assertEqual(export.number_text(value), text)
            self.assertEqual(float(text), value)

    def test_csv_and_json_keep_full_precision_and_nulls(self):
        columns, cells = export.export_table(*sweep())
        with tempfile.TemporaryDirectory() as tmp:
            export.write(columns, cells, os.path.join(tmp, "r.csv"), "csv")
            export.write(columns, cells, os.path.join(tmp, "r.json"), "json")
            with open(os.path.join(tmp, "r.csv"), encoding="utf-8") as f:
                table = list(csv.DictReader(f))
            with open(os.path.join(tmp, "r.json"), encoding="utf-8") as f:
                doc = json.load(f)
        self.assertEqual(table[3]["final_val_bpc"], "", "null is an empty cell")
        self.assertEqual(table[2]["activation_rate"], "0.19999999999999998")
        self.assertEqual(table[2]["params"], str(1 << 60))
        self.assertIsNone(doc[3]["final_val_bpc"])
        self.assertIsInstance(doc[3]["seed"], int)
        self.assertEqual(doc[2]["params"], 1 << 60)

    @unittest.skipUnless(importlib.util.find_spec("pandas"), "pandas not installed (optional)")
    def test_frame_has_nan_for_missing(self):
        columns, cells = export.export_table(*sweep())
        df = export.frame(columns, cells)
        self.assertEqual(list(df.columns), [n for n, _ in columns])
        self.assertTrue(math.isnan(df.loc[3, "final_val_bpc"]))
        self.assertTrue(math.isnan(df.loc[3, "delta_bpc_vs_dense_2c"]))
        self.assertEqual(str(df["final_val_bpc"].dtype), "float64")
        self.assertEqual(str(df["seed"].dtype), "int64")
        self.assertIsNone(df.loc[0, "failure_class"])

    def test_parquet_without_pyarrow_names_the_remedies(self):
        saved = sys.modules.get("pyarrow")
        sys.modules["pyarrow"] = None  # import pyarrow now raises ImportError
        try:
            with self.assertRaises(ImportError) as raised:
                export.write(*export.export_table(*sweep()), "/nonexistent/r.parquet", "parquet")
        finally:
            if saved is None:
                del sys.modules["pyarrow"]
            else:
                sys.modules["pyarrow"] = saved
        self.assertIn("pip install pyarrow", str(raised.exception))
        self.assertIn("parity results SWEEP --format parquet", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
