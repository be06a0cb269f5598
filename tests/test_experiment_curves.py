"""An experiment's learning curves (kdflow.reporting.experiment_curves): every run's dev evaluations, placed in
epochs over all stages, marked by whether the selection chose their grid point, and drawn."""

import json

import numpy as np
import pandas as pd
import pytest

from kdflow.reporting.experiment_curves import experiment_curves, experiment_curves_figure


def write_run(directory, steps, stages, scores, stage_epochs):
    directory.mkdir(parents=True)
    pd.DataFrame({"step": steps, "stage": stages, "dev_accuracy": scores, "dev_f1": [0.0] * len(steps)}).to_parquet(
        directory / "curves.parquet")
    (directory / "metrics.json").write_text(json.dumps({
        "transfer": {"examples": 10}, "hyperparameters": {"batch_size": 4, "epochs": 1},
        "stages": [{"epochs": epochs} for epochs in stage_epochs]}))
    return directory / "curves.parquet", directory / "metrics.json"


@pytest.fixture
def experiment(tmp_path):
    """kd at two grid points (beta0.7 selected), and a two-stage method whose second stage restarts its steps;
    10 examples in batches of 4: 3 steps an epoch."""
    runs, files = [], []
    for method, point, seed, steps, stages, scores, epochs in [
            ("kd", "beta0.2", 1, [3, 6], [1, 1], [0.5, 0.6], [2]),
            ("kd", "beta0.7", 1, [3, 6], [1, 1], [0.6, 0.8], [2]),
            ("kd", "beta0.7", 2, [3, 6], [1, 1], [0.7, 0.7], [2]),
            ("pkd", "default", 1, [3, 3], [1, 2], [0.4, 0.9], [1, 1])]:
        runs.append({"task": "mrpc", "student": "bert_4", "method": method, "point": point, "seed": str(seed)})
        files.append(write_run(tmp_path / f"{method}-{point}-{seed}", steps, stages, scores, epochs))
    selection = {"selections": [
        {"task": "mrpc", "student": "bert_4", "method": "kd", "main_metric": "accuracy", "selected": "beta0.7"},
        {"task": "mrpc", "student": "bert_4", "method": "pkd", "main_metric": "accuracy", "selected": "default"}]}
    curves, metrics = zip(*files)
    return experiment_curves(runs, curves, metrics, selection)


def test_every_run_is_placed_in_epochs_over_its_stages_and_marked_selected_or_not(experiment):
    assert len(experiment) == 8 and set(experiment["metric"]) == {"accuracy"}
    pkd = experiment[experiment["method"] == "pkd"]
    np.testing.assert_allclose(pkd["epoch"], [1, 2])  # stage 2's step 3 follows stage 1's epoch
    np.testing.assert_allclose(pkd["dev"], [40, 90])
    selected = experiment.groupby(["point", "seed"])["selected"].first()
    assert selected.to_dict() == {("beta0.2", 1): False, ("beta0.7", 1): True, ("beta0.7", 2): True,
                                  ("default", 1): True}


def test_the_figure_draws_and_an_experiment_without_curves_is_an_error(experiment, tmp_path):
    path = experiment_curves_figure(experiment, tmp_path / "curves.png", "demo")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no learning curves"):
        experiment_curves_figure(experiment.iloc[:0], tmp_path / "none.png", "demo")
