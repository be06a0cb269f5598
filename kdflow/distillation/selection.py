"""Model selection on dev only, apart from the numbers it reports: per experiment, task, student and method, the
grid point with the best mean dev score over the **selection seeds** (the experiment's first ``selection_seeds``
seeds) wins. The winner's other seeds, the **held-out seeds**, give the mean ± sample std (ddof=1,
:mod:`kdflow.core.statistics`) on every labelled split and every test against a baseline: a seed whose luck chose
the point is never counted in the comparison it won (at the chosen point the choosing seed beat the others by
+0.35 on average over 12 SST-2 cells of the claims benchmark, +2.6 for PKD). A method with one grid point chooses
nothing: all its seeds are held out. The selection seeds' mean at the winner is the **headline**, the number
comparable with a paper's best dev score; with no held-out seed (``selection_seeds`` >= the seeds) it is the only
number, and nothing is tested. Test scores (where a split has labels, e.g. Sara) are reported, never used to
choose. Exact ties go to the first point in sorted point-name order.

A seed whose dev score is not finite counts as diverged (its training diverged, see :mod:`kdflow.training.loop`,
or its outputs did, see :mod:`kdflow.core.metrics`). Its grid point's mean is then NaN, which compares false with
every number (``max`` would keep it if it came first); instead such a point loses to every point with a finite
mean. If no point has one, the point with the fewest diverged seeds wins and the selection says so
(``selected_diverged``).

An experiment that names a baseline (``compare_to``) tests every other method's held-out seeds against the
baseline's, on the main dev metric, over seeds and dev examples together
(:func:`kdflow.core.statistics.seed_example_test`), with Holm's adjustment across the experiment's comparisons, the
difference it can detect and the seeds it would need for :data:`kdflow.core.statistics.PLANNED_GAIN`."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core import metrics, run_files, statistics
from kdflow.core.errors import UserError
from kdflow.core.model_references import reference_kind

# What :func:`select` does, in the words the papers' protocols are compared with (reference/protocols.yaml).
SELECTION_RULE = "the grid point with the best mean dev score over the selection seeds"


def select(runs: list[dict], main_metric: str, selection_seeds: list[int] | None = None) -> dict:
    """``runs``: one dict per trained student with ``point`` (of the grid), ``seed`` and ``scores`` (split -> metric
    -> value). ``selection_seeds`` choose the point (None: every seed, and none is held out, as the exploration
    figures want); with a single point nothing is chosen and every seed is held out."""
    by_point: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_point[run["point"]].append(run)
    choosing = set(selection_seeds) if selection_seeds is not None else {run["seed"] for run in runs}
    if len(by_point) == 1 and selection_seeds is not None:
        choosing = set()
    grid = {
        point: {
            "dev_mean": float(np.mean([r["scores"]["dev"][main_metric] for r in group])),
            "dev_std": statistics.sample_std([r["scores"]["dev"][main_metric] for r in group]),
            "selection_mean": _mean([r["scores"]["dev"][main_metric] for r in group if r["seed"] in choosing]),
            "seeds": sorted(r["seed"] for r in group),
            "dev_by_seed": {str(r["seed"]): r["scores"]["dev"][main_metric] for r in sorted(group, key=lambda r: r["seed"])},
            "diverged_seeds": sorted(r["seed"] for r in group if not math.isfinite(r["scores"]["dev"][main_metric])),
        }
        for point, group in sorted(by_point.items())
    }

    def preference(point: str) -> tuple[float, int]:
        diverged = [seed for seed in grid[point]["diverged_seeds"] if seed in choosing]
        return _finite_or_worst(grid[point]["selection_mean"]), -len(diverged)

    winner = max(grid, key=preference)  # first of equals in sorted order
    held_out = [r for r in by_point[winner] if r["seed"] not in choosing]
    chose = [r for r in by_point[winner] if r["seed"] in choosing]
    return {"main_metric": main_metric, "selected": winner, "selected_diverged": bool(grid[winner]["diverged_seeds"]),
            "selection_seeds": sorted(r["seed"] for r in chose), "held_out_seeds": sorted(r["seed"] for r in held_out),
            "headline": _summary(chose or held_out), "scores": _summary(held_out), "grid": grid}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _summary(runs: list[dict]) -> dict:
    """split -> metric -> mean, sample std and number of ``runs`` ({} without runs)."""
    summary = {}
    for split in runs[0]["scores"] if runs else ():
        for metric in runs[0]["scores"][split]:
            values = [r["scores"][split][metric] for r in runs]
            summary.setdefault(split, {})[metric] = {"mean": float(np.mean(values)),
                                                      "std": statistics.sample_std(values), "n": len(values)}
    return summary


def best_seed(dev_by_seed: dict[str, float]) -> str:
    """The seed with the best dev score (the first of equals), a diverged one only if every seed diverged: the run
    a selected grid point stands for (GLUE submissions, named models)."""
    return max(dev_by_seed, key=lambda seed: _finite_or_worst(dev_by_seed[seed]))


def _finite_or_worst(score: float) -> float:
    return score if math.isfinite(score) else -math.inf


def select_experiment(runs: list[dict], metric_paths: list[str], main_metrics: dict[str, str],
                      compare_to: str | None = None, prediction_paths: list[str] | None = None,
                      selection_seeds: list[int] | None = None) -> dict:
    """Selections of every (task, student, method) of an experiment. ``runs`` hold the wildcards of each
    student run (task, student, method, point, seed), ``metric_paths`` their metrics.json files and, with a
    baseline method entry ``compare_to``, ``prediction_paths`` their predictions.parquet files.
    ``selection_seeds``: the seeds that choose grid points (None: every seed, and nothing is held out)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for number, (run, path) in enumerate(zip(runs, metric_paths, strict=True)):
        scores = json.loads(Path(path).read_text())["scores"]
        groups[run["task"], run["student"], run["method"]].append(
            {**run, "seed": int(run["seed"]), "scores": scores,
             "predictions": prediction_paths[number] if prediction_paths else None})
    selections = {key: select(group, main_metrics[key[0]], selection_seeds) for key, group in groups.items()}
    result = []
    for (task, student, method), selection in selections.items():
        entry = {"task": task, "student": student, "method": method, **selection}
        baseline = selections.get((task, student, compare_to))
        if compare_to and method != compare_to:
            if baseline is None:
                raise UserError(f"compare_to: {compare_to!r} is not a method entry of this experiment for {student} "
                                f"on {task}")
            held_out = lambda group, chosen: [r for r in group if r["point"] == chosen["selected"]  # noqa: E731
                                              and r["seed"] in chosen["held_out_seeds"]]
            entry["comparison"] = compare(held_out(groups[task, student, method], selection),
                                          held_out(groups[task, student, compare_to], baseline),
                                          main_metrics[task], compare_to)
        result.append(entry)
    comparisons = [entry["comparison"] for entry in result if "comparison" in entry]
    for comparison, adjusted in zip(comparisons, statistics.holm([c["p"] for c in comparisons])):
        comparison["p_holm"] = adjusted
    # what a comparison detects and the seeds it needs rest on the seed variance of all the methods' comparisons
    # with the baseline for one task and student, pooled: one comparison's 3 or 4 degrees of freedom are noisy
    for task, student in {(entry["task"], entry["student"]) for entry in result}:
        alike = [entry["comparison"] for entry in result
                 if "comparison" in entry and (entry["task"], entry["student"]) == (task, student)]
        pooled, df = statistics.pooled_seed_variance([c["seed_variance"] for c in alike], [c["pairs"] for c in alike])
        for comparison in alike:
            comparison.update(pooled_seed_variance=pooled, pooled_df=df, **statistics.sensitivity(
                statistics.PLANNED_GAIN, pooled if math.isfinite(pooled) else comparison["seed_variance"],
                comparison["example_variance"], comparison["pairs"]))
    return {"compare_to": compare_to, "selection_seeds": selection_seeds, "selections": result}


