"""Model selection on dev only, mean ± std over seeds, and the experiment table."""

import json

import pytest

from kdflow.selection import select, select_experiment
from kdflow.tables import experiment_markdown, experiment_table


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
    assert selection["grid"]["lr2"] == {"dev_mean": pytest.approx(0.77), "dev_std": pytest.approx(0.01), "seeds": [1, 2]}
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
    markdown = experiment_markdown("demo", table)
    assert "| bert_4 | kd | 90.0 ± 0.0 | 45.0 ± 0.0 |" in markdown
