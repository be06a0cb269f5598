"""The GPU check's throughput part (benchmarks/gpu_throughput.py) on the CPU: the measured rows in
reference/throughput.csv's schema, the deadline, adopting measured rows, and the plan before against after."""

import math
import sys
import time
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_throughput  # noqa: E402

THROUGHPUT = pd.read_csv(REPO / "reference/throughput.csv")
SCALED = set(THROUGHPUT[THROUGHPUT.source.str.startswith("scaled:")][["family", "kind"]].itertuples(False, None))


def test_the_tiny_cpu_run_measures_every_scaled_family_and_kind_in_the_tables_schema():
    lines = []
    rows = pd.DataFrame(gpu_throughput.measure("cpu", ["fp32"], tiny=True, deadline=time.monotonic() + 120,
                                               log=lines.append))
    assert list(rows.columns) == list(THROUGHPUT.columns)
    assert set(zip(rows.family, rows.kind)) == SCALED and len(rows) == len(SCALED)
    assert set(rows.device) == {"cpu"} and set(rows.precision) == {"fp32"}
    assert all(math.isfinite(floor) and floor >= 0 for floor in rows.floor_seconds_per_layer)
    assert all(math.isfinite(rate) and rate > 0 for rate in rows.flops_per_second)
    assert rows.source.str.startswith("measured-cpu: ").all() and rows.source.str.contains("--tiny").all()
    assert len(lines) == 2 * len(SCALED)  # one line per measurement: two widths of each family and kind


def test_a_deadline_already_past_measures_nothing():
    lines = []
    assert gpu_throughput.measure("cpu", ["fp32", "bf16"], True, time.monotonic() - 1, lines.append) == []
    assert lines == []


def test_the_deadline_keeps_only_the_kinds_measured_at_both_widths(monkeypatch):
    """In bf16 (CPU autocast): the clock passes the deadline after the third measurement (the transformer's narrow
    training and inference, its wide training), so its inference, measured narrow only, gives no row."""
    lines = []
    monkeypatch.setattr(gpu_throughput, "time", SimpleNamespace(monotonic=lambda: len(lines)))
    rows = gpu_throughput.measure("cpu", ["bf16", "fp32"], tiny=True, deadline=2.5, log=lines.append)
    assert len(lines) == 3
    assert [(row["family"], row["kind"], row["precision"]) for row in rows] == [("transformer", "train", "bf16")]


