"""The papers' claims tested on real data: verdicts from a record of runs (kdflow.reporting.claims)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pandas as pd

from kdflow.reporting.claims import (claims_document, compare_sides, interval, read_margins, read_runs, searched_points,
                                     verdict, verdicts)
from scipy.stats import t as scipy_t


def runs_of(method, experiment, dev_by_seed, point="default", fixed=0, task="sst2"):
    """Runs of one grid point on 100 dev examples of label 1, each seed right on its first ``dev`` examples."""
    return [{"experiment": experiment, "task": task, "student": "bert_3", "method": method, "point": point,
             "seed": seed, "metric": "accuracy", "dev": dev, "cpu_seconds": 60.0, "commit": "0" * 40,
             "dev_predictions": [1] * int(dev) + [0] * (100 - int(dev))} for seed, dev in dev_by_seed.items()]


LABELS = {"sst2": [1] * 100}
MARGINS = read_margins(Path(__file__).resolve().parents[1] / "benchmarks/quality/claim_margins.yaml")
# The paper's numbers of ALP-KD's claim as kdflow looks them up (Universal-KD Table 2's BERT-4 rows): KD 2.2 over
# no KD, PKD 0.3 under KD.
REFERENCE = pd.DataFrame([{"source": "universal_kd_wu2021", "table": 2, "student": "bert-4", "task": "sst2",
                           "split": "dev", "method": method, "value": value}
                          for method, value in (("no_kd", 88.2), ("kd", 90.4), ("pkd", 90.1))])


def test_a_link_holds_when_its_interval_at_the_claims_level_lies_above_zero():
    # kd is right on 30 more of the 100 dev examples, the same 30 for every seed: the examples, not only the
    # seeds, must be many enough (10 such examples would leave the interval across 0: 100 examples hold few)
    runs = (runs_of("kd", "claims_alp", {1: 90, 2: 91, 3: 89, 4: 90})
            + runs_of("no_kd", "claims_alp", {1: 60, 2: 62, 3: 61, 4: 61})  # kd ahead by 29
            + runs_of("pkd", "claims_alp", {1: 91, 2: 90, 3: 90, 4: 92}))  # pkd ahead of kd by 0.75
    found = verdicts(runs, LABELS, MARGINS, reference=REFERENCE).set_index("link")
    kd = found.loc["KD > no KD"]
    assert kd["difference"] == pytest.approx(29.0) and kd["pairs"] == 4 and kd["verdict"] == "holds"
    # two links tested in the claim: each interval at 1 - 0.05 / 2, from the t quantile at 3 degrees of freedom
    assert kd["family"] == 2 and kd["level"] == pytest.approx(0.975)
    half = scipy_t.ppf(1 - 0.025 / 2, 3) * kd["standard_error"]
    assert (kd["low"], kd["high"]) == (pytest.approx(29.0 - half), pytest.approx(29.0 + half)) and kd["low"] > 0
    assert kd["paper_gain"] == pytest.approx(2.2) and kd["margin"] == pytest.approx(2.2)
    assert found.loc["PKD > KD", "verdict"] == "inconclusive"
    assert found.loc["PKD > KD", "margin"] == 1.0  # the paper's -0.3 is no margin: the stated one point
    assert found.loc["PKD > KD", "detectable"] > 0.3


def test_the_four_verdicts_are_exclusive_and_follow_where_the_interval_lies():
    """By hand, for a `>` link with margin 2 and a `>=` link (non-inferiority) with margin 1."""
    def of(low, high, margin, relation):
        return verdict({"low": low, "high": high, "margin": margin}, relation)

    assert of(-3.0, -0.5, 2.0, ">") == "contradicted"
    assert of(0.1, 0.5, 2.0, ">") == "holds"  # real, and smaller than the margin: the interval says how large
    assert of(-0.5, 1.5, 2.0, ">") == "no difference as large as the margin"
    assert of(-0.5, 2.5, 2.0, ">") == "inconclusive"
    assert of(-0.9, 0.4, 1.0, ">=") == "holds"  # worse by less than the margin at most: not inferior
    assert of(-3.0, -1.5, 1.0, ">=") == "contradicted"  # worse by more than the margin
    assert of(-0.5, -0.2, 1.0, ">=") == "holds"
    assert of(-1.5, 0.5, 1.0, ">=") == "inconclusive"
    assert of(math.nan, math.nan, 1.0, ">") == "inconclusive"


def test_a_claims_links_are_one_family_whose_error_rate_is_alpha():
    """Simultaneous intervals: with 6 tested links of one true difference of 0 each, the chance that any link gets
    holds or contradicted is at most 0.05 (simulated: 400 claims of 6 such links, 5 seeds on 1,000 examples)."""
    rng = np.random.default_rng(7)
    gold = np.ones(1000)
    wrong = 0
    for _ in range(400):
        found = []
        for _ in range(6):
            seeds = {s: (rng.random(1000) < 0.8).astype(int) for s in range(1, 6)}
            others = {s: (rng.random(1000) < 0.8).astype(int) for s in range(1, 6)}
            result = compare_sides({"held_out": [{"seed": s, "dev_predictions": v} for s, v in seeds.items()],
                                    "metric": "accuracy"},
                                   {"held_out": [{"seed": s, "dev_predictions": v} for s, v in others.items()],
                                    "metric": "accuracy"}, gold, margin=2.0)
            found.append(verdict({**result, **interval(result, 6)}, ">"))
        wrong += any(v in ("holds", "contradicted") for v in found)
    assert wrong / 400 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 400)


def test_a_link_the_runs_reverse_is_contradicted_and_a_missing_side_is_left_out():
    runs = runs_of("kd", "claims_alp", {1: 60, 2: 61, 3: 62}) + runs_of("pkd", "claims_alp", {1: 90, 2: 92, 3: 91})
    found = verdicts(runs, LABELS, MARGINS).set_index("link")
    assert found.loc["PKD > KD", "verdict"] == "holds"
    runs = runs_of("kd", "claims_alp", {1: 90, 2: 92, 3: 91}) + runs_of("pkd", "claims_alp", {1: 60, 2: 61, 3: 62})
    found = verdicts(runs, LABELS, MARGINS).set_index("link")
    assert found.loc["PKD > KD", "verdict"] == "contradicted"
    assert "KD > no KD" not in found.index  # no no_kd runs


def test_equal_sides_show_no_difference_as_large_as_the_margin():
    # kd and no_kd differ by at most one example per seed: the interval lies below the paper's 2.2, the margin
    runs = (runs_of("kd", "claims_alp", {1: 80, 2: 81, 3: 80, 4: 81, 5: 80})
            + runs_of("no_kd", "claims_alp", {1: 80, 2: 80, 3: 81, 4: 80, 5: 81}))
    row = verdicts(runs, LABELS, MARGINS, reference=REFERENCE).set_index("link").loc["KD > no KD"]
    assert row["high"] < row["margin"] == pytest.approx(2.2) and row["low"] < 0
    assert row["verdict"] == "no difference as large as the margin"
    assert row["seeds_needed"] is not None and row["seeds_needed"] >= 2


def test_a_link_without_a_declared_margin_is_a_clear_error():
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 81}) + runs_of("no_kd", "claims_alp", {1: 70, 2: 72})
    with pytest.raises(ValueError, match="no margin declared for 'claims_alp/kd > claims_alp/no_kd' on sst2"):
        verdicts(runs, LABELS, {})


def test_each_method_is_judged_on_the_seeds_that_did_not_choose_its_point():
    # beta0.7 wins the search on seed 1 (85 > 75): its headline is that 85, and only its seeds 2-3 are judged
    runs = (runs_of("kd", "claims_alp", {1: 75, 2: 95}, point="beta0.2")
            + runs_of("kd", "claims_alp", {1: 85, 2: 84, 3: 82}, point="beta0.7")
            + runs_of("no_kd", "claims_alp", {1: 70, 2: 71, 3: 72}))
    markdown = claims_document(runs, LABELS, MARGINS).markdown()
    assert ("| sst2 | claims_alp | KD | accuracy | beta0.7 | 85.00 | 2 | 83.00 ± 1.41 | beta0.2 75.00, beta0.7 85.00 |"
            in markdown)
    row = verdicts(runs, LABELS, MARGINS).set_index("link").loc["KD > no KD"]
    assert row["pairs"] == 2 and row["difference"] == pytest.approx(((84 - 71) + (82 - 72)) / 2)


def test_the_best_of_ckds_bucketings_on_the_first_seed_stands_for_ckd():
    # PO wins CKD's choice on seed 1 (80 > 70) although NO is better on the held-out seeds; with a choice made, the
    # first seed is not judged
    runs = (runs_of("ckd_no", "claims_alp", {1: 70, 2: 90, 3: 91}) + runs_of("ckd_po", "claims_alp",
                                                                               {1: 80, 2: 81, 3: 80})
            + runs_of("alp", "claims_alp", {1: 80, 2: 80, 3: 80}))
    row = verdicts(runs, LABELS, MARGINS).set_index("link").loc["ALP-KD >= CKD-PO"]
    assert row["pairs"] == 2 and row["difference"] == pytest.approx(-0.5)


def test_runs_without_predictions_or_a_clean_commit_take_no_part_in_a_verdict():
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 81, 3: 79}) + runs_of("no_kd", "claims_alp", {1: 70, 2: 72, 3: 71})
    assert len(verdicts(runs, LABELS, MARGINS)) == 1
    dirty = [dict(run, commit=run["commit"] + "-dirty") if run["method"] == "kd" else run for run in runs]
    assert verdicts(dirty, LABELS, MARGINS).empty
    transcribed = [{k: v for k, v in run.items() if k != "dev_predictions"} for run in runs]
    assert verdicts(transcribed, LABELS, MARGINS).empty


def test_the_committed_record_reads_and_renders(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(run) + "\n" for run in runs_of("kd", "claims_alp", {1: 80})))
    runs = read_runs(path)
    assert [run["dev"] for run in runs] == [80]
    assert read_runs(tmp_path / "none.jsonl") == []
    html = claims_document(runs, LABELS, MARGINS).html()
    assert "No link of this claim has both sides&#x27; searches complete" in html and "<td>80.00</td>" in html
    assert "The thesis, random vectors: KD over a large transfer set" in html  # both of the thesis's claims
    assert np.isclose(runs[0]["cpu_seconds"], 60.0)


def test_a_search_that_has_not_run_every_point_yet_takes_no_part_in_a_verdict():
    config = {"experiments": {"claims_alp": {"methods": {"kd": None, "no_kd": None}, "grid": {"beta": [0.2, 0.5]}}}}
    grids = searched_points(config)
    assert grids == {("claims_alp", "kd"): {"beta0.2", "beta0.5"}, ("claims_alp", "no_kd"): {"default"}}
    runs = runs_of("kd", "claims_alp", {1: 90, 2: 91, 3: 89, 4: 90}, point="beta0.2") + runs_of(
        "no_kd", "claims_alp", {1: 60, 2: 62, 3: 61, 4: 61})
    assert verdicts(runs, LABELS, MARGINS, grids).empty  # beta0.5 may still win KD's search
    assert "| beta0.2 (search 1 of 2) |" in claims_document(runs, LABELS, MARGINS, grids).markdown()
    runs += runs_of("kd", "claims_alp", {1: 60}, point="beta0.5")
    assert verdicts(runs, LABELS, MARGINS, grids).set_index("link").loc["KD > no KD", "verdict"] == "holds"


def test_a_resumed_runs_partial_cpu_time_is_left_out_of_the_mean_and_said():
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 81})
    runs[1] |= {"cpu_seconds": 6.0, "resumed": True}  # its last attempt alone
    text = claims_document(runs, LABELS, MARGINS, {}).markdown()
    assert "| 80.00 | 2 | 80.50 ± 0.71 |" in text and "| 1.0 |" in text  # 60 s: the resumed run left out of the mean
    assert "1 of them resumed from a checkpoint" in text and "0.0 CPU-hours" in text


def test_gpu_runs_are_costed_by_their_wall_clock_as_they_share_the_gpu():
    runs = [run | {"device": "NVIDIA H200", "wall_seconds": 150.0, "cpu_seconds": None}
            for run in runs_of("kd", "claims_alp", {1: 80, 2: 81})]
    text = claims_document(runs, LABELS, MARGINS, {}).markdown()
    assert "wall-min per run" in text and "| 2.5 |" in text and "0.1 wall-hours" in text
    assert "jobs shared the GPU" in text and "CPU-hours" not in text
    runs[1] |= {"resumed": True}  # a continuation call resumed it from its checkpoint
    assert "their wall time is their last attempt's alone" in claims_document(runs, LABELS, MARGINS, {}).markdown()


def on_gpu(runs, teacher=None, invocation="benchmarks/gpu_check.py --work /tmp/kdflow-check"):
    """GPU runs, with their teacher's digest (None: recorded before digests, named by commit and device)."""
    return [run | {"device": "NVIDIA H200", "wall_seconds": 150.0, "invocation": invocation}
            | ({"teacher_digest": teacher} if teacher else {}) for run in runs]


