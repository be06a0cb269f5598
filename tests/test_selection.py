"""Model selection on dev only, mean ± sample std over seeds, the tests against a baseline, the experiment table and
the GLUE server files."""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kdflow.core.errors import UserError
from kdflow.distillation.selection import best_seed, predictions_path, select, select_experiment, selected_run_dir
from kdflow.reporting.submission import write_submissions
from kdflow.reporting.tables import experiment_document, experiment_table, grid_table


def run(point, seed, dev, test):
    return {"point": point, "seed": seed, "scores": {"dev": {"accuracy": dev}, "test": {"accuracy": test}}}


def test_selection_uses_dev_only_and_averages_seeds():
    runs = [
        run("lr1", 1, 0.80, 0.99), run("lr1", 2, 0.70, 0.99),  # best on test, not on dev
        run("lr2", 1, 0.78, 0.50), run("lr2", 2, 0.76, 0.52),
    ]
    selection = select(runs, "accuracy")  # every seed chooses: the exploration figures' use
    assert selection["selected"] == "lr2" and selection["held_out_seeds"] == [] and selection["scores"] == {}
    assert selection["grid"]["lr1"]["dev_mean"] == pytest.approx(0.75)
    # the sample std (ddof=1) of 0.78 and 0.76: sqrt(2 * 0.01**2 / 1)
    assert selection["grid"]["lr2"] == {"dev_mean": pytest.approx(0.77), "dev_std": pytest.approx(0.01 * math.sqrt(2)),
                                        "selection_mean": pytest.approx(0.77), "seeds": [1, 2],
                                        "dev_by_seed": {"1": 0.78, "2": 0.76}, "diverged_seeds": []}
    assert selection["headline"]["test"]["accuracy"] == {"mean": pytest.approx(0.51),
                                                         "std": pytest.approx(0.01 * math.sqrt(2)), "n": 2}


def test_the_seeds_that_choose_a_point_are_not_the_ones_that_report_it():
    # Seed 1 chooses: lr1's lucky 0.80 wins, and its headline is that 0.80; the numbers reported (and tested) are
    # lr1's held-out seeds 2 and 3 alone, which took no part in the choice.
    runs = [run("lr1", 1, 0.80, 0.60), run("lr1", 2, 0.70, 0.61), run("lr1", 3, 0.72, 0.63),
            run("lr2", 1, 0.78, 0.50), run("lr2", 2, 0.76, 0.52), run("lr2", 3, 0.77, 0.52)]
    selection = select(runs, "accuracy", selection_seeds=[1])
    assert selection["selected"] == "lr1"
    assert (selection["selection_seeds"], selection["held_out_seeds"]) == ([1], [2, 3])
    assert selection["headline"]["dev"]["accuracy"] == {"mean": pytest.approx(0.80), "std": pytest.approx(math.nan,
                                                        nan_ok=True), "n": 1}
    assert selection["scores"]["dev"]["accuracy"]["mean"] == pytest.approx(0.71)
    assert selection["scores"]["test"]["accuracy"] == {"mean": pytest.approx(0.62),
                                                       "std": pytest.approx(0.01 * math.sqrt(2)), "n": 2}
    # a method with one point chooses nothing: every seed is held out, and the headline is their mean
    single = select([run("default", seed, dev, 0.5) for seed, dev in ((1, 0.9), (2, 0.7))], "accuracy", [1])
    assert single["held_out_seeds"] == [1, 2] and single["headline"]["dev"]["accuracy"]["mean"] == pytest.approx(0.8)
    # with every seed choosing, nothing is held out
    assert select(runs, "accuracy", selection_seeds=[1, 2, 3])["scores"] == {}


def test_ties_go_to_the_first_configuration_in_sorted_order():
    assert select([run("b", 1, 0.5, 0), run("a", 1, 0.5, 1)], "accuracy")["selected"] == "a"


NAN = float("nan")


def test_a_grid_point_with_a_diverged_seed_loses_to_any_finite_one():
    runs = [run("a", 1, 0.9, 0.9), run("a", 2, NAN, NAN),  # first in sorted order, where max() kept a NaN mean
            run("b", 1, 0.5, 0.5), run("b", 2, 0.5, 0.5)]
    selection = select(runs, "accuracy")
    assert selection["selected"] == "b" and not selection["selected_diverged"]
    assert math.isnan(selection["grid"]["a"]["dev_mean"]) and selection["grid"]["a"]["diverged_seeds"] == [2]


