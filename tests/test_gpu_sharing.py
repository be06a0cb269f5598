"""The GPU check's small-students-sharing part (benchmarks/gpu_sharing.py): K processes training side by side run
on CPU with the demo's sizes, the rule that turns a measurement into config.yaml's gpu_sharing, and the rewrite of
that one line and its comment."""

import math
import shutil
import sys
import time

import pandas as pd
import pytest
import yaml
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_sharing  # noqa: E402

NOTE = "on one NVIDIA H100 80GB HBM3 in bf16, 2026-11-28"


def test_k_processes_train_side_by_side_on_cpu_and_the_command_writes_the_measurement(tmp_path, capsys):
    """One row per family and K, each with positive throughput; K=2 holds two processes' memory."""
    gpu_sharing.main(["--device", "cpu", "--tiny", "--ks", "1", "2", "--out", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "sharing.csv")
    families = list(gpu_sharing.FAMILIES)
    assert list(zip(frame.family, frame.k)) == [(family, k) for family in families for k in (1, 2)]
    assert frame.config_key.tolist() == [gpu_sharing.FAMILIES[family].config_key for family in frame.family]
    assert frame.error.isna().all(), frame.error.tolist()  # written empty
    for column in ("examples_per_second", "per_process_examples_per_second", "peak_reserved_gb"):
        assert all(math.isfinite(value) and value > 0 for value in frame[column]), (column, frame[column].tolist())
    assert (frame[frame.k == 1].speedup == 1).all()
    pairs = frame[frame.k == 2]
    in_all = pairs.examples_per_second.tolist()
    assert (pairs.per_process_examples_per_second * 2).tolist() == pytest.approx(in_all, rel=1e-5)  # CSV's 6 digits
    assert (pairs.sum_peak_reserved_gb >= pairs.peak_reserved_gb).all()
    assert set(frame.device) == {"cpu"} and set(frame.precision) == {"bf16"}
    printed = capsys.readouterr().out.splitlines()
    assert sum("examples/s in all" in line for line in printed) == len(frame)  # a progress line per measurement
    assert printed[-1].startswith("recommended gpu_sharing: {'bilstm': ")


def test_a_deadline_already_past_measures_nothing():
    frame = gpu_sharing.measure("cpu", ks=(1, 2), tiny=True, deadline=time.monotonic() - 1, log=lambda line: None)
    assert frame.empty and list(frame.columns) == gpu_sharing.COLUMNS
    assert gpu_sharing.recommend(frame) == {}


def measured(family: str, throughputs: dict[int, float], gb_per_process: float = 1.0, device_gb: float = 80.0,
             errors: dict[int, str] | None = None) -> list[dict]:
    return [{"family": family, "config_key": gpu_sharing.FAMILIES[family].config_key, "k": k,
             "examples_per_second": rate, "speedup": rate / throughputs[1], "batch_size": 32,
             "sum_peak_reserved_gb": k * gb_per_process, "device_memory_gb": device_gb,
             "error": (errors or {}).get(k, "")} for k, rate in throughputs.items()]


def test_a_larger_k_is_taken_only_for_a_clear_gain_that_fits_in_memory():
    frame = pd.DataFrame(
        measured("bilstm", {1: 100, 2: 180, 4: 189, 8: 300})  # 4 adds 5% over 2: the walk stops at 2
        + measured("gated_cnn", {1: 100, 2: 190, 4: 350, 8: 600}, gb_per_process=9.0)  # 4 x 9 GB fits in 80%, 8 not
        + measured("bilstm_s", {1: 100, 2: 120, 4: 200, 8: 210})  # +20%, +67%, +5%
        + measured("bert_k2", {1: 100, 2: 150}, errors={2: "torch.OutOfMemoryError: CUDA out of memory"})
    )
    assert gpu_sharing.recommend(frame) == {"bilstm": 2, "gated_cnn": 4, "bilstm_s": 4, "bert_k": 1}
    # nothing fits: one job to a GPU
    assert gpu_sharing.recommend(pd.DataFrame(measured("bilstm", {1: 100, 2: 200}, 70.0))) == {"bilstm": 1}


@pytest.fixture
def config_copy(tmp_path):
    path = tmp_path / "config.yaml"
    shutil.copyfile(REPO / "config.yaml", path)
    return path


def parts(text: str) -> tuple[str, str, str]:
    """What comes before the comment block above ``gpu_sharing:``, that comment as one line of words, and what
    comes after the ``gpu_sharing:`` line."""
    lines = text.splitlines(keepends=True)
    line = next(i for i, entry in enumerate(lines) if entry.startswith("gpu_sharing:"))
    comment = line
    while lines[comment - 1].startswith("#"):
        comment -= 1
    words = " ".join(entry.removeprefix("# ").strip() for entry in lines[comment:line])
    return "".join(lines[:comment]), words, "".join(lines[line + 1:])


def test_adopting_rewrites_only_the_gpu_sharing_line_and_its_comment(config_copy):
    before = config_copy.read_text()
    recommendation = {"bilstm": 2, "gated_cnn": 8, "bilstm_s": 4, "bert_k": 1, "bert_s_never_used": 3}
    assert gpu_sharing.adopt(recommendation, config_copy, NOTE) == {"bilstm": 2, "gated_cnn": 8, "bilstm_s": 4,
                                                                      "bert_k": 1}
    after = config_copy.read_text()
    (head, comment, tail), (old_head, old_comment, old_tail) = parts(after), parts(before)
    assert (head, tail) == (old_head, old_tail)
    config = yaml.safe_load(after)
    assert config["gpu_sharing"] == {"bilstm": 2, "gated_cnn": 8, "bilstm_s": 4, "bert_k": 1}
    assert {**config, "gpu_sharing": None} == {**yaml.safe_load(before), "gpu_sharing": None}
    assert NOTE not in old_comment and "over the measured speedup (reference/gpu_sharing.csv)" in comment
    assert comment.endswith(f"for bilstm, gated_cnn, bilstm_s, bert_k {NOTE}.")
    assert all(len(line) <= 120 for line in after.splitlines()[len(head.splitlines()):][:5])


def test_families_left_unmeasured_keep_their_k_and_are_named(config_copy):
    before = yaml.safe_load(config_copy.read_text())["gpu_sharing"]
    assert gpu_sharing.adopt({"bilstm": 2}, config_copy, NOTE) == {**before, "bilstm": 2}
    assert parts(config_copy.read_text())[1].endswith(f"for bilstm {NOTE}; gated_cnn, bilstm_s not measured.")


def test_a_family_whose_sweep_stopped_short_of_the_largest_k_is_not_adopted():
    """The check's deadline stopped bilstm_s at K = 2 (an H200, 2026-12-04): its K = 2 is no measurement of K = 8."""
    frame = pd.DataFrame(measured("bilstm", {1: 100, 2: 200, 4: 400, 8: 800}) + measured("bilstm_s", {1: 100, 2: 200}))
    assert gpu_sharing.recommend(frame) == {"bilstm": 8, "bilstm_s": 2}
    assert gpu_sharing.adopted(frame) == {"bilstm": 8}


def test_the_command_adopts_a_gpu_measurement_and_refuses_a_cpu_one(tmp_path, config_copy):
    rows = measured("bilstm", {1: 100, 2: 200, 4: 300}) + measured("bert_k2", {1: 50, 2: 100})  # BERT-2: never packed
    frame = pd.DataFrame([row | {"precision": "bf16", "date": "2026-11-28"} for row in rows])
    for device in ("NVIDIA H100 80GB HBM3", "cpu"):
        frame.assign(device=device).to_csv(tmp_path / f"{device[:3]}.csv", index=False)
    before = yaml.safe_load(config_copy.read_text())["gpu_sharing"]
    speedups = tmp_path / "gpu_sharing.csv"
    pd.DataFrame({"student_type": ["gated_cnn", "bilstm"], "k": [4, 4], "speedup": [3.0, 9.9], "device": "A100",
                  "source": "earlier"}).to_csv(speedups, index=False)
    gpu_sharing.main(["--adopt", str(tmp_path / "NVI.csv"), "--config", str(config_copy), "--speedups", str(speedups)])
    assert yaml.safe_load(config_copy.read_text())["gpu_sharing"] == {**before, "bilstm": 4}
    # the plan's speedups: bilstm's measured ones replace its earlier row, gated_cnn's row stays
    table = pd.read_csv(speedups)
    assert table[["student_type", "k", "speedup"]].values.tolist() == [
        ["gated_cnn", 4, 3.0], ["bilstm", 1, 1.0], ["bilstm", 2, 2.0], ["bilstm", 4, 3.0]]
    assert table.source.iloc[-1] == "benchmarks/gpu_sharing.py, bilstm at batch 32, bf16, 2026-11-28"
    assert parts(config_copy.read_text())[1].endswith(f"for bilstm {NOTE}; gated_cnn, bilstm_s not measured.")
    with pytest.raises(SystemExit, match="not a GPU measurement"):
        gpu_sharing.main(["--adopt", str(tmp_path / "cpu.csv"), "--config", str(config_copy)])