def test_runs_of_different_teachers_are_never_paired_and_the_pairs_left_out_are_said():
    """Each GPU check fine-tunes its teacher again: a side trained under one teacher and the other side under
    another differ by the teachers too, so those seeds are left out, not tested."""
    kd, no_kd = runs_of("kd", "claims_alp", {1: 90, 2: 91, 3: 89, 4: 90}), runs_of("no_kd", "claims_alp",
                                                                                  {1: 60, 2: 62, 3: 61, 4: 61})
    same = verdicts(on_gpu(kd, "aaaa") + on_gpu(no_kd, "aaaa"), LABELS, MARGINS).set_index("link").loc["KD > no KD"]
    assert (same["pairs"], same["other_teachers"], same["verdict"]) == (4, 0, "holds")
    other = verdicts(on_gpu(kd, "aaaa") + on_gpu(no_kd, "bbbb"), LABELS, MARGINS).set_index("link").loc["KD > no KD"]
    assert (other["pairs"], other["other_teachers"], other["verdict"]) == (0, 4, "inconclusive")
    assert math.isnan(other["difference"])
    mixed = on_gpu(no_kd[:2], "aaaa") + on_gpu(no_kd[2:], "bbbb")  # seeds 3 and 4 under another teacher
    found = verdicts(on_gpu(kd, "aaaa") + mixed, LABELS, MARGINS).set_index("link").loc["KD > no KD"]
    assert (found["pairs"], found["other_teachers"]) == (2, 2)  # seed 1 chose nothing: no_kd has no grid
    text = claims_document(on_gpu(kd, "aaaa") + mixed, LABELS, MARGINS, {}).markdown()
    assert "Seed pairs left out because their two runs learnt from different teachers" in text
    assert "sst2 KD \\> no KD, 2." in text  # Markdown escapes the >