def test_without_a_finite_grid_point_the_one_with_fewest_diverged_seeds_is_selected_and_marked():
    runs = [run("a", 1, NAN, NAN), run("a", 2, NAN, NAN), run("b", 1, NAN, NAN), run("b", 2, 0.7, 0.7),
            run("c", 1, 0.9, 0.9), run("c", 2, NAN, NAN)]
    selection = select(runs, "accuracy")
    assert selection["selected"] == "b" and selection["selected_diverged"]  # b and c tie: the first in sorted order
    assert math.isnan(selection["headline"]["dev"]["accuracy"]["mean"])


def test_the_best_seed_of_a_point_is_never_a_diverged_one_unless_all_are():
    assert best_seed({"1": NAN, "2": 0.6, "3": 0.6}) == "2"
    assert best_seed({"1": NAN, "2": NAN}) == "1"


def test_experiment_selection_groups_runs_and_builds_its_table(tmp_path):
    runs, paths = [], []
    for method, point, seed, dev in [("kd", "beta0.2", 1, 0.6), ("kd", "beta0.7", 1, 0.9), ("no_kd", "default", 1, 0.5)]:
        path = tmp_path / f"{method}-{point}-{seed}.json"
        path.write_text(json.dumps({"scores": {"dev": {"accuracy": dev, "f1": dev / 2}}}))
        runs.append({"task": "mrpc", "student": "bert_4", "method": method, "point": point, "seed": str(seed)})
        paths.append(path)
    selection = select_experiment(runs, paths, {"mrpc": "accuracy"}, selection_seeds=[1])
    assert [(s["method"], s["selected"]) for s in selection["selections"]] == [("kd", "beta0.7"), ("no_kd", "default")]
    table = experiment_table(selection)
    assert len(table) == 4  # 2 methods x 2 metrics on dev
    kd_f1 = table.query("method == 'kd' and metric == 'f1'").iloc[0]
    # kd's one seed chose its point: its headline is 45.0, and nothing is held out to report
    assert kd_f1["headline"] == pytest.approx(45.0) and math.isnan(kd_f1["mean"]) and kd_f1["seeds"] == 0
    # no_kd has no grid: its seed chose nothing and is held out
    assert table.query("method == 'no_kd' and metric == 'f1'")["mean"].item() == pytest.approx(25.0)
    page = experiment_document("demo", table, grid_table(selection))
    assert "| bert_4 | kd | — | — |" in page.markdown() and "| bert_4 | no_kd | 50.0 | 25.0 |" in page.markdown()
    assert "## dev, headline" in page.markdown() and "| bert_4 | kd | 90.0 | 45.0 |" in page.markdown()
    assert "Diverged" not in page.markdown()
    assert "<td>90.0</td>" in page.html() and "sample standard deviation (ddof=1)" in page.markdown()
    # the grid: every point, also the one not selected, with its selection seed's score
    assert "| mrpc | bert_4 | kd | beta0.2 | accuracy |  | 60.0 | 60.0 | 60.0 | 0 |" in page.markdown()
    assert "| mrpc | bert_4 | kd | beta0.7 | accuracy | ✓ | 90.0 | 90.0 | 90.0 | 0 |" in page.markdown()


def test_experiment_table_marks_diverged_grid_points_and_seeds(tmp_path):
    runs, paths = [], []
    for method, point, seed, dev in [("kd", "lr1", 1, 0.6), ("kd", "lr1", 2, 0.7), ("kd", "lr2", 1, 0.9),
                                      ("kd", "lr2", 2, NAN), ("no_kd", "default", 1, NAN)]:
        path = tmp_path / f"{method}-{point}-{seed}.json"
        path.write_text(json.dumps({"scores": {"dev": {"accuracy": dev}}}))  # NaN as Python's json writes it
        runs.append({"task": "mrpc", "student": "bert_4", "method": method, "point": point, "seed": str(seed)})
        paths.append(path)
    selection = select_experiment(runs, paths, {"mrpc": "accuracy"})  # every seed chooses
    table = experiment_table(selection)
    assert table[["method", "selected", "diverged_points", "diverged_seeds", "seeds"]].values.tolist() == [
        ["kd", "lr1", 1, 0, 0], ["no_kd", "default", 1, 1, 0]]
    grid = grid_table(selection)
    assert grid[["method", "point", "selected", "seeds", "diverged_seeds"]].values.tolist() == [
        ["kd", "lr1", True, 2, 0], ["kd", "lr2", False, 2, 1], ["no_kd", "default", True, 1, 1]]
    assert grid.loc[1, "seed 1"] == pytest.approx(90.0) and math.isnan(grid.loc[1, "seed 2"])
    assert math.isnan(grid.loc[2, "seed 2"])  # no_kd ran seed 1 alone
    markdown = experiment_document("demo", table, grid).markdown()
    assert "| mrpc | bert_4 | kd | lr2 | accuracy |  | — | diverged | 90.0 | — | 1 |" in markdown
    assert "| bert_4 | kd | 65.0 |" in markdown and "| bert_4 | no_kd | diverged |" in markdown
    assert "## Diverged runs" in markdown and "| mrpc | bert_4 | no_kd | 1 | 1 | 0 |" in markdown
    # with seed 1 choosing, lr2's 90.0 wins, and its diverged seed 2 is what the held-out numbers show
    held_out = experiment_table(select_experiment(runs, paths, {"mrpc": "accuracy"}, selection_seeds=[1]))
    assert held_out[["method", "selected", "diverged_seeds", "seeds"]].values.tolist()[0] == ["kd", "lr2", 1, 1]
    assert math.isnan(held_out["mean"].iloc[0])


