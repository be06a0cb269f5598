"""The papers' claims tested on real data: verdicts from a record of runs (kdflow.reporting.claims)."""

import json
import math

import numpy as np
import pytest

from kdflow.reporting.claims import claims_document, read_runs, searched_points, verdict, verdicts


def runs_of(method, experiment, dev_by_seed, point="default", fixed=0, task="sst2"):
    """Runs of one grid point on 100 dev examples of label 1, each seed right on its first ``dev`` examples."""
    return [{"experiment": experiment, "task": task, "student": "bert_3", "method": method, "point": point,
             "seed": seed, "metric": "accuracy", "dev": dev, "cpu_seconds": 60.0,
             "dev_predictions": [1] * int(dev) + [0] * (100 - int(dev))} for seed, dev in dev_by_seed.items()]


LABELS = {"sst2": [1] * 100}


def test_a_link_holds_only_when_both_tests_reject_no_difference():
    runs = (runs_of("kd", "claims_alp", {1: 80, 2: 81, 3: 79})
            + runs_of("no_kd", "claims_alp", {1: 70, 2: 72, 3: 71})  # kd ahead by 9, both tests reject
            + runs_of("pkd", "claims_alp", {1: 81, 2: 80, 3: 80}))  # pkd ahead of kd by 1/3: within noise
    found = verdicts(runs, LABELS).set_index("link")
    kd = found.loc["KD > no KD"]
    assert kd["difference"] == pytest.approx(9.0) and kd["pairs"] == 3 and kd["verdict"] == "holds"
    assert kd["p_seeds"] < 0.05 and kd["low"] > 0
    assert found.loc["PKD > KD", "verdict"] == "within noise"


def test_a_link_the_runs_reverse_is_contradicted_and_a_missing_side_is_left_out():
    runs = runs_of("kd", "claims_alp", {1: 70, 2: 71, 3: 72}) + runs_of("pkd", "claims_alp", {1: 80, 2: 82, 3: 81})
    found = verdicts(runs, LABELS).set_index("link")
    assert found.loc["PKD > KD", "verdict"] == "holds"
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 82, 3: 81}) + runs_of("pkd", "claims_alp", {1: 70, 2: 71, 3: 72})
    found = verdicts(runs, LABELS).set_index("link")
    assert found.loc["PKD > KD", "verdict"] == "contradicted"
    assert "KD > no KD" not in found.index  # no no_kd runs


def test_each_method_is_judged_at_its_point_chosen_with_the_first_seed():
    # beta0.7 wins the search on seed 1 (85 > 75), so its seeds count, although beta0.2's seed 2 would be better
    runs = (runs_of("kd", "claims_alp", {1: 75, 2: 95}, point="beta0.2")
            + runs_of("kd", "claims_alp", {1: 85, 2: 84}, point="beta0.7")
            + runs_of("no_kd", "claims_alp", {1: 70, 2: 71}))
    markdown = claims_document(runs, LABELS).markdown()
    assert "| sst2 | claims_alp | KD | accuracy | beta0.7 | 2 | 84.50 ± 0.71 | beta0.2 75.00, beta0.7 85.00 |" in markdown


def test_the_best_of_ckds_bucketings_stands_for_ckd():
    runs = (runs_of("ckd_no", "claims_alp", {1: 70, 2: 71}) + runs_of("ckd_po", "claims_alp", {1: 80, 2: 81})
            + runs_of("alp", "claims_alp", {1: 80, 2: 80}))
    found = verdicts(runs, LABELS).set_index("link")
    assert found.loc["ALP-KD >= CKD-PO", "difference"] == pytest.approx(-0.5)
    assert found.loc["ALP-KD >= CKD-PO", "verdict"] == "within noise (agrees with >=)"


def test_where_one_test_cannot_be_made_the_other_decides_and_the_verdict_says_so():
    result = {"difference": 2.0, "pairs": 3, "p_seeds": 0.01, "low": math.nan, "high": math.nan}
    assert verdict(result, ">") == "holds (seeds only)"  # no predictions kept
    assert verdict({**result, "low": -0.5, "high": 3.0}, ">") == "within noise"
    one_seed = {"difference": -2.0, "pairs": 1, "p_seeds": math.nan, "low": -4.0, "high": -0.5}
    assert verdict(one_seed, ">") == "contradicted (dev examples only: one seed)"
    assert verdict({**one_seed, "high": 0.5}, ">=") == "within noise (agrees with >=) (dev examples only: one seed)"


def test_the_committed_record_reads_and_renders(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(run) + "\n" for run in runs_of("kd", "claims_alp", {1: 80})))
    runs = read_runs(path)
    assert [run["dev"] for run in runs] == [80]
    assert read_runs(tmp_path / "none.jsonl") == []
    html = claims_document(runs, LABELS).html()
    assert "No link of this claim has both sides&#x27; searches complete" in html and "<td>80.00</td>" in html
    assert np.isclose(runs[0]["cpu_seconds"], 60.0)


def test_a_search_that_has_not_run_every_point_yet_takes_no_part_in_a_verdict():
    config = {"experiments": {"claims_alp": {"methods": {"kd": None, "no_kd": None}, "grid": {"beta": [0.2, 0.5]}}}}
    grids = searched_points(config)
    assert grids == {("claims_alp", "kd"): {"beta0.2", "beta0.5"}, ("claims_alp", "no_kd"): {"default"}}
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 81, 3: 79}, point="beta0.2") + runs_of("no_kd", "claims_alp",
                                                                                           {1: 70, 2: 72, 3: 71})
    assert verdicts(runs, LABELS, grids).empty  # beta0.5 may still win KD's search
    assert "| beta0.2 (search 1 of 2) |" in claims_document(runs, LABELS, grids).markdown()
    runs += runs_of("kd", "claims_alp", {1: 60}, point="beta0.5")
    assert verdicts(runs, LABELS, grids).set_index("link").loc["KD > no KD", "verdict"] == "holds"


def test_a_resumed_runs_partial_cpu_time_is_left_out_of_the_mean_and_said():
    runs = runs_of("kd", "claims_alp", {1: 80, 2: 81})
    runs[1] |= {"cpu_seconds": 6.0, "resumed": True}  # its last attempt alone
    text = claims_document(runs, LABELS, {}).markdown()
    assert "| 2 | 80.50 ± 0.71 |" in text and "| 1.0 |" in text  # 60 s: the resumed run left out of the mean
    assert "1 of them resumed from a checkpoint" in text and "0.0 CPU-hours" in text
