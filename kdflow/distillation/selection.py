"""Model selection on dev only: per experiment, task, student and method, the grid point with the best mean
dev score over seeds wins; its seeds give the mean ± sample std (ddof=1, :mod:`kdflow.core.statistics`) on every
labelled split. Test scores (where a split has
labels, e.g. Sara) are reported for the winner but never used to choose it.

A seed whose dev score is not finite counts as diverged (its training diverged, see :mod:`kdflow.training.loop`,
or its outputs did, see :mod:`kdflow.core.metrics`). Its grid point's mean is then NaN, which compares false with
every number (``max`` would keep it if it came first); instead such a point loses to every point with a finite
mean. If no point has one, the point with the fewest diverged seeds wins and the selection says so (``selected_diverged``).

An experiment that names a baseline (``compare_to``) tests every other method's selected point against the
baseline's, on the main dev metric: a paired t-test over their common seeds and a paired bootstrap over the dev
examples (:func:`compare`)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core import metrics, statistics
from kdflow.core.errors import UserError
from kdflow.core.model_references import reference_kind

# What :func:`select` does, in the words the papers' protocols are compared with (reference/protocols.yaml).
SELECTION_RULE = "the grid point with the best mean dev score over seeds"


def select(runs: list[dict], main_metric: str) -> dict:
    """``runs``: one dict per trained student with ``point`` (of the grid), ``seed`` and ``scores`` (split -> metric -> value)."""
    by_point: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_point[run["point"]].append(run)
    grid = {
        point: {
            "dev_mean": float(np.mean([r["scores"]["dev"][main_metric] for r in group])),
            "dev_std": statistics.sample_std([r["scores"]["dev"][main_metric] for r in group]),
            "seeds": sorted(r["seed"] for r in group),
            "dev_by_seed": {str(r["seed"]): r["scores"]["dev"][main_metric] for r in sorted(group, key=lambda r: r["seed"])},
            "diverged_seeds": sorted(r["seed"] for r in group if not math.isfinite(r["scores"]["dev"][main_metric])),
        }
        for point, group in sorted(by_point.items())
    }

    def preference(point: str) -> tuple[float, int]:
        return _finite_or_worst(grid[point]["dev_mean"]), -len(grid[point]["diverged_seeds"])

    winner = max(grid, key=preference)  # first of equals in sorted order
    winning_runs = by_point[winner]
    summary = {}
    for split in winning_runs[0]["scores"]:
        for metric in winning_runs[0]["scores"][split]:
            values = [r["scores"][split][metric] for r in winning_runs]
            summary.setdefault(split, {})[metric] = {"mean": float(np.mean(values)),
                                                      "std": statistics.sample_std(values), "n": len(values)}
    return {"main_metric": main_metric, "selected": winner, "selected_diverged": bool(grid[winner]["diverged_seeds"]),
            "scores": summary, "grid": grid}


def best_seed(dev_by_seed: dict[str, float]) -> str:
    """The seed with the best dev score (the first of equals), a diverged one only if every seed diverged: the run
    a selected grid point stands for (GLUE submissions, named models)."""
    return max(dev_by_seed, key=lambda seed: _finite_or_worst(dev_by_seed[seed]))


def _finite_or_worst(score: float) -> float:
    return score if math.isfinite(score) else -math.inf


def select_experiment(runs: list[dict], metric_paths: list[str], main_metrics: dict[str, str],
                      compare_to: str | None = None, prediction_paths: list[str] | None = None) -> dict:
    """Selections of every (task, student, method) of an experiment. ``runs`` hold the wildcards of each
    student run (task, student, method, point, seed), ``metric_paths`` their metrics.json files and, with a
    baseline method entry ``compare_to``, ``prediction_paths`` their predictions.parquet files."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for number, (run, path) in enumerate(zip(runs, metric_paths, strict=True)):
        scores = json.loads(Path(path).read_text())["scores"]
        groups[run["task"], run["student"], run["method"]].append(
            {**run, "seed": int(run["seed"]), "scores": scores,
             "predictions": prediction_paths[number] if prediction_paths else None})
    selections = {key: select(group, main_metrics[key[0]]) for key, group in groups.items()}
    result = []
    for (task, student, method), selection in selections.items():
        entry = {"task": task, "student": student, "method": method, **selection}
        baseline = selections.get((task, student, compare_to))
        if compare_to and method != compare_to:
            if baseline is None:
                raise UserError(f"compare_to: {compare_to!r} is not a method entry of this experiment for {student} "
                                f"on {task}")
            chosen = [r for r in groups[task, student, method] if r["point"] == selection["selected"]]
            reference = [r for r in groups[task, student, compare_to] if r["point"] == baseline["selected"]]
            entry["comparison"] = compare(chosen, reference, main_metrics[task], compare_to)
        result.append(entry)
    return {"compare_to": compare_to, "selections": result}


def compare(runs: list[dict], baseline: list[dict], metric: str, name: str) -> dict:
    """A selected point's runs against the baseline's on the dev ``metric``: the difference of their means over
    seeds, a paired t-test over the seeds both ran, and the paired-bootstrap interval over the dev examples."""
    by_seed = lambda group: {r["seed"]: r["scores"]["dev"][metric] for r in group}  # noqa: E731
    gold, ours = _dev_predictions(runs)
    _, theirs = _dev_predictions(baseline)
    result = statistics.compare(by_seed(runs), by_seed(baseline), metrics.METRICS[metric], ours, theirs, gold)
    return {"baseline": name, "metric": metric, "difference": result["difference"], "pairs": result["pairs"],
            "p_seeds": result["p_seeds"], "bootstrap_low": result["low"], "bootstrap_high": result["high"],
            "confidence": statistics.CONFIDENCE, "resamples": statistics.RESAMPLES}


def _dev_predictions(runs: list[dict]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The dev gold labels and each run's dev predictions, in the order of the examples' ``idx``."""
    gold, predictions = None, []
    for run in sorted(runs, key=lambda r: r["seed"]):
        frame = pd.read_parquet(run["predictions"], columns=["split", "idx", "label", "prediction"])
        dev = frame[frame["split"] == "dev"].sort_values("idx")
        gold = dev["label"].to_numpy() if gold is None else gold
        predictions.append(dev["prediction"].to_numpy())
    return gold, predictions


# A named student model (config ``models:``) is the run its experiment selected.


def selected_run(selection: dict, task: str, student: str, method: str) -> tuple[str, str]:
    """(grid point, seed) the experiment selected for ``task``/``student``/``method``: the selected point's seed
    with the best dev score (the first of equals), read from ``results/selection/<experiment>.json``."""
    for entry in selection["selections"]:
        if (entry["task"], entry["student"], entry["method"]) == (task, student, method):
            return entry["selected"], best_seed(entry["grid"][entry["selected"]]["dev_by_seed"])
    raise UserError(f"the selection has no run of student {student!r} with method {method!r} on {task!r}")


def selected_run_dir(reference: dict, selection_path, runs_dir) -> Path:
    """The run directory of a student reference: ``runs_dir/<grid point>/seed<seed>`` as selected."""
    selection = json.loads(Path(selection_path).read_text())
    point, seed = selected_run(selection, reference["task"], reference["student"], reference["method"])
    return Path(runs_dir) / point / f"seed{seed}"


def predictions_path(reference: dict, files: dict) -> Path:
    """Where a fine-tuned teacher's or a selected student's per-example predictions are."""
    if reference_kind(reference) == "teacher":
        return Path(files["teacher_model"]).parent / "predictions.parquet"
    return selected_run_dir(reference, files["selection"], files["runs_dir"]) / "predictions.parquet"
