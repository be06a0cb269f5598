"""Model selection on dev only, mean ± std over seeds, the experiment table and the GLUE server files."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from kdflow.distillation.selection import best_seed, select, select_experiment
from kdflow.reporting.submission import write_submissions
from kdflow.reporting.tables import experiment_document, experiment_table


def run(config, seed, dev, test):
    return {"config": config, "seed": seed, "scores": {"dev": {"accuracy": dev}, "test": {"accuracy": test}}}


def test_selection_uses_dev_only_and_averages_seeds():
    runs = [
        run("lr1", 1, 0.80, 0.99), run("lr1", 2, 0.70, 0.99),  # best on test, not on dev
        run("lr2", 1, 0.78, 0.50), run("lr2", 2, 0.76, 0.52),
    ]
    selection = select(runs, "accuracy")
    assert selection["selected"] == "lr2"
    assert selection["grid"]["lr1"]["dev_mean"] == pytest.approx(0.75)
    assert selection["grid"]["lr2"] == {"dev_mean": pytest.approx(0.77), "dev_std": pytest.approx(0.01), "seeds": [1, 2],
                                        "dev_by_seed": {"1": 0.78, "2": 0.76}, "diverged_seeds": []}
    assert selection["scores"]["test"]["accuracy"] == {"mean": pytest.approx(0.51), "std": pytest.approx(0.01), "n": 2}


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
    assert math.isnan(selection["scores"]["dev"]["accuracy"]["mean"])


def test_the_best_seed_of_a_point_is_never_a_diverged_one_unless_all_are():
    assert best_seed({"1": NAN, "2": 0.6, "3": 0.6}) == "2"
    assert best_seed({"1": NAN, "2": NAN}) == "1"


def test_experiment_selection_groups_runs_and_builds_its_table(tmp_path):
    runs, paths = [], []
    for method, config, seed, dev in [("kd", "beta0.2", 1, 0.6), ("kd", "beta0.7", 1, 0.9), ("no_kd", "default", 1, 0.5)]:
        path = tmp_path / f"{method}-{config}-{seed}.json"
        path.write_text(json.dumps({"scores": {"dev": {"accuracy": dev, "f1": dev / 2}}}))
        runs.append({"task": "mrpc", "student": "bert_4", "method": method, "config": config, "seed": str(seed)})
        paths.append(path)
    selection = select_experiment(runs, paths, {"mrpc": "accuracy"})
    assert [(s["method"], s["selected"]) for s in selection["selections"]] == [("kd", "beta0.7"), ("no_kd", "default")]
    table = experiment_table(selection)
    assert len(table) == 4  # 2 methods x 2 metrics on dev
    assert table.query("method == 'kd' and metric == 'f1'")["mean"].item() == pytest.approx(45.0)
    page = experiment_document("demo", table)
    assert "| bert_4 | kd | 90.0 ± 0.0 | 45.0 ± 0.0 |" in page.markdown() and "Diverged" not in page.markdown()
    assert "<td>90.0 ± 0.0</td>" in page.html()


def test_experiment_table_marks_diverged_grid_points_and_seeds(tmp_path):
    runs, paths = [], []
    for method, config, seed, dev in [("kd", "lr1", 1, 0.6), ("kd", "lr1", 2, 0.7), ("kd", "lr2", 1, 0.9),
                                      ("kd", "lr2", 2, NAN), ("no_kd", "default", 1, NAN)]:
        path = tmp_path / f"{method}-{config}-{seed}.json"
        path.write_text(json.dumps({"scores": {"dev": {"accuracy": dev}}}))  # NaN as Python's json writes it
        runs.append({"task": "mrpc", "student": "bert_4", "method": method, "config": config, "seed": str(seed)})
        paths.append(path)
    table = experiment_table(select_experiment(runs, paths, {"mrpc": "accuracy"}))
    assert table[["method", "selected", "diverged_points", "diverged_seeds", "seeds"]].values.tolist() == [
        ["kd", "lr1", 1, 0, 2], ["no_kd", "default", 1, 1, 1]]
    markdown = experiment_document("demo", table).markdown()
    assert "| bert_4 | kd | 65.0 ± 5.0 |" in markdown and "| bert_4 | no_kd | diverged |" in markdown
    assert "## Diverged runs" in markdown and "| mrpc | bert_4 | no_kd | 1 | 1 | 1 |" in markdown


def test_glue_submission_takes_the_selected_points_best_dev_seed(tmp_path):
    run_dir = str(tmp_path / "{task}/{student}/{method}/{config}/seed{seed}")
    for seed, flip in ((1, False), (2, True)):
        for task, names, regression in (("rte", ["entailment", "not_entailment"], False), ("stsb", None, True),
                                        ("sara", ["greet", "bye"], False)):
            run = Path(run_dir.format(task=task, student="bert_4", method="kd", config="lr1", seed=seed))
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
