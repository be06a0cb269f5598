"""The data behind Sučík (2020) Table 5.1 and Figures B.1-B.12, from the learning curves (``curves.parquet``) of the
exploration's student runs (:mod:`kdflow.workflow.exploration`).

- Figs. B.1-B.7 (:func:`curve_lines`): per point, the mean dev score over repeats at each evaluation, smoothed by a
  sliding average over 2 epochs' worth of evaluations, and the best single evaluation of any repeat ("×").
- Figs. B.8-B.9 (:func:`explosion_curve`, :func:`warmup_stretch`, :func:`knee`): one run's dev score smoothed over
  0.1 epoch, its gradient norms and learning rate; during warm-up, the point beyond which learning slows, and the
  learning rate there.
- Figs. B.10-B.12 (:func:`size_cells`): per student size, the best dev score over all evaluations of all repeats,
  with the size in non-embedding parameters.
- Table 5.1 (:func:`table51`): the values explored, the thesis's initial and chosen values, and kdflow's best.

Scores are x100 as in the thesis. An evaluation's position is in epochs (:func:`epoch_positions`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core.documents import Document, Heading, Paragraph, Table
from kdflow.core.tasks import get_task
from kdflow.distillation.selection import select
from kdflow.reporting.paper_tables import deviation_blocks

KEYS = ["study", "task", "task_name", "metric", "student_label", "point"]  # a line; a seed is one repeat


def epoch_positions(curves: pd.DataFrame, metrics: dict) -> np.ndarray:
    """Each evaluation's position in epochs (``curves``: a run's ``curves.parquet``, ``metrics``: its
    ``metrics.json``): its optimiser step over the run's steps per epoch (the transfer set's examples over the batch
    size), after the epochs of earlier stages (a student's steps restart at each stage)."""
    steps = math.ceil(metrics["transfer"]["examples"] / metrics["hyperparameters"]["batch_size"])
    stage_epochs = [stage.get("epochs", metrics["hyperparameters"]["epochs"]) for stage in metrics["stages"]]
    offsets = np.concatenate([[0], np.cumsum(stage_epochs)])
    stage = curves["stage"].to_numpy() if "stage" in curves else np.ones(len(curves), dtype=int)
    return offsets[stage - 1] + curves["step"].to_numpy() / steps


def load_run(run: dict, curves_path, metrics_path) -> pd.DataFrame:
    """One run's evaluations: the run's fields (study, task, student_label, point, seed), ``epoch`` (position in
    epochs), ``step``, ``lr``, the gradient norms, ``dev`` (the task's main metric, x100), the metric's and the
    task's names, and the student's non-embedding parameters."""
    curves = pd.read_parquet(curves_path)
    metrics = json.loads(Path(metrics_path).read_text())
    task = get_task(run["task"])
    frame = pd.DataFrame({
        "epoch": epoch_positions(curves, metrics),
        "step": curves["step"].to_numpy(),
        "lr": curves["lr"].to_numpy(),
        "grad_norm_mean": curves["grad_norm_mean"].to_numpy(),
        "grad_norm_max": curves["grad_norm_max"].to_numpy(),
        "dev": 100 * curves[f"dev_{task.main_metric}"].to_numpy(dtype=float),
    })
    fields = {**run, "task_name": task.tsv_dir or task.name.capitalize(), "metric": task.main_metric}
    for key in reversed([*KEYS, "seed"]):
        frame.insert(0, key, fields[key])
    frame["parameters"] = metrics.get("non_embedding_parameters")
    return frame


def load_runs(runs: Sequence[dict], curves_paths: Sequence, metrics_paths: Sequence) -> pd.DataFrame:
    """:func:`load_run` of every run, one table."""
    return pd.concat([load_run(run, curves, metrics) for run, curves, metrics
                      in zip(runs, curves_paths, metrics_paths, strict=True)], ignore_index=True)


def sliding_average(values: Sequence[float], window: int) -> np.ndarray:
    """Centred sliding mean over ``window`` values (fewer at the ends; missing values skipped)."""
    return pd.Series(values, dtype=float).rolling(max(1, window), center=True, min_periods=1).mean().to_numpy()


def evaluations_per_epoch(epochs: Sequence[float]) -> float:
    """How many evaluations a curve has per epoch, from the positions of its evaluations."""
    return len(epochs) / max(epochs) if len(epochs) and max(epochs) > 0 else 1.0


def smooth(curve: pd.DataFrame, epochs: float, column: str = "dev") -> np.ndarray:
    """``curve[column]`` averaged over a sliding window of ``epochs`` epochs' worth of evaluations."""
    return sliding_average(curve[column], round(epochs * evaluations_per_epoch(curve["epoch"])))


def curve_lines(runs: pd.DataFrame, epochs: float = 2.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Figs. B.1-B.7: per line (study, task, student, point) the mean dev over its repeats at each evaluation
    (``mean``; ``repeats`` that reached it) and its sliding average over ``epochs`` epochs (``smoothed``); and per
    line the best single evaluation of any repeat (``epoch``, ``dev``, ``seed``), the "×" of the thesis's figures."""
    means = (runs.groupby([*KEYS, "step"], sort=False)
             .agg(epoch=("epoch", "first"), mean=("dev", "mean"), repeats=("dev", "count")).reset_index())
    lines = []
    for _, curve in means.groupby(KEYS, sort=False):
        curve = curve.sort_values("step").reset_index(drop=True)
        lines.append(curve.assign(smoothed=smooth(curve, epochs, "mean")))
    best = runs.loc[runs.dropna(subset=["dev"]).groupby(KEYS, sort=False)["dev"].idxmax(),
                    [*KEYS, "seed", "epoch", "step", "dev"]].reset_index(drop=True)
    return pd.concat(lines, ignore_index=True), best


def explosion_curve(run: pd.DataFrame, epochs: float = 0.1) -> pd.DataFrame:
    """Figs. B.8-B.9: one run's evaluations with its dev score smoothed over ``epochs`` epochs (``smoothed``)."""
    run = run.sort_values("step").reset_index(drop=True)
    return run.assign(smoothed=smooth(run, epochs))


def warmup_stretch(curve: pd.DataFrame) -> pd.DataFrame:
    """Fig. B.9: the evaluations of a run's warm-up, up to the first at the largest learning rate, over which
    learning progress can be read against a rising learning rate; the whole run if it has no warm-up."""
    end = int(np.argmax(curve["lr"].to_numpy()))
    return curve if end == 0 else curve.iloc[: end + 1]


def knee(epochs: Sequence[float], scores: Sequence[float]) -> int:
    """Fig. B.9: the evaluation beyond which learning slows down, read off the smoothed dev curve. Up to its peak,
    the curve's point farthest above the straight line from its first point to the peak (both axes scaled to that
    stretch): where a fast rise bends into a slow one. The thesis picked its point by eye; this is a rule for it."""
    x, y = np.asarray(epochs, dtype=float), np.asarray(scores, dtype=float)
    if not np.isfinite(y).any():
        return 0
    peak = int(np.nanargmax(y))
    if peak == 0 or y[peak] == y[0] or x[peak] == x[0]:
        return peak
    rise = (y[: peak + 1] - y[0]) / (y[peak] - y[0]) - (x[: peak + 1] - x[0]) / (x[peak] - x[0])
    return int(np.nanargmax(rise))


def size_cells(runs: pd.DataFrame, sizes: dict[str, dict]) -> pd.DataFrame:
    """Figs. B.10-B.12: per study, task and student size (point), the best dev score over all evaluations of all
    repeats, the repeats, the size in non-embedding parameters, and what ``sizes`` gives of each point (per study,
    point -> ``width`` and ``depth`` factors, and any dimensions and settings to list beside them:
    :func:`kdflow.workflow.exploration.student_sizes`)."""
    rows = []
    for (study, task, task_name, metric, label, point), group in runs.groupby(KEYS, sort=False):
        rows.append({"study": study, "task": task, "task_name": task_name, "metric": metric, "student_label": label,
                     "point": point, "width": "1", "depth": "1", **sizes[study][point],
                     "best_dev": float(group["dev"].max()) if group["dev"].notna().any() else float("nan"),
                     "repeats": group["seed"].nunique(), "parameters": group["parameters"].iloc[0]})
    return pd.DataFrame(rows)


# Table 5.1.


def run_bests(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's best dev evaluation (the model it keeps)."""
    return runs.groupby([*KEYS, "seed"], sort=False)["dev"].max().reset_index()


def table51(reference: pd.DataFrame, studies: dict[str, dict], runs: pd.DataFrame) -> pd.DataFrame:
    """Table 5.1: per student, parameter and task, what the thesis explored, its initial and chosen values (from
    ``reference``, reference/thesis_table51.csv), what kdflow explored (its points' labels), and kdflow's best: the
    point with the best mean over repeats of each run's best dev score (as experiments select, diverged runs
    losing), with mean ± std, and the point of the best single evaluation. ``studies``: per study its student,
    parameter, tasks and point labels (:func:`kdflow.workflow.exploration.table_studies`)."""
    bests = run_bests(runs)
    rows = []
    for study, spec in studies.items():
        for task in spec["tasks"]:
            labels = {point: ", ".join(label) for point, label in spec["points"].items()}
            mine = bests[(bests.study == study) & (bests.task == task)]
            row = {"student": spec["student"], "parameter": spec["parameter"], "task": task, "study": study,
                   "kdflow_explored": "; ".join(labels.values())}
            if len(mine):
                chosen = select([{"point": r.point, "seed": r.seed, "scores": {"dev": {"score": r.dev}}}
                                 for r in mine.itertuples()], "score")
                winner = chosen["grid"][chosen["selected"]]
                single = mine.loc[mine["dev"].idxmax()] if mine["dev"].notna().any() else None
                row.update(kdflow_best=labels[chosen["selected"]], kdflow_best_dev=winner["dev_mean"],
                           kdflow_best_std=winner["dev_std"], repeats=len(winner["seeds"]),
                           kdflow_best_single=None if single is None else labels[single["point"]],
                           kdflow_best_single_dev=None if single is None else float(single["dev"]))
            rows.append(row)
    kdflow = pd.DataFrame(rows, columns=["student", "parameter", "task", "study", "kdflow_explored", *KDFLOW_BEST])
    thesis = reference.rename(columns={"explored": "thesis_explored", "initial": "thesis_initial",
                                       "chosen": "thesis_chosen"})
    keys = ["student", "parameter", "task"]
    table = thesis.merge(kdflow, on=keys, how="left")
    unmatched = kdflow.merge(thesis[keys], on=keys, how="left", indicator=True)
    return pd.concat([table, unmatched[unmatched["_merge"] == "left_only"].drop(columns="_merge")],
                     ignore_index=True)[TABLE51_COLUMNS]


KDFLOW_BEST = ["kdflow_best", "kdflow_best_dev", "kdflow_best_std", "repeats", "kdflow_best_single",
               "kdflow_best_single_dev"]
TABLE51_COLUMNS = ["student", "parameter", "task", "study", "thesis_explored", "thesis_initial", "thesis_chosen",
                   "kdflow_explored", *KDFLOW_BEST]


def table51_document(table: pd.DataFrame, deviations: list[dict] = ()) -> Document:
    """Table 5.1 as people read it: the thesis's choice beside kdflow's best, then what each explored, then the
    ledger's differences between what kdflow ran and what the thesis did."""
    cells = table.assign(
        kdflow=[("—" if pd.isna(best) else f"{best} ({mean:.1f}{'' if pd.isna(std) else f' ± {std:.1f}'}, n={int(n)})")
                for best, mean, std, n in zip(table["kdflow_best"], table["kdflow_best_dev"],
                                              table["kdflow_best_std"], table["repeats"].fillna(0))],
        best_single=[("—" if pd.isna(best) else f"{best} ({value:.1f})")
                     for best, value in zip(table["kdflow_best_single"], table["kdflow_best_single_dev"])])
    document = Document("Sučík (2020) Table 5.1: student hyperparameters explored one at a time", [
        Paragraph("Per student and parameter (explored on CoLA; embeddings on each task): the thesis's initial and "
                  "chosen values (reference/thesis_table51.csv) beside kdflow's best point by the mean over repeats "
                  "of each run's best dev score (x100: MCC on CoLA, accuracy on SST-2, micro-F1 on Sara; mean ± std "
                  "over n repeats), and kdflow's best single evaluation (the × of Figs. B.1-B.7). An em dash: "
                  "kdflow has no run of that row."),
        Table(cells[["student", "parameter", "task", "thesis_initial", "thesis_chosen", "kdflow", "best_single"]]
              .rename(columns={"kdflow": "kdflow best (mean ± std)", "best_single": "kdflow best single"})),
        Heading("Values explored"),
        Table(table[["student", "parameter", "task", "thesis_explored", "kdflow_explored"]]),
        *deviation_blocks(deviations),
    ])
    return document
