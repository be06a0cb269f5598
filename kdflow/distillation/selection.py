"""Model selection on dev only: per experiment, task, student and method, the grid point with the best mean
dev score over seeds wins; its seeds give mean ± std on every labelled split. Test scores (where a split has
labels, e.g. Sara) are reported for the winner but never used to choose it."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np


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
        }
        for config, group in sorted(by_config.items())
    }
    winner = max(grid, key=lambda config: grid[config]["dev_mean"])  # first of equals in sorted order
    winning_runs = by_config[winner]
    summary = {}
    for split in winning_runs[0]["scores"]:
        for metric in winning_runs[0]["scores"][split]:
            values = [r["scores"][split][metric] for r in winning_runs]
            summary.setdefault(split, {})[metric] = {"mean": float(np.mean(values)), "std": float(np.std(values)),
                                                      "n": len(values)}
    return {"main_metric": main_metric, "selected": winner, "scores": summary, "grid": grid}


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
