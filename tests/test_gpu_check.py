"""The GPU check (benchmarks/gpu_check.py, issue 50) and its runner without Snakemake (kdflow.workflow.replay): the
kit runs every part on CPU in its tiny profile, so that it cannot rot between the sessions that get a GPU."""

import hashlib
import json
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from conftest import REPO, run_while_progressing
from kdflow.distillation.methods.registry import available_methods
from kdflow.transfer.signals import TeacherSignals
from kdflow.workflow import results_paths as paths
from kdflow.workflow.replay import NamedList, export, run

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402
import gpu_step  # noqa: E402


def test_a_named_list_reads_as_snakemakes_input_does():
    files = NamedList(["a.tsv", "b.json", "c.json"], {"data": [0, None], "signals": [1, 3]})
    assert files.data == "a.tsv" and files.signals == ["b.json", "c.json"] and list(files) == files
    assert files.get("transfer") is None and files.get("data") == "a.tsv" and list(files.keys()) == ["data", "signals"]
    with pytest.raises(AttributeError):
        files.transfer  # noqa: B018


def test_a_step_that_differs_on_the_device_beyond_its_tolerance_fails_the_check():
    """The comparison bites: a loss (3.4) that moves by 0.5 under autocast fails in bf16 (tolerance 5%), one that
    moves by 1e-4 in the device's fp32 step fails in fp32 (tolerance 1e-5), and the same path unshifted passes."""
    model, batch = torch.nn.Linear(3, 1), {"x": torch.ones(4, 3)}
    with torch.no_grad():  # an output well away from 0, where a relative gradient error means something
        model.weight.copy_(torch.tensor([[0.5, -0.25, 1.0]]))
        model.bias.fill_(0.3)
    calls = []

    def drifting(m, b):  # called for the CPU reference, then the device's fp32 step, then its bf16 step
        calls.append(None)
        return m(b["x"]).pow(2).mean() + 1 + (1e-4 if len(calls) == 2 else 0.0)

    def shifted_under_autocast(m, b):
        return m(b["x"]).pow(2).mean() + 1 + 0.5 * torch.is_autocast_enabled("cpu")

    code_paths = {"exact": (model, lambda m, b: m(b["x"]).pow(2).mean() + 1, batch),
                  "bf16 off by 15%": (model, shifted_under_autocast, batch),
                  "fp32 off by 1e-4": (model, drifting, batch)}
    rows = {(row["what"], row["precision"]): row["passed"]
            for row in gpu_check.step_checks(code_paths, "cpu", ["fp32", "bf16"], float("inf"))}
    assert rows == {("exact", "fp32"): True, ("exact", "bf16"): True, ("bf16 off by 15%", "fp32"): True,
                    ("bf16 off by 15%", "bf16"): False, ("fp32 off by 1e-4", "fp32"): False,
                    ("fp32 off by 1e-4", "bf16"): True}


def test_a_step_is_compared_in_training_mode_with_every_dropout_off():
    """cuDNN's LSTM has no backward pass in eval mode (it failed the check on an H200, 2026-11-28): the step runs in
    training mode, and two runs of it agree because no dropout draws."""
    torch.manual_seed(0)
    lstm, head = torch.nn.LSTM(4, 4, num_layers=2, dropout=0.5, batch_first=True), torch.nn.Dropout(0.5)
    model = torch.nn.ModuleDict({"lstm": lstm, "head": head})

    def loss_fn(m, batch):
        return m["head"](m["lstm"](batch["x"])[0]).pow(2).mean()

    batch = {"x": torch.randn(2, 3, 4)}
    steps = [gpu_check.one_step(model, loss_fn, batch, "cpu", gpu_check.Precision("fp32", "cpu")) for _ in range(2)]
    assert steps[0][0] == steps[1][0] and torch.equal(steps[0][1], steps[1][1])
    quiet = gpu_check.without_dropout(torch.nn.ModuleDict({"lstm": lstm, "head": torch.nn.Dropout(0.5)}))
    assert quiet.training and quiet["lstm"].dropout == 0.0 and quiet["head"].p == 0.0


def test_a_batch_moved_to_the_device_keeps_its_tokens_counts_on_the_host():
    """pack_padded_sequence takes its lengths on the host only: moving them to the GPU failed every LSTM student's
    correctness step on an H200 (2026-12-04). The jobs' batches keep them there (batching.to_device); so does the
    check's copy of them."""
    batch = {"input_ids": torch.ones(2, 3, dtype=torch.long), "lengths": torch.tensor([3, 2])}
    moved = gpu_check.moved({**batch, "signals": TeacherSignals(torch.zeros(2, 2), None, None)}, "meta")
    assert moved["input_ids"].is_meta and moved["signals"].logits.is_meta
    assert moved["lengths"].device.type == "cpu" and torch.equal(moved["lengths"], batch["lengths"])