def test_glue_submission_takes_the_selected_points_best_dev_seed(tmp_path):
    run_dir = str(tmp_path / "{task}/{student}/{method}/{point}/seed{seed}")
    for seed, flip in ((1, False), (2, True)):
        for task, names, regression in (("rte", ["entailment", "not_entailment"], False), ("stsb", None, True),
                                        ("sara", ["greet", "bye"], False)):
            run = Path(run_dir.format(task=task, student="bert_4", method="kd", point="lr1", seed=seed))
            run.mkdir(parents=True)
            prediction = [5.7, 2.5] if regression else ([1, 0] if flip else [0, 1])
            frame = pd.DataFrame({"split": ["test", "test", "dev"], "idx": [1, 0, 0],
                                  "prediction": prediction + prediction[:1]})
            if names:
                frame["prediction_name"] = [names[int(p)] for p in frame["prediction"]]
            frame.to_parquet(run / "predictions.parquet")
    grid = {"lr1": {"dev_by_seed": {"1": 0.6, "2": 0.8}}}  # seed 2 is the best on dev
    selections = [{"task": task, "student": "bert_4", "method": "kd", "selected": "lr1", "grid": grid}
                  for task in ("rte", "stsb", "sara")]
    (tmp_path / "selection.json").write_text(json.dumps({"selections": selections}))
    written = write_submissions(tmp_path / "selection.json", run_dir, tmp_path / "out")
    assert sorted(p.name for p in written) == ["RTE.tsv", "STS-B.tsv"]  # Sara is not a GLUE task
    rte = (tmp_path / "out/bert_4/kd/RTE.tsv").read_text().splitlines()
    assert rte == ["index\tprediction", "0\tentailment", "1\tnot_entailment"]  # seed 2 (seed 1 is the reverse)
    stsb = (tmp_path / "out/bert_4/kd/STS-B.tsv").read_text().splitlines()
    assert stsb == ["index\tprediction", "0\t2.5", "1\t5.0"]  # clipped to the 0-5 scale