def compare(runs: list[dict], baseline: list[dict], metric: str, name: str) -> dict:
    """Held-out runs against the baseline's on the dev ``metric``, over the seeds both hold out: the difference of
    their means, the test over seeds and dev examples together, the difference it can detect (80% power) and the
    paired seeds it would need to detect :data:`kdflow.core.statistics.PLANNED_GAIN` (from its own seed variance
    here; :func:`select_experiment` pools it over the experiment's comparisons). Without two common seeds the test cannot
    be made (NaN)."""
    common = {r["seed"] for r in runs} & {r["seed"] for r in baseline}
    gold, predictions = _dev_predictions({r["seed"]: r for r in runs if r["seed"] in common})
    _, baseline_predictions = _dev_predictions({r["seed"]: r for r in baseline if r["seed"] in common})
    per_example = metrics.PER_EXAMPLE.get(metric)  # accuracy's example part in closed form, no resampling
    result = statistics.seed_example_test(predictions, baseline_predictions, gold, metrics.METRICS[metric],
                                          per_example=per_example)
    return {"baseline": name, "metric": metric, **result, "planned_gain": statistics.PLANNED_GAIN,
            **statistics.sensitivity(statistics.PLANNED_GAIN, result["seed_variance"], result["example_variance"],
                                     result["pairs"]),
            "confidence": statistics.CONFIDENCE, "resamples": result.get("resamples")}


def _dev_predictions(runs: dict[int, dict]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The dev gold labels and each run's dev predictions ({seed: run} -> {seed: predictions}), in the order of
    the examples' ``idx``. Runs compared on different dev sets (e.g. a task prepared again in between) are an error."""
    gold, predictions = None, {}
    for seed, run in sorted(runs.items()):
        frame = pd.read_parquet(run["predictions"], columns=["split", "idx", "label", "prediction"])
        dev = frame[frame["split"] == "dev"].sort_values("idx")
        labels = dev["label"].to_numpy()
        if gold is None:
            gold = labels
        elif not np.array_equal(gold, labels):
            raise UserError(f"{run['predictions']} holds other dev labels than the runs it is compared with: "
                            "were they trained on different versions of the task's data?")
        predictions[seed] = dev["prediction"].to_numpy()
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
        return Path(files["teacher_model"]).parent / run_files.PREDICTIONS
    return selected_run_dir(reference, files["selection"], files["runs_dir"]) / run_files.PREDICTIONS