def test_a_rerun_of_one_part_replaces_that_part_of_the_check_it_follows():
    first = {"started": "2026-11-28 18:42:13 UTC", "profile": "full", "environment": {"gpu": "NVIDIA H200"},
             "seconds": 480.0, "parts": {"correctness": {"error": "RuntimeError: cudnn", "seconds": 19.0},
                                         "throughput": {"rows": 20, "seconds": 42.0}}}
    rerun = {**first, "started": "2026-11-28 18:51:35 UTC", "seconds": 81.0,
             "parts": {"correctness": {"checks": 95, "failed": [], "seconds": 79.0}}}
    merged = gpu_check.merged_summary([first, rerun])
    assert merged["parts"] == {"correctness": {"checks": 95, "failed": [], "seconds": 79.0, "run": rerun["started"]},
                               "throughput": {"rows": 20, "seconds": 42.0, "run": first["started"]}}
    assert merged["runs"] == [first["started"], rerun["started"]] and merged["seconds"] == 561.0
    assert "2026-11-28 18:42:13 UTC, 2026-11-28 18:51:35 UTC" in gpu_check.summary_markdown(merged)


@pytest.mark.slow
def test_a_replay_stops_at_a_failed_job_and_says_so(tmp_path):
    """A job that fails (prepare_task, its data missing) exits non-zero in the record, and no job that needs it
    starts."""
    listing = tmp_path / "jobs.json"
    listing.write_text(json.dumps(export([REPO / "demo/config.yaml"],
                                         targets=[paths.TEACHER_METRICS.format(teacher="tiny_bert", task="sst2")])))
    records = run(listing, tmp_path / "work", jobs=2, log=lambda message: None)
    assert [(record["rule"], record["returncode"] > 0) for record in records] == [("prepare_task", True)]
    assert "data directory for task 'sst2' not found" in (tmp_path / "work/replay.log").read_text()


@pytest.mark.slow
def test_a_replayed_job_still_running_at_the_deadline_is_killed_and_nothing_starts_after_it(tmp_path):
    """The GPU check's caps: a teacher job that the deadline overtakes ends with a negative exit code (killed, not
    failed), writes no model, and the job that needs it does not start."""
    listing = tmp_path / "jobs.json"
    signals = paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train")
    listing.write_text(json.dumps(export([REPO / "demo/config.yaml"], targets=[signals])))
    work = tmp_path / "work"
    work.mkdir()
    (work / "demo").symlink_to(REPO / "demo", target_is_directory=True)
    assert [r["returncode"] for r in run(listing, work, log=print, targets=[paths.DATA.format(task="sst2")])] == [0]
    # three epochs of the demo teacher take several seconds; it is killed one second in
    records = run(listing, work, stop_at=time.monotonic() + 1.0, log=print)
    assert [(record["rule"], record["returncode"] < 0) for record in records] == [("finetune_teacher", True)]
    assert not (work / paths.TEACHER_MODEL.format(teacher="tiny_bert", task="sst2") / "model.safetensors").exists()


def test_a_second_evidence_call_adds_its_runs_to_the_first():
    first = {"started": "2026-11-28 21:33:08 UTC", "profile": "full", "environment": {"gpu": "NVIDIA H200"},
             "seconds": 481.0, "parts": {"evidence": {"runs": 4, "jobs": 16, "failed_jobs": 8, "seconds": 479.0}}}
    second = {**first, "started": "2026-11-28 21:41:28 UTC", "seconds": 290.0,
              "parts": {"evidence": {"runs": 7, "jobs": 10, "failed_jobs": 3, "seconds": 289.0}}}
    merged = gpu_check.merged_summary([first, second])
    assert merged["parts"]["evidence"] == {"runs": 11, "jobs": 26, "failed_jobs": 11, "seconds": 768.0,
                                           "run": f"{first['started']}, {second['started']}"}


def test_a_run_recorded_before_or_by_an_earlier_call_is_adopted_once():
    def run(seed, device="NVIDIA H200"):
        return {"experiment": "claims_alp", "task": "sst2", "student": "bert_3", "method": "kd", "point": "beta0.5",
                "seed": seed, "device": device}
    kept = gpu_check.unrecorded([run(1), run(2), run(2), run(3), run(3, "NVIDIA H100")], recorded=[run(1)])
    assert kept == [run(2), run(3), run(3, "NVIDIA H100")]



