"""Model selection on dev only, mean ± std over seeds, the experiment table and the GLUE server files."""

import json
from pathlib import Path

import pandas as pd
import pytest

from kdflow.distillation.selection import select, select_experiment
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
                                        "dev_by_seed": {"1": 0.78, "2": 0.76}}
    assert selection["scores"]["test"]["accuracy"] == {"mean": pytest.approx(0.51), "std": pytest.approx(0.01), "n": 2}


def test_ties_go_to_the_first_configuration_in_sorted_order():
    assert select([run("b", 1, 0.5, 0), run("a", 1, 0.5, 1)], "accuracy")["selected"] == "a"


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
    assert "| bert_4 | kd | 90.0 ± 0.0 | 45.0 ± 0.0 |" in page.markdown()
    assert "<td>90.0 ± 0.0</td>" in page.html()


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
