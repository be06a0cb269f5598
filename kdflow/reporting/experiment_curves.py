"""The learning curves of every run of an experiment (issue 32: the evidence behind each number of its table): each
dev evaluation of each task, student, method, grid point and seed, and a figure of them, one panel per task and
student, a colour per method, the selected grid point's seeds drawn bold and the other points' faint.

Scores are x100; an evaluation's position is in epochs
(:func:`kdflow.reporting.exploration_curves.epoch_positions`), so that methods with stages of their own line up with
those without.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from kdflow.reporting.exploration_curves import epoch_positions
from kdflow.reporting.figures.style import OKABE_ITO, legend_below, metric_label, new_figure, panel_columns, save
from kdflow.workflow.results_paths import RUN_KEYS

STYLES = {True: {"linewidth": 1.4, "alpha": 0.95}, False: {"linewidth": 0.8, "alpha": 0.3}}  # selected or not


def experiment_curves(runs: Sequence[dict], curves_paths: Sequence, metrics_paths: Sequence,
                      selection: dict) -> pd.DataFrame:
    """Every dev evaluation of the experiment's ``runs`` (their wildcards; ``curves.parquet`` and ``metrics.json``
    in the same order): the run's keys, ``selected`` (its point is the one the selection chose for its task,
    student and method), the main metric, ``epoch``, ``step`` and ``dev`` (x100)."""
    chosen = {(entry["task"], entry["student"], entry["method"]): entry for entry in selection["selections"]}
    frames = []
    for run, curves_path, metrics_path in zip(runs, curves_paths, metrics_paths, strict=True):
        curves = pd.read_parquet(curves_path)
        entry = chosen[run["task"], run["student"], run["method"]]
        metric = entry["main_metric"]
        frame = pd.DataFrame({"epoch": epoch_positions(curves, json.loads(Path(metrics_path).read_text())),
                              "step": curves["step"].to_numpy(),
                              "dev": 100 * curves[f"dev_{metric}"].to_numpy(dtype=float)})
        fields = {**run, "seed": int(run["seed"]), "selected": run["point"] == entry["selected"], "metric": metric}
        for key in reversed([*RUN_KEYS, "selected", "metric"]):
            frame.insert(0, key, fields[key])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def experiment_curves_figure(data: pd.DataFrame, path, experiment: str) -> Path:
    """One panel per task and student of ``data`` (:func:`experiment_curves`): every run's dev curve, coloured by
    method, the selected point's runs bold."""
    panels = list(dict.fromkeys(zip(data["task"], data["student"])))
    if not panels:
        raise ValueError(f"experiment {experiment} has no learning curves to draw")
    methods = list(dict.fromkeys(data["method"]))
    colours = {method: OKABE_ITO[number % len(OKABE_ITO)] for number, method in enumerate(methods)}
    columns = panel_columns(len(panels), 3.3)
    rows = math.ceil(len(panels) / columns)
    figure = new_figure(3.3 * columns, 2.8 * rows + 0.8)
    grid = figure.subplots(rows, columns, squeeze=False).ravel()
    for axes, (task, student) in zip(grid, panels):
        panel = data[(data["task"] == task) & (data["student"] == student)]
        for selected in (False, True):  # the selected runs on top
            for (method, _, _), run in panel[panel["selected"] == selected].groupby(
                    ["method", "point", "seed"], sort=False):
                axes.plot(run["epoch"], run["dev"], color=colours[method], **STYLES[selected])
        axes.set(title=f"{task}, {student}", xlabel="epoch", ylabel=metric_label(panel["metric"].iloc[0]))
        axes.grid(alpha=0.3)
    for axes in grid[len(panels):]:
        axes.set_visible(False)
    figure.suptitle(f"Experiment {experiment}: the dev curve of every run")
    handles = [Line2D([], [], color=colours[method], label=method, linewidth=1.4) for method in methods]
    handles += [Line2D([], [], color="grey", label=label, **STYLES[selected])
                for selected, label in ((True, "selected grid point, each seed"), (False, "other grid points"))]
    legend_below(figure, handles, columns=6)
    return save(figure, path)