def test_a_check_retrains_the_runs_an_earlier_check_recorded_under_another_teacher_and_skips_its_own():
    """Two checks fine-tune two teachers (a GPU's fine-tuning is not bit-reproducible): the second check's runs can
    pair only with runs of its own teacher, so it counts as done only those, and trains both sides of a link."""
    def run(method, seed, digest, experiment="claims_alp"):
        return {"experiment": experiment, "task": "sst2", "student": "bert_3", "method": method, "point": "default",
                "seed": seed, "teacher_digest": digest}
    first_check = [run("kd", 1, "aaaa"), run("kd", 2, "aaaa"), run("no_kd", 1, "aaaa")]
    second_call = [run("pkd", 1, "bbbb")]  # an earlier call of this same check, its teacher kept in the work folder
    untracked = [{**run("kd", 3, None), "teacher_digest": None}]  # recorded before digests: pairs with nothing
    recorded = first_check + second_call + untracked
    assert gpu_check.same_teacher(recorded, {("claims_alp", "sst2"): "bbbb"}) == second_call
    assert gpu_check.same_teacher(recorded, {("claims_alp", "sst2"): "aaaa"}) == first_check
    assert gpu_check.same_teacher(recorded, {("claims_alp", "sst2"): None}) == []  # its teacher not trained yet
    assert gpu_check.same_teacher([run("kd", 1, "aaaa", "claims_ukd")], {("claims_alp", "sst2"): "aaaa"}) == []

def test_the_evidence_trains_a_groups_held_out_seeds_with_the_next_groups_search():
    """A wave is one replay: the GPU's job slots hold the last group's kept points on their other seeds (first,
    seed by seed) and the next group's search; a group's points are asked for once its search has run."""
    def group(name, methods):
        return {"experiment": name, "task": "sst2", "student": "bert_3", "methods": list(methods), "seeds": [1, 2, 3],
                "points": methods}
    groups = [group("a", {"no_kd": ["default"], "kd": ["beta0.2", "beta0.5"]}), group("b", {"pkd": ["g1", "g2"]})]
    asked, waves = [], []
    def kept(chosen):
        asked.append((chosen["experiment"], len(waves)))
        return {"no_kd": "default", "kd": "beta0.5"} if chosen["experiment"] == "a" else {"pkd": "g2"}
    for wave in gpu_check.evidence_waves(groups, kept):
        waves.append([(g["experiment"], r["method"], r["point"], r["seed"]) for g, r in wave])
    assert waves == [
        [("a", "no_kd", "default", 1), ("a", "kd", "beta0.2", 1), ("a", "kd", "beta0.5", 1)],
        [("a", "no_kd", "default", 2), ("a", "kd", "beta0.5", 2), ("a", "no_kd", "default", 3),
         ("a", "kd", "beta0.5", 3), ("b", "pkd", "g1", 1), ("b", "pkd", "g2", 1)],
        [("b", "pkd", "g2", 2), ("b", "pkd", "g2", 3)]]
    assert asked == [("a", 1), ("b", 2)]  # after the wave holding its search


def test_a_second_check_of_the_same_day_and_gpu_is_kept_beside_the_first_not_over_it(tmp_path):
    first = {"started": "2026-11-28 18:42:13 UTC", "environment": {"gpu": "NVIDIA H200"}}
    second = {**first, "started": "2026-11-28 21:33:08 UTC"}
    assert gpu_check.kept_folder(first, tmp_path) == tmp_path / "2026-11-28-NVIDIA_H200"
    (tmp_path / "2026-11-28-NVIDIA_H200").mkdir()
    (tmp_path / "2026-11-28-NVIDIA_H200/summary.json").write_text(json.dumps(first))
    assert gpu_check.kept_folder(first, tmp_path) == tmp_path / "2026-11-28-NVIDIA_H200"
    assert gpu_check.kept_folder(second, tmp_path) == tmp_path / "2026-11-28-2133-NVIDIA_H200"


