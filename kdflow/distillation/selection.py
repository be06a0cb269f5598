"""Model selection on dev only: per experiment, task, student and method, the grid point with the best mean
dev score over seeds wins; its seeds give mean ± std on every labelled split. Test scores (where a split has
labels, e.g. Sara) are reported for the winner but never used to choose it.

A seed whose dev score is not finite counts as diverged (its training diverged, see :mod:`kdflow.training.loop`,
or its outputs did, see :mod:`kdflow.core.metrics`). Its grid point's mean is then NaN, which compares false with
every number (``max`` would keep it if it came first); instead such a point loses to every point with a finite
mean. If no point has one, the point with the fewest diverged seeds wins and the selection says so (``selected_diverged``)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from kdflow.core.errors import UserError
from kdflow.core.model_references import reference_kind


def select(runs: list[dict], main_metric: str) -> dict:
    """``runs``: one dict per trained student with ``config``, ``seed`` and ``scores`` (split -> metric -> value)."""
    by_config: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_config[run["config"]].append(run)
    grid = {
        config: {
            "dev_mean": float(np.mean([r["scores"]["dev"][main_metric] for r in group])),
            "dev_std": float(np.std([r["scores"]["dev"][main_metric] for r in group])),
            "seeds": sorted(r["seed"] for r in group),
            "dev_by_seed": {str(r["seed"]): r["scores"]["dev"][main_metric] for r in sorted(group, key=lambda r: r["seed"])},
            "diverged_seeds": sorted(r["seed"] for r in group if not math.isfinite(r["scores"]["dev"][main_metric])),
        }
        for config, group in sorted(by_config.items())
    }

    def preference(config: str) -> tuple[float, int]:
        point = grid[config]
        return _finite_or_worst(point["dev_mean"]), -len(point["diverged_seeds"])

    winner = max(grid, key=preference)  # first of equals in sorted order
    winning_runs = by_config[winner]
    summary = {}
    for split in winning_runs[0]["scores"]:
        for metric in winning_runs[0]["scores"][split]:
            values = [r["scores"][split][metric] for r in winning_runs]
            summary.setdefault(split, {})[metric] = {"mean": float(np.mean(values)), "std": float(np.std(values)),
                                                      "n": len(values)}
    return {"main_metric": main_metric, "selected": winner, "selected_diverged": bool(grid[winner]["diverged_seeds"]),
            "scores": summary, "grid": grid}


def best_seed(dev_by_seed: dict[str, float]) -> str:
    """The seed with the best dev score (the first of equals), a diverged one only if every seed diverged: the run
    a selected grid point stands for (GLUE submissions, named models)."""
    return max(dev_by_seed, key=lambda seed: _finite_or_worst(dev_by_seed[seed]))


def _finite_or_worst(score: float) -> float:
    return score if math.isfinite(score) else -math.inf


def select_experiment(runs: list[dict], metric_paths: list[str], main_metrics: dict[str, str]) -> dict:
    """Selections of every (task, student, method) of an experiment. ``runs`` hold the wildcards of each
    student run (task, student, method, config, seed), ``metric_paths`` their metrics.json files."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for run, path in zip(runs, metric_paths):
        scores = json.loads(Path(path).read_text())["scores"]
        groups[run["task"], run["student"], run["method"]].append({**run, "seed": int(run["seed"]), "scores": scores})
    return {
        "selections": [
            {"task": task, "student": student, "method": method, **select(group, main_metrics[task])}
            for (task, student, method), group in groups.items()
        ]
    }


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
