"""Universal-KD (Wu et al. 2021)'s figures as PNG files, drawn from kdflow's result tables:

* :func:`pseudo_head_figure`: Universal-KD Fig. 3 (left), per teacher layer, as means over dev;
* :func:`attention_figure`: Universal-KD Fig. 3 (middle, right) and ALP-KD Fig. 3, per example.

Shared drawing helpers and the palette: :mod:`kdflow.reporting.figures.style`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from kdflow.reporting.figures.style import WIDEST, legend_below, line_style, new_figure, save

# --- Universal-KD Fig. 3 ----------------------------------------------------------------------------------------


def pseudo_head_figure(table: pd.DataFrame, path) -> Path:
    """Universal-KD Fig. 3 (left) averaged over dev: per teacher layer, the pseudo-head's mean distance to the
    gold label and (second panel) its dev score on the task's main metric, one line per teacher and task; the
    teacher's own dev score is the dotted line of the same colour. ``table``: :func:`kdflow.reporting.tables.teacher_table`
    (``results/tables/teachers.csv``)."""
    heads = table[table["component"] == "pseudo_head"]
    if heads.empty:
        raise ValueError("the teacher table has no pseudo-head rows")
    teachers = table[(table["component"] == "teacher") & (table["split"] == "dev")]
    figure = new_figure(WIDEST, 5)
    distance_axes, score_axes = figure.subplots(1, 2)
    handles = []
    for number, ((teacher, task), rows) in enumerate(heads.groupby(["teacher", "task"], sort=False)):
        metric = rows["metric"].iloc[0]  # teacher_table lists the task's main metric first
        rows = rows[rows["metric"] == metric].sort_values("layer")
        layers = rows["layer"].astype(float)
        style = line_style(number)
        label = f"{teacher} · {task} ({metric})"
        handles += distance_axes.plot(layers, pd.to_numeric(rows["gold_distance"]), label=label, **style)
        score_axes.plot(layers, pd.to_numeric(rows["value"]), **style)
        own = teachers[(teachers["teacher"] == teacher) & (teachers["task"] == task) & (teachers["metric"] == metric)]
        if not own.empty:
            score_axes.axhline(float(own["value"].iloc[0]), color=style["color"], linestyle=":", linewidth=1)
    handles.append(Line2D([], [], color="#7f7f7f", linestyle=":", label="teacher itself (dev)"))
    distance_axes.set(xlabel="teacher layer", title="Pseudo-head distance to the gold label (dev)",
                      ylabel="mean distance to gold label\n(L2 of probabilities; |error| for regression)")
    score_axes.set(xlabel="teacher layer", ylabel="dev score (main metric, ×100)", title="Pseudo-head dev score")
    for axes in (distance_axes, score_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3)
    legend_below(figure, handles)
    return save(figure, path)


def attention_figure(weights: Mapping | Sequence[Mapping], path, title: str | None = None,
                     gold_distance: bool = True) -> Path:
    """Universal-KD Fig. 3 or ALP-KD Fig. 3 as one image: ``weights`` is one record of
    :func:`kdflow.analysis.attention_maps.attention_weights` or several (e.g. a Universal-KD(IL) and an ALP student of
    the same task, or ALP students of 2, 4 and 6 layers), drawn side by side as heatmaps (rows = examples, columns
    = teacher layers) on one colour scale, each titled by its ``model`` (when the record names one) and method.
    With ``gold_distance``, when every record covers the same examples and has gold distances, a first panel
    shows the teacher's pseudo-head distances to the gold label for those examples (Universal-KD Fig. 3, left)."""
    records = [weights] if isinstance(weights, Mapping) else list(weights)
    if not records:
        raise ValueError("no attention records to draw")
    first = records[0]
    same_examples = all(record["idx"] == first["idx"] for record in records)
    panels = [("distance", first)] * (gold_distance and same_examples and first.get("gold_distance") is not None)
    panels += [("attention", record) for record in records]
    rows = max(len(record["idx"]) for record in records)
    figure = new_figure(2.6 + min(3.2, (WIDEST - 2.6) / len(panels)) * len(panels), 1.8 + 0.32 * rows)
    grid = figure.subplots(1, len(panels), sharey=same_examples, squeeze=False)[0]
    attention_axes, top = [], max(np.max(record["weights"]) for record in records)
    for number, (axes, (kind, record)) in enumerate(zip(grid, panels)):
        if kind == "distance":
            shown = axes.imshow(np.array(record["gold_distance"]), cmap="cividis_r", aspect="auto", vmin=0)
            figure.colorbar(shown, ax=axes, label="distance to gold (lower: closer)")
            axes.set_title("pseudo-head distance to gold")
        else:
            image = axes.imshow(np.array(record["weights"]), cmap="viridis", aspect="auto", vmin=0, vmax=top)
            attention_axes.append(axes)
            name = f"{record['model']} ({record['method']})" if "model" in record else record["method"]
            axes.set_title(f"{name}\nstudent layer {record['student_layer']} of {record['student_layers']}")
        axes.set_xticks(range(len(record["teacher_layers"])), [str(layer) for layer in record["teacher_layers"]])
        axes.set_xlabel("teacher layer")
        examples = [f"{idx}: {shorten(text)}" for idx, text in zip(record["idx"], record["texts"])]
        axes.set_yticks(range(len(examples)), examples)
        axes.tick_params(labelleft=number == 0 or not same_examples, labelsize="small")
    figure.colorbar(image, ax=attention_axes, label="attention weight")
    grid[0].set_ylabel("example (idx: text)")
    figure.suptitle(title or f"Attention over teacher layers ({first['task']}, {first['split']})")
    return save(figure, path)


def shorten(text: str, length: int = 40) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