@pytest.mark.slow
def test_the_gpu_check_runs_every_part_on_cpu_in_its_tiny_profile(tmp_path):
    out = tmp_path / "out"
    result = run_while_progressing([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--tiny", "--out",
                                    str(out), "--carry", str(tmp_path / "carry"), "--work", str(tmp_path / "work"),
                                    "--jobs", "2"], cwd=REPO)
    assert result.returncode == 0, result.stdout[-6000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["parts"]) == list(gpu_check.PARTS)
    assert not [part for part, found in summary["parts"].items() if "error" in found], summary
    checks = pd.read_csv(out / "correctness.csv")
    assert checks.passed.all(), checks[~checks.passed]
    steps = pd.read_csv(out / "step.csv")
    assert set(zip(steps.family, steps.form)) == {(family, form) for family in gpu_step.FAMILIES
                                                  for form in ("eager", "compiled")}
    assert "error" not in steps and (steps.ms > 0).all() and (steps.flops > 0).all()
    assert (steps[steps.form == "eager"].syncs == 0).all()
    steps = checks[checks.check == "one step against CPU fp32"]
    assert {f"method {name} (bert_s)" for name in available_methods()} <= set(steps.what)
    assert set(steps.precision) == {"fp32", "bf16"} and "probe" in set(checks.what)
    assert {"finetune_teacher", "compute_teacher_signals", "distill_student"} <= {
        what.split()[0] for what in checks[checks.check == "demo job replayed"].what}
    throughput = pd.read_csv(out / "throughput_measured.csv")
    reference = pd.read_csv(REPO / "reference/throughput.csv")
    scaled = reference[reference.source.str.startswith("scaled")]
    assert set(zip(throughput.family, throughput.kind)) == set(zip(scaled.family, scaled.kind))
    assert (throughput.flops_per_second > 0).all()
    sharing = pd.read_csv(out / "sharing.csv")
    assert set(sharing.k) == {1, 2} and set(sharing.family) == {"bilstm", "bert_k2"}
    assert (sharing.examples_per_second > 0).all()
    packs = pd.read_csv(out / "packs.csv")
    assert set(zip(packs.family, packs.k)) == {(family, k) for family in ("bilstm", "gated_cnn") for k in (1, 2)}
    assert (packs.examples_per_s > 0).all() and (packs[packs.k == 1].speedup == 1).all()
    [record] = [json.loads(line) for line in (out / "evidence_runs.jsonl").read_text().splitlines()]
    assert record["method"] == "no_kd" and record["profile"] == "tiny" and len(record["dev_predictions"]) > 0
    assert set(record["teacher_dev"]) == {"accuracy"}, record["teacher_dev"]
    group = gpu_check.TINY_GROUPS[0]  # which teacher: the digest of its weights (claims pair runs of one teacher)
    teacher = paths.TEACHER_MODEL.format(teacher=group["teacher"], task=group["task"]) + "/model.safetensors"
    [weights] = [path for path in (tmp_path / "work").rglob("model.safetensors") if path.as_posix().endswith(teacher)]
    assert record["teacher_digest"] == hashlib.sha256(weights.read_bytes()).hexdigest()[:16]
    # a second call on the same work directory (a still-warm GPU) trains nothing again and reads the run back
    again = run_while_progressing([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--tiny", "--parts",
                                   "environment", "evidence", "--out", str(tmp_path / "again"), "--carry",
                                   str(tmp_path / "carry"), "--work", str(tmp_path / "work")], cwd=REPO)
    assert again.returncode == 0, again.stdout[-6000:]
    [read_back] = [json.loads(line) for line in (tmp_path / "again/evidence_runs.jsonl").read_text().splitlines()]
    kept = ("dev", "wall_seconds", "teacher_dev", "teacher_digest", "dev_predictions")
    assert {key: read_back[key] for key in kept} == {key: record[key] for key in kept}
    assert json.loads((tmp_path / "again/summary.json").read_text())["parts"]["evidence"]["jobs"] == 0
    refused = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--adopt", str(out)], cwd=REPO,
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "only a full run on a GPU is adopted" in refused.stderr


def test_the_evidence_takes_kd_and_no_kd_first_then_every_other_claims_method_once():
    """The carried groups (benchmarks/gpu_carry.py): ALP-KD's KD > no KD first, whose two sides need no other
    method; then each method of the claims experiments once, with the grid points kdflow expands for it."""
    import gpu_carry
    from quality_claims import EXPERIMENTS

    from kdflow.workflow.job_settings import grid_points

    config = gpu_carry.evidence_config()
    groups = gpu_carry.evidence_groups(config)
    assert (groups[0]["experiment"], groups[0]["methods"]) == ("claims_alp", ["no_kd", "kd"])
    taken = [(group["experiment"], method) for group in groups for method in group["methods"]]
    expected = [(name, method) for name in EXPERIMENTS if name in config["experiments"]
                for method in config["experiments"][name]["methods"]]
    assert sorted(taken) == sorted(expected) and len(set(taken)) == len(taken)
    for group in groups:
        spec = config["experiments"][group["experiment"]]
        assert group["seeds"] == [1, 2, 3, 4, 5] and group["task"] == "sst2" and group["teacher"] == spec["teacher"]
        assert all(group["points"][method] == grid_points(spec, method) for method in group["methods"])



def test_the_step_part_times_every_eager_step_before_any_compiled_one_and_the_lstms_compile_last():
    """A compilation cannot be stopped at the part's deadline (the BiLSTM's ran past the check's call on an H200,
    2026-12-04, and took the rows before it along): eager rows first, the slowest compilations last."""
    order = gpu_step.measured_order(["fp32", "bf16"])
    forms = [form for form, _, _ in order]
    assert forms == sorted(forms, key=["eager", "compiled"].index) and len(order) == 4 * 2 * 2
    compiled = [family for form, family, _ in order if form == "compiled"]
    assert compiled[-4:] == ["bilstm", "bilstm", "lstm_s", "lstm_s"]
    assert len(set(order)) == len(order)