def test_runs_recorded_before_teacher_digests_pair_with_each_other_and_cpu_runs_always_pair():
    kd, no_kd = runs_of("kd", "claims_alp", {1: 90, 2: 91, 3: 89}), runs_of("no_kd", "claims_alp", {1: 60, 2: 62, 3: 61})
    # the two calls of 2026-11-28's check, the second on the first's work directory: one teacher
    first_call = "benchmarks/gpu_check.py --parts environment evidence --out /root/out"
    second_call = "benchmarks/gpu_check.py --parts environment evidence --work /tmp/gpu-check-e1k_0d69 --budget 290"
    found = verdicts(on_gpu(kd, invocation=first_call) + on_gpu(no_kd, invocation=second_call), LABELS, MARGINS)
    assert found.set_index("link").loc["KD > no KD", "pairs"] == 3
    later = on_gpu(no_kd, "cccc")  # a later check's teacher
    found = verdicts(on_gpu(kd, invocation=first_call) + later, LABELS, MARGINS).set_index("link").loc["KD > no KD"]
    assert (found["pairs"], found["other_teachers"]) == (0, 3)
    assert verdicts(kd + no_kd, LABELS, MARGINS).set_index("link").loc["KD > no KD", "other_teachers"] == 0  # CPU runs

    def undigested(runs, invocation):  # a check that found no teacher weights to digest
        return [run | {"teacher_digest": None} for run in on_gpu(runs, invocation=invocation)]

    found = verdicts(undigested(kd, first_call) + undigested(no_kd, second_call), LABELS, MARGINS).set_index("link")
    assert (found.loc["KD > no KD", "pairs"], found.loc["KD > no KD", "other_teachers"]) == (0, 3)