@pytest.mark.parametrize(("full_name", "short_name"), [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA H200", "H200"),
    ("NVIDIA H100 PCIe", "H100"), ("Tesla V100-SXM2-16GB", "V100"), ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090")])
def test_a_gpu_is_named_as_the_throughput_table_names_it(full_name, short_name):
    assert gpu_throughput.gpu_short_name(full_name) == short_name


def rows(*entries) -> pd.DataFrame:
    return pd.DataFrame([{"family": family, "kind": kind, "device": device, "precision": precision,
                          "floor_seconds_per_layer": floor, "flops_per_second": rate, "source": source}
                         for family, kind, device, precision, floor, rate, source in entries])


def test_adopting_replaces_the_measured_gpu_rows_and_adds_a_new_gpus_after_their_family_and_kind():
    throughput = rows(("transformer", "train", "cpu", "fp32", 7e-3, 6e10, "measured-cpu"),
                      ("transformer", "train", "H100", "bf16", 1e-3, 3e14, "scaled"),
                      ("transformer", "train", "H100", "fp32", 1e-3, 1.5e14, "scaled"),
                      ("transformer", "train", "A100", "bf16", 1e-3, 9e13, "scaled"),
                      ("lstm", "train", "cpu", "fp32", 2e-2, 7e10, "measured-cpu"),
                      ("lstm", "train", "H100", "bf16", 2e-3, 1e14, "scaled"))
    measured = rows(("transformer", "train", "H100", "bf16", 5e-4, 2e14, "measured-gpu"),
                    ("transformer", "train", "H200", "bf16", 4e-4, 2.5e14, "measured-gpu"),
                    ("transformer", "train", "cpu", "bf16", 1.0, 1.0, "measured-cpu"),
                    ("lstm", "train", "H100", "bf16", 3e-3, 5e13, "measured-gpu"))
    adopted = gpu_throughput.adopt(measured, throughput)
    expected = rows(("transformer", "train", "cpu", "fp32", 7e-3, 6e10, "measured-cpu"),
                    ("transformer", "train", "H100", "bf16", 5e-4, 2e14, "measured-gpu"),
                    ("transformer", "train", "H100", "fp32", 1e-3, 1.5e14, "scaled"),
                    ("transformer", "train", "A100", "bf16", 1e-3, 9e13, "scaled"),
                    ("transformer", "train", "H200", "bf16", 4e-4, 2.5e14, "measured-gpu"),
                    ("lstm", "train", "cpu", "fp32", 2e-2, 7e10, "measured-cpu"),
                    ("lstm", "train", "H100", "bf16", 3e-3, 5e13, "measured-gpu"))
    pd.testing.assert_frame_equal(adopted, expected)


@pytest.mark.slow
def test_the_plan_before_and_after_halves_its_compute_hours_with_every_gpu_rate_doubled():
    """The demo's DAG with its jobs on a GPU (config overrides, as `--config` would give them)."""
    inputs = gpu_throughput.plan_inputs(["demo/config.yaml"], {"device": "auto", "resources": {"gpu": 1}},
                                        replace_workflow_config=True)
    faster = THROUGHPUT.assign(flops_per_second=THROUGHPUT.flops_per_second.where(
        THROUGHPUT.device == "cpu", 2 * THROUGHPUT.flops_per_second))
    plan = gpu_throughput.plan_before_after(THROUGHPUT, faster, inputs, gpu="A100")
    assert {"paper table", "section", "all"} <= set(plan.group) and (plan.hours_before > 0).all()
    assert set(plan.gpu_before) == set(plan.gpu_after) == {"A100"}
    assert plan.compute_hours_after.to_numpy() == pytest.approx(plan.compute_hours_before.to_numpy() / 2)
    assert plan.floor_hours_after.to_numpy() == pytest.approx(plan.floor_hours_before.to_numpy())
    saved = plan.compute_hours_before - plan.compute_hours_after
    assert (plan.hours_before - plan.hours_after).to_numpy() == pytest.approx(saved.to_numpy())
    assert plan.ratio.to_numpy() == pytest.approx((plan.hours_after / plan.hours_before).to_numpy())
    # A GPU measured for the first time: the plan after is on it, the plan before on the config's plan.gpu (H200).
    l40s = THROUGHPUT[THROUGHPUT.device == "H200"].assign(device="L40S", source="measured-gpu: NVIDIA L40S")
    first = gpu_throughput.plan_before_after(THROUGHPUT, gpu_throughput.adopt(l40s, THROUGHPUT), inputs)
    assert set(first.gpu_before) == {"H200"} and set(first.gpu_after) == {"L40S"}
    assert first.ratio.to_numpy() == pytest.approx(1)  # H200's figures under L40S's name


def test_a_gpu_fit_takes_the_narrow_models_time_as_host_and_the_wide_ones_as_arithmetic_at_most_the_peak():
    """The plan prices a GPU step as the larger of host and device time; its fit reads each measurement so: the
    H200's fp32 transformer of 2026-11-28 (15.22 ms narrow, 22.26 ms for 695.8 GFLOP wide) is 31 TFLOP/s, not the
    sum model's 98 (above the 67 peak)."""
    narrow = {"seconds": 15.22e-3, "flops": 3.221e9, "layers": 4}
    wide = {"seconds": 22.26e-3, "flops": 695.785e9, "layers": 4}
    floor, rate = gpu_throughput.gpu_floor_and_rate(narrow, wide, 67e12)
    assert floor == pytest.approx(15.22e-3 / 4) and rate == pytest.approx(695.785e9 / 22.26e-3)
    assert gpu_throughput.floor_and_rate(narrow, wide)[1] > 67e12  # what the sum model made of it
    assert gpu_throughput.gpu_floor_and_rate(narrow, {**wide, "seconds": 1e-3}, 67e12)[1] == 67e12  # no slower: peak
    assert gpu_throughput.gpu_floor_and_rate(narrow, {**wide, "flops": 1e15}, 67e12)[1] == 67e12  # capped


def test_a_checks_log_refits_to_one_row_per_family_kind_and_precision():
    log = (REPO / "benchmarks/gpu/2026-11-28-NVIDIA_H200/gpu_check.1.log").read_text()
    rows = pd.DataFrame(gpu_throughput.refit_log(log, "measured-gpu: test"))
    assert len(rows) == 20 and not rows.duplicated(["family", "kind", "precision"]).any()
    assert (rows.flops_per_second <= rows.precision.map({"fp32": 67e12, "bf16": 989e12})).all()
    transformer = rows.set_index(["family", "kind", "precision"]).loc["transformer", "train", "fp32"]
    assert transformer.flops_per_second == pytest.approx(695.785e9 / 22.26e-3)