def test_every_method_is_tested_against_the_experiments_baseline(tmp_path):
    # 100 dev examples, all of label 1. kd (the baseline) is wrong on examples 0-19 with every seed; alp fixes
    # examples 0-9 with seeds 1 and 2 and 0-4 with seed 3: dev accuracies 0.8 x 3 against 0.9, 0.9, 0.85, so
    # differences 0.10, 0.10, 0.05 (mean 0.0833, sd 0.0289: t = 5 on 2 dof, p = 1 - 5 / sqrt(27)).
    gold = np.ones(100, dtype=int)
    runs, metric_paths, prediction_paths = [], [], []
    for method, seed, fixed in [("kd", 1, 0), ("kd", 2, 0), ("kd", 3, 0), ("alp", 1, 10), ("alp", 2, 10),
                                ("alp", 3, 5)]:
        prediction = gold.copy()
        prediction[fixed:20] = 0
        directory = tmp_path / method / str(seed)
        directory.mkdir(parents=True)
        (directory / "metrics.json").write_text(json.dumps({"scores": {"dev": {"accuracy": prediction.mean()}}}))
        pd.DataFrame({"split": "dev", "idx": np.arange(100)[::-1], "label": gold, "prediction": prediction[::-1]}
                     ).to_parquet(directory / "predictions.parquet")  # rows out of idx order on purpose
        runs.append({"task": "sst2", "student": "bert_3", "method": method, "point": "default", "seed": str(seed)})
        metric_paths.append(directory / "metrics.json")
        prediction_paths.append(directory / "predictions.parquet")
    selection = select_experiment(runs, metric_paths, {"sst2": "accuracy"}, "kd", prediction_paths, [1])
    alp = next(s for s in selection["selections"] if s["method"] == "alp")
    kd = next(s for s in selection["selections"] if s["method"] == "kd")
    assert "comparison" not in kd
    comparison = alp["comparison"]
    assert comparison["baseline"] == "kd" and comparison["pairs"] == 3  # no grid: every seed is held out
    assert comparison["difference"] == pytest.approx(0.25 / 3)
    assert comparison["seed_variance"] == pytest.approx(0.0025 / 3)  # differences 0.10, 0.10, 0.05
    # the fixed examples are the same ones for every seed: which of them the dev set holds is shared noise, so the
    # test is wider than the paired t-test over seeds (p = 1 - 5 / sqrt(27)) and its interval still holds the gain
    assert comparison["example_variance"] > 0 and comparison["p"] > 1 - 5 / math.sqrt(27)
    assert comparison["low"] < comparison["difference"] < comparison["high"]
    assert comparison["p_holm"] == comparison["p"]  # the experiment's one comparison
    assert comparison["detectable"] > 0 and comparison["planned_gain"] == 0.01
    assert (comparison["confidence"], comparison["resamples"]) == (0.95, None)  # how: accuracy in closed form
    assert (selection["compare_to"], selection["selection_seeds"]) == ("kd", [1])
    table = experiment_table(selection)
    row = table.query("method == 'alp'").iloc[0]
    assert row["compare_to"] == "kd" and row["difference"] == pytest.approx(25 / 3) and row["pairs"] == 3
    markdown = experiment_document("claims", table, grid_table(selection)).markdown()
    assert "| bert_3 | alp | 88.3 ± 2.9" in markdown and "| bert_3 | kd | 80.0 ± 0.0 |" in markdown
    assert "## Against kd (dev)" in markdown and "| sst2 | bert_3 | alp | accuracy | +8.33 | 3 |" in markdown


def test_holm_adjusts_across_an_experiments_comparisons_and_held_out_seeds_are_the_only_ones_tested(tmp_path):
    # kd has a grid: seed 1 chose beta0.7 (its lucky 0.95), so only seeds 2-3 are tested against no_kd, whose
    # seeds are all held out; pkd and kd make two comparisons against no_kd, adjusted together.
    gold = np.ones(100, dtype=int)
    runs, metric_paths, prediction_paths = [], [], []
    for method, point, seed, right in [("no_kd", "default", 1, 80), ("no_kd", "default", 2, 80),
                                       ("no_kd", "default", 3, 81), ("kd", "beta0.2", 1, 70),
                                       ("kd", "beta0.7", 1, 95), ("kd", "beta0.7", 2, 81), ("kd", "beta0.7", 3, 80),
                                       ("kd", "beta0.2", 2, 99), ("kd", "beta0.2", 3, 99), ("pkd", "default", 1, 90),
                                       ("pkd", "default", 2, 91), ("pkd", "default", 3, 90)]:
        prediction = np.where(np.arange(100) < right, 1, 0)
        directory = tmp_path / method / point / str(seed)
        directory.mkdir(parents=True)
        (directory / "metrics.json").write_text(json.dumps({"scores": {"dev": {"accuracy": prediction.mean()}}}))
        pd.DataFrame({"split": "dev", "idx": np.arange(100), "label": gold, "prediction": prediction}
                     ).to_parquet(directory / "predictions.parquet")
        runs.append({"task": "sst2", "student": "bert_3", "method": method, "point": point, "seed": str(seed)})
        metric_paths.append(directory / "metrics.json")
        prediction_paths.append(directory / "predictions.parquet")
    selection = select_experiment(runs, metric_paths, {"sst2": "accuracy"}, "no_kd", prediction_paths, [1])
    kd = next(s for s in selection["selections"] if s["method"] == "kd")
    pkd = next(s for s in selection["selections"] if s["method"] == "pkd")
    assert kd["selected"] == "beta0.7" and kd["held_out_seeds"] == [2, 3]
    assert kd["headline"]["dev"]["accuracy"]["mean"] == pytest.approx(0.95)
    assert kd["comparison"]["pairs"] == 2 and kd["comparison"]["difference"] == pytest.approx(0.0)  # 81-80, 80-81
    assert pkd["comparison"]["pairs"] == 3
    p = [kd["comparison"]["p"], pkd["comparison"]["p"]]
    assert sorted([kd["comparison"]["p_holm"], pkd["comparison"]["p_holm"]]) == pytest.approx(
        sorted([min(1, 2 * min(p)), min(1, max(2 * min(p), max(p)))]))