REPO = Path(__file__).resolve().parents[1]


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_every_committed_run_names_a_clean_commit_on_main():
    if git(REPO, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the history the recorded commits are in")
    commits = {run["commit"] for run in read_runs(REPO / "benchmarks/quality/claims_runs.jsonl")}
    assert not [c for c in commits if c.endswith("-dirty")]
    off_main = [c for c in commits if subprocess.run(["git", "merge-base", "--is-ancestor", c, "HEAD"], cwd=REPO,
                                                     capture_output=True).returncode != 0]
    assert not off_main, f"recorded from commits not in this branch's history: {off_main}"


def test_the_benchmark_records_runs_only_from_a_clean_commit_on_main(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from quality_claims import OWN_FILES, recordable_commit

    repo = tmp_path / "repo"
    (repo / "kdflow").mkdir(parents=True)
    (repo / "benchmarks/quality").mkdir(parents=True)
    for name in ("kdflow/loss.py", OWN_FILES[0]):
        (repo / name).write_text("first\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "0")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "1")
    head = git(repo, "rev-parse", "HEAD")
    assert recordable_commit(repo) == head
    (repo / OWN_FILES[0]).write_text("first\nrun\n")  # the benchmark appending to its record is fine
    assert recordable_commit(repo) == head
    (repo / "kdflow/loss.py").write_text("edited\n")
    with pytest.raises(SystemExit, match="uncommitted changes \\(kdflow/loss.py\\)"):
        recordable_commit(repo)
    git(repo, "checkout", "-q", "-b", "experiment")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "2")
    with pytest.raises(SystemExit, match="is not on main"):
        recordable_commit(repo)


def test_the_thesis_phase_trains_every_setting_with_both_vectors_and_records_one_commit(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from quality_claims import THESIS_EXPERIMENTS, thesis_commit, thesis_runs
    from quality_real_data import benchmark_config

    config = benchmark_config(["sst2"], [3], False, THESIS_EXPERIMENTS)
    assert set(config["experiments"]) == set(THESIS_EXPERIMENTS)  # a subset's work directory runs nothing else
    runs = thesis_runs(config, 3)
    settings = {(run["student"], run["experiment"].removeprefix("lstm_s_").removeprefix("scratch_"), run["method"])
                for run in runs}
    assert len(runs) == 8 and {run["seed"] for run in runs} == {3} and {run["task"] for run in runs} == {"sst2"}
    assert settings == {(student, experiment, method) for student in ("lstm_s", "lstm_s_scratch")
                        for experiment, method in (("train", "no_kd"), ("train", "mse_logits"),
                                                   ("unlabelled", "mse_logits"), ("generated", "mse_logits"))}
    record = tmp_path / "thesis_runs.jsonl"
    thesis_commit(record, "b" * 40)  # no record yet: any clean commit may start it
    record.write_text(json.dumps(runs_of("kd", "lstm_s_train", {1: 80})[0] | {"commit": "a" * 40}) + "\n")
    thesis_commit(record, "a" * 40)
    with pytest.raises(SystemExit, match="runs of commit aaaaaaaaaaaa, not bbbbbbbbbbbb: resume from a worktree"):
        thesis_commit(record, "b" * 40)


def test_thesis_runs_pair_within_a_subset_and_its_teacher_only():
    runs = [run | {"teacher_digest": f"teacher{run['seed']}"} for run in
            runs_of("mse_logits", "lstm_s_train", {1: 80, 2: 81, 3: 79}) + runs_of("no_kd", "lstm_s_train",
                                                                                 {1: 70, 2: 72, 3: 71})]
    row = verdicts(runs, LABELS, MARGINS).set_index("link").loc["(b) KD, labelled > (a) no KD"]
    assert row["pairs"] == 3 and row["other_teachers"] == 0
    crossed = [run | {"teacher_digest": "other"} if run["method"] == "no_kd" and run["seed"] == 3 else run
               for run in runs]
    row = verdicts(crossed, LABELS, MARGINS).set_index("link").loc["(b) KD, labelled > (a) no KD"]
    assert row["pairs"] == 2 and row["other_teachers"] == 1


def test_what_a_link_detects_rests_on_its_claims_seed_variance_pooled_and_its_test_on_its_own():
    from kdflow.core.statistics import detectable_difference, pooled_seed_variance

    runs = (runs_of("kd", "claims_alp", {1: 90, 2: 91, 3: 89, 4: 90})
            + runs_of("no_kd", "claims_alp", {1: 60, 2: 62, 3: 61, 4: 61})
            + runs_of("pkd", "claims_alp", {1: 91, 2: 95, 3: 85, 4: 92}))  # a noisier link than KD > no KD
    found = verdicts(runs, LABELS, MARGINS, reference=REFERENCE).set_index("link")
    own = found["seed_variance"]
    assert own["PKD > KD"] > 4 * own["KD > no KD"]
    pooled, df = pooled_seed_variance(list(own), list(found["pairs"]))
    assert np.allclose(found["pooled_seed_variance"], pooled) and (found["pooled_df"] == df).all()
    for link, row in found.iterrows():
        alpha = 0.05 / row["family"]
        assert row["detectable"] == pytest.approx(detectable_difference(pooled, row["example_variance"], 4, alpha))
        half = scipy_t.ppf(1 - alpha / 2, 3) * row["standard_error"]  # the interval: its own seed variance
        assert row["high"] - row["low"] == pytest.approx(2 * half), link