def test_a_baseline_the_experiment_does_not_run_is_a_clear_error(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"scores": {"dev": {"accuracy": 0.5}}}))
    runs = [{"task": "sst2", "student": "bert_3", "method": "alp", "point": "default", "seed": "1"}]
    with pytest.raises(UserError, match="compare_to: 'kd' is not a method entry of this experiment"):
        select_experiment(runs, [path], {"sst2": "accuracy"}, "kd", [tmp_path / "predictions.parquet"])


def dev_run(directory, labels, predictions):
    directory.mkdir(parents=True)
    (directory / "metrics.json").write_text(json.dumps({"scores": {"dev": {"accuracy": float(np.mean(
        np.equal(labels, predictions)))}}}))
    pd.DataFrame({"split": "dev", "idx": np.arange(len(labels)), "label": labels, "prediction": predictions}
                 ).to_parquet(directory / "predictions.parquet")
    return directory


def test_runs_on_different_dev_labels_are_not_compared(tmp_path):
    runs, metric_paths, prediction_paths = [], [], []
    for method, seed, labels in [("kd", 1, [1, 0, 1]), ("kd", 2, [1, 0, 1]), ("alp", 1, [1, 0, 1]),
                                 ("alp", 2, [1, 1, 1])]:  # alp's seed 2 saw another version of the dev set
        directory = dev_run(tmp_path / method / str(seed), labels, [1, 0, 0])
        runs.append({"task": "sst2", "student": "bert_3", "method": method, "point": "default", "seed": str(seed)})
        metric_paths.append(directory / "metrics.json")
        prediction_paths.append(directory / "predictions.parquet")
    with pytest.raises(UserError, match=r"alp/2/predictions.parquet holds other dev labels than the runs it is "
                                        r"compared with: were they trained on different versions of the task's data\?"):
        select_experiment(runs, metric_paths, {"sst2": "accuracy"}, "kd", prediction_paths, [1])


def test_each_run_needs_its_metrics_file(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"scores": {"dev": {"accuracy": 0.5}}}))
    runs = [{"task": "sst2", "student": "bert_3", "method": "kd", "point": "default", "seed": str(seed)}
            for seed in (1, 2)]
    with pytest.raises(ValueError, match="zip"):
        select_experiment(runs, [path], {"sst2": "accuracy"})


def test_a_point_that_no_selection_seed_ran_has_no_selection_mean_and_loses():
    runs = [run("lr1", 2, 0.9, 0.5), run("lr2", 1, 0.7, 0.5), run("lr2", 2, 0.6, 0.5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice": the point simply has no selection mean yet
        selection = select(runs, "accuracy", selection_seeds=[1])
    assert math.isnan(selection["grid"]["lr1"]["selection_mean"]) and selection["selected"] == "lr2"


def test_a_named_model_is_the_selected_points_best_dev_seed_and_a_teacher_its_own_folder(tmp_path):
    grid = {"lr1": {"dev_by_seed": {"1": 0.6, "2": 0.8}}, "lr2": {"dev_by_seed": {"1": 0.9}}}
    selection = {"selections": [{"task": "rte", "student": "bert_4", "method": "kd", "selected": "lr1", "grid": grid},
                                {"task": "rte", "student": "bert_4", "method": "pkd", "selected": "lr2", "grid": grid}]}
    (tmp_path / "selection.json").write_text(json.dumps(selection))
    student = {"experiment": "e", "task": "rte", "student": "bert_4", "method": "kd"}
    assert selected_run_dir(student, tmp_path / "selection.json", tmp_path / "runs") == tmp_path / "runs/lr1/seed2"
    files = {"selection": tmp_path / "selection.json", "runs_dir": tmp_path / "runs",
             "teacher_model": tmp_path / "teacher/model.safetensors"}
    assert predictions_path(student, files) == tmp_path / "runs/lr1/seed2/predictions.parquet"
    assert predictions_path({"teacher": "bert_base", "task": "rte"}, files) == tmp_path / "teacher/predictions.parquet"
    with pytest.raises(UserError, match="no run of student 'bert_4' with method 'alp' on 'rte'"):
        selected_run_dir({**student, "method": "alp"}, tmp_path / "selection.json", tmp_path / "runs")
